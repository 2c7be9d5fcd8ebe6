"""The front page's numbers: per machine class, tool and task, what each build measured
(geomean speedup over `pt`, pass rate, compile time, peak memory) and whether the newest
build moved it; and which changes are still open. Statistics and policy only; the
dashboard lays them out.

The speedups are the ones every view shows (`kscperf.results.samples`, stored per point); a
change of less than `stats.NEUTRAL_CHANGE` between the last two builds is neither better
nor worse.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, Sequence

from kscperf.errors import NOT_RUN_STATUSES, CellStatus
from kscperf.history.changes import HistoryChange
from kscperf.history.series import Series, SeriesKey
from kscperf.names import Kind
from kscperf.stats import core as stats

__all__ = ["Trend", "GroupSummary", "summarize_groups", "open_changes"]


@dataclass(frozen=True)
class Trend:
    """One number per build position (None where the build has none), and the newest
    build's change against the one before: `change` the ratio (None when unknown) and
    `better` True, False, or None when unknown or within `stats.NEUTRAL_CHANGE`."""

    values: tuple[float | None, ...]
    change: float | None
    better: bool | None

    @property
    def last(self) -> float | None:
        """The newest build's number."""
        return self.values[-1] if self.values else None


@dataclass(frozen=True)
class GroupSummary:
    """One tool x task of one machine class over its builds. `passed` and `counted` are
    the newest build's ok and run (not skipped) run-time benchmarks; `pass_change` the
    change of the pass rate in points of percent against the build before."""

    machine_class: str
    tool: str
    task: str
    speedup: Trend
    pass_rate: Trend
    passed: int
    counted: int
    pass_change: float | None
    compile_s: Trend
    peak_rss: Trend


@dataclass
class _Group:
    """Per build position: what one tool x task of a machine class measured."""

    speedups: dict[int, list[float]] = field(default_factory=dict)
    passed: dict[int, list[float]] = field(default_factory=dict)  # 1.0 ok, 0.0 not
    compile_s: dict[int, list[float]] = field(default_factory=dict)
    memory: dict[int, list[float]] = field(default_factory=dict)


def _groups(all_series: Sequence[Series]) -> dict[tuple[str, str, str], _Group]:
    groups: dict[tuple[str, str, str], _Group] = {}
    for s in all_series:
        k = s.key
        group = groups.setdefault((k.machine_class, k.tool, k.task), _Group())
        for p in s.points:
            pos = p.build.position
            if k.kind is Kind.TIME:
                if p.status not in NOT_RUN_STATUSES:
                    group.passed.setdefault(pos, []).append(
                        1.0 if p.status is CellStatus.OK else 0.0)
                if math.isfinite(p.speedup) and p.speedup > 0:
                    group.speedups.setdefault(pos, []).append(p.speedup)
            elif k.kind is Kind.COMPILE and math.isfinite(p.median):
                group.compile_s.setdefault(pos, []).append(p.median)
            elif k.kind is Kind.PEAK_RSS and math.isfinite(p.median):
                group.memory.setdefault(pos, []).append(p.median)
    return groups


def _trend(per_build: dict[int, list[float]], n: int,
           how: Callable[[list[float]], float], higher_is_better: bool) -> Trend:
    values = tuple(how(per_build[pos]) if per_build.get(pos) else None for pos in range(n))
    last, previous = (values[-1] if values else None), (values[-2] if n > 1 else None)
    if last is None or previous is None or not previous:
        return Trend(values, None, None)
    ratio = last / previous
    better = None if abs(ratio - 1) < stats.NEUTRAL_CHANGE else (ratio > 1) == higher_is_better
    return Trend(values, ratio, better)


def _summary(cls: str, tool: str, task: str, g: _Group, n: int) -> GroupSummary:
    passing = _trend(g.passed, n, lambda v: sum(v) / len(v), True)
    ok = g.passed.get(n - 1, [])
    rates = passing.values
    pass_change = None
    if n > 1 and rates[-1] is not None and rates[-2] is not None:
        pass_change = (rates[-1] - rates[-2]) * 100
    return GroupSummary(
        cls, tool, task, _trend(g.speedups, n, stats.geometric_mean, True), passing,
        int(sum(ok)), len(ok), pass_change, _trend(g.compile_s, n, statistics.median, False),
        _trend(g.memory, n, statistics.median, False))


def summarize_groups(all_series: Sequence[Series], builds_per_class: dict[str, int]
                     ) -> list[GroupSummary]:
    """One summary per machine class, tool and task, in that order, over the
    `builds_per_class[cls]` builds of its class."""
    return [_summary(cls, tool, task, g, builds_per_class[cls])
            for (cls, tool, task), g in sorted(_groups(all_series).items())]


def open_changes(changes: Sequence[HistoryChange]) -> list[HistoryChange]:
    """Per series, its latest change of level or status (an earlier one is closed by it),
    regressions first, then by kind, newest first."""
    latest: dict[SeriesKey, HistoryChange] = {}
    for c in changes:
        # An unsettled newest build is no change of level or status: it waits for the next;
        # nor is a change only the night's `ab` called (listed on the benchmark's page).
        if c.kind in ("environment", "unsettled", "ab-only"):
            continue
        seen = latest.get(c.key)
        if seen is None or c.after.position > seen.after.position:
            latest[c.key] = c
    return sorted(latest.values(), key=lambda c: (not c.is_regression, c.kind,
                                                  -c.after.position, c.key.benchmark,
                                                  c.key.kind))
