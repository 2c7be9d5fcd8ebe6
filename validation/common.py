"""What the validation scripts share: where the repository and its benchmark definitions
are, how a script runs one build through the Python API or a `run-benchmarks` command in a
new interpreter (and times it), and how a share is printed."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import kscperf
from kscperf.errors import BAD_STATUSES
from kscperf.names import benchmark_name, cell_name

ROOT = Path(__file__).resolve().parent.parent
# The benchmark definitions the scripts run: `work` does exactly proportional work, `tiny`
# is the cheapest cell there is.
MODELS = ROOT / "tools" / "models"
# `work` again, with the extra work in `ptnice`, so that `pt` (the reference) is untouched
# and both keep one correct result.
WORK_FIXTURE = ROOT / "tests" / "fixtures" / "work" / "work.py"


def percent(value: float) -> str:
    """`value` (a share) as "12.3 %", or "-" when it is NaN (nothing to share)."""
    return "-" if math.isnan(value) else f"{100 * value:.1f} %"


def run_build(who: str, *paths: str, **settings: Any) -> float:
    """Wall time of one run through the Python API (fork server, workers, files), replacing
    its output; `settings` go to `kscperf.run`. After Ctrl-C, exits with "WHO: interrupted";
    where a cell failed, crashed, timed out, ran out of memory or went wrong, exits naming
    the first, since the times of such a run measure nothing."""
    t0 = time.perf_counter()
    result = kscperf.run(*paths, replace=True, **settings)
    exit_if_interrupted(result, who)
    wall_s = time.perf_counter() - t0
    bad = [c for lr in result.loaded for c in lr.cells if c.status in BAD_STATUSES]
    if bad:
        first = bad[0]
        where = (cell_name(first.model, first.tool, first.task) if first.config is None
                 else benchmark_name(first.model, first.tool, first.task, first.config))
        total = sum(len(lr.cells) for lr in result.loaded)
        sys.exit(f"{who}: {len(bad)} of the run's {total} results did not end ok; the first, "
                 f"{where}, {first.status.value}: {first.reason[:200] or 'no reason given'}")
    return wall_s


def exit_if_interrupted(result: Any, who: str) -> None:
    """Exits with "WHO: interrupted" when the session `result` was interrupted (Ctrl-C)."""
    if result.interrupted:
        sys.exit(f"{who}: interrupted")


def timed_cli(who: str, *args: str, cpus: int | None = None,
              ok: tuple[int, ...] = (0,)) -> tuple[float, str]:
    """Wall time and stdout of `run-benchmarks ARGS` in a new interpreter (its start-up
    included: what a user waits for), pinned to the first `cpus` CPUs when given. An exit
    status outside `ok` exits "WHO: run-benchmarks ARGS failed" with its stderr."""
    allowed = (sorted(os.sched_getaffinity(0))[:cpus]
               if cpus is not None and hasattr(os, "sched_setaffinity") else None)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kscperf", *args], capture_output=True,
                          text=True, cwd=ROOT, preexec_fn=(
                              (lambda: os.sched_setaffinity(0, allowed)) if allowed else None))
    wall = time.perf_counter() - t0
    if proc.returncode not in ok:
        sys.exit(f"{who}: run-benchmarks {' '.join(args)} failed:\n{proc.stderr}")
    return wall, proc.stdout
