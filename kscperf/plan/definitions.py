"""Finding models in user modules by the Knossos naming convention.

For a model `B`, a plain Python module (which never imports kscperf) holds:

    B_bench_configs()      yields sample inputs, one per config: a tensor or a tuple of args
    B_pytorch(*args)       the fast PyTorch version: tool `pt`, and the correctness reference
    B_pytorch_nice(*args)  the readable PyTorch version: tool `ptnice`
    B(*args)               the source for compiler tools (else B_pytorch_nice, else B_pytorch)

and, optionally:

    B_config_names         list of config names, in order (default: the first tensor
                           argument's shape joined with "x", e.g. "1000x4x4")
    B_diff_args            indices of the arguments that are differentiated (default: every
                           floating-point tensor argument)
    B_tolerances           {"float32": {"rtol": 1e-4, "atol": 1e-5}, ...} per input dtype
    B_skip(task, config)   a reason to skip that task on that config, or None; declared
                           as B_skip(task, config, tool) it is also told the tool
    B_timeout              seconds before one process of one of this model's cells is killed

and tools of its own (model-defined tools), each a factory whose call is the tool's timed
compile step and which returns the callable (see tools.build_model_tool):

    B_tool_<name>()        tool `<name>`; a name ending in `_cuda` is a CUDA tool, which
                           also gets `<name>_transfer`, timed with the copies to and from
                           the GPU inside the timing
    B_embedded_<suffix>()  Knossos's embedded C++: tool `embedded_<suffix>`
    B_cuda_init()          Knossos's hand-written CUDA: tools `manual_cuda` and
                           `manual_cuda_transfer`

The parent reads module names statically with `ast` (no import, so no torch); the worker
imports the module by path. A module that breaks the convention yields a `DefinitionProblem`
naming the module and the function, and the other modules still run.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import sys
import types
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from kscperf.errors import KscperfError
from kscperf.names import BUILTIN_TOOLS, CUDA_SUFFIX, MANUAL_CUDA_TOOL, TRANSFER_SUFFIX

__all__ = [
    "ModelDef",
    "ModelTool",
    "model_tools",
    "DefinitionProblem",
    "DefinitionError",
    "find_definition_files",
    "scan_models",
    "import_definition_module",
    "resolve_model",
    "ResolvedModel",
]

CONFIGS_SUFFIX = "_bench_configs"
REFERENCE_SUFFIX = "_pytorch"
NICE_SUFFIX = "_pytorch_nice"
TOOL_INFIX = "_tool_"
EMBEDDED_INFIX = "_embedded_"
CUDA_INIT_SUFFIX = "_cuda_init"


class DefinitionError(Exception):
    """A definition module breaks the convention; the message names module and function."""


@dataclass(frozen=True)
class ModelTool:
    """A tool that one model defines for itself: its name, the module-level factory that
    builds it, whether it needs CUDA, and whether the copies of the inputs to the GPU and of
    the outputs back are inside the timing (an explicit `_transfer` tool, never the default)."""

    name: str
    factory: str
    cuda: bool = False
    transfer: bool = False


@dataclass(frozen=True)
class ModelDef:
    """A model found statically: its name, its module file, which functions it defines and
    the tools it defines for itself."""

    name: str
    module_path: str
    has_nice: bool
    has_source: bool
    timeout_s: float | None = None
    tools: tuple[ModelTool, ...] = ()

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools this model defines for itself."""
        return tuple(t.name for t in self.tools)


@dataclass(frozen=True)
class DefinitionProblem:
    module_path: str
    message: str


def find_definition_files(paths: list[str]) -> list[str]:
    """The `.py` files named by `paths` (files, or folders searched recursively), sorted,
    absolute. Raises KscperfError for a path that does not exist or holds no Python file."""
    files: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            if not path.endswith(".py"):
                raise KscperfError(f"{path} is not a Python file (.py) of benchmark definitions.")
            files.append(os.path.abspath(path))
        elif os.path.isdir(path):
            found = []
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
                found += [os.path.join(root, n) for n in names
                          if n.endswith(".py") and not n.startswith("_")]
            if not found:
                raise KscperfError(f"{path} holds no Python file of benchmark definitions.")
            files += sorted(os.path.abspath(f) for f in found)
        else:
            raise KscperfError(f"{path}: no such file or folder of benchmark definitions.")
    return list(dict.fromkeys(files))


def _top_level_names(tree: ast.Module) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    _collect_names(tree.body, names)
    return names


