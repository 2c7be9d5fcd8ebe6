"""The sequential design of `run-benchmarks ab --until-resolved`: an always-valid confidence
sequence for the median log ratio of lockstep process pairs, the stopping rule over the
benchmarks of a run, and the effect a sequence reached. Pure statistics on sequences of
floats: no I/O, no formatting, no torch, no scipy.

The replicates are those of the fixed design (`stats.compare_paired_samples`): one number
per process pair, the median over its values of log(NEW value / BASE value). Looking at
them after every pair and stopping at the first significant test would inflate false alarms,
so the interval is a confidence sequence: with probability at least 1 - alpha it holds the
true median of the pair numbers at every number of pairs at once, so it stays valid at
whatever pair the run stops. It is the sign-test confidence sequence for a quantile (Howard
and Ramdas 2022, "Sequential estimation of quantiles with applications to A/B-testing and
best-arm identification", Bernoulli 28(3)): for a candidate median m, the count k of pair
numbers at or under m is, under "m is the median", a sum of fair coin flips, and the
uniform (Beta(1, 1)) mixture of their likelihood ratios

    M_n(k) = 2**n * k! * (n - k)! / (n + 1)!

is a test martingale (Robbins 1970; Howard, Ramdas, McAuliffe and Sekhon 2021,
"Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann. Statist. 49(2)).
By Ville's inequality the candidates with M_n < 1 / alpha form the sequence: an interval
between two order statistics of the pair numbers. It assumes only that pairs are
independent and alike, not that their numbers are normal: a pair split by a change of the
machine's state moves one order statistic, not the interval. Why it fits: docs/method.md,
"Running until resolved".
"""

from __future__ import annotations

import bisect
import enum
import functools
import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from kscperf.stats import core as stats

__all__ = [
    "METHOD",
    "FIRST_BOUNDED_PAIRS",
    "Resolution",
    "log_e_value",
    "admissible_counts",
    "estimate_sequence",
    "compare_sequential_pairs",
    "detectable_effect",
    "interval_resolution",
    "resolve",
    "Walk",
    "walk_sequence",
]

# `RatioEstimate.method` of a confidence-sequence estimate.
METHOD = "sequential"

# Fewest pairs whose interval is bounded at alpha 0.05: with all 8 on one side, 2**8 / 9 =
# 28 > 20. Nothing is resolved before.
FIRST_BOUNDED_PAIRS = 8


class Resolution(enum.StrEnum):
    """Where a benchmark's sequence stands: its interval wholly beyond the minimum effect
    (and significant after the false-discovery adjustment), wholly within it, or neither."""

    CHANGED = "changed"
    SAME = "same"
    OPEN = "open"


def log_e_value(n: int, k: int) -> float:
    """log M_n(k): the mixture martingale after `n` pair numbers of which `k` lie at or
    under the candidate median."""
    if not 0 <= k <= n:
        raise ValueError(f"a count of {k} out of {n} pair numbers")
    return (math.lgamma(k + 1) + math.lgamma(n - k + 1) - math.lgamma(n + 2)
            + n * math.log(2.0))


@functools.lru_cache(maxsize=4096)
def admissible_counts(n: int, alpha: float = stats.ALPHA) -> tuple[int, int]:
    """(lowest, highest) count k of pair numbers at or under a candidate median that the
    sequence keeps after `n` pairs (M_n(k) < 1 / alpha); the kept counts are every k
    between, since M_n falls towards n / 2 from both ends."""
    limit = math.log(1.0 / alpha)
    low = 0
    while low < n // 2 and log_e_value(n, low) >= limit:
        low += 1
    return low, n - low


def estimate_sequence(logs: Sequence[float], *, alpha: float = stats.ALPHA
                      ) -> stats.RatioEstimate:
    """NEW/BASE from the pair numbers `logs` (in the order the pairs ran), method
    `METHOD`. Promises: `ratio` is exp(median), inside [`low`, `high`], the (1 - alpha)
    confidence sequence at this number of pairs, valid whenever the run stopped (0 and
    infinity while it is unbounded, under `FIRST_BOUNDED_PAIRS`); `p_value` is the
    anytime-valid p-value of no difference, min(1, 1 / M_n(k at 0)), at most alpha exactly
    when the interval excludes a ratio of 1. `se_log` is the interval's half-width over
    1.96 (what a geometric mean's interval uses; NaN while unbounded), `df` is n - 1. NaN
    throughout for no pair."""
    if not logs:
        nan = math.nan
        return stats.RatioEstimate(nan, nan, nan, nan, nan, nan, METHOD, 0, 0)
    return _estimate_ordered(sorted(logs), alpha)


