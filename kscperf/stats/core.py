"""Pure statistics on sequences of floats: medians, spreads, intervals, tests, geometric means.

Owns how two builds' values are compared (`compare_samples`: Welch t on per-process medians,
or pooled values with Mann-Whitney U under `MIN_PROCESSES`; `compare_paired_samples` for the
lockstep pairs of `ab`), the Benjamini-Hochberg adjustment, the minimum detectable effect and
the thresholds, as named constants here, never literals in formatting or templates. No I/O, no
formatting, no torch, no pyperf. numpy and scipy are imported lazily, inside the functions that
need them, so importing this module stays cheap for the CLI.

Why this method, and a seeded simulation of its false-verdict rates: docs/method.md, "Statistics".
"""

from __future__ import annotations

import enum
import functools
import math
import statistics
from dataclasses import dataclass
from typing import Sequence

__all__ = [
    "ALPHA",
    "DEFAULT_MIN_EFFECT",
    "INSTRUCTIONS_MIN_EFFECT",
    "DEFAULT_POWER",
    "MIN_PROCESSES",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "RatioEstimate",
    "median",
    "median_abs_dev",
    "speedup",
    "process_medians",
    "ratio_of_medians",
    "process_level",
    "compare_samples",
    "compare_paired_samples",
    "compare_log_levels",
    "t_estimate",
    "split_search_p_value",
    "split_search_significance",
    "paired_log_ratios",
    "adjust_p_values",
    "Difference",
    "compare_means",
    "classify_change",
    "effect_direction",
    "min_detectable_effect",
    "detectable_spread_of_runs",
    "min_detectable_effect_of_runs",
    "geometric_mean",
    "geometric_mean_interval",
    "NEUTRAL_CHANGE",
    "Direction",
]

# Two-sided significance level of every test, 1 - confidence of every interval, and the
# false discovery rate of `adjust_p_values`.
ALPHA = 0.05

# A ratio NEW/BASE within [1/(1 + e), 1 + e] is never called a change. Symmetric in log
# space: 5 % slower is a ratio of 1.05, 5 % faster (a speedup of 1.05) is 1/1.05.
DEFAULT_MIN_EFFECT = 0.05

# The same for instruction counts (docs/method.md, "Counting instructions"): a count's repeats
# spread far less than times do, and 5 % would hide the steps the count is for.
INSTRUCTIONS_MIN_EFFECT = 0.005

# A summary's move between two builds smaller than this (1 %) is shown as neither better
# nor worse: the dashboard's front page, which has no test behind its geomeans.
NEUTRAL_CHANGE = 0.01

# The power at which `min_detectable_effect` is stated (the conventional 80 %).
DEFAULT_POWER = 0.8

# Fewest processes per build for a test on per-process medians; with 2 the spread estimate
# has 1 degree of freedom per build and the test can detect almost nothing.
MIN_PROCESSES = 3

# Bootstrap of the pooled fallback: enough resamples for stable 2.5 %/97.5 % percentiles,
# a fixed seed so the same files always give the same report.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240501


@dataclass(frozen=True)
class RatioEstimate:
    """NEW/BASE for one benchmark: the ratio its test is about, its (1 - alpha) interval, the raw
    p-value of the test that there is no difference, and the standard error and degrees of
    freedom of log(ratio) that the interval and `min_detectable_effect` use.

    `method` is "processes" (Welch t on per-process medians), "pairs" (a t-test on the paired
    log ratios of lockstep processes), "values" (pooled values: Mann-Whitney U and a
    bootstrap interval) or "none" (a side had no usable value: every
    number is NaN). `n_base`/`n_new` count the units tested: processes or values.
    """

    ratio: float
    low: float
    high: float
    p_value: float
    se_log: float
    df: float
    method: str
    n_base: int
    n_new: int


def median(values: Sequence[float]) -> float:
    """The median; NaN for an empty sequence."""
    return statistics.median(values) if values else math.nan


def median_abs_dev(values: Sequence[float]) -> float:
    """The median absolute deviation from the median (pyperf's spread); 0 for one value."""
    if len(values) < 2:
        return 0.0
    m = statistics.median(values)
    return statistics.median(abs(v - m) for v in values)


def speedup(reference_s: float, time_s: float) -> float:
    """How many times faster `time_s` is than `reference_s` (>1: faster)."""
    if not (time_s > 0 and reference_s > 0):
        return math.nan
    return reference_s / time_s


