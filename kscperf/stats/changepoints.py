"""Change points over the history of one benchmark series: pure statistics beside `stats.core`.

A series is one benchmark and kind on one machine class, one `BuildPoint` per build in build
order. `detect_series` finds, in one series, the candidate steps of its level (with the
p-values of the test `compare` uses) and the environment and status events;
`control_fdr` then keeps the steps that survive Benjamini-Hochberg across every series of the
store. The method, its choices and its measured accuracy: docs/changepoints.md.

No I/O, no formatting, no torch. numpy is imported inside the functions that need it, like
`stats.core` does, so importing this module stays cheap for the CLI.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Hashable, Mapping, Sequence, TypeVar

from kscperf.errors import CellStatus
from kscperf.stats import core as stats
from kscperf.stats.serieslevels import (
    MIN_SIDE_BUILDS,
    NOISE_FLOOR,
    BuildPoint,
    LevelSeries,
    detectable_step,
    environment_spans,
    level_noise_sd,
    level_series,
    unsettled_newest,
    usable_samples,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "SEARCH_PENALTY",
    "MIN_SIDE_BUILDS",
    "BLIP_SDS",
    "SHORT_HISTORY",
    "MIN_EFFECT_SLACK_SES",
    "SHORT_SIDE_BUILDS",
    "SPLIT_FAMILIES",
    "BuildPoint",
    "Change",
    "detect_series",
    "control_fdr",
    "step_direction",
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
    with its interval `low`..`high` and the `p_value` of the test, which pays for the
    search's choice of the split),
    "environment" or "status" (no ratio or p-value), or "unsettled" (the newest build, `after`,
    ran through a disturbance of the machine and opens no step until the next build: see
    `serieslevels.unsettled_newest`). `detail` says what changed for humans.
    `confirmed` is False for a step opened by the newest build alone, which persistence
    cannot show yet. `q_value` is set by `control_fdr`; `min_effect` is the minimum effect
    the step was held to.
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


# A step found by the search is reported when its estimate comes within this many standard
# errors of the minimum effect, or goes beyond it. At 0 a step of exactly the minimum effect
# would be missed half the time (its estimate falls short as often as not). Pooled over six
# seeded Gaussian stores (docs/changepoints.md, "The minimum effect", measured), 0.7 finds
# 68.3 % of the 5 % steps and reports 4.6 % of the 3 % ones, under the 5 % that may be; 1
# reports 5.4 %.
MIN_EFFECT_SLACK_SES = 0.7

# A step with fewer builds than this on a side must lie wholly beyond the minimum effect,
# its interval and all: next to an edge the search picks the few most extreme builds, whose
# difference is inflated by the choice (the winner's curse), and nearly every false step of
# the benchmarks sat there.
SHORT_SIDE_BUILDS = 5

# The families of splits a step's p-value pays for: those with a side of fewer than
# SHORT_SIDE_BUILDS builds, and those without (in a stretch long enough to have both).
SPLIT_FAMILIES = 2


def _step_estimate(series: LevelSeries, left: list[int], right: list[int], alpha: float
                   ) -> stats.RatioEstimate:
    """The after/before ratio of two stretches of builds (positions into `series`): Student's
    t on the builds' log levels (`stats.compare_log_levels`), the build as the unit of
    replication (builds differ by more than their processes do), its p-value paying for the
    search's choice of the split among the stretches' builds (`stats.split_search_p_value`).
    A history shorter than `SHORT_HISTORY` has too few builds for that: its processes are
    pooled, as `compare` does for two builds."""
    if len(series.index) < SHORT_HISTORY:
        return stats.compare_samples([[v] for i in left for v in series.samples[i]],
                                     [[v] for i in right for v in series.samples[i]],
                                     alpha=alpha)
    est = stats.compare_log_levels([float(series.levels[i]) for i in left],
                                   [float(series.levels[i]) for i in right], alpha=alpha)
    # A split with a short side answers to a stricter rule (`step_direction`), so a split
    # with none pays only for the choice among the splits that have none. Which of the two
    # families the chosen split belongs to is seen in the data, so each pays for both
    # (Bonferroni): the price of one family alone let through twice the false steps a valid
    # p-value would (docs/changepoints.md, "Testing a step").
    builds = len(left) + len(right)
    side = SHORT_SIDE_BUILDS if min(len(left), len(right)) >= SHORT_SIDE_BUILDS \
        else MIN_SIDE_BUILDS
    families = SPLIT_FAMILIES if builds >= 2 * SHORT_SIDE_BUILDS else 1
    return dataclasses.replace(est, p_value=min(1.0, families * stats.split_search_p_value(
        est.p_value, builds, side)))


def step_direction(est: stats.RatioEstimate, *, min_effect: float = stats.DEFAULT_MIN_EFFECT,
                   alpha: float = stats.ALPHA, short_side: bool = False) -> int:
    """The one rule that makes a tested difference of two stretches of builds (or a
    lockstep link) a step: +1 slower, -1 faster, 0 no step. A step is significant
    (`est.p_value` < `alpha`) and its ratio within `MIN_EFFECT_SLACK_SES` standard errors of
    `min_effect` or beyond; with `short_side`, the near end of its interval is beyond
    `min_effect`."""
    if not est.p_value < alpha or not (math.isfinite(est.ratio) and est.ratio > 0):
        return 0
    sign = 1 if est.ratio > 1.0 else -1
    limit = math.log1p(min_effect) - 1e-12  # an exact 5 % step stays one despite rounding
    if short_side:
        near_end = est.low if sign > 0 else 1.0 / est.high
        return sign if near_end > 0 and math.log(near_end) >= limit else 0
    slack = MIN_EFFECT_SLACK_SES * est.se_log if math.isfinite(est.se_log) else 0.0
    return sign if abs(math.log(est.ratio)) + slack >= limit else 0


@dataclass(frozen=True)
class _Step:
    cut: int
    estimate: stats.RatioEstimate
    direction: int  # +1 slower, -1 faster, 0 fails the test or the minimum effect


def _test_cuts(series: LevelSeries, cuts: list[int], outliers: frozenset[int],
               min_effect: float, alpha: float,
               cache: dict[tuple[int, int, int], _Step]) -> list[_Step]:
    """Each cut tested between its neighbouring stretches, outliers left out. Cached by
    (start, cut, end): dropping one cut re-tests only its two neighbours."""
    n = len(series.index)
    bounds = [0, *cuts, n]
    steps = []
    for a, c, b in zip(bounds, bounds[1:], bounds[2:]):
        if (a, c, b) not in cache:
            left = [i for i in range(a, c) if i not in outliers]
            right = [i for i in range(c, b) if i not in outliers]
            est = _step_estimate(series, left, right, alpha)
            short = n >= SHORT_HISTORY and min(len(left), len(right)) < SHORT_SIDE_BUILDS
            cache[(a, c, b)] = _Step(c, est, step_direction(est, min_effect=min_effect, alpha=alpha,
                                                          short_side=short))
        steps.append(cache[(a, c, b)])
    return steps


def _prune(series: LevelSeries, cuts: list[int], outliers: frozenset[int],
           min_effect: float, alpha: float) -> list[_Step]:
    """Otava's merge pass: while some cut fails its test (p >= alpha) or the minimum effect,
    drop the weakest (highest p-value) and re-test its neighbours."""
    cache: dict[tuple[int, int, int], _Step] = {}
    while True:
        steps = _test_cuts(series, cuts, outliers, min_effect, alpha, cache)
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


def _segment_steps(series: LevelSeries, noise_sd: float, min_effect: float,
                   alpha: float) -> list[Change]:
    """The steps of one environment segment, as candidate `Change`s."""
    dropped = _blips(series.levels, noise_sd, series.newest,
                     interior_only=len(series.index) < SHORT_HISTORY)
    unsettled = unsettled_newest(series) if len(series.index) >= SHORT_HISTORY else None
    waiting = []
    if unsettled is not None:
        dropped[-1] = True
        before = max((i for i in range(len(series.index) - 1) if not dropped[i]),
                     default=len(series.index) - 2)
        waiting.append(Change(
            "unsettled", series.index[before], series.index[-1], None, None, None, None,
            f"the newest build's processes disagree (their spread {unsettled[0]:.1%}, the series' "
            f"usual {unsettled[1]:.1%}): it opens no step until the next build",
            confirmed=False))
    series = _without(series, dropped)
    n = len(series.index)
    if n < 2:
        return waiting
    cuts = _search(series.levels, noise_sd * noise_sd)
    if n >= SHORT_HISTORY:
        cuts = _join_step_edges(cuts, series.levels)
    cuts, outliers = _drop_outliers(cuts, n, series.newest)
    changes = []
    for step in _prune(series, cuts, outliers, min_effect, alpha):
        before = max(i for i in range(step.cut) if i not in outliers)
        after = min(i for i in range(step.cut, n) if i not in outliers)
        est = step.estimate
        changes.append(Change(
            "slower" if step.direction > 0 else "faster", series.index[before],
            series.index[after], est.ratio, est.low, est.high, est.p_value, "",
            confirmed=not (series.newest and after == n - 1),
            min_effect=min_effect))
    return changes + waiting


def detect_series(points: Sequence[BuildPoint], *, min_effect: float = stats.DEFAULT_MIN_EFFECT,
                  alpha: float = stats.ALPHA) -> list[Change]:
    """Every event on one series' timeline, in build order: environment changes, status
    changes, candidate steps of the level, and an "unsettled" newest build.

    Promises: steps are searched only inside stretches of one environment, over builds with
    status "ok" and a usable sample, so a change of environment is only ever an
    "environment" event. Each step's ratio, interval and p-value are those of Student's t
    on the log levels of the stretches on either side, the p-value paying for the search's
    choice of the split (see `_step_estimate`); every step has p < alpha and an estimate
    within `MIN_EFFECT_SLACK_SES` standard errors of `min_effect` or beyond, and one with a
    side of fewer than `SHORT_SIDE_BUILDS` builds an interval wholly beyond `min_effect`;
    each side holds at least `MIN_SIDE_BUILDS` builds, except that
    the newest build may open a step alone (`confirmed` False) and a history of fewer than
    `SHORT_HISTORY` builds may have one-build sides. A build that differs and reverts is an
    outlier: never a step, and left out of the levels. A newest build whose processes
    scatter beyond the segment's usual scatter (`serieslevels.unsettled_newest`) is left out
    of the levels too, and is an "unsettled" event, never a step. Deterministic. The steps
    still need `control_fdr` across the store.
    """
    spans = environment_spans(points)
    levels = level_series(points, spans)
    sd, _ = level_noise_sd(levels)
    noise_sd = max(_finite_or(sd, 0.0), NOISE_FLOOR)
    events = _environment_events(points, spans) + _status_events(points)
    for series in levels:
        events += _segment_steps(series, noise_sd, min_effect, alpha)
    order = {"environment": 0, "status": 1, "slower": 2, "faster": 2, "unsettled": 3}
    return sorted(events, key=lambda c: (c.after, order[c.kind], c.before))


def _finite_or(value: float, default: float) -> float:
    return value if math.isfinite(value) else default


def control_fdr(per_series: Mapping[_Key, list[Change]], *, fdr: float = stats.ALPHA,
                tests: Mapping[_Key, int] | None = None) -> dict[_Key, list[Change]]:
    """The events of every series with the steps that survive Benjamini-Hochberg across all
    of them (`stats.adjust_p_values`), each with its `q_value` set.

    Promises: environment and status events are all kept; a step is kept when its q-value
    is under `fdr`. Every series counts as `tests[key]` tests (1 when not given): its
    candidate steps, and as many more with p = 1 as it made tests that gave no candidate
    (a series with no candidate counts once, a series of n lockstep links n times), so
    that a store of many quiet series or links does not make the few candidates look rarer
    than they are; the false discovery rate among the steps kept is then at most `fdr` for
    independent or positively dependent tests. The order of each list is kept.
    """
    p_values: list[float] = []
    where: list[tuple[_Key, int]] = []
    untested = 0
    for key, changes in per_series.items():
        steps = [(i, c) for i, c in enumerate(changes) if c.is_step and c.p_value is not None]
        untested += max(0, (tests or {}).get(key, 1) - len(steps))
        for i, c in steps:
            where.append((key, i))
            p_values.append(c.p_value if c.p_value is not None else math.nan)
    q_values = stats.adjust_p_values(p_values + [1.0] * untested)
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
