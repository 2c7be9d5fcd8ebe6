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

found through the entry point group `kscperf.tools` (the entry point's name is the tool's
name) or the command-line option `--tool-plugin [NAME=]module:object` (NAME defaults to
`object`). Plug-ins are imported in the worker only.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from typing import Any, Callable

from kscperf.errors import describe_exception

__all__ = [
    "BUILTIN_TOOLS",
    "EAGER_TOOLS",
    "CUDA_SUFFIX",
    "ENTRY_POINT_GROUP",
    "Unsupported",
    "ToolImpl",
    "parse_plugin_option",
    "plugin_tool_names",
    "load_tool",
    "split_device",
]

CUDA_SUFFIX = "_cuda"
ENTRY_POINT_GROUP = "kscperf.tools"
BUILTIN_TOOLS = ("pt", "ptnice", "ts", "compiled")
# Built-ins that never need torch.compile's machinery (plug-ins might).
EAGER_TOOLS = ("pt", "ptnice", "ts")


class Unsupported(Exception):
    """The tool cannot run this model on this device; the message says why."""


@dataclass(frozen=True)
class ToolImpl:
    """A loaded tool: which function it takes, whether it compiles lazily, and how."""

    name: str
    source: str
    lazy: bool
    compile: Callable[[Callable[..., Any], tuple[Any, ...], str], Callable[..., Any]]
    compiles: bool = True  # False for tools that run the function as it is (no compile time)


def split_device(tool: str) -> tuple[str, str]:
    """`pt_cuda` -> ("pt", "cuda"); `pt` -> ("pt", "cpu")."""
    if tool.endswith(CUDA_SUFFIX):
        return tool[: -len(CUDA_SUFFIX)], "cuda"
    return tool, "cpu"


def parse_plugin_option(option: str) -> tuple[str, str]:
    """`[NAME=]module:object` -> (NAME, "module:object"). Raises ValueError on bad syntax."""
    name, _, target = option.rpartition("=")
    module, sep, obj = target.partition(":")
    if not sep or not module or not obj:
        raise ValueError(f"--tool-plugin {option!r} is not of the form [NAME=]module:object")
    name = name or obj.split(".")[-1]
    if not name.isidentifier():
        raise ValueError(f"--tool-plugin {option!r}: tool name {name!r} is not an identifier")
    return name, target


def plugin_tool_names(options: tuple[str, ...] = ()) -> dict[str, str]:
    """Tool name -> "module:object" for every plug-in, from entry points and `options`,
    without importing any of them."""
    found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    for option in options:
        name, target = parse_plugin_option(option)
        found[name] = target
    return found


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


_BUILTINS: dict[str, ToolImpl] = {
    "pt": ToolImpl("pt", "pytorch", False, _identity_compile, compiles=False),
    "ptnice": ToolImpl("ptnice", "nice", False, _identity_compile, compiles=False),
    "ts": ToolImpl("ts", "source", False, _script_compile),
    "compiled": ToolImpl("compiled", "source", True, _torch_compile),
}


def _load_plugin(name: str, target: str) -> ToolImpl:
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
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

    return ToolImpl(name, source, bool(getattr(obj, "lazy", False)), compile_plugin)


def load_tool(tool: str, plugin_options: tuple[str, ...] = ()) -> tuple[ToolImpl, str]:
    """The implementation of `tool` (a built-in or plug-in name, maybe with `_cuda`) and its
    device. Raises KeyError for an unknown name."""
    base, device = split_device(tool)
    if base in _BUILTINS:
        return _BUILTINS[base], device
    plugins = plugin_tool_names(plugin_options)
    if base not in plugins:
        raise KeyError(tool)
    return _load_plugin(base, plugins[base]), device