def _usable(value: float) -> bool:
    # Logs need positive finite numbers; pyperf already refuses values <= 0.
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _positive(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values if _usable(v)]


def process_medians(runs: Sequence[Sequence[float]]) -> list[float]:
    """The median of each process's usable (positive, finite) values; processes with none
    are left out."""
    out = []
    for run in runs:
        values = _positive(run)
        if values:
            out.append(statistics.median(values))
    return out


def process_level(runs: Sequence[Sequence[float]]) -> float:
    """The level `compare_samples` tests for one side with `MIN_PROCESSES` or more
    processes: the geometric mean of its per-process medians (`process_medians`), so that
    the ratio of two levels is exactly the ratio the Welch test on their logs is about; NaN
    without a usable value."""
    return geometric_mean(process_medians(runs))


def ratio_of_medians(base: Sequence[float], new: Sequence[float]) -> float:
    """median(new) / median(base) over usable values; NaN when either side has none."""
    b, n = _positive(base), _positive(new)
    if not b or not n:
        return math.nan
    return statistics.median(n) / statistics.median(b)


def _nan_estimate(method: str = "none", n_base: int = 0, n_new: int = 0) -> RatioEstimate:
    nan = math.nan
    return RatioEstimate(nan, nan, nan, nan, nan, nan, method, n_base, n_new)


def _welch(base: Sequence[float], new: Sequence[float]) -> tuple[float, float]:
    """Welch's standard error of mean(new) - mean(base), at least two values a side, and
    its Welch-Satterthwaite degrees of freedom (infinite when the error is 0)."""
    vb = statistics.variance(base) / len(base)
    vn = statistics.variance(new) / len(new)
    se = math.sqrt(vb + vn)
    if se == 0.0:
        return 0.0, math.inf
    # A side with zero variance contributes no term.
    denominator = (vb * vb / (len(base) - 1) if vb else 0.0) + \
        (vn * vn / (len(new) - 1) if vn else 0.0)
    return se, (vb + vn) ** 2 / denominator


def _welch_on_process_medians(ratio: float, base_medians: list[float],
                              new_medians: list[float], alpha: float) -> RatioEstimate:
    # Every process of both builds giving the same median (deterministic counters such as
    # peak memory) makes the error 0: the ratio is known exactly.
    se, df = _welch([math.log(v) for v in base_medians], [math.log(v) for v in new_medians])
    return t_estimate(ratio, se, df, alpha, "processes", len(base_medians), len(new_medians))


def t_estimate(ratio: float, se: float, df: float, alpha: float, method: str, n_base: int,
                n_new: int) -> RatioEstimate:
    """The estimate of a t-test of log(ratio) = 0 with standard error `se` and `df` degrees
    of freedom (normal when infinite): the two-sided p-value and the matching (1 - alpha)
    interval ratio * exp(+-t * se). With se 0 the ratio is known
    exactly: p is 1 for a ratio of 1, else 0, and the interval is the ratio itself."""
    if se == 0.0:
        return RatioEstimate(ratio, ratio, ratio, 1.0 if ratio == 1.0 else 0.0, 0.0, math.inf,
                             method, n_base, n_new)
    from scipy import stats as sps

    p = float(2.0 * sps.t.sf(abs(math.log(ratio)) / se, df))
    half = float(sps.t.ppf(1.0 - alpha / 2.0, df)) * se
    return RatioEstimate(ratio, ratio * math.exp(-half), ratio * math.exp(half), p, se, df,
                         method, n_base, n_new)


