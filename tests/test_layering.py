"""The layering rules of the design: only `kscperf/worker/` imports torch, the package has no
import cycle, and benchmark definitions (shipped and test fixtures) never import kscperf."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from runner_testing import BENCH_DEFS, FIXTURES

PACKAGE = Path(__file__).resolve().parent.parent / "kscperf"
WORKER = PACKAGE / "worker"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PARENT_MODULES = sorted(p for p in PACKAGE.rglob("*.py") if WORKER not in p.parents)


def test_the_layout_puts_every_torch_import_under_worker() -> None:
    # Static, over every module, lazy imports and TYPE_CHECKING blocks included: no list to
    # keep up to date. The worker package is the only place torch may be imported.
    assert len(PARENT_MODULES) > 20
    offending = {_module_name(p): sorted(m for m in imported_modules(p)
                                         if m.split(".")[0] == "torch"
                                         or m.split(".")[:2] == ["kscperf", "worker"])
                 for p in PARENT_MODULES}
    assert not {k: v for k, v in offending.items() if v}


def test_the_worker_package_imports_torch_and_is_the_only_one() -> None:
    worker_modules = sorted(WORKER.glob("*.py"))
    assert any("torch" in imported_modules(p) for p in worker_modules)


@pytest.mark.integration
def test_the_public_surface_leaves_torch_unloaded() -> None:
    code = ("import sys, kscperf, kscperf.api, kscperf.cli\n"
            + "".join(f"import {_module_name(p)}\n" for p in PARENT_MODULES
                      if p.name != "__main__.py")
            + "sys.exit('imported torch' if 'torch' in sys.modules else None)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr.strip()


def _package_import_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for imported in imported_modules(path):
            # `from kscperf import x` names the module kscperf.x when there is one.
            if imported in modules and imported != "kscperf":
                targets.add(imported)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.update(f"{node.module}.{a.name}" for a in node.names
                               if f"{node.module}.{a.name}" in modules)
        graph[name] = targets - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_package_has_no_import_cycle() -> None:
    # Every import counts, lazy and TYPE_CHECKING ones too: a cycle hidden in a function
    # body is still a cycle of responsibilities.
    graph = _package_import_graph()
    assert "kscperf.worker.cell" in graph["kscperf.worker.server"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_check_would_catch_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def imported_modules(path: Path) -> set[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError:
        return set()  # a fixture that is broken on purpose cannot import anything
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            found.update(a.value for a in node.args if isinstance(a, ast.Constant)
                         and isinstance(a.value, str))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module"):
            found.update(a.value for a in node.args if isinstance(a, ast.Constant)
                         and isinstance(a.value, str))
    return found


DEFINITION_FILES = (sorted(BENCH_DEFS.glob("*.py")) + sorted(FIXTURES.rglob("*.py"))
                    + sorted((BENCH_DEFS.parent / "tools" / "models").glob("*.py")))


def test_there_are_definitions_to_check() -> None:
    assert len(list(BENCH_DEFS.glob("*.py"))) >= 4
    assert (FIXTURES / "defs" / "toy.py") in DEFINITION_FILES


@pytest.mark.parametrize("path", DEFINITION_FILES,
                         ids=[str(p.relative_to(BENCH_DEFS.parent)) for p in DEFINITION_FILES])
def test_definitions_never_import_kscperf(path: Path) -> None:
    offending = {m for m in imported_modules(path) if m.split(".")[0] == "kscperf"}
    assert not offending, f"{path} imports {sorted(offending)}"


def test_the_ast_check_would_catch_it(tmp_path: Path) -> None:
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text("def f():\n    from kscperf.spec import TASKS\n"
                      "    return __import__('kscperf')\n")
    assert {"kscperf.spec", "kscperf"} <= imported_modules(sneaky)
