"""Apache Otava beside kscperf: its virtual environment (created on first use), its change
points on a set of series through `tools/otava-run`, what a CI keeping one number per build
would hand it, and dashboard-bench's tigerbeetle section (the TigerBeetle series of Otava's
own tests, through both detectors)."""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from kscperf.stats import changepoints
from kscperf.stats.changepoints import BuildPoint
from validation.common import ROOT, percent
from validation.detection import Samples

OTAVA_VERSION = "0.8.0"
# Otava's library defaults (window 50, p < 0.001), with the 5 % minimum magnitude that
# matches kscperf's minimum effect.
OTAVA_OPTIONS = {"window_len": 50, "max_pvalue": 0.001, "min_magnitude": 0.05}


def otava_python(venv: Path) -> Path:
    """The Python of the virtual environment that holds apache-otava, created (and the
    package installed from PyPI) on first use."""
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"creating {venv} with apache-otava=={OTAVA_VERSION} (once)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q",
                        f"apache-otava=={OTAVA_VERSION}"], check=True)
    return python


def detect_otava(python: Path, series: Sequence[Sequence[float]]
                 ) -> tuple[list[list[tuple[int, int]]], float]:
    """Otava's change points per series as (first point after it, +1 up / -1 down), and the
    seconds Otava itself took, from `tools/otava-run` under `python`."""
    with tempfile.TemporaryDirectory(prefix="otava-") as tmp:
        request, answer = Path(tmp) / "request.json", Path(tmp) / "answer.json"
        request.write_text(json.dumps({**OTAVA_OPTIONS, "series": [list(s) for s in series]}))
        subprocess.run([str(python), str(ROOT / "tools" / "otava-run"), str(request),
                        str(answer)], check=True)
        done = json.loads(answer.read_text())
    steps = [[(int(i), 1 if change > 0 else -1) for i, change in found]
             for found in done["change_points"]]
    return steps, float(done["seconds"])


def one_value_per_build(store: Sequence[Samples]) -> list[list[float]]:
    """Per series, the mean of each build's per-process medians: what a CI that keeps one
    number per build would hand Otava."""
    return [[float(np.mean(s)) for s in series] for series in store]


def _tigerbeetle_series(venv: Path) -> list[float]:
    """The TigerBeetle series of Otava's tests, from the apache-otava sdist (downloaded
    once into the venv's folder): the list literal that `_get_series` returns."""
    cache = venv / "sdist"
    archive = cache / f"apache_otava-{OTAVA_VERSION}.tar.gz"
    if not archive.exists():
        subprocess.run([str(otava_python(venv)), "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", ":all:", f"apache-otava=={OTAVA_VERSION}", "-d",
                        str(cache)], check=True)
    with tarfile.open(archive) as tar:
        member = tar.extractfile(f"apache_otava-{OTAVA_VERSION}/tests/tigerbeetle_test.py")
        assert member is not None
        tree = ast.parse(member.read().decode("utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_get_series":
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return) and inner.value is not None:
                    return [float(v) for v in ast.literal_eval(inner.value)]
    sys.exit("dashboard-bench: no _get_series in Otava's tigerbeetle_test.py")


def section_tigerbeetle(args: argparse.Namespace) -> dict[str, Any]:
    """Both detectors on the TigerBeetle series, at a 5 % minimum effect."""
    venv = Path(args.otava_venv)
    values = _tigerbeetle_series(venv)
    points = [BuildPoint((v,), "ok", "env") for v in values]
    kept = changepoints.control_fdr({0: changepoints.detect_series(points)})[0]
    ours = [c.after for c in kept if c.is_step]
    print(f"\n## TigerBeetle ({len(values)} builds, one value each), 5 % minimum effect")
    print(f"kscperf: {ours}; smallest detectable step "
          f"{percent(changepoints.detectable_step(points))}")
    result: dict[str, Any] = {"kscperf": ours}
    if not args.no_otava:
        theirs, _ = detect_otava(otava_python(venv), [values])
        result["otava"] = [b for b, _ in theirs[0]]
        print(f"Otava {OTAVA_VERSION} ({OTAVA_OPTIONS}): {result['otava']}")
    return result
