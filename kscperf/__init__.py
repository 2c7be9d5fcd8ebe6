"""kscperf: correctness-checked, process-isolated pyperf benchmarks of differentiable
functions across tools (eager, TorchScript, torch.compile, plug-ins) and tasks
(inference, fwd, bwd, jacobian). Importing it never imports torch."""

__version__ = "0.1.0"

__all__ = ["__version__"]
