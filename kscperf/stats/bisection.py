"""The statistics of `run-benchmarks bisect`: whether a step between two builds is there
(confirmation), which of the two levels a commit between them is at (a probe), and the
chance that a named culprit is not the commit that caused the step. Pure statistics on
lists of floats: no I/O, no formatting, no torch.

The numbers are lockstep pair numbers, one per process pair, as `stats.paired_log_ratios`
makes them: log(NEW / BASE) of a pair of worker processes that took turns value by value.
Every probe is measured against the good end, so its numbers estimate the log level of the
probed commit above the good end's, and the bad end's level is the confirmed step.

A probe decides between the level of the two ends of its range with two sequential
probability ratio tests (Wald 1945) on the pair numbers, taken as normal with the pooled
spread of every comparison so far: one of the lower level against the midway level, one of
the midway level against the upper level (Sobel and Wald 1949, "A sequential decision
procedure for choosing one of three hypotheses"). Like the lower end when the first accepts
the lower level; like the upper end when the second accepts the upper level; partial (part
of the step lies on each side) when both accept the midway level. A verdict's error is the
likelihood ratio of the rejected hypothesis nearest to it at the moment it was reached: by
Ville's inequality the chance that the test ever gets there under that hypothesis is at most
that ratio, whenever the probe stopped (docs/method.md, "Bisecting a step").
"""

from __future__ import annotations

import dataclasses
import enum
import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from kscperf.stats import core as stats

__all__ = ["DEFAULT_ERROR", "DEFAULT_MAX_PAIRS", "ProbeVerdict", "ProbeDecision", "StepCheck", "MIN_PROBE_PAIRS", "MIN_PAIR_SD",
           "RULED_OUT_WITHIN", "NO_STEP_WITHIN", "probe_decision", "pooled_sd", "pairs_estimate",
           "check_step", "check_estimate", "culprit_error", "part_short_p"]

# The chance of a wrong culprit a bisect is allowed, by default: its probes' and its
# verification's error rates are set from it.
DEFAULT_ERROR = 0.05
# Most pairs a probe adds before it says can't-tell.
DEFAULT_MAX_PAIRS = 48

# Fewest pairs a probe decides on: one pair split by a change of the machine's state must
# not decide alone.
MIN_PROBE_PAIRS = 3

# The spread of pair numbers below which none is believed (identical timings would make
# every likelihood ratio infinite): 0.1 % of log.
MIN_PAIR_SD = 0.001

# A step is ruled out when its interval lies within this relative change of no change.
RULED_OUT_WITHIN = 0.02
# A step is shown only when its interval lies beyond this relative change: two checkouts of
# identical code, in lockstep, differ by up to about 1 % with p-values that do not allow for
# it (docs/validation.md, "Two checkouts of identical code"), so a smaller step is none.
NO_STEP_WITHIN = 0.01


class ProbeVerdict(enum.StrEnum):
    """What a probe said of a commit: at the level of the range's lower (good-side) end,
    at its upper (bad-side) end, between the two, or not yet either."""

    LIKE_GOOD = "like-good"
    LIKE_BAD = "like-bad"
    PARTIAL = "partial"
    CANT_TELL = "can't-tell"


@dataclass(frozen=True)
class ProbeDecision:
    """A probe's verdict on its pair numbers: the verdict, the estimated log level (the mean
    of the numbers), its (1 - alpha) t interval as ratios, the bound on the chance that the
    verdict is wrong (NaN while can't-tell), and the pairs it used."""

    verdict: ProbeVerdict
    level: float
    ratio_low: float
    ratio_high: float
    error: float
    pairs: int

    @property
    def ratio(self) -> float:
        """exp(level): the probed commit's time over the good end's."""
        return math.exp(self.level)


def pooled_sd(groups: Sequence[Sequence[float]]) -> float:
    """The spread of pair numbers pooled over `groups` (each one comparison's numbers):
    sqrt(sum of squares about each group's own mean / sum of (n - 1)), at least
    `MIN_PAIR_SD`; NaN when no group has two numbers."""
    squares, df = 0.0, 0
    for g in groups:
        if len(g) >= 2:
            mean = statistics.fmean(g)
            squares += sum((x - mean) ** 2 for x in g)
            df += len(g) - 1
    if df == 0:
        return math.nan
    return max(MIN_PAIR_SD, math.sqrt(squares / df))


