"""Bisecting by instruction counts (`bisect --by instructions`): one counting run per
commit, its processes' levels kept, and a comparison of two commits read from those levels
without running anything more.

A commit's measurement is one `run --instructions` of the selected cells from its own
checkout: one timing process, whose calibrated loops set how many calls are counted, then
`processes` counting processes under Callgrind (`kscperf.orchestrator.counting`). Its level
per counting process is the mean over the selected benchmarks of log(instructions per
call). A probe of NEW against BASE pairs their processes in order, one number per pair:
NEW's level minus BASE's. The processes of two commits are independent, so the pairing only
makes the one-sample tests that bisect's probes already use (`stats.bisection`) apply, each
number carrying both commits' noise. The confirmation of the ends and the verification of a
culprit compare the two commits' levels as two samples instead (`bisect.drive`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Sequence

from kscperf.bisect.builds import Environment
from kscperf.bisect.pairs import planned_paths, unusable_reason
from kscperf.errors import CellStatus, KscperfError
from kscperf.orchestrator.counting import counter_for, counter_missing
from kscperf.orchestrator.session import Build, RunConfig, prepare_session
from kscperf.spec import CellResult

__all__ = ["Counted", "Counter", "count_commit", "level_differences", "DEFAULT_PROCESSES"]

# Counting processes per commit: a probe decides on three numbers at least
# (`stats.bisection.MIN_PROBE_PAIRS`).
DEFAULT_PROCESSES = 3


@dataclass(frozen=True)
class Counted:
    """One commit's counting run: its level per counting process (mean log instructions per
    call over the selected benchmarks), the wall seconds the run took, why it could not be
    counted ("" when it was), and whether Ctrl-C stopped it."""

    levels: list[float]
    seconds: float
    failed: str = ""
    interrupted: bool = False


# How a bisect counts a commit: `count_commit`, or in tests of the search a stand-in.
Counter = Callable[[RunConfig, Environment, str, int], "Counted"]


def _levels(counts: Sequence[CellResult]) -> tuple[list[float], str]:
    """Per counting process, in process order, the mean log count over every benchmark
    that all processes counted; and why there are none ("" when there are): the first
    process that did not count, or the reason every config was skipped."""
    per_process: dict[int, dict[tuple[str, str], float]] = defaultdict(dict)
    skipped = ""
    for r in counts:
        if not r.configs and r.status is CellStatus.SKIPPED:
            skipped = skipped or f"{r.name} skipped: {r.reason}"
        elif not r.configs:
            return [], f"{r.name} {r.status.value}: {r.reason}"
        for c in r.configs:
            if c.status is CellStatus.SKIPPED:
                skipped = skipped or f"{r.name}/{c.config} skipped: {c.reason or r.reason}"
            elif c.status is not CellStatus.OK or c.instructions is None:
                return [], f"{r.name}/{c.config} {c.status.value}: {c.reason or r.reason}"
            else:
                per_process[r.process_index][r.name, c.config] = math.log(c.instructions)
    shared = set.intersection(*(set(p) for p in per_process.values())) if per_process else set()
    if not shared:
        return [], skipped or "no cell was counted"
    return [statistics.fmean(per_process[i][k] for k in sorted(shared))
            for i in sorted(per_process)], ""


def count_commit(config: RunConfig, env: Environment, output_dir: str,
                 processes: int = DEFAULT_PROCESSES) -> Counted:
    """Count the cells of `config` in the environment `env`, reading the definition paths
    from its own checkout, into `output_dir`: one timing process for the calibration, then
    `processes` counting processes. A worker that does not end ok, or a cell that cannot be
    counted (a CUDA tool) makes the commit's `failed` reason. Without valgrind, raises
    KscperfError."""
    missing = counter_missing(counter_for(config.instruction_counter))
    if missing:
        raise KscperfError(f"bisect --by instructions cannot count here: {missing}.")
    config = dataclasses.replace(config, processes=1, instructions=True,
                                 instruction_processes=processes, until_resolved=False,
                                 paths=planned_paths(config.paths, env.checkout))
    os.makedirs(output_dir, exist_ok=True)
    build = Build(label=env.label, python=env.python, env=env.env,
                  output=os.path.join(output_dir, "counted.json"))
    session = prepare_session(config, [build], replace=True)
    if not session.selection.cells:
        raise KscperfError("no cell is selected for the bisect; check -k, --tools and --tasks.")
    t0 = time.monotonic()
    result = session.run()
    seconds = time.monotonic() - t0
    if result.interrupted:
        return Counted([], seconds, interrupted=True)
    failed = next(filter(None, map(unusable_reason, result.runs[0])), "")
    if failed:
        return Counted([], seconds, failed)
    levels, failed = _levels(result.loaded[0].instruction_runs)
    return Counted(levels, seconds, failed[:300])


def level_differences(base: Sequence[float], new: Sequence[float]) -> list[float]:
    """NEW's levels minus BASE's, process by process in order (as many numbers as the
    fewer processes)."""
    return [n - b for b, n in zip(base, new)]
