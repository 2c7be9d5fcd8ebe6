"""kscperf.stats.changepoints: steps, outliers, environment and status events and false discovery
rate control, on seeded synthetic series whose answers are known."""

from __future__ import annotations

import math
import statistics
import random
from typing import Sequence

import pytest

from kscperf.stats import changepoints, core as stats
from kscperf.stats.changepoints import BuildPoint, Change

# Per-process medians around 1 ms with a 1 % spread between processes and another 1 %
# between builds: quiet enough that a 20 % step is unmistakable.
_LEVEL = 1e-3


def _series(levels: Sequence[float], *, seed: int = 1, spread: float = 0.01,
            processes: int = 3, environments: Sequence[str] | None = None,
            statuses: Sequence[str] | None = None) -> list[BuildPoint]:
    """One point per level (a factor on _LEVEL), with seeded lognormal build and process
    noise of `spread`."""
    rng = random.Random(seed)
    points = []
    for i, level in enumerate(levels):
        build = _LEVEL * level * math.exp(rng.gauss(0.0, spread))
        samples = tuple(build * math.exp(rng.gauss(0.0, spread)) for _ in range(processes))
        status = statuses[i] if statuses else "ok"
        if status not in ("ok", "incorrect"):
            samples = ()
        env = environments[i] if environments else "env-a"
        points.append(BuildPoint(samples, status, env, f"detail of {env}" if env else ""))
    return points


def _steps(changes: Sequence[Change]) -> list[Change]:
    return [c for c in changes if c.is_step]


def test_a_constant_series_has_no_change() -> None:
    points = [BuildPoint((2e-3, 2e-3, 2e-3), "ok", "env-a") for _ in range(50)]
    assert changepoints.detect_series(points) == []
    assert changepoints.segments(points, []) == [(0, 49, 2e-3)]


def test_a_20_percent_step_is_found_at_its_build_with_the_compare_statistics() -> None:
    points = _series([1.0] * 40 + [1.2] * 40)
    steps = _steps(changepoints.detect_series(points))
    assert len(steps) == 1
    step = steps[0]
    assert (step.kind, step.before, step.after, step.confirmed) == ("slower", 39, 40, True)
    assert step.ratio is not None and step.low is not None and step.high is not None
    assert step.low <= step.ratio <= step.high
    assert step.ratio == pytest.approx(1.2, rel=0.02)
    assert step.p_value is not None and step.p_value < 1e-6
    # Student's t on the builds' log levels, the build as the unit, its p-value paying for
    # the choice of the split among the 80 builds' splits with no short side, and for the
    # choice between that family and the splits with a short side.
    logs = [math.log(statistics.median(p.samples)) for p in points]
    expected = stats.compare_log_levels(logs[:40], logs[40:])
    assert (step.ratio, step.low, step.high) == (expected.ratio, expected.low, expected.high)
    assert step.p_value == changepoints.SPLIT_FAMILIES * stats.split_search_p_value(
        expected.p_value, 80, changepoints.SHORT_SIDE_BUILDS)


def test_a_speedup_is_faster_and_several_steps_are_all_found() -> None:
    points = _series([1.0] * 30 + [0.8] * 30 + [1.1] * 30)
    steps = _steps(changepoints.detect_series(points))
    assert [(c.kind, c.after) for c in steps] == [("faster", 30), ("slower", 60)]


def test_a_one_build_blip_that_reverts_is_an_outlier_not_a_change() -> None:
    levels = [1.0] * 60
    levels[30] = 1.4
    assert _steps(changepoints.detect_series(_series(levels))) == []


def test_a_blip_next_to_a_step_does_not_hide_it() -> None:
    levels = [1.0] * 30 + [1.25] * 30
    levels[31] = 1.8
    steps = _steps(changepoints.detect_series(_series(levels)))
    assert [(c.kind, c.after) for c in steps] == [("slower", 30)]


def test_a_step_whose_first_build_overshoots_a_little_is_found_at_that_build() -> None:
    # Little noise, and the first build after the step 1 % further out than the rest: still
    # a step at build 5, not a blip at 5 and a step at 6.
    levels = [1.0] * 5 + [1.31] + [1.3] * 4
    steps = _steps(changepoints.detect_series(_series(levels, spread=0.002, processes=5)))
    assert [(c.kind, c.before, c.after) for c in steps] == [("slower", 4, 5)]


@pytest.mark.parametrize("levels", [[1.0, 1.3, 1.0], [1.0, 1.0, 1.3, 1.0]])
def test_a_blip_that_reverts_in_a_short_history_is_no_step(levels: list[float]) -> None:
    assert _steps(changepoints.detect_series(_series(levels, spread=0.005))) == []