def pairs_estimate(numbers: Sequence[float], alpha: float = stats.ALPHA) -> stats.RatioEstimate:
    """exp(mean) of the pair numbers with the one-sample t-test's two-sided p-value and
    (1 - alpha) interval (n - 1 degrees of freedom), as `stats.compare_paired_samples` gives
    for one benchmark; NaN throughout for fewer than two numbers."""
    k = len(numbers)
    if k < 2:
        nan = math.nan
        return stats.RatioEstimate(nan, nan, nan, nan, nan, nan, "pairs", k, k)
    se = statistics.stdev(numbers) / math.sqrt(k)
    return stats.t_estimate(math.exp(statistics.fmean(numbers)), se, float(k - 1), alpha,
                            "pairs", k, k)


@dataclass(frozen=True)
class StepCheck:
    """Whether pair numbers show a step: `shown` False when the interval lies within
    `RULED_OUT_WITHIN` of no change (whether or not it holds it), else True when it lies
    beyond `NO_STEP_WITHIN` of no change, None when neither (yet). `p_value` is the
    two-sided t-test's p of a step at the edge of the `NO_STEP_WITHIN` band nearest the
    estimate: below alpha exactly when the interval lies beyond the band."""

    shown: bool | None
    estimate: stats.RatioEstimate
    p_value: float


def check_step(numbers: Sequence[float], alpha: float, *,
               no_step_within: float = NO_STEP_WITHIN,
               ruled_out_within: float = RULED_OUT_WITHIN) -> StepCheck:
    """The step of pair numbers at one look, tested at `alpha` (the caller divides its
    error among its looks): ruled out (interval inside [1 / (1 + ruled_out_within),
    1 + ruled_out_within]), else shown (interval beyond [1 / (1 + no_step_within),
    1 + no_step_within]), else open. The bands default to those of lockstep time; a bisect
    by instruction counts passes their minimum effect."""
    return check_estimate(pairs_estimate(numbers, alpha), no_step_within=no_step_within,
                          ruled_out_within=ruled_out_within)


def check_estimate(e: stats.RatioEstimate, *, no_step_within: float = NO_STEP_WITHIN,
                   ruled_out_within: float = RULED_OUT_WITHIN) -> StepCheck:
    """`check_step` of any t estimate `e` (its interval at the caller's alpha): of pair
    numbers, or of two samples of levels (`stats.compare_log_levels`, as a bisect by
    instruction counts compares two commits' counting processes)."""
    if not math.isfinite(e.low):
        return StepCheck(None, e, math.nan)
    beyond = abs(math.log(e.ratio)) - math.log1p(no_step_within)
    if e.se_log > 0.0:
        p = min(1.0, 2.0 * _t_tail(beyond, e))
    else:  # identical numbers: the step is known exactly, beyond the band or not
        p = 0.0 if beyond > 0.0 else 1.0
    if e.low >= 1.0 / (1.0 + ruled_out_within) and e.high <= 1.0 + ruled_out_within:
        return StepCheck(False, e, p)
    if e.low > 1.0 + no_step_within or e.high < 1.0 / (1.0 + no_step_within):
        return StepCheck(True, e, p)
    return StepCheck(None, e, p)


def _log_likelihood_ratio(ys: Sequence[float], lower: float, upper: float,
                          sd: float) -> float:
    """log of L(upper) / L(lower) for normal numbers `ys` of spread `sd`."""
    width = upper - lower
    middle = (upper + lower) / 2.0
    return sum(width / (sd * sd) * (y - middle) for y in ys)


