"""kscperf.stats.core: intervals, tests, multiple-comparison adjustment, detectable effects and
geometric means, on seeded synthetic samples with known shifts."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from scipy import stats as sps

from kscperf.stats import core as stats


def _runs(rng: random.Random, *, processes: int = 3, values: int = 10, scale: float = 1.0,
          process_sd: float = 0.01, value_sd: float = 0.005) -> list[list[float]]:
    out = []
    for _ in range(processes):
        effect = scale * math.exp(rng.gauss(0.0, process_sd))
        out.append([effect * math.exp(rng.gauss(0.0, value_sd)) for _ in range(values)])
    return out


def test_existing_helpers_keep_their_behaviour() -> None:
    assert math.isnan(stats.median([]))
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median_abs_dev([5.0]) == 0.0
    assert stats.median_abs_dev([1.0, 2.0, 4.0]) == 1.0
    assert stats.speedup(2.0, 1.0) == 2.0
    assert math.isnan(stats.speedup(0.0, 1.0))


def test_named_thresholds() -> None:
    assert stats.DEFAULT_MIN_EFFECT == 0.05
    assert 0 < stats.ALPHA < 0.5
    assert stats.MIN_PROCESSES == 3


def test_a_known_20_percent_shift_is_estimated_and_significant() -> None:
    rng = random.Random(1)
    base, new = _runs(rng), _runs(rng, scale=1.2)
    est = stats.compare_samples(base, new)
    assert est.method == "processes"
    assert (est.n_base, est.n_new) == (3, 3)
    assert est.ratio == pytest.approx(1.2, rel=0.03)
    assert est.low < est.ratio < est.high
    assert est.low > 1.0
    assert est.p_value < 0.01


def test_the_ratio_is_the_one_the_process_test_is_about() -> None:
    # With MIN_PROCESSES a side: the ratio of the geometric means of the process medians,
    # the estimate of the Welch test on their logs, not the ratio of pooled medians beside it.
    rng = random.Random(2)
    base, new = _runs(rng), _runs(rng, scale=0.7)
    est = stats.compare_samples(base, new)
    lb = [math.log(m) for m in stats.process_medians(base)]
    ln = [math.log(m) for m in stats.process_medians(new)]
    assert est.ratio == pytest.approx(math.exp(sum(ln) / 3 - sum(lb) / 3), rel=1e-12)
    assert est.ratio == pytest.approx(stats.process_level(new) / stats.process_level(base),
                                      rel=1e-12)
    pooled_b = [v for r in base for v in r]
    pooled_n = [v for r in new for v in r]
    assert est.ratio != pytest.approx(stats.median(pooled_n) / stats.median(pooled_b), rel=1e-4)
    # The interval is the test's: it excludes 1 exactly when p < 0.05.
    assert (est.high < 1.0 or est.low > 1.0) == (est.p_value < 0.05)
    # With fewer processes the values are pooled, and the ratio is that of pooled medians.
    few = stats.compare_samples(base[:2], new[:2])
    assert few.method == "values"
    assert few.ratio == stats.ratio_of_medians([v for r in base[:2] for v in r],
                                               [v for r in new[:2] for v in r])


def test_process_test_uses_welch_on_log_process_medians() -> None:
    rng = random.Random(3)
    base, new = _runs(rng, process_sd=0.03), _runs(rng, process_sd=0.01, scale=1.1)
    est = stats.compare_samples(base, new)
    lb = [math.log(m) for m in stats.process_medians(base)]
    ln = [math.log(m) for m in stats.process_medians(new)]
    vb, vn = sps.tvar(lb) / 3, sps.tvar(ln) / 3
    assert est.se_log == pytest.approx(math.sqrt(vb + vn))
    assert est.df == pytest.approx((vb + vn) ** 2 / (vb**2 / 2 + vn**2 / 2))
    t = math.log(est.ratio) / est.se_log
    assert est.p_value == pytest.approx(2 * sps.t.sf(abs(t), est.df))


@pytest.mark.parametrize("seed", range(20))
def test_interval_and_p_value_agree_and_hold_the_ratio(seed: int) -> None:
    rng = random.Random(seed)
    shift = rng.choice([1.0, 1.02, 1.05, 1.1])
    est = stats.compare_samples(_runs(rng, process_sd=0.02), _runs(rng, process_sd=0.02,
                                                                    scale=shift))
    assert est.low <= est.ratio <= est.high
    # The Wald interval and the t-test come from one model: they cannot disagree.
    assert (est.p_value < stats.ALPHA) == (est.low > 1.0 or est.high < 1.0)


def test_fewer_than_three_processes_pool_the_values() -> None:
    rng = random.Random(4)
    base = _runs(rng, processes=1, values=10)
    new = _runs(rng, processes=1, values=10, scale=1.3)
    est = stats.compare_samples(base, new)
    assert est.method == "values"
    assert (est.n_base, est.n_new) == (10, 10)
    expected = sps.mannwhitneyu(new[0], base[0], alternative="two-sided").pvalue
    assert est.p_value == pytest.approx(expected)
    assert est.low <= est.ratio <= est.high
    assert est.low > 1.0
    # A fixed seed: the bootstrap gives the same interval every time.
    assert stats.compare_samples(base, new) == est


def test_one_value_against_one_is_no_evidence() -> None:
    est = stats.compare_samples([[1.0]], [[2.0]])
    assert est.ratio == 2.0
    assert est.p_value == 1.0
    assert stats.classify_change(est.ratio, est.p_value) == 0


def test_identical_deterministic_values() -> None:
    same = stats.compare_samples([[5.0]] * 3, [[5.0]] * 3)
    assert (same.ratio, same.low, same.high, same.p_value) == (1.0, 1.0, 1.0, 1.0)
    grown = stats.compare_samples([[100.0]] * 3, [[110.0]] * 3)
    assert grown.ratio == pytest.approx(1.1)
    assert grown.p_value == 0.0
    assert stats.min_detectable_effect(grown.se_log, grown.df) == 0.0


def test_unusable_values_are_ignored_and_empty_sides_give_nan() -> None:
    rng = random.Random(5)
    base = _runs(rng)
    dirty = [r + [0.0, -1.0, math.nan, math.inf] for r in base]
    assert stats.compare_samples(dirty, base).ratio == pytest.approx(1.0)
    nothing = stats.compare_samples([], base)
    assert nothing.method == "none"
    assert math.isnan(nothing.ratio) and math.isnan(nothing.p_value)
    assert stats.compare_samples([[0.0, -2.0]], base).method == "none"


def test_process_noise_makes_no_false_alarms_where_pooled_values_make_many() -> None:
    # The reason for testing on processes: 200 benchmarks with 3 % process-to-process
    # noise, compared with a copy of themselves.
    rng = random.Random(6)
    pairs = [(_runs(rng, process_sd=0.03, value_sd=0.003),
              _runs(rng, process_sd=0.03, value_sd=0.003)) for _ in range(200)]
    pooled_alarms = 0
    p_values, ratios = [], []
    for base, new in pairs:
        pooled_p = sps.mannwhitneyu([v for r in new for v in r], [v for r in base for v in r],
                                    alternative="two-sided").pvalue
        est = stats.compare_samples(base, new)
        pooled_alarms += stats.classify_change(est.ratio, pooled_p, alpha=0.01) != 0
        p_values.append(est.p_value)
        ratios.append(est.ratio)
    q_values = stats.adjust_p_values(p_values)
    alarms = sum(stats.classify_change(r, q) != 0 for r, q in zip(ratios, q_values))
    assert pooled_alarms >= 3
    assert alarms == 0


def test_benjamini_hochberg() -> None:
    p = [0.01, 0.04, 0.03, 0.2, math.nan]
    q = stats.adjust_p_values(p)
    # Sorted p: 0.01, 0.03, 0.04, 0.2 (m = 4): q = min over ranks >= i of p * m / rank.
    assert q[0] == pytest.approx(0.04)
    assert q[2] == pytest.approx(0.04 * 4 / 3)
    assert q[1] == pytest.approx(0.04 * 4 / 3)
    assert q[3] == pytest.approx(0.2)
    assert math.isnan(q[4])
    assert all(qi >= pi for pi, qi in zip(p[:4], q[:4]))
    assert stats.adjust_p_values([]) == []
    assert stats.adjust_p_values([0.9, 0.95]) == [0.95, 0.95]


@pytest.mark.parametrize(("ratio", "p", "expected"), [
    (1.05, 0.001, 1),
    (1.2, 0.001, 1),
    (1.049, 0.001, 0),
    (1 / 1.05, 0.001, -1),
    (0.96, 0.001, 0),
    (0.5, 0.001, -1),
    (1.5, stats.ALPHA, 0),
    (1.5, math.nan, 0),
    (math.nan, 0.001, 0),
])
def test_classify_change(ratio: float, p: float, expected: int) -> None:
    assert stats.classify_change(ratio, p) == expected


def test_classify_change_with_another_minimum_effect() -> None:
    assert stats.classify_change(1.03, 0.001, min_effect=0.02) == 1
    assert stats.classify_change(1.03, 0.001, min_effect=0.05) == 0


def test_min_detectable_effect() -> None:
    se, df = 0.02, 4.0
    expected = math.expm1((sps.t.ppf(1 - stats.ALPHA / 2, df) + sps.t.ppf(0.8, df)) * se)
    assert stats.min_detectable_effect(se, df) == pytest.approx(expected)
    assert stats.min_detectable_effect(2 * se, df) > stats.min_detectable_effect(se, df)
    assert stats.min_detectable_effect(se, math.inf) < stats.min_detectable_effect(se, df)
    assert stats.min_detectable_effect(0.0, df) == 0.0
    assert math.isnan(stats.min_detectable_effect(math.nan, df))


def test_min_detectable_effect_of_one_build() -> None:
    rng = random.Random(7)
    quiet = stats.min_detectable_effect_of_runs(_runs(rng, process_sd=0.002))
    noisy = stats.min_detectable_effect_of_runs(_runs(rng, process_sd=0.05))
    assert 0 < quiet < 0.05 < noisy
    pooled = stats.min_detectable_effect_of_runs(_runs(rng, processes=1))
    assert 0 < pooled < 0.05
    assert math.isnan(stats.min_detectable_effect_of_runs([[1.0]]))


def test_geometric_mean() -> None:
    assert stats.geometric_mean([1.0, 4.0]) == pytest.approx(2.0)
    assert stats.geometric_mean([2.0, math.nan, 0.0, 8.0]) == pytest.approx(4.0)
    assert math.isnan(stats.geometric_mean([]))


def test_geometric_mean_interval() -> None:
    gm, low, high = stats.geometric_mean_interval([1.1, 1.3], [0.02, 0.02], [4.0, 4.0])
    assert gm == pytest.approx(math.sqrt(1.1 * 1.3))
    assert low < gm < high
    # Two benchmarks average their errors: narrower than either one's own interval.
    half = sps.t.ppf(1 - stats.ALPHA / 2, 8.0) * math.sqrt(2 * 0.02**2) / 2
    assert math.log(high / gm) == pytest.approx(half)
    assert stats.geometric_mean_interval([1.2], [0.0], [math.inf]) == (1.2, 1.2, 1.2)
    gm, low, high = stats.geometric_mean_interval([1.2, 0.9], [0.01, math.nan], [4.0, 4.0])
    assert math.isfinite(gm) and math.isnan(low) and math.isnan(high)
    assert all(math.isnan(x) for x in stats.geometric_mean_interval([], [], []))


def _lockstep_pairs(rng: random.Random, *, scale: float, processes: int = 3, values: int = 10,
                    slow_factor: float = 1.5, switch: float = 0.2, value_sd: float = 0.01
                    ) -> list[tuple[list[float], list[float]]]:
    """Two builds taking turns on a machine that switches between a fast and a slow state
    (Markov, `switch` chance per turn): neighbouring values mostly share the state."""
    pairs = []
    slow = rng.random() < 0.5
    for _ in range(processes):
        base, new = [], []
        for _ in range(values):
            for side, out in ((1.0, base), (scale, new)):
                if rng.random() < switch / 2:
                    slow = not slow
                out.append(side * (slow_factor if slow else 1.0)
                           * math.exp(rng.gauss(0.0, value_sd)))
        pairs.append((base, new))
    return pairs


def test_lockstep_pairs_resolve_20_percent_that_unpaired_processes_cannot() -> None:
    rng = random.Random(7)
    found_paired = found_unpaired = 0
    for _ in range(20):
        pairs = _lockstep_pairs(rng, scale=1.2)
        paired = stats.compare_paired_samples(pairs)
        assert paired.method == "pairs" and (paired.n_base, paired.n_new) == (3, 3)
        assert paired.df == 2
        assert paired.low <= paired.ratio <= paired.high
        found_paired += paired.p_value < stats.ALPHA and paired.low > 1.1
        unpaired = stats.compare_samples([b for b, _ in pairs], [n for _, n in pairs])
        found_unpaired += unpaired.p_value < stats.ALPHA and unpaired.low > 1.0
    assert found_paired >= 19
    assert found_unpaired <= 12


def test_lockstep_pairs_of_one_build_rarely_differ() -> None:
    rng = random.Random(8)
    p_values = [stats.compare_paired_samples(_lockstep_pairs(rng, scale=1.0)).p_value
                for _ in range(300)]
    assert sum(p < stats.ALPHA for p in p_values) <= 0.09 * len(p_values)


def test_paired_estimate_is_the_mean_of_per_pair_median_log_ratios() -> None:
    pairs = [([1.0, 2.0, 1.0], [1.1, 2.4, 1.1]), ([3.0, 3.0], [3.3, 3.6]),
             ([1.0], [1.2])]
    logs = [math.log(1.1), stats.median([math.log(1.1), math.log(1.2)]), math.log(1.2)]
    est = stats.compare_paired_samples(pairs)
    assert est.ratio == pytest.approx(math.exp(sum(logs) / 3))
    se = sps.tstd(logs) / math.sqrt(3)
    assert est.se_log == pytest.approx(se)
    t = sps.t.ppf(0.975, 2)
    assert est.high == pytest.approx(est.ratio * math.exp(t * se))


def test_paired_falls_back_to_unpaired_with_one_pair_and_drops_unusable_values() -> None:
    rng = random.Random(9)
    base, new = _runs(rng, processes=1), _runs(rng, processes=1, scale=1.2)
    one = stats.compare_paired_samples([(base[0], new[0]), ([], [1.0])])
    assert one == stats.compare_samples([base[0], []], [new[0], [1.0]])
    assert one.method == "values"
    exact = stats.compare_paired_samples([([1.0, -1.0, math.nan], [2.0, 2.0]), ([1.0], [2.0])])
    assert exact.method == "pairs" and exact.ratio == pytest.approx(2.0)
    assert exact.p_value == 0.0 and exact.low == exact.high == exact.ratio
    # A bad value drops its position only: the pairs after it stay aligned.
    aligned = stats.compare_paired_samples([([1.0, math.nan, 3.0, 5.0], [1.2, 9.0, 3.6, 6.0]),
                                            ([2.0, 4.0], [2.4, 4.8])])
    assert aligned.ratio == pytest.approx(1.2) and aligned.se_log == pytest.approx(0.0)




def test_the_split_search_p_value_matches_a_simulated_search_of_pure_noise() -> None:
    import numpy as np
    from scipy import stats as sps

    # The largest standardized difference over the splits of 60 builds of pure noise,
    # each side at least 2 builds: how often it reaches b, against the approximation.
    rng = np.random.default_rng(7)
    n, side = 60, 2
    y = rng.normal(size=(6000, n))
    sums = np.cumsum(y, axis=1)
    k = np.arange(1, n)
    left = sums[:, :-1]
    z = (left / k - (sums[:, -1:] - left) / (n - k)) / np.sqrt(1 / k + 1 / (n - k))
    largest = np.abs(z[:, side - 1:n - side]).max(axis=1)
    for b in (2.5, 3.0, 3.5):
        simulated = float((largest > b).mean())
        approximated = stats.split_search_p_value(float(2 * sps.norm.sf(b)), n, side)
        assert approximated == pytest.approx(simulated, rel=0.15, abs=0.003)
    assert stats.split_search_significance(0.05, n, side) == pytest.approx(
        0.0029, rel=0.05)
    assert stats.split_search_p_value(stats.split_search_significance(0.05, n, side), n,
                                      side) == pytest.approx(0.05, rel=1e-4)


def test_compare_log_levels_is_students_t_on_the_logs() -> None:
    from scipy import stats as sps

    base, new = [0.0, 0.01, -0.01, 0.02], [0.10, 0.12, 0.09]
    est = stats.compare_log_levels(base, new)
    expected = sps.ttest_ind(new, base, equal_var=True)
    assert est.method == "levels" and est.df == 5.0
    assert est.p_value == pytest.approx(float(expected.pvalue))
    assert est.ratio == pytest.approx(math.exp(statistics.fmean(new) - statistics.fmean(base)))
    assert est.low < est.ratio < est.high
    assert stats.compare_log_levels([0.0], [0.1]).method == "none"