def _collect_names(body: list[ast.stmt], names: dict[str, ast.AST]) -> None:
    # Module-level `if`/`try`/`with` blocks (e.g. `try: import knossos`) define names too.
    for node in body:
        if isinstance(node, ast.If):
            _collect_names(node.body + node.orelse, names)
        elif isinstance(node, ast.Try):
            _collect_names(node.body + node.orelse + node.finalbody
                           + [s for h in node.handlers for s in h.body], names)
        elif isinstance(node, ast.With):
            _collect_names(node.body, names)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node


def _literal_number(node: ast.AST | None) -> float | None:
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


def _tools_of_factory(model: str, name: str) -> list[ModelTool]:
    """The tools that the module-level `name` defines for `model`, if it is a factory."""
    if name == model + CUDA_INIT_SUFFIX:
        return [ModelTool(MANUAL_CUDA_TOOL, name, cuda=True),
                ModelTool(MANUAL_CUDA_TOOL + TRANSFER_SUFFIX, name, cuda=True, transfer=True)]
    for infix, prefix in ((TOOL_INFIX, ""), (EMBEDDED_INFIX, "embedded_")):
        rest = name[len(model + infix):] if name.startswith(model + infix) else ""
        # `B_tool_x_pytorch` is model `B_tool_x`'s reference, not a tool of model `B`.
        if rest.isidentifier() and not ("_" + rest).endswith(
                (CONFIGS_SUFFIX, REFERENCE_SUFFIX, NICE_SUFFIX)):
            tool = prefix + rest
            if not tool.endswith(CUDA_SUFFIX):
                return [ModelTool(tool, name)]
            return [ModelTool(tool, name, cuda=True),
                    ModelTool(tool + TRANSFER_SUFFIX, name, cuda=True, transfer=True)]
    return []


def model_tools(model: str, names: Iterable[str],
                where: str) -> tuple[list[ModelTool], list[str]]:
    """The tools `model` defines for itself among the module-level `names` of `where`
    (a module path), sorted by name, and a sentence for each factory that was refused: one
    that takes a built-in tool's name, or a tool name that two factories claim."""
    builtin = set(BUILTIN_TOOLS) | {t + CUDA_SUFFIX for t in BUILTIN_TOOLS}
    found: dict[str, ModelTool] = {}
    problems: list[str] = []
    for name in sorted(names):
        for tool in _tools_of_factory(model, name):
            if tool.name in builtin:
                problems.append(f"{where}: {name}() would define tool {tool.name}, which is "
                                f"a built-in tool; rename it (that tool was not run).")
            elif tool.name in found and found[tool.name].factory != name:
                problems.append(f"{where}: {found[tool.name].factory}() and {name}() both "
                                f"define tool {tool.name}; only the first was run.")
            else:
                found[tool.name] = tool
    return sorted(found.values(), key=lambda t: t.name), problems


def scan_models(files: list[str]) -> tuple[list[ModelDef], list[DefinitionProblem]]:
    """The models defined in `files`, read statically, and the problems found on the way.

    A model named twice (in two modules) is kept from the first module only.
    """
    models: list[ModelDef] = []
    problems: list[DefinitionProblem] = []
    seen: dict[str, str] = {}
    for path in files:
        try:
            with open(path, encoding="utf-8") as fp:
                tree = ast.parse(fp.read(), filename=path)
        except SyntaxError as exc:
            problems.append(DefinitionProblem(
                path, f"{path}:{exc.lineno}: syntax error: {exc.msg}; its models were not run."))
            continue
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            problems.append(DefinitionProblem(path, f"cannot read {path}: {exc}."))
            continue
        names = _top_level_names(tree)
        for name in sorted(names):
            if not name.endswith(CONFIGS_SUFFIX) or name == CONFIGS_SUFFIX:
                continue
            model = name[: -len(CONFIGS_SUFFIX)]
            if model + REFERENCE_SUFFIX not in names:
                problems.append(DefinitionProblem(
                    path, f"{path} defines {name} but no reference {model}{REFERENCE_SUFFIX}; "
                    f"model {model} was not run."))
                continue
            if model in seen:
                problems.append(DefinitionProblem(
                    path, f"model {model} is defined in both {seen[model]} and {path}; "
                    f"only the first was run (rename one)."))
                continue
            seen[model] = path
            tools, tool_problems = model_tools(model, names, path)
            problems += [DefinitionProblem(path, p) for p in tool_problems]
            models.append(ModelDef(
                name=model, module_path=path, has_nice=model + NICE_SUFFIX in names,
                has_source=model in names,
                timeout_s=_literal_number(names.get(model + "_timeout")), tools=tuple(tools)))
        if not any(n.endswith(CONFIGS_SUFFIX) for n in names) and any(
                n.endswith(REFERENCE_SUFFIX) for n in names):
            ref = next(n for n in names if n.endswith(REFERENCE_SUFFIX))
            problems.append(DefinitionProblem(
                path, f"{path} defines {ref} but no {ref[: -len(REFERENCE_SUFFIX)]}"
                f"{CONFIGS_SUFFIX}(); add one that yields sample inputs."))
    return models, problems