def probe_decision(numbers: Sequence[float], low_level: float, high_level: float, sd: float,
                   alpha: float, *, min_pairs: int = MIN_PROBE_PAIRS,
                   final: bool = False) -> ProbeDecision:
    """The verdict of a probe whose pair numbers (log level over the good end) are
    `numbers`, between the range's lower-end level `low_level` and upper-end level
    `high_level` (either may be the larger: a step may be a speed-up), with pair spread
    `sd` and per-test error `alpha`.

    Promises: no verdict before `min_pairs` numbers; the spread is the larger of `sd` and
    the numbers' own; like-good when the test of the lower against the midway level reaches
    log(1 / alpha) for the lower, like-bad when the test of the midway against the upper
    level reaches it for the upper, partial when both reach it for the midway level and the
    numbers' (1 - alpha) t interval lies strictly between the two levels; else can't-tell. `error` is the likelihood ratio of the nearest
    rejected hypothesis (for partial the sum of the two), at most alpha. Each number is
    first clipped to within one step of the range, so that one wild pair moves a test by a
    bounded amount. At the probe's last look (`final`, its cap), the test is truncated: a
    verdict still open is like-good or like-bad when the numbers' one-sided t-test puts
    their level on that side of the midway level at `alpha`, with that p-value as its
    error; else can't-tell."""
    n = len(numbers)
    est = pairs_estimate(numbers, alpha)
    level = statistics.fmean(numbers) if numbers else math.nan
    undecided = ProbeDecision(ProbeVerdict.CANT_TELL, level, est.low, est.high, math.nan, n)
    width = high_level - low_level
    if n < min_pairs or width == 0.0 or not sd > 0.0:
        return undecided
    # A probe noisier than the comparisons before it is held to its own spread.
    sd = max(sd, statistics.stdev(numbers))
    # Oriented so that the lower end is 0 and the upper end 1, whichever way the step goes.
    ys = [min(2.0, max(-1.0, (x - low_level) / width)) for x in numbers]
    sd_y = sd / abs(width)
    toward_middle = _log_likelihood_ratio(ys, 0.0, 0.5, sd_y)
    toward_upper = _log_likelihood_ratio(ys, 0.5, 1.0, sd_y)
    bound = math.log(1.0 / alpha)
    if toward_middle <= -bound:
        return ProbeDecision(ProbeVerdict.LIKE_GOOD, level, est.low, est.high,
                             math.exp(toward_middle), n)
    if toward_upper >= bound:
        return ProbeDecision(ProbeVerdict.LIKE_BAD, level, est.low, est.high,
                             math.exp(-toward_upper), n)
    # A partial verdict splits the search in two: it also needs its own t interval to lie
    # strictly between the two levels.
    inside = min(low_level, high_level) < math.log(est.low) and \
        math.log(est.high) < max(low_level, high_level)
    if toward_middle >= bound and toward_upper <= -bound and inside:
        return ProbeDecision(ProbeVerdict.PARTIAL, level, est.low, est.high,
                             math.exp(-toward_middle) + math.exp(toward_upper), n)
    if final:
        return _truncated(undecided, est, (low_level + high_level) / 2.0, width, alpha)
    return undecided


def _truncated(undecided: ProbeDecision, est: stats.RatioEstimate, middle: float,
               width: float, alpha: float) -> ProbeDecision:
    """The verdict of a probe at its cap whose two sequential tests are both open: the
    side of the midway level its one-sided t-test puts it on at `alpha`, else undecided.
    A commit at one end's level whose measured level a checkout's offset or a misestimated
    end moved toward the middle keeps the likelihood ratios short of 1/alpha for long,
    while its mean already lies far from the midway level."""
    if not est.se_log > 0.0:
        return undecided
    # Oriented so that positive means toward the upper end, whichever way the step goes.
    beyond = math.copysign(1.0, width) * (undecided.level - middle)
    p = _t_tail(abs(beyond), est)
    if p > alpha:
        return undecided
    verdict = ProbeVerdict.LIKE_BAD if beyond > 0.0 else ProbeVerdict.LIKE_GOOD
    return dataclasses.replace(undecided, verdict=verdict, error=p)


def _t_tail(distance: float, e: stats.RatioEstimate) -> float:
    """The one-sided t tail beyond `distance` (in log units) of estimate `e`, whose
    standard error is positive: the chance of its mean lying that far off or farther."""
    from scipy import stats as sps

    return float(sps.t.sf(distance / e.se_log, e.df))


def part_short_p(numbers: Sequence[float], part_level: float) -> float:
    """The one-sided t-test's p-value of a part of log size `part_level` (its sign the
    step's direction) between two commits whose pair numbers are `numbers`: the chance of
    numbers at least this far short of it if the part were that large. It bounds the error
    of saying that no part of that size lies there. 1 for fewer than two numbers."""
    e = pairs_estimate(numbers)
    if not math.isfinite(e.ratio):
        return 1.0
    short = abs(part_level) - math.copysign(1.0, part_level) * math.log(e.ratio)
    if e.se_log == 0.0:
        return 0.0 if short > 0.0 else 1.0
    return _t_tail(short, e)


def culprit_error(probe_errors: Sequence[float], verify_p: float) -> float:
    """The stated chance that a culprit is not the commit that caused its step: the sum of
    the error bounds of the probe verdicts that put the step between it and its parent,
    and of the p-value of its verification against its parent (a union bound: the culprit
    can be wrong only if one of them is), at most 1."""
    return min(1.0, sum(e for e in probe_errors if math.isfinite(e)) +
               (verify_p if math.isfinite(verify_p) else 1.0))
