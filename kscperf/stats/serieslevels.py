"""The levels and the noise of one benchmark series, and the smallest step it can show: pure
statistics beside `stats.core`, under `changepoints`.

A series is one `BuildPoint` per build in build order. Each build's level is the median of
its per-process medians, leaving out the processes that the machine-speed canary marked as
timed in another state of the machine (`BuildPoint.odd`): one slow process of three moves a
median not at all, where it moved the mean of the logs by a third of its slowdown. The noise
of the levels is estimated from the differences of consecutive builds, robustly (a MAD, then
a trimmed root mean square), so steps and outliers do not inflate it. `detectable_step` says
what a series can see: the smallest step that the test of two stretches of builds would find.
Why: docs/changepoints.md.

No I/O, no formatting, no torch; numpy is imported inside the functions that need it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from kscperf.errors import CellStatus
from kscperf.stats import core as stats
from kscperf.stats.machine import ODD_STATE_FACTOR

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "MIN_SIDE_BUILDS",
    "DETECTABLE_SIDE_BUILDS",
    "NOISE_FLOOR",
    "BuildPoint",
    "LevelSeries",
    "usable_samples",
    "environment_spans",
    "level_series",
    "level_noise_sd",
    "UNSETTLED_P",
    "unsettled_newest",
    "per_build_min_detectable",
    "detectable_step",
]


# Persistence: a level must hold for this many builds on each side of a step. A single build
# that differs and reverts is an outlier, not a change.
MIN_SIDE_BUILDS = 2

# `detectable_step` is stated for a step with this many builds on each side (fewer in a
# shorter history): what a regression must be to be found within this many builds of it.
DETECTABLE_SIDE_BUILDS = 10

# Fewest differences of consecutive builds from which the build-to-build spread is
# estimated; in a shorter history one step would be most of the estimate.
MIN_DIFFERENCES = 10

# A floor under the noise of a log level (1e-6 relative), so that a constant series (peak
# memory is often deterministic) is not split by floating-point rounding.
NOISE_FLOOR = 1e-6

# A process whose median is this many of the series' process standard deviations (and at
# least machine.ODD_STATE_FACTOR) slower than the fastest process of its build ran in another
# state of the machine, as if the canary had marked it: a machine only ever slows a process.
ODD_PROCESS_SDS = 6.0

# A newest build whose processes scatter more than its segment's processes do, at this
# significance (a chi-square test of their variance against the segment's process variance),
# ran through a disturbance of the machine: a slow state that came and went during its run,
# slowing its processes by different amounts, where a change of the code moves them alike.
# 0.001 holds back about one ordinary newest build in 1,000, for one build, and stays rare
# when the segment's process scatter is underestimated (it rests on a median).
UNSETTLED_P = 0.001

# The median absolute difference of two normal values is 0.6745 * sqrt(2) standard deviations.
_PAIR_MAD_TO_SD = 1.0 / (0.6745 * math.sqrt(2.0))

# MAD to standard deviation for normal data.
_MAD_TO_SD = 1.4826

# Differences of consecutive levels beyond this many (robust) standard deviations are steps
# or blips, left out of the noise estimate; the variance of a standard normal truncated to
# +-_TRIM is _TRIMMED_VARIANCE: 1 - 2 c phi(c) / (2 Phi(c) - 1) at c = 3.
_TRIM = 3.0
_TRIMMED_VARIANCE = 0.9733


@dataclass(frozen=True)
class BuildPoint:
    """One build's data in one series.

    `samples` are the build's per-process medians (seconds, bytes...), empty when none is
    usable; `status` the cell status ("ok", "incorrect", "failed", "timeout", ...; "missing"
    when absent); `environment` a fingerprint whose change between builds is an environment
    event, `environment_detail` its text for humans; `min_detectable` the build's minimum
    detectable effect as a fraction (0.05 = 5 %), if known; `odd` the positions in `samples`
    of the processes that the canary marked as timed in another machine state, which the
    level leaves out (unless every process is marked).
    """

    samples: tuple[float, ...]
    status: str
    environment: str
    environment_detail: str = ""
    min_detectable: float | None = None
    odd: tuple[int, ...] = ()


@dataclass(frozen=True)
class LevelSeries:
    """The builds of one environment segment that give the level: status ok with at least
    one usable sample. `index` maps a position here to the build's index in the series;
    `samples` are each build's usable samples in the usual machine state."""

    index: tuple[int, ...]
    samples: tuple[tuple[float, ...], ...]
    levels: np.ndarray  # each build's level: the log of the median of `samples`
    newest: bool  # the segment is the series' last: its last build may open a change alone


