"""The layering rules of the design: the orchestrator side never imports torch, and benchmark
definitions (shipped and test fixtures) never import kscperf."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from runner_testing import BENCH_DEFS, FIXTURES

TORCH_FREE = ["kscperf", "kscperf.api", "kscperf.cli", "kscperf.session", "kscperf.plan",
              "kscperf.schedule", "kscperf.launch", "kscperf.outcome", "kscperf.workerenv",
              "kscperf.lockstep", "kscperf.names", "kscperf.results", "kscperf.compare",
              "kscperf.report", "kscperf.definitions", "kscperf.spec", "kscperf.errors",
              "kscperf.envinfo", "kscperf.tools", "kscperf.measure", "kscperf.history",
              "kscperf.dashboard", "kscperf.sparklines", "kscperf.sequential",
              "kscperf.resolve"]


@pytest.mark.parametrize("module", TORCH_FREE)
def test_module_does_not_import_torch(module: str) -> None:
    code = (f"import sys, {module}; "
            "sys.exit('imported torch' if 'torch' in sys.modules else None)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, f"importing {module}: {proc.stderr.strip()}"


def test_all_torch_free_modules_together() -> None:
    code = ("import sys\n" + "".join(f"import {m}\n" for m in TORCH_FREE)
            + "assert 'torch' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


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