def import_definition_module(path: str) -> types.ModuleType:
    """Import a definition file by path, with its folder on sys.path so that it can import
    its neighbours. Raises DefinitionError with the module's name and the cause."""
    # Two definition files may share a file name in different folders.
    name = (f"kscperf_defs_{os.path.splitext(os.path.basename(path))[0]}_"
            f"{zlib.crc32(os.path.abspath(path).encode()):08x}")
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise DefinitionError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise DefinitionError(
            f"importing {path} raised {type(exc).__name__}: {exc}") from exc
    return module


@dataclass
class ResolvedModel:
    """A model's callables, looked up in its imported module."""

    name: str
    module_path: str
    configs: Callable[[], Any]
    reference: Callable[..., Any]
    nice: Callable[..., Any] | None
    source: Callable[..., Any] | None
    config_names: list[str] | None
    diff_args: tuple[int, ...] | None
    tolerances: dict[str, dict[str, float]]
    skip: Callable[..., str | None] | None
    # The model's own tools, by name, with what their factory name holds in the module.
    tools: dict[str, tuple[ModelTool, Any]] = field(default_factory=dict)

    def skip_reason(self, task: str, config: str, tool: str) -> str | None:
        """What the model's `B_skip` says of `task` on `config` with `tool`: it is given the
        tool when it takes a third argument (B_skip(task, config, tool)), else the two
        arguments it always had."""
        if self.skip is None:
            return None
        try:
            params = inspect.signature(self.skip).parameters.values()
            takes_tool = len(params) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in params)
        except (TypeError, ValueError):  # no signature to read: called as it always was
            takes_tool = False
        reason = self.skip(task, config, tool) if takes_tool else self.skip(task, config)
        return str(reason) if reason else None

    def function_for(self, kind: str) -> tuple[str, Callable[..., Any]] | None:
        """The function a tool of `kind` ("pytorch", "nice" or "source") takes, with its name;
        compilers ("source") fall back to the nice version, then to the reference."""
        orders: dict[str, list[tuple[str, Callable[..., Any] | None]]] = {
            "pytorch": [(REFERENCE_SUFFIX, self.reference)],
            "nice": [(NICE_SUFFIX, self.nice)],
            "source": [("", self.source), (NICE_SUFFIX, self.nice),
                       (REFERENCE_SUFFIX, self.reference)]}
        order = orders[kind]
        for suffix, fn in order:
            if fn is not None:
                return self.name + suffix, fn
        return None


def resolve_model(module: types.ModuleType, model: str) -> ResolvedModel:
    """Look up `model`'s functions in `module`; DefinitionError names what is wrong."""
    where = getattr(module, "__file__", module.__name__)

    def get(suffix: str, required: bool = False, want_callable: bool = True) -> Any:
        value = getattr(module, model + suffix, None)
        if value is None:
            if required:
                raise DefinitionError(f"{where} has no {model}{suffix}")
            return None
        if want_callable and not callable(value):
            raise DefinitionError(
                f"{where}: {model}{suffix} is a {type(value).__name__}, not a function")
        return value

    names = get("_config_names", want_callable=False)
    if callable(names):
        names = names()
    if names is not None and (not isinstance(names, (list, tuple))
                              or not all(isinstance(n, str) and n for n in names)):
        raise DefinitionError(f"{where}: {model}_config_names must be a list of non-empty strings")
    diff = get("_diff_args", want_callable=False)
    if diff is not None and not (isinstance(diff, (list, tuple))
                                 and all(isinstance(i, int) for i in diff)):
        raise DefinitionError(f"{where}: {model}_diff_args must be a tuple of argument indices")
    tolerances = get("_tolerances", want_callable=False) or {}
    if not isinstance(tolerances, dict):
        raise DefinitionError(f"{where}: {model}_tolerances must be a dict")
    own_tools, _ = model_tools(model, vars(module), where)
    # Checked when the tool is built, so that a bad factory fails only its own cells.
    tools = {t.name: (t, getattr(module, t.factory)) for t in own_tools}
    return ResolvedModel(
        name=model, module_path=where, configs=get(CONFIGS_SUFFIX, required=True),
        reference=get(REFERENCE_SUFFIX, required=True), nice=get(NICE_SUFFIX),
        source=get(""), config_names=list(names) if names is not None else None,
        diff_args=tuple(diff) if diff is not None else None, tolerances=tolerances,
        skip=get("_skip"), tools=tools)