def test_a_two_build_excursion_persists_and_is_reported_both_ways() -> None:
    levels = [1.0] * 30 + [1.3] * 2 + [1.0] * 30
    steps = _steps(changepoints.detect_series(_series(levels)))
    assert [(c.kind, c.after) for c in steps] == [("slower", 30), ("faster", 32)]


def test_the_newest_build_opens_an_unconfirmed_change() -> None:
    points = _series([1.0] * 40 + [1.3])
    steps = _steps(changepoints.detect_series(points))
    assert [(c.kind, c.before, c.after, c.confirmed) for c in steps] == [
        ("slower", 39, 40, False)]
    # The next build at the same level confirms it.
    steps = _steps(changepoints.detect_series(_series([1.0] * 40 + [1.3] * 2)))
    assert [(c.after, c.confirmed) for c in steps] == [(40, True)]


def test_histories_of_two_three_and_five_builds() -> None:
    assert changepoints.detect_series([]) == []
    assert changepoints.detect_series(_series([1.0])) == []
    # Two builds: only the processes of each can be tested; the newest opens the change.
    two = _steps(changepoints.detect_series(_series([1.0, 1.3])))
    assert [(c.kind, c.before, c.after, c.confirmed) for c in two] == [
        ("slower", 0, 1, False)]
    assert _steps(changepoints.detect_series(_series([1.0, 1.01]))) == []
    three = _steps(changepoints.detect_series(_series([1.0, 1.3, 1.3])))
    assert [(c.after, c.confirmed) for c in three] == [(1, True)]
    pending = _steps(changepoints.detect_series(_series([1.0, 1.0, 1.3])))
    assert [(c.before, c.after, c.confirmed) for c in pending] == [(1, 2, False)]
    five = _steps(changepoints.detect_series(_series([1.0, 1.0, 1.0, 0.7, 0.7])))
    assert [(c.kind, c.after, c.confirmed) for c in five] == [("faster", 3, True)]
    assert _steps(changepoints.detect_series(_series([1.0] * 5, seed=3))) == []


def test_two_builds_of_one_process_each_cannot_show_a_change() -> None:
    points = _series([1.0, 1.5], processes=1)
    assert _steps(changepoints.detect_series(points)) == []


def test_a_step_below_the_minimum_effect_is_not_a_change() -> None:
    points = _series([1.0] * 40 + [1.03] * 40, spread=0.002)
    assert _steps(changepoints.detect_series(points)) == []
    steps = _steps(changepoints.detect_series(points, min_effect=0.02))
    assert [(c.kind, c.after) for c in steps] == [("slower", 40)]
    assert steps[0].min_effect == 0.02


def test_long_stretches_find_a_step_that_one_build_against_the_next_could_not() -> None:
    # 6 % between builds hides 12 % from one build against the next, and from ten builds
    # against ten (the detectable step); forty builds against forty see it, and the step
    # is found at its build.
    points = _series([1.0] * 40 + [1.12] * 40, spread=0.06)
    assert changepoints.detectable_step(points) > 0.12
    steps = _steps(changepoints.detect_series(points))
    assert [(c.kind, c.after) for c in steps] == [("slower", 40)]
    assert steps[0].min_effect == stats.DEFAULT_MIN_EFFECT


def test_a_step_with_a_short_side_must_lie_wholly_beyond_the_minimum_effect() -> None:
    # 12 % three builds from the end, at 6 % between builds: its interval reaches below
    # 5 %, and next to an edge the search's pick is inflated by the choice, so no step.
    points = _series([1.0] * 77 + [1.12] * 3, spread=0.06)
    assert _steps(changepoints.detect_series(points)) == []
    # 30 % at 0.5 %: plainly beyond, found at its build though its side is short.
    quiet = _series([1.0] * 77 + [1.3] * 3, spread=0.005)
    steps = _steps(changepoints.detect_series(quiet))
    assert [(c.kind, c.after) for c in steps] == [("slower", 77)]
    assert steps[0].low is not None and steps[0].low > 1.05
    # The same 12 % in the middle of the series, forty builds a side, is a step.
    middle = _steps(changepoints.detect_series(_series([1.0] * 40 + [1.12] * 40,
                                                       spread=0.06)))
    assert [c.after for c in middle] == [40]


def _estimate(ratio: float, se_log: float, p_value: float = 1e-6) -> stats.RatioEstimate:
    spread = 1.96 * se_log
    return stats.RatioEstimate(ratio, ratio * math.exp(-spread), ratio * math.exp(spread),
                               p_value, se_log, 50.0, "levels", 30, 30)


