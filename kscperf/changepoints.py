"""Change points over the history of one benchmark series: pure statistics beside `stats`.

A series is one benchmark and kind on one machine class, one `BuildPoint` per build in build
order. `detect_series` finds, in one series, the candidate steps of its level (with the
p-values of the test `compare` uses) and the environment and status events;
`control_fdr` then keeps the steps that survive Benjamini-Hochberg across every series of the
store. The method, its choices and its measured accuracy: docs/changepoints.md.

No I/O, no formatting, no torch. numpy is imported inside the functions that need it, like
`stats` does, so importing this module stays cheap for the CLI.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Hashable, Mapping, Sequence, TypeVar

from kscperf import stats
from kscperf.errors import CellStatus
from kscperf.serieslevels import (
    MIN_BUILDS_AS_UNITS,
    MIN_DIFFERENCES,
    NOISE_FLOOR,
    BuildPoint,
    LevelSeries,
    detectable_step,
    environment_spans,
    level_noise_sd,
    level_series,
    per_build_min_detectable,
    stretch_detectable,
    usable_samples,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "SEARCH_PENALTY",
    "MIN_SIDE_BUILDS",
    "BLIP_SDS",
    "MIN_BUILDS_AS_UNITS",
    "SHORT_HISTORY",
    "BuildPoint",
    "Change",
    "detect_series",
    "control_fdr",
    "series_min_detectable",
    "detectable_step",
    "segments",
]

# Binary segmentation splits a stretch of builds while the split explains more than this many
# times log(builds) of the build-to-build noise variance: Schwarz's log n per parameter
# (BIC/SIC), tripled for heavier tails than a normal's. It only proposes cuts: the tests
# decide, so a generous search costs time, not false changes.
SEARCH_PENALTY = 3.0

# A build whose level is this many noise standard deviations away from each of its
# neighbours (two on each side), in the same direction, is a blip: an outlier.
BLIP_SDS = 4.0

# Persistence: a level must hold for this many builds on each side of a step. A single build
# that differs and reverts is an outlier, not a change.
MIN_SIDE_BUILDS = 2

# An environment segment with fewer usable builds than this is a short history: its single
# best split is always tested (the search's noise estimate needs more builds), and a side
# that reaches the segment's edge may hold one build.
SHORT_HISTORY = 2 * MIN_SIDE_BUILDS + 1

_Key = TypeVar("_Key", bound=Hashable)


@dataclass(frozen=True)
class Change:
    """One event on a series' timeline, between build `before` (the last build before it,
    an index into the series) and build `after` (the first build after it).

    `kind` is "slower" or "faster" (a step of the level: `ratio` is the after/before level,
    a ratio of medians, with its interval `low`..`high` and the raw `p_value` of the test),
    "environment" or "status" (no ratio or p-value). `detail` says what changed for humans.
    `confirmed` is False for a step opened by the newest build alone, which persistence
    cannot show yet. `q_value` is set by `control_fdr`; `min_effect` is the threshold the
    step had to reach: max(the minimum effect asked, the series' minimum detectable effect).
    """

    kind: str
    before: int
    after: int
    ratio: float | None
    low: float | None
    high: float | None
    p_value: float | None
    detail: str
    confirmed: bool = True
    q_value: float | None = None
    min_effect: float | None = None

    @property
    def is_step(self) -> bool:
        """True for a step of the level ("slower" or "faster")."""
        return self.kind in ("slower", "faster")


def _environment_events(points: Sequence[BuildPoint],
                        spans: list[tuple[int, int]]) -> list[Change]:
    events = []
    for (_, end), (start, _) in zip(spans, spans[1:]):
        before = max((i for i in range(end) if points[i].environment), default=end - 1)
        old, new = points[before], points[start]
        detail = (f"{old.environment_detail or old.environment} → "
                  f"{new.environment_detail or new.environment}")
        events.append(Change("environment", before, start, None, None, None, None, detail))
    return events


def _status_events(points: Sequence[BuildPoint]) -> list[Change]:
    return [Change("status", i - 1, i, None, None, None, None,
                   f"{points[i - 1].status} → {points[i].status}")
            for i in range(1, len(points)) if points[i].status != points[i - 1].status]


def series_min_detectable(points: Sequence[BuildPoint], *, alpha: float = stats.ALPHA
                          ) -> float:
    """The series' own minimum detectable effect (0.05 = 5 %): the larger of what one build's
    processes allow (`stats.min_detectable_effect`, as `compare` reports it) and what the
    build-to-build spread of the series allows for one build against the next (once the
    series has 10 consecutive pairs of usable builds). NaN when neither can be estimated.
    What a step with a side of fewer than `MIN_BUILDS_AS_UNITS` builds must reach while the
    series' build-to-build noise is not known yet; `detectable_step` is what a series can
    see."""
    return _min_detectable(points, level_series(points, environment_spans(points)), alpha)


def _min_detectable(points: Sequence[BuildPoint], levels: list[LevelSeries], alpha: float
                    ) -> float:
    sd, n_diffs = level_noise_sd(levels)
    between = (stats.min_detectable_effect(math.sqrt(2.0) * sd, float(n_diffs - 1),
                                           alpha=alpha)
               if math.isfinite(sd) and n_diffs >= MIN_DIFFERENCES else math.nan)
    within = per_build_min_detectable(points, alpha)
    finite = [v for v in (between, within) if math.isfinite(v)]
    return max(finite) if finite else math.nan


def _best_split(y: np.ndarray, a: int, b: int) -> tuple[int, float]:
    """The split c of y[a:b] (y[a:c] | y[c:b], both non-empty) that removes the most squared
    error from one constant level, and that reduction; (-1, 0.0) with fewer than 2 builds.
    One pass of cumulative sums: O(b - a)."""
    import numpy as np

    m = b - a
    if m < 2:
        return -1, 0.0
    sums = np.cumsum(y[a:b])
    left_n = np.arange(1, m)
    left_sum = sums[:-1]
    difference = left_sum / left_n - (sums[-1] - left_sum) / (m - left_n)
    gain = left_n * (m - left_n) / m * difference * difference
    best = int(np.argmax(gain))
    return a + best + 1, float(gain[best])


def _search(levels: np.ndarray, noise_variance: float) -> list[int]:
    """Binary segmentation of the log levels: split a stretch at its `_best_split` while
    that explains more than SEARCH_PENALTY * log(n) noise variances, then each side again.
    Returns the cuts (index of the first build after each split), sorted. A short history
    gets its single best split, tested later, whatever the gain."""
    n = len(levels)
    if n < SHORT_HISTORY:
        cut, _ = _best_split(levels, 0, n)
        return [cut] if cut > 0 else []
    penalty = SEARCH_PENALTY * math.log(n) * noise_variance
    cuts = []
    stack = [(0, n)]
    while stack:
        a, b = stack.pop()
        cut, gain = _best_split(levels, a, b)
        if cut > 0 and gain > penalty:
            cuts.append(cut)
            stack += [(a, cut), (cut, b)]
    return sorted(cuts)


def _join_step_edges(cuts: list[int], levels: np.ndarray) -> list[int]:
    """A one-build stretch between two cuts whose two sides differ (a step, with its first
    build a little further out than the rest by noise) joins the side it is closer to: the
    cut on its other side stays, the one between it and that side goes. One whose sides
    agree is left for `_drop_outliers`: it reverts."""
    bounds = [0, *cuts, len(levels)]
    dropped = set()
    for k in range(1, len(bounds) - 2):
        a, b = bounds[k], bounds[k + 1]
        if b - a != 1:
            continue
        left = float(levels[bounds[k - 1]:a].mean())
        right = float(levels[b:bounds[k + 2]].mean())
        x = float(levels[a])
        if abs(left - right) * 2 <= min(abs(x - left), abs(x - right)):
            continue
        dropped.add(b if abs(x - right) <= abs(x - left) else a)
    return [c for c in cuts if c not in dropped]


def _drop_outliers(cuts: list[int], n: int, newest: bool) -> tuple[list[int], frozenset[int]]:
    """Persistence: a stretch of one build between two cuts (or at an edge of the segment)
    is an outlier. It leaves the level fit and the cut into it goes, while the cut out of it
    stays, so that a real step hidden behind a blip is still tested. The newest build may
    stand alone: it opens a change that the next build confirms or not. A short history
    keeps its one-build sides: there is nothing else to compare."""
    if n < SHORT_HISTORY:
        return cuts, frozenset()
    bounds = [0, *cuts, n]
    outliers = frozenset(i for a, b in zip(bounds, bounds[1:])
                         if b - a < MIN_SIDE_BUILDS and not (b == n and newest)
                         for i in range(a, b))
    kept, previous = [], 0
    for cut in cuts:
        # A cut into an outlier goes; so does one with only outliers before it.
        if cut in outliers or all(i in outliers for i in range(previous, cut)):
            continue
        kept.append(cut)
        previous = cut
    return kept, outliers


def _step_estimate(left: Sequence[tuple[float, ...]], right: Sequence[tuple[float, ...]],
                   alpha: float) -> stats.RatioEstimate:
    """The after/before ratio of two stretches of builds, tested as `compare` tests two
    builds, one level up: `stats.compare_samples` with each build's per-process medians as
    one "process" when both sides have `MIN_BUILDS_AS_UNITS` builds or more, so that Welch's
    t runs on per-build medians and the build, not the process, is the unit of replication
    (builds differ by more than their processes do). With fewer builds on a side, the
    processes of each side are pooled: what `compare` does for two builds. That test
    ignores the build-to-build spread; the effect it must reach (`_Thresholds`), what the
    two stretches could show given that spread, is what keeps it from calling that spread
    a change. Each build's samples are those of its usual machine state
    (`serieslevels.level_series`)."""
    if len(left) >= MIN_BUILDS_AS_UNITS and len(right) >= MIN_BUILDS_AS_UNITS:
        return stats.compare_samples(left, right, alpha=alpha)
    return stats.compare_samples([[v] for s in left for v in s],
                                 [[v] for s in right for v in s], alpha=alpha)


@dataclass(frozen=True)
class _Step:
    cut: int
    estimate: stats.RatioEstimate
    direction: int  # +1 slower, -1 faster, 0 fails the test or the minimum effect
    threshold: float  # the effect it had to reach (see `_Thresholds`)


# The standard error of a median of many normal values over that of their mean.
_MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2.0)


@dataclass(frozen=True)
class _Thresholds:
    """What a step must reach: `min_effect` where both sides have `MIN_BUILDS_AS_UNITS`
    builds (the test then sees the builds' scatter); where a side has fewer (the test pools
    processes and does not), also what those two stretches could show given the series'
    level noise `noise_sd`, at a significance that pays for the choice of the split among
    the segment's builds (`serieslevels.stretch_detectable`, for a ratio of medians), or,
    while that noise is unknown, what one build against the next shows (`fallback`)."""

    min_effect: float
    noise_sd: float
    fallback: float

    def of(self, left: int, right: int, candidates: int, alpha: float) -> float:
        if min(left, right) >= MIN_BUILDS_AS_UNITS:
            return self.min_effect
        # The pooled test's ratio is one of medians, whose standard error is about
        # sqrt(pi / 2) times that of the mean of the levels that `stretch_detectable` uses.
        floor = _MEDIAN_SE_FACTOR * stretch_detectable(self.noise_sd, left, right,
                                                       alpha=alpha, candidates=candidates)
        if not math.isfinite(floor):
            floor = self.fallback
        return max(self.min_effect, _finite_or(floor, 0.0))


def _test_cuts(series: LevelSeries, cuts: list[int], outliers: frozenset[int],
               thresholds: _Thresholds, alpha: float,
               cache: dict[tuple[int, int, int], _Step]) -> list[_Step]:
    """Each cut tested between its neighbouring stretches, outliers left out. Cached by
    (start, cut, end): dropping one cut re-tests only its two neighbours."""
    n = len(series.index)
    bounds = [0, *cuts, n]
    steps = []
    for a, c, b in zip(bounds, bounds[1:], bounds[2:]):
        if (a, c, b) not in cache:
            left = [series.samples[i] for i in range(a, c) if i not in outliers]
            right = [series.samples[i] for i in range(c, b) if i not in outliers]
            est = _step_estimate(left, right, alpha)
            threshold = thresholds.of(len(left), len(right), n - 1, alpha)
            direction = stats.classify_change(est.ratio, est.p_value, min_effect=threshold,
                                              alpha=alpha)
            cache[(a, c, b)] = _Step(c, est, direction, threshold)
        steps.append(cache[(a, c, b)])
    return steps


def _prune(series: LevelSeries, cuts: list[int], outliers: frozenset[int],
           thresholds: _Thresholds, alpha: float) -> list[_Step]:
    """Otava's merge pass: while some cut fails its test (p >= alpha) or the minimum effect,
    drop the weakest (highest p-value) and re-test its neighbours."""
    cache: dict[tuple[int, int, int], _Step] = {}
    while True:
        steps = _test_cuts(series, cuts, outliers, thresholds, alpha, cache)
        failing = [s for s in steps if s.direction == 0]
        if not failing:
            return steps
        weakest = max(failing, key=lambda s: (_nan_last(s.estimate.p_value), s.cut))
        cuts = [c for c in cuts if c != weakest.cut]


def _nan_last(p: float) -> float:
    return math.inf if math.isnan(p) else p


def _blips(levels: np.ndarray, noise_sd: float, newest: bool,
           interior_only: bool = False) -> np.ndarray:
    """Which builds are one-build blips: a level more than BLIP_SDS noise sds away, in the
    same direction, from each of the two builds before it and the two after it (those that
    exist; at least two), where the builds on its two sides agree with each other (it
    reverts). A step is not a blip (the builds before and after it differ), nor is a
    two-build excursion (each agrees with the other). The newest build never is: it may
    open a change. With `interior_only` (a short history, where an edge build may be all of
    a side) only builds with neighbours on both sides can be blips."""
    import numpy as np

    n = levels.size
    padded = np.concatenate((np.full(2, np.nan), levels, np.full(2, np.nan)))
    distances = np.stack([levels - padded[2 + o:2 + o + n] for o in (-2, -1, 1, 2)])
    present = ~np.isnan(distances)
    limit = BLIP_SDS * noise_sd
    with np.errstate(invalid="ignore"):
        above = np.all((distances > limit) | ~present, axis=0)
        below = np.all((distances < -limit) | ~present, axis=0)
    # It must also revert: where both sides exist, they agree with each other better than
    # with it. Otherwise the first build after a step, a little further out than the builds
    # after it by noise, would pass for a blip and move the step one build late.
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a side with no neighbour: NaN
        before = np.nanmean(distances[:2], axis=0)
        after = np.nanmean(distances[2:], axis=0)
        sides_apart = np.abs(before - after)
        reverts = ~(sides_apart * 2 > np.minimum(np.abs(before), np.abs(after)))
    blips: np.ndarray = (above | below) & (present.sum(axis=0) >= 2) & reverts
    if interior_only:
        blips &= present[1] & present[2]
    if newest and n:
        blips[-1] = False
    return blips


def _without(series: LevelSeries, dropped: np.ndarray) -> LevelSeries:
    kept = [i for i in range(len(series.index)) if not dropped[i]]
    return LevelSeries(tuple(series.index[i] for i in kept), tuple(series.samples[i] for i in kept),
                   series.levels[kept], series.newest)


def _segment_steps(series: LevelSeries, noise_sd: float, thresholds: _Thresholds,
                   alpha: float) -> list[Change]:
    """The steps of one environment segment, as candidate `Change`s."""
    series = _without(series, _blips(series.levels, noise_sd, series.newest,
                                     interior_only=len(series.index) < SHORT_HISTORY))
    n = len(series.index)
    if n < 2:
        return []
    cuts = _search(series.levels, noise_sd * noise_sd)
    if n >= SHORT_HISTORY:
        cuts = _join_step_edges(cuts, series.levels)
    cuts, outliers = _drop_outliers(cuts, n, series.newest)
    changes = []
    for step in _prune(series, cuts, outliers, thresholds, alpha):
        before = max(i for i in range(step.cut) if i not in outliers)
        after = min(i for i in range(step.cut, n) if i not in outliers)
        est = step.estimate
        changes.append(Change(
            "slower" if step.direction > 0 else "faster", series.index[before],
            series.index[after], est.ratio, est.low, est.high, est.p_value, "",
            confirmed=not (series.newest and after == n - 1),
            min_effect=step.threshold))
    return changes


def detect_series(points: Sequence[BuildPoint], *, min_effect: float = stats.DEFAULT_MIN_EFFECT,
                  alpha: float = stats.ALPHA) -> list[Change]:
    """Every event on one series' timeline, in build order: environment changes, status
    changes, and candidate steps of the level.

    Promises: steps are searched only inside stretches of one environment, over builds with
    status "ok" and a usable sample, so a change of environment is only ever an
    "environment" event. Each step's ratio, interval and raw p-value are those of
    `stats.compare_samples` between the stretches on either side (see `_step_estimate`);
    every step has p < alpha and an effect of at least `min_effect`, and, where a side has
    fewer than `MIN_BUILDS_AS_UNITS` builds (the test then pools processes and cannot see
    the builds' scatter), at least what those two stretches could show given the series'
    build-to-build noise, paying for the choice of the split (`_Thresholds`); each side holds at least `MIN_SIDE_BUILDS` builds, except that
    the newest build may open a step alone (`confirmed` False) and a history of fewer than
    `SHORT_HISTORY` builds may have one-build sides. A build that differs and reverts is an
    outlier: never a step, and left out of the levels. Deterministic. The steps still need
    `control_fdr` across the store.
    """
    spans = environment_spans(points)
    levels = level_series(points, spans)
    sd, n_diffs = level_noise_sd(levels)
    noise_sd = max(_finite_or(sd, 0.0), NOISE_FLOOR)
    threshold = _Thresholds(min_effect, sd if n_diffs >= MIN_DIFFERENCES else math.nan,
                            _min_detectable(points, levels, alpha))
    events = _environment_events(points, spans) + _status_events(points)
    for series in levels:
        events += _segment_steps(series, noise_sd, threshold, alpha)
    order = {"environment": 0, "status": 1, "slower": 2, "faster": 2}
    return sorted(events, key=lambda c: (c.after, order[c.kind], c.before))


def _finite_or(value: float, default: float) -> float:
    return value if math.isfinite(value) else default


def control_fdr(per_series: Mapping[_Key, list[Change]], *, fdr: float = stats.ALPHA
                ) -> dict[_Key, list[Change]]:
    """The events of every series with the steps that survive Benjamini-Hochberg across all
    of them (`stats.adjust_p_values`), each with its `q_value` set.

    Promises: environment and status events are all kept; a step is kept when its q-value
    is under `fdr`. Every series counts as a test even when it has no candidate step (it then
    counts once, with p = 1), so that a store of many quiet series does not make the few
    candidates look rarer than they are; the false discovery rate among the steps kept is
    then at most `fdr` for independent or positively dependent tests. The order of each list
    is kept.
    """
    p_values: list[float] = []
    where: list[tuple[_Key, int]] = []
    quiet = 0
    for key, changes in per_series.items():
        steps = [(i, c) for i, c in enumerate(changes) if c.is_step and c.p_value is not None]
        quiet += not steps
        for i, c in steps:
            where.append((key, i))
            p_values.append(c.p_value if c.p_value is not None else math.nan)
    q_values = stats.adjust_p_values(p_values + [1.0] * quiet)
    q_of = {spot: q for spot, q in zip(where, q_values)}
    kept: dict[_Key, list[Change]] = {}
    for key, changes in per_series.items():
        kept[key] = []
        for i, c in enumerate(changes):
            if not c.is_step:
                kept[key].append(c)
                continue
            q = q_of.get((key, i), math.nan)
            if q < fdr:
                kept[key].append(dataclasses.replace(c, q_value=q))
    return kept


def segments(points: Sequence[BuildPoint], changes: Sequence[Change]
             ) -> list[tuple[int, int, float]]:
    """The fitted levels for plotting: (first build, last build, level) per stretch between
    consecutive environment events and kept steps, the level being the median of the
    stretch's per-process medians (builds with status "ok" only). Stretches without a usable
    build are left out; indices are into `points`, inclusive."""
    bounds = sorted({c.after for c in changes if c.is_step or c.kind == "environment"}
                    | {0, len(points)})
    out = []
    for start, end in zip(bounds, bounds[1:]):
        values = [v for i in range(start, end) if points[i].status == CellStatus.OK
                  for v in usable_samples(points[i])]
        if values:
            out.append((start, end - 1, statistics.median(values)))
    return out