def _pooled(ratio: float, base: list[float], new: list[float], alpha: float) -> RatioEstimate:
    import numpy as np
    from scipy import stats as sps

    n_b, n_n = len(base), len(new)
    if min(n_b, n_n) < 2:
        # One value against one value carries no evidence of a difference.
        return RatioEstimate(ratio, math.nan, math.nan, 1.0, math.nan, math.nan, "values",
                             n_b, n_n)
    b, n = np.asarray(base), np.asarray(new)
    if np.all(b == b[0]) and np.all(n == n[0]):
        p = 1.0 if ratio == 1.0 else 0.0
        return RatioEstimate(ratio, ratio, ratio, p, 0.0, math.inf, "values", n_b, n_n)
    p = float(sps.mannwhitneyu(n, b, alternative="two-sided").pvalue)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    mb = np.median(rng.choice(b, size=(BOOTSTRAP_RESAMPLES, n_b)), axis=1)
    mn = np.median(rng.choice(n, size=(BOOTSTRAP_RESAMPLES, n_n)), axis=1)
    log_ratios = np.log(mn / mb)
    low, high = np.quantile(log_ratios, [alpha / 2.0, 1.0 - alpha / 2.0])
    se = float(np.std(log_ratios, ddof=1))
    # A pooled test has no better claim to degrees of freedom than the smaller sample.
    df = float(min(n_b, n_n) - 1)
    # Percentiles of a skewed bootstrap distribution can, rarely, exclude the estimate
    # itself; an interval that does not contain the number printed next to it helps nobody.
    return RatioEstimate(ratio, min(float(math.exp(low)), ratio),
                         max(float(math.exp(high)), ratio), p, se, df, "values", n_b, n_n)


def compare_samples(base_runs: Sequence[Sequence[float]], new_runs: Sequence[Sequence[float]],
                    *, alpha: float = ALPHA) -> RatioEstimate:
    """NEW/BASE for one benchmark from its raw values, one inner sequence per process.

    Promises: when both builds have `MIN_PROCESSES` or more processes, `ratio` is
    `process_level(new_runs) / process_level(base_runs)` (the ratio of the geometric means of
    the per-process medians) and the p-value and interval are those of a Welch t-test on the
    log per-process medians, whose estimate that ratio is: the ratio shown, the levels shown
    and the test are one statistic (docs/method.md, "One statistic"). Otherwise `ratio` is
    median(all NEW values) / median(all BASE values), with a Mann-Whitney U test on the
    pooled values and a bootstrap interval of that ratio. The interval has (1 - alpha)
    confidence and contains `ratio`. Values that
    are not positive and finite are ignored; a side without any gives method "none".
    Deterministic: the same input always gives the same result.
    """
    base = [_positive(r) for r in base_runs]
    new = [_positive(r) for r in new_runs]
    base = [r for r in base if r]
    new = [r for r in new if r]
    pooled_b = [v for r in base for v in r]
    pooled_n = [v for r in new for v in r]
    if not pooled_b or not pooled_n:
        return _nan_estimate("none", len(pooled_b), len(pooled_n))
    if len(base) >= MIN_PROCESSES and len(new) >= MIN_PROCESSES:
        medians_b, medians_n = process_medians(base), process_medians(new)
        return _welch_on_process_medians(geometric_mean(medians_n) / geometric_mean(medians_b),
                                         medians_b, medians_n, alpha)
    ratio = statistics.median(pooled_n) / statistics.median(pooled_b)
    return _pooled(ratio, pooled_b, pooled_n, alpha)


def compare_log_levels(base_logs: Sequence[float], new_logs: Sequence[float], *,
                       alpha: float = ALPHA) -> RatioEstimate:
    """NEW/BASE for two stretches of builds of one series, from one log level per build:
    `ratio` is exp(mean NEW log - mean BASE log), and the interval and p-value are those of
    Student's two-sample t-test on the logs (one pooled variance, n - 2 degrees of freedom,
    method "levels"). The variance is pooled because the noise around a level is the same on
    both sides of a step of it, and a stretch of two builds cannot estimate its own. The
    estimate is the mean the test is about: a ratio of medians beside a t-test on means
    misstates p whenever the two disagree. Needs three builds or more, one or more a side;
    otherwise every number is NaN (method "none")."""
    n_b, n_n = len(base_logs), len(new_logs)
    if n_b < 1 or n_n < 1 or n_b + n_n < 3:
        return _nan_estimate("none", n_b, n_n)
    mean_b, mean_n = math.fsum(base_logs) / n_b, math.fsum(new_logs) / n_n
    squares = (math.fsum((v - mean_b) ** 2 for v in base_logs)
               + math.fsum((v - mean_n) ** 2 for v in new_logs))
    df = float(n_b + n_n - 2)
    se = math.sqrt(squares / df * (1.0 / n_b + 1.0 / n_n))
    return t_estimate(math.exp(mean_n - mean_b), se, df, alpha, "levels", n_b, n_n)