def test_a_step_just_under_the_minimum_effect_counts_when_the_data_cannot_rule_it_out(
) -> None:
    # A true 5 % step is estimated under 5 % half the time: within half a standard error of
    # the minimum effect, it still counts; measured tightly enough to rule 5 % out, not.
    assert changepoints.step_direction(_estimate(1.048, 0.01)) == 1
    assert changepoints.step_direction(_estimate(1 / 1.048, 0.01)) == -1
    assert changepoints.step_direction(_estimate(1.048, 0.001)) == 0
    assert changepoints.step_direction(_estimate(1.03, 0.01)) == 0
    assert changepoints.step_direction(_estimate(1.05, 0.0)) == 1
    # Not significant, or a short side whose interval reaches under 5 %: no step.
    assert changepoints.step_direction(_estimate(1.2, 0.01, p_value=0.06)) == 0
    assert changepoints.step_direction(_estimate(1.08, 0.02), short_side=True) == 0
    assert changepoints.step_direction(_estimate(1.2, 0.02), short_side=True) == 1
    # On a series: 3 % at 2 % noise is not reported, 10 % is.
    below = _series([1.0] * 30 + [1.03] * 30, spread=0.02, seed=4)
    assert _steps(changepoints.detect_series(below)) == []
    above = _series([1.0] * 30 + [1.10] * 30, spread=0.02, seed=4)
    assert [c.after for c in _steps(changepoints.detect_series(above))] == [30]


def test_the_search_pays_for_its_choice_of_the_split() -> None:
    from scipy import stats as sps

    # The largest standardized difference over the splits of 60 builds of pure noise
    # reaches 3 in about 4.7 % of series (simulated: tests/test_stats.py), not 0.27 %.
    p = float(2 * sps.norm.sf(3.0))
    assert stats.split_search_p_value(p, 60, 2) == pytest.approx(0.047, abs=0.004)
    assert stats.split_search_p_value(p, 4, 2) == p  # one split: no choice
    assert stats.split_search_p_value(1e-30, 60, 2) < 1e-25


def dataclass_replace(point: BuildPoint, **changes: object) -> BuildPoint:
    import dataclasses

    return dataclasses.replace(point, **changes)  # type: ignore[arg-type]


def test_an_environment_change_is_an_event_never_a_regression() -> None:
    environments = ["torch-2.12"] * 30 + ["torch-2.13"] * 30
    points = _series([1.0] * 30 + [1.3] * 30, environments=environments)
    changes = changepoints.detect_series(points)
    assert [(c.kind, c.before, c.after, c.detail) for c in changes] == [
        ("environment", 29, 30, "detail of torch-2.12 → detail of torch-2.13")]
    assert changes[0].ratio is None and changes[0].p_value is None


def test_a_step_inside_an_environment_is_still_found() -> None:
    environments = ["a"] * 20 + ["b"] * 40
    points = _series([1.0] * 20 + [1.1] * 20 + [1.4] * 20, environments=environments)
    changes = changepoints.detect_series(points)
    assert [(c.kind, c.after) for c in changes] == [("environment", 20), ("slower", 40)]


def test_missing_builds_without_a_fingerprint_are_no_environment_change() -> None:
    environments = ["a"] * 10 + [""] * 2 + ["a"] * 10
    statuses = ["ok"] * 10 + ["missing"] * 2 + ["ok"] * 10
    changes = changepoints.detect_series(_series([1.0] * 22, environments=environments,
                                                 statuses=statuses))
    assert [(c.kind, c.after, c.detail) for c in changes] == [
        ("status", 10, "ok → missing"), ("status", 12, "missing → ok")]


def test_status_flips_are_events_and_their_builds_give_no_level() -> None:
    statuses = ["ok"] * 20 + ["incorrect", "failed", "timeout"] + ["ok"] * 20
    levels = [1.0] * 20 + [3.0, 1.0, 1.0] + [1.0] * 20
    changes = changepoints.detect_series(_series(levels, statuses=statuses))
    assert [(c.kind, c.before, c.after, c.detail) for c in changes] == [
        ("status", 19, 20, "ok → incorrect"), ("status", 20, 21, "incorrect → failed"),
        ("status", 21, 22, "failed → timeout"), ("status", 22, 23, "timeout → ok")]


def test_a_step_across_failed_builds_spans_them() -> None:
    statuses = ["ok"] * 30 + ["failed"] * 3 + ["ok"] * 30
    levels = [1.0] * 33 + [1.25] * 30
    steps = _steps(changepoints.detect_series(_series(levels, statuses=statuses)))
    assert [(c.kind, c.before, c.after) for c in steps] == [("slower", 29, 33)]


