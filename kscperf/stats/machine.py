"""The machine's own speed, from the canaries the workers timed (`kscperf.worker.canary`): one
figure per run with its spread, the processes that ran while the machine was in another
state, and whether two runs' machines differed by more than their own noise allows.

Pure statistics over loaded worker results, beside `stats.core` (whose tests it uses): no I/O,
no formatting, no torch. Why these rules and what they were measured against:
docs/method.md, "Machine speed".
"""

from __future__ import annotations

import enum
import math
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from kscperf.names import cell_name
from kscperf.spec import CanaryProbe, CellResult
from kscperf.stats import core as stats

__all__ = [
    "SHIFT_MIN_EFFECT",
    "ODD_STATE_FACTOR",
    "ProcessSpeed",
    "MachineSpeed",
    "ShiftState",
    "MachineShift",
    "probe_score",
    "machine_speed",
    "compare_machine_speeds",
    "compare_canary_scores",
    "usual_scores",
]

# Two runs' canaries must differ by at least this much (and significantly) before the
# machine is said to have changed: A/A runs on a quiet machine differ by up to about 1 %.
SHIFT_MIN_EFFECT = 0.03

# A process whose canary is this much slower or faster than its run's median ran in another
# state of the machine. This VM's slow state is about 1.5x its fast one.
ODD_STATE_FACTOR = 1.2


@dataclass(frozen=True)
class ProcessSpeed:
    """One worker process's canary: its cell, process index, the score of each probe (the
    geometric mean of its parts' seconds) and their geometric mean, `score_s`."""

    cell: str
    process_index: int
    probe_scores_s: tuple[float, ...]
    at: str

    @property
    def score_s(self) -> float:
        return stats.geometric_mean(self.probe_scores_s)


@dataclass(frozen=True)
class MachineSpeed:
    """A run's machine speed: the median canary score over its processes, `canary_s`, with
    the interquartile range [`low_s`, `high_s`] as its spread; `odd` are the processes whose
    score was `ODD_STATE_FACTOR` or more away from the median, or whose probes before and
    after their values were that far apart (the state changed while they ran)."""

    canary_s: float
    low_s: float
    high_s: float
    processes: tuple[ProcessSpeed, ...]
    odd: tuple[ProcessSpeed, ...]

    def to_dict(self) -> dict[str, Any]:
        """The figure as a results file records it (the processes stay in their runs)."""
        return {"canary_s": self.canary_s, "low_s": self.low_s, "high_s": self.high_s,
                "processes": len(self.processes), "odd_processes": len(self.odd)}

    def odd_keys(self) -> frozenset[tuple[str, int]]:
        """(cell name, process index) of every odd process."""
        return frozenset((p.cell, p.process_index) for p in self.odd)


class ShiftState(enum.StrEnum):
    """Whether the machine's speed changed between two runs."""

    UNCHANGED = "unchanged"    # the whole interval lies within SHIFT_MIN_EFFECT of 1
    CHANGED = "changed"        # significant, and at least SHIFT_MIN_EFFECT from 1
    UNRESOLVED = "unresolved"  # neither: too few or too noisy canaries to tell


@dataclass(frozen=True)
class MachineShift:
    """NEW's machine speed against BASE's as a ratio of canary medians (above 1: NEW's
    machine was slower) with its (1 - alpha) interval and p-value, and what that says."""

    ratio: float
    low: float
    high: float
    p_value: float
    state: ShiftState

    @property
    def shifted(self) -> bool:
        """Whether the machine changed speed."""
        return self.state is ShiftState.CHANGED

    @property
    def could_have_shifted(self) -> bool:
        """Whether a change of the machine's speed cannot be ruled out."""
        return self.state is not ShiftState.UNCHANGED


def probe_score(probe: CanaryProbe) -> float | None:
    """The geometric mean of a probe's part times, or None when a part is unusable."""
    seconds = [s for _, s in probe.seconds]
    if not seconds or not all(math.isfinite(s) and s > 0 for s in seconds):
        return None
    return stats.geometric_mean(seconds)


def _process_speed(run: CellResult) -> ProcessSpeed | None:
    scores = [probe_score(p) for p in run.canary]
    usable = tuple(s for s in scores if s is not None)
    if not usable:
        return None
    return ProcessSpeed(cell_name(run.model, run.tool, run.task), run.process_index, usable,
                        run.canary[0].at)


def _is_odd(p: ProcessSpeed, median_s: float) -> bool:
    limit = math.log(ODD_STATE_FACTOR)
    if abs(math.log(p.score_s / median_s)) >= limit:
        return True
    scores = p.probe_scores_s
    return abs(math.log(max(scores) / min(scores))) >= limit


def machine_speed(runs: Iterable[CellResult]) -> MachineSpeed | None:
    """The machine speed of the worker results `runs`, or None when none has a canary (a
    file from before kscperf had one, or a run that timed nothing)."""
    processes = tuple(p for p in map(_process_speed, runs) if p is not None)
    if not processes:
        return None
    scores = sorted(p.score_s for p in processes)
    median_s = statistics.median(scores)
    if len(scores) >= 2:
        low_s, _, high_s = statistics.quantiles(scores, n=4, method="inclusive")
    else:
        low_s = high_s = median_s
    odd = tuple(p for p in processes if _is_odd(p, median_s))
    return MachineSpeed(median_s, low_s, high_s, processes, odd)


def compare_machine_speeds(base: MachineSpeed, new: MachineSpeed, *,
                           alpha: float = stats.ALPHA) -> MachineShift:
    """NEW's machine against BASE's, by the same test `compare` uses for a benchmark (each
    process's canary score is one process's value), over the processes in the run's usual
    state. CHANGED needs a p-value under `alpha` and a ratio beyond `SHIFT_MIN_EFFECT`;
    UNCHANGED, an interval wholly within `SHIFT_MIN_EFFECT` of 1; otherwise UNRESOLVED."""
    return compare_canary_scores(usual_scores(base), usual_scores(new), alpha=alpha)


def compare_canary_scores(base: Sequence[float], new: Sequence[float], *,
                          alpha: float = stats.ALPHA) -> MachineShift:
    """NEW's machine against BASE's from their processes' canary scores, as
    `compare_machine_speeds` decides it."""
    estimate = stats.compare_samples([[s] for s in base], [[s] for s in new], alpha=alpha)
    direction = stats.classify_change(estimate.ratio, estimate.p_value,
                                      min_effect=SHIFT_MIN_EFFECT, alpha=alpha)
    if direction != 0:
        state = ShiftState.CHANGED
    elif estimate.low > 0 and stats.effect_direction(estimate.low, SHIFT_MIN_EFFECT) == 0 \
            and stats.effect_direction(estimate.high, SHIFT_MIN_EFFECT) == 0:
        state = ShiftState.UNCHANGED
    else:
        state = ShiftState.UNRESOLVED
    return MachineShift(estimate.ratio, estimate.low, estimate.high, estimate.p_value, state)


def usual_scores(speed: MachineSpeed) -> list[float]:
    """The canary scores of the run's processes in its usual machine state (all of them
    when every process was odd)."""
    odd = speed.odd_keys()
    usual = [p.score_s for p in speed.processes if (p.cell, p.process_index) not in odd]
    return usual or [p.score_s for p in speed.processes]