def split_search_p_value(p_value: float, builds: int, min_side: int) -> float:
    """The p-value of a step whose split was chosen, among every split of `builds` builds
    that leaves `min_side` or more on each side, as the one that differs most: the chance
    that the largest of those standardized differences reaches the one found, when there is
    no step. `p_value` is the chosen split's own two-sided p-value, as if it had been fixed in
    advance. The tail of the maximum is the approximation of James, James and Siegmund
    (1987, Biometrika 74:71-83; Siegmund 1988) for a change in a normal mean: b phi(b)
    sum_k w_k nu(b sqrt(w_k)), w_k = n / (k (n - k)), with Siegmund's correction nu for a
    discrete search. Never below `p_value`, never above 1; `p_value` itself with fewer than
    two splits to choose from."""
    import numpy as np
    from scipy import stats as sps

    splits = builds - 2 * min_side + 1
    if splits < 2 or not 0.0 < p_value < 1.0:
        return p_value
    b = float(sps.norm.isf(p_value / 2.0))
    k = np.arange(min_side, builds - min_side + 1, dtype=float)
    weight = builds / (k * (builds - k))
    half = b * np.sqrt(weight) / 2.0
    nu = (sps.norm.cdf(half) - 0.5) / (half * (half * sps.norm.cdf(half) + sps.norm.pdf(half)))
    tail = b * float(sps.norm.pdf(b)) * float(np.sum(weight * nu))
    return min(1.0, max(p_value, tail))


@functools.lru_cache(maxsize=256)
def split_search_significance(alpha: float, builds: int, min_side: int) -> float:
    """The p-value, as if the split were fixed, that `split_search_p_value` turns into
    `alpha`: the significance a chosen split's own test must reach. `alpha` itself when
    there is no choice. Cached: a store asks for a handful of distinct arguments."""
    from scipy import optimize

    if builds - 2 * min_side + 1 < 2:
        return alpha
    return math.exp(optimize.brentq(
        lambda log_p: math.log(split_search_p_value(math.exp(log_p), builds, min_side))
        - math.log(alpha), math.log(1e-300), math.log(alpha), xtol=1e-6))


def _paired_logs(base: Sequence[float], new: Sequence[float]) -> list[float]:
    # Value j of each build was timed in alternate turns with value j of the other, so the
    # two saw the same state of the machine. A position unusable on either side is dropped
    # as a pair, so the pairs after it stay aligned.
    return [math.log(n / b) for b, n in zip(base, new) if _usable(b) and _usable(n)]


def compare_paired_samples(pairs: Sequence[tuple[Sequence[float], Sequence[float]]], *,
                           alpha: float = ALPHA) -> RatioEstimate:
    """NEW/BASE for one benchmark measured in lockstep (`run-benchmarks ab`): `pairs` holds,
    per process index, (BASE values, NEW values) of two worker processes that took turns, one
    value each, on the same machine.

    Promises: each pair is summarised by the median over j of log(NEW value j / BASE value j)
    (the median is robust to the odd pair that a change of the machine's state split); with
    two or more usable pairs, `ratio` is exp(mean of those), the interval and p-value come
    from a one-sample t-test on them (k - 1 degrees of freedom, method "pairs"), and the
    interval contains the ratio. With fewer it is `compare_samples` on the same values,
    unpaired. A position j whose value is not positive and finite on either side is dropped
    from that pair.
    """
    logs = paired_log_ratios(pairs)
    if len(logs) < 2:
        return compare_samples([b for b, _ in pairs], [n for _, n in pairs], alpha=alpha)
    k = len(logs)
    se = statistics.stdev(logs) / math.sqrt(k)
    return t_estimate(math.exp(statistics.fmean(logs)), se, float(k - 1), alpha, "pairs", k, k)


def paired_log_ratios(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]
                      ) -> list[float]:
    """One number per lockstep process pair, in the order given: the median over j of
    log(NEW value j / BASE value j), positions unusable on either side dropped; a pair with
    no usable position is left out. The replicates of `compare_paired_samples` and of the
    sequential design (`kscperf.stats.sequential`)."""
    per_pair = [logs for logs in (_paired_logs(b, n) for b, n in pairs) if logs]
    return [statistics.median(pair) for pair in per_pair]


@dataclass(frozen=True)
class Difference:
    """NEW's mean less BASE's (`delta`), its (1 - alpha) interval and two-sided p-value."""

    delta: float
    low: float
    high: float
    p_value: float


