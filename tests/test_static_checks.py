"""The type checker and the linter that CI runs (CONTRIBUTING.md): mypy on the package and on
`validation/` (its settings in pyproject.toml) and pyflakes on the package, the scripts, their
logic in `validation/` and the tests. Fixtures that are broken on purpose are left out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_no_type_errors() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pyflakes_finds_nothing() -> None:
    paths = [ROOT / "kscperf", ROOT / "kscperf_onnx", ROOT / "tools" / "truth-check",
             ROOT / "tools" / "harness-bench", ROOT / "tools" / "run-benchmarks",
             ROOT / "tools" / "models", ROOT / "bench_defs", ROOT / "tools" / "dashboard-bench",
             ROOT / "tools" / "history-demo", ROOT / "tools" / "same-suite",
             ROOT / "tools" / "writer-bench", ROOT / "tools" / "gpu-check", ROOT / "validation"]
    paths += [p for p in (ROOT / "tests").rglob("*.py") if "faults" not in p.parts]
    proc = subprocess.run([sys.executable, "-m", "pyflakes", *map(str, paths)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
