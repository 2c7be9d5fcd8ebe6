"""The likelihood rules of dashboard-bench's detection section: what a detector that knows the
otava-test-data step_function generator (a ceiling), or only its sigma (a reference), finds
at a fixed false-alarm rate, scored as `validation.detection.score` scores."""

from __future__ import annotations

import numpy as np

from validation.detection import EDGE_BUILDS, STEP_SIZES

# The likelihood rules' false-alarm rate: the share of step-free series they may alarm on, the
# issue's 10 false per 1,000 at most (a series with a false alarm has at least one).
CEILING_ALARMS = 0.01


def _sizes() -> list[float]:
    return [z for z in STEP_SIZES if z >= 0.05]


def _best_window(values: np.ndarray, sigma: float, told_sizes: bool, builds: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per series (a row of `values`): the log likelihood ratio against no step of the
    likeliest neighbourhood (+-1) of cuts, and its cut (the first build after the step)."""
    cuts = np.arange(EDGE_BUILDS, builds - EDGE_BUILDS + 1)
    shifts = np.array([100.0 * d * z for z in _sizes() for d in (1.0, -1.0)])
    before_n = cuts.astype(float)
    after_n = builds - before_n
    if told_sizes:
        # log likelihood ratio of a step of each shift at each cut, against no step
        after = np.cumsum((values - 100.0)[:, ::-1], axis=1)[:, ::-1][:, cuts]
        log_ratio = ((2.0 * shifts[:, None, None] * after[None] - shifts[:, None, None] ** 2
                      * after_n[None, None]) / (2.0 * sigma * sigma))
        top = log_ratio.max(axis=(0, 2))
        ratio = np.exp(log_ratio - top[None, :, None]).sum(axis=0)
    else:
        # flat priors on both levels: the least-squares gain of the cut, and the width
        # of the two levels' posteriors against the one level's
        sums = np.cumsum(values, axis=1)
        left = sums[:, cuts - 1]
        difference = left / before_n - (sums[:, -1:] - left) / after_n
        log_ratio = (before_n * after_n / builds * difference * difference
                     / (2.0 * sigma * sigma) - 0.5 * np.log(before_n * after_n / builds))
        top = log_ratio.max(axis=1)
        ratio = np.exp(log_ratio - top[:, None])
    window = ratio.copy()
    window[:, 1:] += ratio[:, :-1]
    window[:, :-1] += ratio[:, 1:]
    pick = np.argmax(window, axis=1)
    return np.log(window[np.arange(values.shape[0]), pick]) + top, cuts[pick]


def likelihood_rule_shares(sigma: float, rng: np.random.Generator, *, told_sizes: bool = True,
                   builds: int = 60, series: int = 20000) -> dict[float, float]:
    """Per step size of 5 % or more: the share of planted steps found at their build (+-1)
    by a likelihood rule that alarms on at most CEILING_ALARMS of step-free series, for one
    value per build with normal noise of sd `sigma` on a baseline of 100, as the
    otava-test-data models make them. The rule reports the build whose neighbourhood (+-1)
    has the largest likelihood ratio against no step, when that ratio passes the quantile of
    step-free series that gives the alarm rate.

    `told_sizes`: it is told everything the generator knows (the baseline, sigma, the sizes,
    that a step is up or down at random at a uniform build EDGE_BUILDS or more from the
    ends), so by Neyman and Pearson no detector scored as `score` scores, at that
    false-alarm rate, does better on average: a ceiling. Otherwise it is told sigma alone,
    with flat priors on the levels before and after: what a detector that knows its noise
    but not the sizes can reach, a reference rather than a bound."""
    quiet, _ = _best_window(100.0 + rng.normal(0.0, sigma, (series, builds)), sigma,
                            told_sizes, builds)
    threshold = float(np.quantile(quiet, 1.0 - CEILING_ALARMS))
    out = {}
    for size in _sizes():
        at = rng.integers(EDGE_BUILDS, builds - EDGE_BUILDS + 1, series)
        sign = np.where(rng.random(series) < 0.5, 1.0, -1.0)
        levels = np.where(np.arange(builds)[None, :] >= at[:, None],
                          100.0 * (1.0 + sign * size)[:, None], 100.0)
        log_ratio, where = _best_window(levels + rng.normal(0.0, sigma, (series, builds)),
                                        sigma, told_sizes, builds)
        out[size] = float(np.mean((log_ratio >= threshold) & (np.abs(where - at) <= 1)))
    return out