def compare_means(base: Sequence[float], new: Sequence[float], *, margin: float = 0.0,
                  alpha: float = ALPHA) -> Difference:
    """Welch's t-test of the difference of means, for quantities that may be zero (an op's
    time in a build without it), where a ratio cannot be taken: the interval is of the
    difference, and the p-value tests that it lies within +-`margin` (0: that it is 0), so
    that a difference within the margin is never significant. With fewer than two values
    on a side the spread is unknown: the interval is infinite and p NaN. With no spread on
    either side the difference is known exactly (p 1 within the margin, else 0)."""
    nan = math.nan
    if not base or not new:
        return Difference(nan, nan, nan, nan)
    delta = statistics.fmean(new) - statistics.fmean(base)
    if len(base) < 2 or len(new) < 2:
        return Difference(delta, -math.inf, math.inf, nan)
    se, df = _welch(base, new)
    beyond = abs(delta) - margin
    if se == 0.0:
        return Difference(delta, delta, delta, 1.0 if beyond <= 0.0 else 0.0)
    from scipy import stats as sps

    half = float(sps.t.ppf(1.0 - alpha / 2.0, df)) * se
    # Against a margin, the nearer edge of the band is the null: one-sided from there.
    p = float(sps.t.sf(beyond / se, df)) if margin > 0 else float(2.0 * sps.t.sf(beyond / se, df))
    return Difference(delta, delta - half, delta + half, min(1.0, p))


