"""Built-in tools and the plug-in interface for third-party compilers.

A tool turns one of a model's functions into the callable that is checked and timed, on a
device. Built in: `pt` (B_pytorch), `ptnice` (B_pytorch_nice), `ts` (torch.jit.script of the
source), `compiled` (torch.compile of the source), and `<tool>_cuda` twins of every tool.

A third-party compiler registers a tool without editing kscperf, with any object (a class or
an instance) that has:

    compile(fn, example_inputs, device) -> callable
        compile the Python function `fn` for the example inputs (a tuple, already on `device`,
        "cpu" or "cuda") and return a callable with the same signature. Raise
        NotImplementedError (with a reason) when the function or device is not supported:
        the cell is then `unsupported`, not `failed`.
    source = "source"  (optional) which function it takes: "source" (B, else B_pytorch_nice,
        else B_pytorch), "nice" or "pytorch".
    lazy = False       (optional) True when the returned callable compiles on its first call
        (as torch.compile does); compile time is then the first call minus a steady call.

    tasks = ("inference", ...)  (optional) the tasks it supports (default: all); the others
        are `unsupported`, before anything is compiled.
    unsupported_reason = "..."  (optional) why the other tasks are not supported.

found through the entry point group `kscperf.tools` (the entry point's name is the tool's
name) or the command-line option `--tool-plugin [NAME=]module:object` (NAME defaults to
`object`). Plug-ins are imported in the worker only. A plug-in whose module, or whose
compile, raises ModuleNotFoundError (an optional dependency is not installed) is `skipped`,
with that message as the reason.

A model may also define tools of its own (definitions.ModelTool): calling its factory is the
compile step, and it returns the callable. What a plug-in's `compile` or a model's factory
returns is read by `as_built`, one mechanism for both: a callable (an autograd.Function class
is called through its `apply`), which may also have

    device = "cpu"            the device its inputs go to (model tools only)
    tasks, unsupported_reason as for a plug-in, checked once it is built
    example_prep(*args)       prepares one config's inputs (timed as prep) and returns the
                              arguments to call with (None: the inputs as they are)
    example_done(*args)       releases what example_prep made (timed as teardown)
    compile_figures           named figures of its own compile step, {name: (value, unit)}
                              (say, the g++ build apart from loading the module), recorded
                              in the cell's compile panel and compared between builds
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from kscperf.compilepanel import Figure, figures_from
from kscperf.errors import describe_exception
from kscperf.names import BUILTIN_TOOLS, TASKS, split_device
from kscperf.plan.definitions import ModelTool
from kscperf.plan.plugins import plugin_tool_names

__all__ = [
    "Unsupported",
    "Unavailable",
    "TaskSupport",
    "ToolImpl",
    "Built",
    "as_built",
    "declared_support",
    "model_tool",
    "load_tool",
]


class Unsupported(Exception):
    """The tool cannot run this model on this device; the message says why."""


class Unavailable(Exception):
    """The tool cannot run on this machine (an optional dependency is missing); the cell is
    skipped and the message says why."""


@dataclass(frozen=True)
class TaskSupport:
    """The tasks a tool says it supports (None: all) and why it does not support the rest."""

    tasks: tuple[str, ...] | None = None
    reason: str = ""

    def refusal(self, tool: str, task: str) -> str | None:
        """Why `tool` does not run `task`, or None when it does."""
        if self.tasks is None or task in self.tasks:
            return None
        if self.reason:
            return f"{tool} does not support {task}: {self.reason}"
        return f"{tool} supports only {', '.join(self.tasks) or 'no task'}, not {task}"


def declared_support(obj: Any, who: str) -> TaskSupport:
    """What `obj` says of the tasks it supports (its `tasks` and `unsupported_reason`);
    TypeError naming `who` when `tasks` is not a list of task names."""
    tasks = getattr(obj, "tasks", None)
    reason = getattr(obj, "unsupported_reason", "")
    if tasks is None:
        return TaskSupport(None, str(reason or ""))
    if isinstance(tasks, str) or not all(t in TASKS for t in tasks):
        raise TypeError(f"{who}: tasks must be a list of task names out of "
                        f"{', '.join(TASKS)}, not {tasks!r}")
    return TaskSupport(tuple(tasks), str(reason or ""))


@dataclass(frozen=True)
class ToolImpl:
    """A loaded tool: which function it takes, whether it compiles lazily, and how; the
    tasks it says it supports before compiling, and whether it needs CUDA whatever the
    device of its inputs (a tool with the copies to and from the GPU inside its timing)."""

    name: str
    source: str
    lazy: bool
    compile: Callable[[Callable[..., Any], tuple[Any, ...], str], Any]
    compiles: bool = True  # False for tools that run the function as it is (no compile time)
    support: TaskSupport = field(default_factory=TaskSupport)
    needs_cuda: bool = False
    model_defined: bool = False
    # For --explain: compiles the function again with the compiler's kernels named for the
    # profiler (code that differs from the timed module's, so it is never the timed one).
    instrumented: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None


@dataclass(frozen=True)
class Built:
    """What a tool's compile step built: the callable, the device its inputs go to when it
    says so, its prep and teardown hooks, and the tasks it supports."""

    fn: Callable[..., Any]
    device: str | None = None
    example_prep: Callable[..., Any] | None = None
    example_done: Callable[..., Any] | None = None
    support: TaskSupport = field(default_factory=TaskSupport)
    figures: tuple[Figure, ...] = ()


def as_built(obj: Any, who: str) -> Built:
    """What a compile step returned, read the one way for plug-ins and model tools: an
    autograd.Function class is called through `apply`, and a callable's optional `device`,
    `tasks`, `unsupported_reason`, `example_prep`, `example_done` and `compile_figures` are
    kept. TypeError naming `who` for anything that cannot be called."""
    import torch

    if isinstance(obj, Built):
        return obj
    fn = obj
    if isinstance(obj, type) and issubclass(obj, torch.autograd.Function):
        fn = obj.apply
    elif isinstance(obj, type) or not callable(obj):
        raise TypeError(f"{who} returned {type(obj).__name__}, not a callable, an "
                        "nn.Module or an autograd.Function class")
    device = getattr(obj, "device", None)
    if device is not None:
        device = str(device).partition(":")[0]  # a torch.device("cuda:0") says "cuda"
        if device not in ("cpu", "cuda"):
            raise TypeError(f"{who}: device must be 'cpu' or 'cuda', not {device!r}")
    hooks = [getattr(obj, name, None) for name in ("example_prep", "example_done")]
    for name, hook in zip(("example_prep", "example_done"), hooks):
        if hook is not None and not callable(hook):
            raise TypeError(f"{who}: {name} must be callable")
    return Built(fn, device, hooks[0], hooks[1], declared_support(obj, who),
                 figures_from(obj, who))


def _identity_compile(fn: Callable[..., Any], example_inputs: tuple[Any, ...],
                      device: str) -> Callable[..., Any]:
    return fn


def _script_compile(fn: Callable[..., Any], example_inputs: tuple[Any, ...],
                    device: str) -> Callable[..., Any]:
    import torch

    try:
        return torch.jit.script(fn)
    except Exception as exc:  # TorchScript raises many types; all mean "cannot script this"
        raise Unsupported(f"torch.jit.script cannot compile {getattr(fn, '__name__', fn)}: "
                          f"{describe_exception(exc, with_type=False)}") from exc


def _torch_compile(fn: Callable[..., Any], example_inputs: tuple[Any, ...],
                   device: str) -> Callable[..., Any]:
    import torch
    import torch._functorch.config

    # `bwd` times the VJP again and again over one graph (retain_graph=True), and a compiled
    # backward that donates its saved buffers refuses that. Donation only saves memory.
    torch._functorch.config.donated_buffer = False
    return torch.compile(fn)


# Inductor's settings that name each kernel in the profile: a record_function around each
# generated C++ kernel, and kernel names that are unique in the process (triton's, on GPU).
INSTRUMENTED_INDUCTOR: dict[str, Any] = {"cpp.enable_kernel_profile": True,
                                         "triton.unique_kernel_names": True}


def _torch_compile_instrumented(fn: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    # Other options make another backend, so dynamo compiles a module of its own beside the
    # timed one (whose cache entries stay as they were).
    return torch.compile(fn, options=INSTRUMENTED_INDUCTOR)


_BUILTINS: dict[str, ToolImpl] = {
    "pt": ToolImpl("pt", "pytorch", False, _identity_compile, compiles=False),
    "ptnice": ToolImpl("ptnice", "nice", False, _identity_compile, compiles=False),
    "ts": ToolImpl("ts", "source", False, _script_compile),
    "compiled": ToolImpl("compiled", "source", True, _torch_compile,
                         instrumented=_torch_compile_instrumented),
}
# The parent plans with names.BUILTIN_TOOLS; the worker must build exactly those.
assert tuple(_BUILTINS) == BUILTIN_TOOLS, "names.BUILTIN_TOOLS and worker.tools disagree"


def _load_plugin(name: str, target: str) -> ToolImpl:
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise Unavailable(f"tool {name} is not available here: {exc}") from exc
    for part in attr.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, type):
        obj = obj()
    compile_fn = getattr(obj, "compile", None)
    if not callable(compile_fn):
        raise TypeError(f"tool plug-in {target} has no compile(fn, example_inputs, device) method")
    source = getattr(obj, "source", "source")
    if source not in ("source", "nice", "pytorch"):
        raise TypeError(f"tool plug-in {target}: source must be 'source', 'nice' or 'pytorch'")

    def compile_plugin(fn: Callable[..., Any], example_inputs: tuple[Any, ...],
                       device: str) -> Callable[..., Any]:
        try:
            return compile_fn(fn, example_inputs, device)
        except NotImplementedError as exc:
            raise Unsupported(str(exc) or f"{name} does not support this model") from exc
        except ModuleNotFoundError as exc:
            raise Unavailable(f"tool {name} is not available here: {exc}") from exc

    return ToolImpl(name, source, bool(getattr(obj, "lazy", False)), compile_plugin,
                    support=declared_support(obj, f"tool plug-in {target}"))


# A compiler's error line: `path:line:col: error: ...` (g++, clang), `path(line): error: ...`
# (nvcc) or `error: ...`.
_COMPILER_ERROR = re.compile(r"^(?:\S+?(?::\d+:(?:\d+:)?|\(\d+\):)\s*)?(?:fatal )?error\b.*",
                             re.MULTILINE)


def _compiler_error_line(text: str) -> str | None:
    """The first error line of a compiler's output, with the file named by its base name."""
    match = _COMPILER_ERROR.search(text)
    if match is None:
        return None
    line = match.group(0).strip()
    path, sep, rest = line.partition(":")
    return os.path.basename(path) + sep + rest if sep and os.sep in path else line


