"""ONNX Runtime as a kscperf tool (`onnxrt`): a third-party compiler through the plug-in
interface only (kscperf.worker.tools documents it; this package imports nothing of kscperf).

Its compile step exports the model's source function with `torch.onnx.export` (the
TorchScript-based exporter, `dynamo=False`, which needs neither onnxscript nor
torch.export) and creates an `onnxruntime.InferenceSession` on the CPU. Only `inference` is
supported: a session runs the exported graph without autograd. Registered through the
`kscperf.tools` entry point by kscperf's own pyproject.toml; needs the `onnx` extra
(`pip install -e '.[onnx]'`), without which importing this module raises
ModuleNotFoundError and kscperf skips the tool's cells.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from typing import Any, Callable

import torch

try:
    import onnxruntime
except ModuleNotFoundError as exc:
    raise ModuleNotFoundError(f"{exc}: install the onnx extra (pip install -e '.[onnx]')",
                              name=exc.name) from exc

__all__ = ["OnnxRuntimeTool"]


def _signature(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """What one export is valid for: each tensor's shape and dtype, and any other argument's
    value (the exporter bakes those into the graph)."""
    return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else repr(a)
                 for a in args)


class _TensorArgs(torch.nn.Module):
    """`fn` as a module of its tensor arguments only, the others fixed, for the exporter."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        super().__init__()
        self.fn = fn
        self.args = args

    def forward(self, *tensors: torch.Tensor) -> Any:
        given = iter(tensors)
        return self.fn(*(next(given) if isinstance(a, torch.Tensor) else a for a in self.args))


class _Session:
    """One exported graph in an ONNX Runtime session: which arguments feed which input."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
        names = [f"input{i}" for i in range(len(tensors))]
        with torch.no_grad():
            self.returns_tensor = isinstance(fn(*args), torch.Tensor)
        try:
            with warnings.catch_warnings(), tempfile.TemporaryDirectory() as folder:
                warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice
                path = os.path.join(folder, "model.onnx")
                torch.onnx.export(_TensorArgs(fn, args), tensors, path, dynamo=False,
                                  input_names=names)
                with open(path, "rb") as fp:
                    graph = fp.read()
        except Exception as exc:  # the exporter raises many types; all mean "cannot export"
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise NotImplementedError(f"torch.onnx cannot export "
                                      f"{getattr(fn, '__name__', fn)}: {first}") from exc
        options = onnxruntime.SessionOptions()
        # As many threads as torch has, so that both compete on the same terms.
        options.intra_op_num_threads = torch.get_num_threads()
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(graph, options,
                                                    providers=["CPUExecutionProvider"])
        # The exporter drops inputs that the graph does not use.
        used = {i.name for i in self.session.get_inputs()}
        self.feeds = [(name, i) for name, i in zip(names, range(len(tensors))) if name in used]

    def run(self, tensors: list[torch.Tensor]) -> Any:
        outputs = self.session.run(None, {name: tensors[i].detach().numpy()
                                          for name, i in self.feeds})
        results = tuple(torch.from_numpy(o) for o in outputs)
        return results[0] if self.returns_tensor else results


class _OnnxCallable:
    """The compiled function: a session per input signature, exported on first use (the
    tool is `lazy`, so kscperf times a new shape's export as that config's prep)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.sessions: dict[tuple[Any, ...], _Session] = {}

    def session_for(self, args: tuple[Any, ...]) -> _Session:
        key = _signature(args)
        if key not in self.sessions:
            self.sessions[key] = _Session(self.fn, args)
        return self.sessions[key]

    def __call__(self, *args: Any) -> Any:
        session = self.session_for(args)
        return session.run([a for a in args if isinstance(a, torch.Tensor)])


class OnnxRuntimeTool:
    """The `onnxrt` tool: compile = export + session creation for the example inputs."""

    source = "source"
    lazy = True
    tasks = ("inference",)
    unsupported_reason = ("an ONNX Runtime session runs the exported graph without autograd, "
                          "so there is no gradient to time")

    def compile(self, fn: Callable[..., Any], example_inputs: tuple[Any, ...],
                device: str) -> Callable[..., Any]:
        """Export `fn` for `example_inputs` and open its session; NotImplementedError (the
        cell is then unsupported) on CUDA or when the exporter cannot export `fn`."""
        if device != "cpu":
            raise NotImplementedError("onnxrt runs on the CPU only (onnxruntime's "
                                      "CPUExecutionProvider)")
        compiled = _OnnxCallable(fn)
        compiled.session_for(tuple(example_inputs))
        return compiled