def test_nan_and_unusable_samples_are_ignored() -> None:
    points = _series([1.0] * 30 + [1.2] * 30)
    broken = list(points)
    broken[5] = dataclass_replace(points[5], samples=(math.nan, -1.0, math.inf))
    broken[40] = dataclass_replace(points[40], samples=(math.nan, *points[40].samples[1:]))
    broken[10] = dataclass_replace(points[10], samples=())
    steps = _steps(changepoints.detect_series(broken))
    assert [(c.kind, c.after) for c in steps] == [("slower", 30)]
    assert all(math.isfinite(v) for c in steps for v in (c.ratio, c.low, c.high, c.p_value)
               if v is not None)


def test_detection_is_deterministic() -> None:
    points = _series([1.0] * 50 + [0.85] * 50, seed=7)
    assert changepoints.detect_series(points) == changepoints.detect_series(list(points))


def test_pure_noise_gives_no_step_over_many_seeds() -> None:
    found = {seed: _steps(changepoints.detect_series(_series([1.0] * 120, seed=seed)))
             for seed in range(40)}
    assert {seed: s for seed, s in found.items() if s} == {}


def _step(p: float, after: int = 5) -> Change:
    return Change("slower", after - 1, after, 1.2, 1.1, 1.3, p, "")


def test_fdr_control_keeps_events_and_counts_quiet_series() -> None:
    env = Change("environment", 2, 3, None, None, None, None, "a → b")
    status = Change("status", 6, 7, None, None, None, None, "ok → failed")
    alone = changepoints.control_fdr({"s": [env, _step(0.01), status]})
    assert [c.kind for c in alone["s"]] == ["environment", "slower", "status"]
    assert alone["s"][1].q_value == pytest.approx(0.01)
    # Nine quiet series make the same p-value one test of ten: q = 0.1, not kept.
    crowd: dict[str, list[Change]] = {f"quiet{i}": [] for i in range(9)}
    crowd["s"] = [env, _step(0.01), status]
    kept = changepoints.control_fdr(crowd)
    assert [c.kind for c in kept["s"]] == ["environment", "status"]
    assert set(kept) == set(crowd)


def test_fdr_control_is_benjamini_hochberg_across_series() -> None:
    per_series = {"a": [_step(0.001), _step(0.04, after=9)], "b": [_step(0.02)],
                  "c": [_step(0.3)]}
    q = stats.adjust_p_values([0.001, 0.04, 0.02, 0.3])
    kept = changepoints.control_fdr(per_series, fdr=0.05)
    assert q[1] > 0.05 > q[2]
    assert [c.q_value for c in kept["a"]] == [q[0]]
    assert [c.q_value for c in kept["b"]] == [q[2]]
    assert kept["c"] == []


def test_segments_give_the_levels_between_kept_changes() -> None:
    points = _series([1.0] * 20 + [2.0] * 20, spread=0.001)
    changes = changepoints.detect_series(points)
    levels = changepoints.segments(points, changes)
    assert [(a, b) for a, b, _ in levels] == [(0, 19), (20, 39)]
    assert levels[0][2] == pytest.approx(_LEVEL, rel=0.01)
    assert levels[1][2] == pytest.approx(2 * _LEVEL, rel=0.01)


def _slow_in_a_third(points: list[BuildPoint], *, seed: int = 5, factor: float = 1.5
                     ) -> list[BuildPoint]:
    """The same builds with one process `factor` times slower in every third build (a
    shared machine's heavy tail)."""
    rng = random.Random(seed)
    out = []
    for i, p in enumerate(points):
        if i % 3 == 0:
            j = rng.randrange(len(p.samples))
            p = dataclass_replace(p, samples=tuple(v * factor if k == j else v
                                                   for k, v in enumerate(p.samples)))
        out.append(p)
    return out


def test_a_heavy_tailed_series_with_a_slow_process_in_a_third_of_its_builds_finds_its_step(
) -> None:
    points = _slow_in_a_third(_series([1.0] * 30 + [1.1] * 30, spread=0.02))
    steps = _steps(changepoints.detect_series(points))
    assert [(c.kind, c.before, c.after) for c in steps] == [("slower", 29, 30)]
    assert steps[0].ratio == pytest.approx(1.1, rel=0.03)
    # and without a step, the slow processes make none
    quiet = _slow_in_a_third(_series([1.0] * 60, spread=0.02, seed=2))
    assert _steps(changepoints.detect_series(quiet)) == []
    assert changepoints.detectable_step(quiet) < stats.DEFAULT_MIN_EFFECT


