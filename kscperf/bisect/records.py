"""What a bisect reports: its progress events, each comparison's record, the culprits, the
result, and the interruption that keeps its state. Plain records, for `bisect.drive` to
fill and `views.bisecttext` to show."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from kscperf.bisect.builds import Commit

__all__ = ["BisectEvent", "ProbeRecord", "Culprit", "BisectResult", "BisectInterrupted",
           "OnEvent", "EXPLAINED_AT_LEAST"]

# Found culprits that explain less of the confirmed log step than this are flagged.
EXPLAINED_AT_LEAST = 0.75


@dataclass(frozen=True)
class BisectEvent:
    """Progress: what a bisect is doing (`stage`: build, confirm, probe, verify), for which
    commit (its index among `commits`), with how many pairs so far and their ratio, the
    verdict when the step is done (else ""), and the seconds of this step and of the whole
    bisect."""

    stage: str
    commit: Commit
    index: int
    commits: int
    pairs: int
    ratio: float
    verdict: str
    seconds: float
    elapsed_s: float
    step: int


@dataclass(frozen=True)
class ProbeRecord:
    """One comparison of the bisect: its stage, the commit, the verdict, the ratio to the
    base with its interval, the pairs and the seconds it took, the error bound of the
    verdict, and whether it was replayed from the state file rather than run now."""

    stage: str
    commit: Commit
    verdict: str
    ratio: float
    ratio_low: float
    ratio_high: float
    pairs: int
    seconds: float
    error: float = math.nan
    replayed: bool = False


@dataclass(frozen=True)
class Culprit:
    """A part of the step, verified against its parent: the commits it lies among (one for
    a culprit, several for a range), the parent, the ratio to the parent with its interval
    and p-value, and the stated chance that it is not the commit that caused its part."""

    commits: tuple[Commit, ...]
    parent: Commit
    ratio: float
    ratio_low: float
    ratio_high: float
    p_value: float
    error: float
    holds: bool

    @property
    def is_range(self) -> bool:
        """Whether the part lies among several commits (untestable ones among them)."""
        return len(self.commits) > 1


@dataclass
class BisectResult:
    """What a bisect found: its verdict (`culprit`, `not-reproduced` or `range`), the
    confirmed step, the culprits that hold (largest first) and those that did not, every
    comparison, the untestable commits with their reasons, the share of the step the
    culprits explain, the ranges left unsearched once they explained it, and its costs."""

    verdict: str
    good: Commit
    bad: Commit
    commits: int
    step: ProbeRecord
    culprits: list[Culprit] = field(default_factory=list)
    rejected: list[Culprit] = field(default_factory=list)
    probes: list[ProbeRecord] = field(default_factory=list)
    untestable: list[tuple[Commit, str]] = field(default_factory=list)
    explained: float = math.nan
    capped: bool = False
    left_unsearched: int = 0
    seconds: float = 0.0
    builds_run: int = 0
    state_path: str = ""
    by: str = "time"
    counting_runs: int = 0  # by instructions: the commits counted (replayed ones too)

    @property
    def not_all_explained(self) -> bool:
        """Whether the culprits that hold explain less of the step than
        `EXPLAINED_AT_LEAST` (or the search stopped at its cap)."""
        return self.verdict != "not-reproduced" and (
            self.capped or not self.explained >= EXPLAINED_AT_LEAST)


class BisectInterrupted(Exception):
    """Ctrl-C during a bisect: the finished comparisons are in `state_path`."""

    def __init__(self, state_path: str, finished: int) -> None:
        super().__init__(state_path)
        self.state_path = state_path
        self.finished = finished


OnEvent = Callable[[BisectEvent], None]