def _estimate_ordered(ordered: list[float], alpha: float) -> stats.RatioEstimate:
    """`estimate_sequence` of pair numbers given in ascending order (at least one)."""
    n = len(ordered)
    k_low, k_high = admissible_counts(n, alpha)
    # Candidates m with k(m) = #{d <= m} = j fill [d_(j), d_(j+1)) (1-based).
    low = math.exp(ordered[k_low - 1]) if k_low >= 1 else 0.0
    high = math.exp(ordered[k_high]) if k_high < n else math.inf
    at_or_under_zero = bisect.bisect_right(ordered, 0.0)
    p_value = min(1.0, math.exp(-log_e_value(n, at_or_under_zero)))
    bounded = low > 0 and math.isfinite(high)
    se = math.log(high / low) / (2 * 1.96) if bounded else math.nan
    return stats.RatioEstimate(math.exp(statistics.median(ordered)), low, high, p_value, se,
                               float(n - 1), METHOD, n, n)


def compare_sequential_pairs(pairs: Sequence[tuple[Sequence[float], Sequence[float]]], *,
                             alpha: float = stats.ALPHA) -> stats.RatioEstimate:
    """`estimate_sequence` of the lockstep pairs (BASE values, NEW values), in the order
    they ran, summarised as `stats.paired_log_ratios` does."""
    return estimate_sequence(stats.paired_log_ratios(pairs), alpha=alpha)


def detectable_effect(estimate: stats.RatioEstimate) -> float:
    """The effect a sequence reached: the larger distance, as a relative change, from the
    ratio to an end of its interval; a change at least this far from no change would have
    had its interval clear of 1. Infinite while the interval is unbounded; NaN for no
    pair."""
    if math.isnan(estimate.ratio):
        return math.nan
    if not (estimate.low > 0 and math.isfinite(estimate.high)):
        return math.inf
    return math.expm1(max(math.log(estimate.ratio / estimate.low),
                          math.log(estimate.high / estimate.ratio)))


def interval_resolution(low: float, high: float, min_effect: float) -> Resolution:
    """CHANGED when the interval [low, high] of ratios lies wholly at or beyond the minimum
    effect on one side, SAME when wholly inside it, OPEN otherwise (also for an unbounded
    or unknown interval)."""
    if not (math.isfinite(low) and math.isfinite(high) and low > 0):
        return Resolution.OPEN
    if stats.effect_direction(low, min_effect) == 1 or stats.effect_direction(high, min_effect) == -1:
        return Resolution.CHANGED
    if stats.effect_direction(low, min_effect) == 0 and stats.effect_direction(high, min_effect) == 0:
        return Resolution.SAME
    return Resolution.OPEN


def resolve(estimates: Sequence[stats.RatioEstimate], *, min_effect: float,
            alpha: float = stats.ALPHA) -> list[Resolution]:
    """The stopping rule, one `Resolution` per benchmark of one family (the run times of a
    run): an interval beyond the minimum effect counts as CHANGED only while its p-value,
    adjusted by Benjamini-Hochberg over the family, is under `alpha`, so that what stops
    as a change is also called one by `compare`; an interval wholly within is SAME."""
    q_values = stats.adjust_p_values([e.p_value for e in estimates])
    out = []
    for e, q in zip(estimates, q_values):
        state = interval_resolution(e.low, e.high, min_effect)
        if state is Resolution.CHANGED and not q < alpha:
            state = Resolution.OPEN
        out.append(state)
    return out


@dataclass(frozen=True)
class Walk:
    """Where one sequence stopped: its resolution, after how many pairs, the estimate
    then, and the direction `compare` would give it (+1 slower, -1 faster, 0 same)."""

    resolution: Resolution
    pairs: int
    estimate: stats.RatioEstimate
    direction: int


def walk_sequence(logs: Sequence[float], *, min_effect: float, first_look: int = 3,
                  alpha: float = stats.ALPHA) -> Walk:
    """The stopping rule on one benchmark's pair numbers, alone in its family: look after
    `first_look` pairs and after every pair from then on; stop at the first resolution, or
    OPEN after all of `logs` (the budget). What the unit tests and truth-check's simulation
    run."""
    if not logs:
        raise ValueError("a sequence of pair numbers needs at least one")
    n = min(max(first_look, 1), len(logs))
    ordered = sorted(logs[:n])
    while True:
        estimate = _estimate_ordered(ordered, alpha)
        state = resolve([estimate], min_effect=min_effect, alpha=alpha)[0]
        if state is not Resolution.OPEN or n == len(logs):
            break
        bisect.insort(ordered, logs[n])
        n += 1
    direction = stats.classify_change(estimate.ratio, estimate.p_value, min_effect=min_effect,
                                      alpha=alpha)
    return Walk(state, n, estimate, direction)