def adjust_p_values(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input order.

    Promises: NaN stays NaN and is not counted as a test; every q >= its p and <= 1;
    rejecting where q < alpha keeps the false discovery rate at or below alpha (and, when
    nothing changed, the chance of any false rejection) for independent or positively
    dependent tests.
    """
    indexed = [(p, i) for i, p in enumerate(p_values) if not math.isnan(p)]
    indexed.sort()
    m = len(indexed)
    out = [math.nan] * len(p_values)
    running = 1.0
    for rank in range(m, 0, -1):
        p, i = indexed[rank - 1]
        running = min(running, p * m / rank)
        out[i] = min(1.0, running)
    return out


class Direction(enum.IntEnum):
    """The direction of a change of a time (or of memory): up is slower (more)."""

    FASTER = -1
    SAME = 0
    SLOWER = 1


def classify_change(ratio: float, p_value: float, *, min_effect: float = DEFAULT_MIN_EFFECT,
                    alpha: float = ALPHA) -> Direction:
    """SLOWER (+1: NEW slower/bigger), FASTER (-1: NEW faster/smaller) or SAME (0).

    A change needs both a p-value under `alpha` and a ratio at or beyond `1 + min_effect`
    (or at or under `1 / (1 + min_effect)`); NaN in either gives 0.
    """
    if math.isnan(p_value) or p_value >= alpha:
        return Direction.SAME
    return effect_direction(ratio, min_effect)


def effect_direction(ratio: float, min_effect: float = DEFAULT_MIN_EFFECT) -> Direction:
    """SLOWER when `ratio` is at or beyond `1 + min_effect`, FASTER when at or under
    `1 / (1 + min_effect)`, else SAME (also for a ratio that is not positive and finite),
    whatever its significance."""
    if not (math.isfinite(ratio) and ratio > 0):
        return Direction.SAME
    # The tiny tolerance keeps an exact 5 % change a change despite floating-point rounding.
    limit = math.log1p(min_effect) - 1e-12
    if math.log(ratio) >= limit:
        return Direction.SLOWER
    if math.log(ratio) <= -limit:
        return Direction.FASTER
    return Direction.SAME


def min_detectable_effect(se_log: float, df: float, *, alpha: float = ALPHA,
                          power: float = DEFAULT_POWER) -> float:
    """The smallest relative change (0.1 = 10 %) that a two-sided test at `alpha` would find
    with probability `power`, given the standard error of log(ratio) and its degrees of
    freedom: exp((t[1 - alpha/2] + t[power]) * se) - 1. NaN when the spread is unknown.

    It says what the spread allows, before the floor `min_effect` and before adjusting for
    many benchmarks; a benchmark whose value is above `min_effect` is too noisy to be
    trusted at that threshold.
    """
    if math.isnan(se_log) or math.isnan(df) or df <= 0:
        return math.nan
    if se_log == 0.0:
        return 0.0
    return math.expm1(_detectable_z(alpha, power, df) * se_log)


@functools.lru_cache(maxsize=1024)
def _detectable_z(alpha: float, power: float, df: float) -> float:
    """t[1 - alpha/2] + t[power] with `df` degrees of freedom. Cached: a history store asks
    for it once per benchmark and build, with a handful of distinct `df`, and scipy takes a
    millisecond a call."""
    from scipy import stats as sps

    if math.isinf(df):
        return float(sps.norm.ppf(1.0 - alpha / 2.0) + sps.norm.ppf(power))
    return float(sps.t.ppf(1.0 - alpha / 2.0, df) + sps.t.ppf(power, df))


def detectable_spread_of_runs(runs: Sequence[Sequence[float]]) -> tuple[float, float]:
    """(standard error of log(ratio), degrees of freedom) of one build's benchmark against a
    future build with the same spread and the same number of processes: what
    `min_detectable_effect` turns into a minimum detectable effect. Uses per-process medians
    with `MIN_PROCESSES` or more processes, else pooled values; (NaN, NaN) when there is too
    little to estimate a spread. Needs no scipy, so a caller can keep it and convert later."""
    medians = process_medians(runs)
    if len(medians) >= MIN_PROCESSES:
        logs = [math.log(v) for v in medians]
        k = len(logs)
        return math.sqrt(2.0 * statistics.variance(logs) / k), 2.0 * (k - 1)
    values = [v for r in runs for v in _positive(r)]
    if len(values) < 2:
        return math.nan, math.nan
    logs = [math.log(v) for v in values]
    # Standard error of a median of n normal values is about sqrt(pi/2) * sd / sqrt(n).
    se_one = math.sqrt(math.pi / 2.0) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.sqrt(2.0) * se_one, float(len(logs) - 1)


def min_detectable_effect_of_runs(runs: Sequence[Sequence[float]], *, alpha: float = ALPHA,
                                  power: float = DEFAULT_POWER) -> float:
    """The `min_detectable_effect` of one build's benchmark against a future build with the
    same spread and the same number of processes (what a report of a single build can say),
    from `detectable_spread_of_runs`; NaN when there is too little to estimate a spread."""
    se, df = detectable_spread_of_runs(runs)
    return min_detectable_effect(se, df, alpha=alpha, power=power)


def geometric_mean(values: Sequence[float]) -> float:
    """The geometric mean of the positive finite values; NaN when there are none."""
    usable = _positive(values)
    if not usable:
        return math.nan
    return math.exp(math.fsum(math.log(v) for v in usable) / len(usable))


def geometric_mean_interval(ratios: Sequence[float], se_logs: Sequence[float],
                            dfs: Sequence[float], *, alpha: float = ALPHA
                            ) -> tuple[float, float, float]:
    """(geometric mean, low, high) of per-benchmark ratios with a (1 - alpha) interval for
    the measurement uncertainty of the set of benchmarks given (not for sampling other
    benchmarks): var(mean log) = sum(se_i^2) / n^2 with Welch-Satterthwaite degrees of
    freedom. Entries whose ratio is unusable are dropped; the interval is NaN when any kept
    entry has an unknown spread.
    """
    kept = [(r, s, d) for r, s, d in zip(ratios, se_logs, dfs)
            if isinstance(r, (int, float)) and math.isfinite(r) and r > 0]
    if not kept:
        return math.nan, math.nan, math.nan
    n = len(kept)
    center = math.fsum(math.log(r) for r, _, _ in kept) / n
    gm = math.exp(center)
    if any(math.isnan(s) or math.isnan(d) for _, s, d in kept):
        return gm, math.nan, math.nan
    variances = [s * s / (n * n) for _, s, _ in kept]
    total = math.fsum(variances)
    if total == 0.0:
        return gm, gm, gm
    denominator = math.fsum(v * v / d for v, (_, _, d) in zip(variances, kept)
                            if v and not math.isinf(d))
    df = total * total / denominator if denominator else math.inf
    from scipy import stats as sps

    q = float(sps.norm.ppf(1.0 - alpha / 2.0) if math.isinf(df)
              else sps.t.ppf(1.0 - alpha / 2.0, df))
    half = q * math.sqrt(total)
    return gm, math.exp(center - half), math.exp(center + half)