def test_processes_the_canary_marked_are_set_aside_from_the_level() -> None:
    # Two of three processes 15 % slow in builds 20 to 25 (too little for the level to set
    # them aside unaided): their medians alone are an excursion, a change and its revert;
    # marked by the canary, they are not.
    points = _series([1.0] * 40, spread=0.01)
    slow = set(range(20, 26))
    marked = [dataclass_replace(p, samples=(p.samples[0] * 1.15, p.samples[1] * 1.15,
                                            p.samples[2]), odd=(0, 1))
              if i in slow else p for i, p in enumerate(points)]
    assert _steps(changepoints.detect_series(marked)) == []
    unmarked = [dataclass_replace(p, odd=()) for p in marked]
    assert [c.after for c in _steps(changepoints.detect_series(unmarked))] == [20, 26]


def test_a_series_too_noisy_to_see_five_percent_says_so() -> None:
    noisy = _series([1.0] * 30 + [1.05] * 30, spread=0.08)
    assert changepoints.detectable_step(noisy) > stats.DEFAULT_MIN_EFFECT
    assert _steps(changepoints.detect_series(noisy)) == []
    quiet = _series([1.0] * 30 + [1.05] * 30, spread=0.005)
    assert changepoints.detectable_step(quiet) < stats.DEFAULT_MIN_EFFECT
    assert [c.after for c in _steps(changepoints.detect_series(quiet))] == [30]
    # a history too short to estimate its builds' scatter falls back on its processes
    short = [dataclass_replace(p, min_detectable=0.3) for p in _series([1.0] * 4)]
    assert changepoints.detectable_step(short) == pytest.approx(0.3)
    assert math.isnan(changepoints.detectable_step([]))


def test_fdr_control_counts_every_test_a_series_made() -> None:
    # One candidate at p = 0.004 beside 9 quiet series: q = 0.04, kept. Counted as one of
    # the 30 lockstep links its series tested, it is one test of 39: q = 0.156, dropped.
    found = {"s": [_step(0.004)], **{f"q{i}": [] for i in range(9)}}
    assert [c.q_value for c in changepoints.control_fdr(found)["s"]] == [pytest.approx(0.04)]
    assert changepoints.control_fdr(found, tests={"s": 30})["s"] == []


def test_a_newest_build_whose_processes_disagree_opens_no_step_alone() -> None:
    # A slow state of the machine that came and went during the newest build's run slowed
    # its three processes by different amounts (1.35x, 1.62x, 1.48x): it waits for the next
    # build. The same 50 % slowdown with the processes moved alike, as a change of the code
    # moves them, opens an unconfirmed step.
    points = _series([1.0] * 40, spread=0.01)
    newest = points[-1]
    disturbed = dataclass_replace(newest, samples=tuple(
        v * f for v, f in zip(newest.samples, (1.35, 1.62, 1.48))))
    waiting = changepoints.detect_series(points[:-1] + [disturbed])
    assert _steps(waiting) == []
    assert [(c.kind, c.before, c.after, c.confirmed) for c in waiting] == [
        ("unsettled", 38, 39, False)]
    assert "processes disagree" in waiting[0].detail
    assert changepoints.control_fdr({0: waiting})[0] == waiting
    moved = dataclass_replace(newest, samples=tuple(v * 1.5 for v in newest.samples))
    steps = _steps(changepoints.detect_series(points[:-1] + [moved]))
    assert [(c.kind, c.after, c.confirmed) for c in steps] == [("slower", 39, False)]
    # Followed by a build at its level, the disturbed build is no longer the newest: the
    # two builds are judged as any others are.
    steps = _steps(changepoints.detect_series(points[:-1] + [disturbed, moved]))
    assert [(c.kind, c.after) for c in steps] == [("slower", 39)]


def test_the_p_values_of_the_steps_found_in_pure_noise_are_honest() -> None:
    # 4,000 series of 60 builds of pure normal noise (5 %, one value per build, the noise
    # where the p-values decide): the candidate steps with p under x are no more than x per
    # series, give or take the simulation (expected 12 at x = 0.003). Before each split paid
    # for both families of splits, 2x as many came through.
    import numpy as np

    rng = np.random.default_rng(20261201)
    p_values = []
    for _ in range(4000):
        values = 100.0 + rng.normal(0.0, 5.0, 60)
        p_values += [c.p_value for c in changepoints.detect_series(
            [BuildPoint((float(v),), "ok", "env") for v in values]) if c.is_step]
    for x in (0.003, 0.01):
        assert sum(p < x for p in p_values) <= 1.5 * x * 4000