def usable_samples(point: BuildPoint) -> tuple[float, ...]:
    """The build's positive finite samples, without the processes marked `odd` (all of them
    when every usable one is marked)."""
    # Logs need positive finite numbers; NaN marks a value the run could not give.
    usable = [(j, float(v)) for j, v in enumerate(point.samples)
              if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    usual = tuple(v for j, v in usable if j not in point.odd)
    return usual or tuple(v for _, v in usable)


def environment_spans(points: Sequence[BuildPoint]) -> list[tuple[int, int]]:
    """[start, end) index ranges of builds sharing one environment. A build without a
    fingerprint (a missing cell) belongs to the span around it."""
    spans: list[tuple[int, int]] = []
    start, current = 0, ""
    for i, point in enumerate(points):
        if point.environment and current and point.environment != current:
            spans.append((start, i))
            start = i
        if point.environment:
            current = point.environment
    spans.append((start, len(points)))
    return spans


def _log_medians(samples: Sequence[tuple[float, ...]]) -> np.ndarray:
    """The log of each build's median, one numpy median per sample count (builds of one
    profile all have the same): a 365-build series takes well under a millisecond."""
    import numpy as np

    out = np.empty(len(samples))
    by_count: dict[int, list[int]] = {}
    for j, s in enumerate(samples):
        by_count.setdefault(len(s), []).append(j)
    for count, where in by_count.items():
        block = np.array([samples[j] for j in where], dtype=float).reshape(len(where), count)
        out[where] = np.log(np.median(block, axis=1))
    return out


def _process_sd(samples: Sequence[tuple[float, ...]], values: np.ndarray | None = None
                ) -> float:
    """The standard deviation of one process's log median around its build's level, from the
    median absolute difference of two processes of one build (robust: a slow process
    spoils the pairs it is in, not the estimate); NaN with no build of two processes.
    `values`, when given, is `samples` as one array (builds x processes)."""
    import numpy as np

    blocks = ([values] if values is not None else
              [np.array([s for s in samples if len(s) == k], dtype=float)
               for k in {len(s) for s in samples}])
    pairs = []
    for block in blocks:
        k = block.shape[1] if block.ndim == 2 else 0
        if k < 2:
            continue
        logs = np.log(block)
        upper = np.triu_indices(k, 1)
        pairs.append(np.abs(logs[:, upper[0]] - logs[:, upper[1]]).ravel())
    if not pairs:
        return math.nan
    return _PAIR_MAD_TO_SD * float(np.median(np.concatenate(pairs)))


def _without_slow_processes(samples: tuple[tuple[float, ...], ...],
                            values: np.ndarray | None = None
                            ) -> tuple[tuple[float, ...], ...]:
    """Each build's samples without the processes `ODD_PROCESS_SDS` process sds (and at
    least `ODD_STATE_FACTOR`) slower than the build's fastest: what the canary would have
    marked, found without one. `samples` itself when nothing is set aside."""
    import numpy as np

    sd = _process_sd(samples, values)
    limit = max(ODD_PROCESS_SDS * sd if math.isfinite(sd) else 0.0, math.log(ODD_STATE_FACTOR))
    if values is not None and values.ndim == 2 and values.size:
        logs = np.log(values)
        if not bool(np.any(logs - logs.min(axis=1, keepdims=True) > limit)):
            return samples
    out = tuple(tuple(v for v in s if math.log(v / min(s)) <= limit) for s in samples)
    return samples if out == samples else out


def _uniform_span(points: Sequence[BuildPoint], start: int, end: int
                  ) -> tuple[list[int], np.ndarray] | None:
    """The ok builds of [start, end) with their samples as one array (builds x processes),
    when they all have the same number of samples, all usable and none marked odd: the
    common case, done in numpy; None otherwise."""
    import numpy as np

    # Only ok builds give a series its level; other statuses are events, not levels.
    index = [i for i in range(start, end)
             if points[i].status == CellStatus.OK and points[i].samples]
    if not index or any(points[i].odd for i in index):
        return None
    count = len(points[index[0]].samples)
    if any(len(points[i].samples) != count for i in index):
        return None
    try:
        values = np.array([points[i].samples for i in index], dtype=float)
    except (TypeError, ValueError):
        return None
    with np.errstate(invalid="ignore"):
        if not bool(np.all(np.isfinite(values) & (values > 0))):
            return None
    return index, values


def _fast_span(index: list[int], values: np.ndarray, newest: bool) -> LevelSeries:
    """`level_series` of one span from `_uniform_span`'s array."""
    import numpy as np

    samples = tuple(tuple(row) for row in values.tolist())
    kept = _without_slow_processes(samples, values)
    if kept is samples:
        return LevelSeries(tuple(index), samples, np.log(np.median(values, axis=1)), newest)
    return LevelSeries(tuple(index), kept, _log_medians(kept), newest)


def level_series(points: Sequence[BuildPoint], spans: list[tuple[int, int]]
                 ) -> list[LevelSeries]:
    """The builds that give the level, per environment span (see `LevelSeries`)."""
    out = []
    for k, (start, end) in enumerate(spans):
        newest = k == len(spans) - 1
        uniform = _uniform_span(points, start, end)
        if uniform is not None:
            out.append(_fast_span(*uniform, newest))
            continue
        kept = [(i, usable_samples(points[i])) for i in range(start, end)
                if points[i].status == CellStatus.OK and points[i].samples]
        kept = [(i, s) for i, s in kept if s]
        samples = _without_slow_processes(tuple(s for _, s in kept))
        out.append(LevelSeries(tuple(i for i, _ in kept), samples, _log_medians(samples),
                               newest))
    return out


def unsettled_newest(series: LevelSeries) -> tuple[float, float] | None:
    """When `series` is its history's newest segment and its newest build's processes
    scatter beyond its processes' usual scatter (`UNSETTLED_P`): that build's standard
    deviation of its processes' log medians and the segment's usual one; that build's level
    cannot open a step alone, and waits for the next build. None otherwise, and with fewer
    than two processes in that build or no scatter to compare with."""
    from scipy import stats as sps

    if not series.newest or not series.index or len(series.samples[-1]) < 2:
        return None
    sd = _process_sd(series.samples[:-1])
    if not (math.isfinite(sd) and sd > 0):
        return None
    logs = [math.log(v) for v in series.samples[-1]]
    variance = statistics.variance(logs)
    chi_square = (len(logs) - 1) * variance / (sd * sd)
    if float(sps.chi2.sf(chi_square, len(logs) - 1)) < UNSETTLED_P:
        return math.sqrt(variance), sd
    return None


def level_noise_sd(series_list: Sequence[LevelSeries]) -> tuple[float, int]:
    """The standard deviation of one build's log level around its segment's level, from the
    differences of consecutive builds (robust to steps and blips), with the number of
    differences it rests on; (NaN, 0) with fewer than 2."""
    import numpy as np

    diffs = [np.diff(s.levels) for s in series_list if len(s.index) >= 2]
    d = np.concatenate(diffs) if diffs else np.empty(0)
    if d.size < 2:
        return math.nan, int(d.size)
    rough = _MAD_TO_SD * float(np.median(np.abs(d)))
    # The MAD is robust but wastes two thirds of the data; the root mean square of the
    # differences within _TRIM rough sds (steps and blips fall outside), corrected for the
    # trimming, is robust too and about as precise as a plain standard deviation.
    inside = d[np.abs(d) <= _TRIM * rough]
    if rough == 0.0 or inside.size < 2:
        return rough / math.sqrt(2.0), int(d.size)
    sd = math.sqrt(float(np.mean(inside * inside)) / _TRIMMED_VARIANCE)
    return sd / math.sqrt(2.0), int(inside.size)


def per_build_min_detectable(points: Sequence[BuildPoint], alpha: float = stats.ALPHA
                             ) -> float:
    """The median of the builds' own minimum detectable effects; where none is given, that
    of the median within-build spread (what `compare` would say of one build against the
    next); NaN when neither is known."""
    given = [p.min_detectable for p in points if p.min_detectable is not None
             and math.isfinite(p.min_detectable)]
    if given:
        return statistics.median(given)
    spreads = []
    for p in points:
        logs = [math.log(v) for v in usable_samples(p)]
        if p.status == CellStatus.OK and len(logs) >= stats.MIN_PROCESSES:
            spreads.append((statistics.variance(logs), len(logs)))
    if not spreads:
        return math.nan
    variance = statistics.median(v for v, _ in spreads)
    k = statistics.median(n for _, n in spreads)
    return stats.min_detectable_effect(math.sqrt(2.0 * variance / k), 2.0 * (k - 1),
                                       alpha=alpha)


def detectable_step(points: Sequence[BuildPoint], *, alpha: float = stats.ALPHA,
                    power: float = stats.DEFAULT_POWER) -> float:
    """The smallest step (0.05 = 5 %) that this series could find now with probability
    `power`: the minimum detectable effect of the test of two stretches of
    `DETECTABLE_SIDE_BUILDS` builds each (fewer when the newest environment has fewer than
    twice that), from the series' robust build-to-build noise, builds as the unit, paying
    for the choice of the split as the test does (`stats.min_detectable_effect` at
    `stats.split_search_significance`). Before the series has `MIN_DIFFERENCES` consecutive
    pairs of usable builds, its noise is unknown and this is what one build against the next
    shows from their processes (`per_build_min_detectable`). NaN when neither is known.

    It is stated before the minimum effect: a series whose `detectable_step` exceeds the
    minimum effect is too noisy to see a step of that size, and reports none of it."""
    levels = level_series(points, environment_spans(points))
    sd, n_diffs = level_noise_sd(levels)
    newest = len(levels[-1].index) if levels else 0
    side = min(DETECTABLE_SIDE_BUILDS, newest // 2)
    if not math.isfinite(sd) or n_diffs < MIN_DIFFERENCES or side < 2:
        return per_build_min_detectable(points, alpha)
    # The test is Student's t on the builds' log levels, `side` builds a side, at the
    # significance that pays for the search's choice of the split among their 2 * side.
    se = max(sd, NOISE_FLOOR) * math.sqrt(2.0 / side)
    return stats.min_detectable_effect(
        se, 2.0 * (side - 1), power=power,
        alpha=stats.split_search_significance(alpha, 2 * side, MIN_SIDE_BUILDS))
