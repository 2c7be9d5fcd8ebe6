"""One comparison of a bisect: two environments run in lockstep by one orchestrator
session, read as one number per process pair, with pairs added round by round until the
caller's rule is satisfied or the cap is reached."""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from kscperf.bisect.builds import Environment
from kscperf.errors import CellStatus, KscperfError
from kscperf.orchestrator.session import Build, RunConfig, prepare_session
from kscperf.plan.cells import PlannedCell
from kscperf.spec import CellResult
from kscperf.stats import core as stats

__all__ = ["Compared", "unusable_reason", "pair_numbers", "run_comparison", "planned_paths"]


@dataclass(frozen=True)
class Compared:
    """What one comparison measured: its pair numbers in the order they ran, its wall
    seconds, and why it could not go on ("" when it could: a side whose worker failed,
    named BASE or NEW), with which side failed (0 base, 1 new, None)."""

    numbers: list[float]
    seconds: float
    failed: str = ""
    failed_side: int | None = None
    interrupted: bool = False
    replayed: bool = False  # read back from a bisect's state file, not run now
    # By instructions: the two commits' levels per counting process (BASE, NEW), which
    # their steps are tested on as two samples; `numbers` then pair them in order.
    levels: tuple[list[float], list[float]] | None = None


# What a bisect can use: measured, or left out by the model's choice.
_USABLE_STATUSES = frozenset({CellStatus.OK, CellStatus.SKIPPED})


def unusable_reason(result: CellResult) -> str:
    """Why a bisect cannot use this worker's measurements, in one line naming the cell, its
    status and the first bad config's reason; "" when it can (every config ok or skipped by
    choice). Stricter than a run's exit status, which lets `unsupported` pass: a commit at
    which the tool cannot run the cell cannot be placed before or after the change, so to a
    bisect it is a commit that failed."""
    if result.worst_status() in _USABLE_STATUSES:
        return ""
    bad = next((c for c in result.configs if c.status not in _USABLE_STATUSES), None)
    reason = (bad.reason if bad and bad.reason else result.reason) or result.worst_status().value
    return f"{result.name} {result.worst_status().value}: {reason}"[:300]


def pair_numbers(cells: Sequence[PlannedCell], gathered: Sequence[list[CellResult]]
                 ) -> tuple[list[float], tuple[int, str] | None]:
    """Per process pair that both builds finished, the mean over every timed benchmark of
    the cells of its pair number; and the first failure (side, reason) when a worker of
    either side did not end ok, else None."""
    by_key = [{(r.name, r.process_index): r for r in results} for results in gathered]
    for side, results in enumerate(gathered):
        failed = next(filter(None, map(unusable_reason, results)), "")
        if failed:
            return [], (side, failed)
    timed = [c for c in cells if not c.skip_reason]
    numbers: list[float] = []
    index = 0
    while timed and all((c.name, index) in by_key[0] and (c.name, index) in by_key[1]
                        for c in timed):
        logs = []
        for cell in timed:
            base, new = by_key[0][cell.name, index], by_key[1][cell.name, index]
            for b in base.configs:
                n = next((c for c in new.configs if c.config == b.config), None)
                if n is not None and b.loops > 0 and n.loops > 0:
                    logs += stats.paired_log_ratios([(list(b.values), list(n.values))])
        if logs:
            numbers.append(statistics.fmean(logs))
        index += 1
    return numbers, None


def planned_paths(paths: Sequence[str], root: str) -> tuple[str, ...]:
    """The definition paths as read from the checkout at `root` (an absolute path is the
    same for every commit); unchanged when `root` is "" (a builds file)."""
    if not root:
        return tuple(paths)
    return tuple(p if os.path.isabs(p) else os.path.join(root, p) for p in paths)


def run_comparison(config: RunConfig, base: Environment, new: Environment, plan_root: str,
                   output_dir: str, *, first_pairs: int, max_pairs: int,
                   more_after: Callable[[list[float]], int],
                   restart_ratio: float = 0.0) -> Compared:
    """BASE and NEW in lockstep over the cells of `config` (paths read from `plan_root`'s
    checkout, each build reading its own copy), files in `output_dir`. After
    `first_pairs` pairs and each further round, `more_after(numbers)` says how many pairs
    to add (0: enough); never more than `max_pairs` in all. A failed worker ends it. Every
    pair has its own zygotes (`restart_ratio` 0.0, as `Session.run` takes it; the null
    calibration of tools/bisect-bench sets a larger one to show why)."""
    config = dataclasses.replace(config, processes=first_pairs,
                                 paths=planned_paths(config.paths, plan_root))
    builds = [Build(label=e.label, python=e.python, env=e.env,
                    module_root=(plan_root, e.checkout) if plan_root and e.checkout else ())
              for e in (base, new)]
    failure: list[tuple[int, str]] = []

    def stopping(cells: Sequence[PlannedCell], gathered: Sequence[list[CellResult]]
                 ) -> Callable[[], list[tuple[int, PlannedCell]]]:
        def more() -> list[tuple[int, PlannedCell]]:
            numbers, failed = pair_numbers(cells, gathered)
            if failed is not None:
                failure.append(failed)
                return []
            n = len(numbers)
            add = min(more_after(numbers), max_pairs - n)
            return [(n + k, c) for k in range(max(0, add)) for c in cells if not c.skip_reason]
        return more

    session = prepare_session(config, builds, replace=True, output_dir=output_dir)
    if not session.selection.cells:
        raise KscperfError("no cell is selected for the bisect; check -k, --tools and --tasks.")
    t0 = time.monotonic()
    result = session.run(stopping=stopping, restart_ratio=restart_ratio)
    seconds = time.monotonic() - t0
    numbers, failed = pair_numbers(session.selection.cells, result.runs)
    if failure or failed:
        side, reason = (failure or [failed])[0]  # type: ignore[list-item]
        return Compared(numbers, seconds, f"{('BASE', 'NEW')[side]} {reason}", side)
    return Compared(numbers, seconds, interrupted=result.interrupted)