def _with_transfer(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` on CUDA, called with CPU tensors: the copies there and back are inside each call
    (and inside autograd, so gradients come back to the CPU inputs)."""
    import torch

    def transferred(*args: Any) -> Any:
        out = fn(*(a.to("cuda") if isinstance(a, torch.Tensor) else a for a in args))
        if isinstance(out, torch.Tensor):
            return out.to("cpu")
        if isinstance(out, (tuple, list)):
            return type(out)(o.to("cpu") if isinstance(o, torch.Tensor) else o for o in out)
        return out

    return transferred


def model_tool(tool: ModelTool, factory: Any, where: str) -> tuple[ToolImpl, str]:
    """The implementation of a tool that a model defines for itself (its factory found in the
    module `where`), and the device of its inputs. Its compile step calls the factory and
    returns a `Built`; a factory that raises while building C++ or CUDA code fails with the
    compiler's first error line."""
    who = f"{tool.factory}()"

    def build(fn: Callable[..., Any], example_inputs: tuple[Any, ...], device: str) -> Built:
        if not callable(factory):
            raise TypeError(f"{where}: {tool.factory} is a {type(factory).__name__}, "
                            "not a function")
        try:
            made = factory()
        except Exception as exc:
            error_line = _compiler_error_line(str(exc))
            if error_line is None:
                raise
            raise RuntimeError(f"building {who} failed: {error_line}") from exc
        built = as_built(made, who)
        if tool.transfer:
            return Built(_with_transfer(built.fn), "cpu", built.example_prep,
                         built.example_done, built.support, built.figures)
        return built

    device = "cuda" if tool.cuda and not tool.transfer else "cpu"
    return ToolImpl(tool.name, "pytorch", False, build, needs_cuda=tool.cuda,
                    model_defined=True), device


def load_tool(tool: str, plugin_options: tuple[str, ...] = (),
              model_tools: Mapping[str, tuple[ModelTool, Any]] | None = None,
              where: str = "") -> tuple[ToolImpl, str]:
    """The implementation of `tool` (one of `model_tools`, the model's own tools with their
    factories, found in module `where`; else a built-in or plug-in name, maybe with `_cuda`)
    and the device of its inputs. Raises KeyError for an unknown name, Unavailable for a
    plug-in whose module needs a module that is not installed."""
    if model_tools and tool in model_tools:
        return model_tool(*model_tools[tool], where)
    base, device = split_device(tool)
    if base in _BUILTINS:
        return _BUILTINS[base], device
    plugins = plugin_tool_names(plugin_options)
    if base not in plugins:
        raise KeyError(tool)
    return _load_plugin(base, plugins[base]), device
