"""The statistics of a bisect's probes and the search over a range, on made-up pair
numbers and made-up probes (the real runs are tests/test_bisect_cli.py)."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from kscperf.bisect.search import Found, default_max_probes, search_range
from kscperf.stats import bisection
from kscperf.stats.bisection import ProbeDecision, ProbeVerdict

STEP = math.log(1.05)
SD = 0.01


def _numbers(level: float, n: int, seed: int = 1, sd: float = SD) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(level, sd) for _ in range(n)]


@pytest.mark.parametrize("level, verdict", [(0.0, ProbeVerdict.LIKE_GOOD),
                                            (STEP, ProbeVerdict.LIKE_BAD),
                                            (STEP / 2, ProbeVerdict.PARTIAL)])
def test_a_probe_says_which_level_its_pairs_are_at(level: float, verdict: ProbeVerdict) -> None:
    d = bisection.probe_decision(_numbers(level, 24), 0.0, STEP, SD, 0.0125)
    assert d.verdict is verdict
    assert 0.0 < d.error <= (2 if verdict is ProbeVerdict.PARTIAL else 1) * 0.0125
    assert d.pairs == 24 and d.ratio_low < math.exp(level) < d.ratio_high


def test_a_probe_decides_nothing_before_its_fewest_pairs_nor_on_a_wild_pair() -> None:
    assert bisection.probe_decision([0.0, 0.0], 0.0, STEP, SD, 0.01).verdict is \
        ProbeVerdict.CANT_TELL
    # One pair 100 steps away is clipped to within one step: three pairs at the good level
    # and one wild one stay like-good.
    d = bisection.probe_decision([0.0, 0.001, -0.001, 100 * STEP], 0.0, STEP, SD / 4, 0.01)
    assert d.verdict is not ProbeVerdict.LIKE_BAD


def test_a_probe_of_a_speed_up_is_oriented_like_a_slow_down() -> None:
    d = bisection.probe_decision(_numbers(-STEP, 12), 0.0, -STEP, SD, 0.01)
    assert d.verdict is ProbeVerdict.LIKE_BAD


def test_noise_as_large_as_the_step_leaves_a_probe_undecided() -> None:
    d = bisection.probe_decision(_numbers(STEP / 2, 3, sd=0.2), 0.0, STEP, 0.2, 0.001)
    assert d.verdict is ProbeVerdict.CANT_TELL and math.isnan(d.error)


def _alternating(level: float, n: int, sd: float) -> list[float]:
    return [level + (sd if k % 2 else -sd) for k in range(n)]


def test_a_probe_at_its_cap_takes_the_side_of_the_midway_level_its_mean_is_on() -> None:
    # A like-bad commit measured at 80 % of the step (an end's level misestimated), its
    # pairs spread 60 % of the step: both sequential tests are still open at 48 pairs, but
    # the mean lies far above the midway level. Only the last look (final) decides on it.
    sd = 0.6 * STEP
    numbers = _alternating(0.8 * STEP, 48, sd)
    assert bisection.probe_decision(numbers, 0.0, STEP, sd, 0.0125).verdict is \
        ProbeVerdict.CANT_TELL
    d = bisection.probe_decision(numbers, 0.0, STEP, sd, 0.0125, final=True)
    assert d.verdict is ProbeVerdict.LIKE_BAD and 0.0 < d.error <= 0.0125
    # The same toward the good end, and a speed-up oriented like a slow-down.
    d = bisection.probe_decision(_alternating(0.2 * STEP, 48, sd), 0.0, STEP, sd, 0.0125,
                                 final=True)
    assert d.verdict is ProbeVerdict.LIKE_GOOD and 0.0 < d.error <= 0.0125
    d = bisection.probe_decision([-x for x in numbers], 0.0, -STEP, sd, 0.0125, final=True)
    assert d.verdict is ProbeVerdict.LIKE_BAD
    # Open, and not far enough from the midway level, it stays can't-tell.
    d = bisection.probe_decision(_alternating(0.62 * STEP, 48, STEP), 0.0, STEP, STEP, 0.0125,
                                 final=True)
    assert d.verdict is ProbeVerdict.CANT_TELL and math.isnan(d.error)


def test_the_truncated_probe_error_rate_holds_on_simulated_pairs() -> None:
    # 2,000 probes at the midway level (the hypothesis the last look's test is against),
    # run to 48 pairs as a probe is at its cap: on either side at most alpha of the time.
    rng = random.Random(11)
    decided = 0
    for _ in range(2000):
        numbers = [rng.gauss(STEP / 2, STEP) for _ in range(48)]
        d = bisection.probe_decision(numbers, 0.0, STEP, STEP, 0.05, final=True)
        decided += d.verdict in (ProbeVerdict.LIKE_GOOD, ProbeVerdict.LIKE_BAD)
    assert decided <= 2 * 0.05 * 2000 * 1.3


def test_the_probe_error_rate_holds_on_simulated_pairs() -> None:
    # 2,000 probes of a commit at the good level, 3 to 24 pairs each: like-bad at most
    # alpha of the time (in truth far less, the bound being for the midway level).
    rng = random.Random(7)
    wrong = 0
    for _ in range(2000):
        numbers: list[float] = []
        while True:
            numbers.append(rng.gauss(0.0, SD))
            d = bisection.probe_decision(numbers, 0.0, STEP, SD, 0.05)
            if d.verdict is not ProbeVerdict.CANT_TELL or len(numbers) == 24:
                break
        wrong += d.verdict is ProbeVerdict.LIKE_BAD
    assert wrong <= 0.05 * 2000 / 10


def test_a_step_is_shown_ruled_out_or_open() -> None:
    assert bisection.check_step(_numbers(STEP, 8), 0.0025).shown is True
    assert bisection.check_step(_numbers(0.0, 16, sd=0.005), 0.0025).shown is False
    # A significant difference of 1 % lies within the 2 %: no step to bisect.
    assert bisection.check_step(_numbers(0.01, 32, sd=0.002), 0.0025).shown is False
    assert bisection.check_step(_numbers(0.0, 4, sd=0.05), 0.0025).shown is None
    assert bisection.check_step([0.1], 0.01).shown is None


def test_a_difference_within_the_no_step_band_is_never_shown() -> None:
    # As an A/A bisect of two checkouts met it: 0.988x [0.979x, 0.997x] over 16 pairs,
    # significant and not within the 2 % either.
    numbers = _numbers(math.log(0.988), 16, sd=0.016)
    check = bisection.check_step(numbers, 0.0025)
    assert check.estimate.p_value < 0.05 and check.estimate.low < 1 / 1.02
    assert check.shown is None and check.p_value > 0.05
    # The same spread about a 5 % step: shown, its p against the band's edge.
    step = bisection.check_step(_numbers(math.log(1.05), 16, sd=0.016), 0.0025)
    assert step.shown is True and step.estimate.p_value < step.p_value < 0.0025
    # Identical numbers: known exactly, and judged against the band as well.
    exact = bisection.check_step([0.005] * 8, 0.0025)
    assert exact.shown is False and exact.p_value == 1.0
    assert bisection.check_step([0.03] * 8, 0.0025).p_value == 0.0


def test_the_pooled_spread_is_of_each_group_about_its_own_mean() -> None:
    assert bisection.pooled_sd([[0.0, 0.02], [1.0, 1.02]]) == pytest.approx(math.sqrt(0.0002))
    assert bisection.pooled_sd([[5.0, 5.0]]) == bisection.MIN_PAIR_SD
    assert math.isnan(bisection.pooled_sd([[1.0]]))


def test_a_culprit_error_adds_its_verdicts_and_its_verification() -> None:
    assert bisection.culprit_error([0.01, 0.0], 0.002) == pytest.approx(0.012)
    assert bisection.culprit_error([0.5, 0.7], 0.1) == 1.0
    assert bisection.culprit_error([0.0, 0.0], math.nan) == 1.0


class _Planted:
    """A range whose commits' levels are planted: commit i is at levels[i]; `broken`
    commits are untestable. Says the verdict a perfect probe would."""

    def __init__(self, levels: list[float], broken: set[int] = set()) -> None:
        self.levels, self.broken, self.asked = levels, broken, []

    def __call__(self, i: int, low: float, high: float) -> ProbeDecision | None:
        self.asked.append(i)
        if i in self.broken:
            return None
        level = self.levels[i]
        width = high - low
        y = (level - low) / width
        verdict = (ProbeVerdict.LIKE_GOOD if y < 0.25 else ProbeVerdict.LIKE_BAD if y > 0.75
                   else ProbeVerdict.PARTIAL)
        return ProbeDecision(verdict, level, math.exp(level), math.exp(level), 0.001, 3)


def _levels(count: int, steps: dict[int, float]) -> list[float]:
    level, out = 0.0, []
    for i in range(count):
        level += steps.get(i, 0.0)
        out.append(level)
    return out


def test_one_culprit_among_64_is_found_in_log2_probes() -> None:
    probe = _Planted(_levels(64, {37: STEP}))
    searched = search_range(64, STEP, probe)
    assert [(f.parent, f.last) for f in searched.found] == [(36, 37)]
    assert searched.found[0].is_culprit and len(probe.asked) == 6
    assert searched.found[0].errors == (0.001, 0.001)


def test_untestable_commits_before_the_culprit_make_a_range_never_a_commit() -> None:
    probe = _Planted(_levels(64, {40: STEP}), broken={36, 37, 38, 39})
    searched = search_range(64, STEP, probe)
    assert [list(f.commits) for f in searched.found] == [[36, 37, 38, 39, 40]]
    assert searched.untestable == [36, 37, 38, 39] and not searched.found[0].is_culprit


def test_two_culprits_split_at_a_partial_probe_and_rank_by_size() -> None:
    small, large = math.log(1.04), math.log(1.06)
    probe = _Planted(_levels(64, {20: small, 45: large}))
    searched = search_range(64, small + large, probe)
    assert [(f.parent, f.last) for f in searched.found] == [(44, 45), (19, 20)]


def test_the_search_stops_at_its_probe_cap_with_what_is_left_as_a_range() -> None:
    probe = _Planted(_levels(64, {37: STEP}))
    searched = search_range(64, STEP, probe, max_probes=2)
    assert searched.capped and len(probe.asked) == 2
    assert not searched.found[0].is_culprit and 37 in searched.found[0].commits
    assert default_max_probes(64) == 32


def test_a_commit_that_cannot_tell_is_skipped_for_its_neighbour() -> None:
    levels = _levels(16, {9: STEP})

    def probe(i: int, low: float, high: float) -> ProbeDecision | None:
        if i == 8:
            return ProbeDecision(ProbeVerdict.CANT_TELL, 0.0, 1.0, 1.0, math.nan, 24)
        return _Planted(levels)(i, low, high)

    searched = search_range(16, STEP, probe)
    # 8 cannot tell, so the culprit 9 lies in a range after 7: 8 and 9.
    assert [list(f.commits) for f in searched.found] == [[8, 9]]


def _false_partial_at(partial: int, level: float, culprit: int = 50,
                      cant_tell_after: bool = True) -> tuple[list[int], Any]:
    """A culprit at `culprit` of 64 whose probe at `partial` says partial at `level` (a
    noisy confirmation's doing), every commit after it can't-tell when `cant_tell_after`:
    the probes asked, and the probe."""
    planted = _Planted(_levels(64, {culprit: STEP}))
    asked: list[int] = []

    def probe(i: int, low: float, high: float) -> ProbeDecision | None:
        asked.append(i)
        if i == partial:
            return ProbeDecision(ProbeVerdict.PARTIAL, level, 1.0, 1.0, 0.001, 10)
        if cant_tell_after and i > partial:
            return ProbeDecision(ProbeVerdict.CANT_TELL, STEP, 1.0, 1.0, math.nan, 48)
        return planted(i, low, high)

    return asked, probe


def too_small(low: float, high: float) -> bool:
    return (high - low) / STEP < 0.25


def test_a_range_too_small_to_hold_is_left_at_its_first_cant_tell() -> None:
    # A false partial at 55 leaves the part 55..63 with a fifth of the step: its first
    # can't-tell ends it (the caller's verification rejects it).
    asked, probe = _false_partial_at(55, 0.8 * STEP)
    searched = search_range(64, STEP, probe, too_small=too_small)
    assert sorted((f.parent, f.last) for f in searched.found) == [(49, 50), (55, 63)]
    assert [i for i in asked if i > 55] == [59] and not searched.capped


def test_a_range_whose_middle_and_a_neighbour_cannot_tell_is_left_unsplit() -> None:
    # A false partial at 55 with a third of the step left (not too small): the middle of
    # 55..63 and one neighbour say can't-tell, and the range is left for verification,
    # not probed at each of its seven commits at a cap each.
    asked, probe = _false_partial_at(55, 0.65 * STEP)
    searched = search_range(64, STEP, probe, too_small=too_small)
    assert sorted((f.parent, f.last) for f in searched.found) == [(49, 50), (55, 63)]
    assert [i for i in asked if i > 55] == [59, 58] and not searched.capped


def test_a_false_partial_whose_upper_part_holds_nothing_is_called_like_bad() -> None:
    # A culprit at 20: the probe of 31 (at the bad level) says partial at a third of the
    # step, so the part above it would be searched first; the split check finds no step
    # above 31, the verdict becomes like-bad, and the search goes on below it alone.
    asked, probe = _false_partial_at(31, STEP / 3, culprit=20, cant_tell_after=False)
    checked: list[tuple[int, int]] = []

    def split_check(middle: int, upper: int, d: ProbeDecision) -> ProbeDecision:
        checked.append((middle, upper))
        return ProbeDecision(ProbeVerdict.LIKE_BAD, d.level, d.ratio_low, d.ratio_high,
                             0.003, d.pairs)

    searched = search_range(64, STEP, probe, split_check=split_check)
    assert checked == [(31, 63)]
    assert [(f.parent, f.last) for f in searched.found] == [(19, 20)]
    assert all(i < 31 for i in asked[1:]) and searched.found[0].errors[1] == 0.001


def test_a_partial_whose_lower_part_is_larger_is_not_checked() -> None:
    small, large = math.log(1.04), math.log(1.06)
    probe = _Planted(_levels(64, {20: large, 45: small}))
    checked: list[int] = []

    def split_check(middle: int, upper: int, d: ProbeDecision) -> ProbeDecision:
        checked.append(middle)
        return d

    searched = search_range(64, small + large, probe, split_check=split_check)
    assert checked == [] and [(f.parent, f.last) for f in searched.found] == [(19, 20), (44, 45)]


def test_the_search_stops_once_the_found_parts_explain_the_step() -> None:
    # A false partial at 47 (the culprit is 50, 47 at the good level) leaves the part
    # 31..47 below it; the part above is larger and is searched first, and once its
    # culprit is found (and, for the caller, holds) nothing else is probed.
    asked, probe = _false_partial_at(47, 0.3 * STEP, cant_tell_after=False)
    found: list[tuple[int, int]] = []

    def on_found(part: Found) -> bool:
        found.append((part.parent, part.last))
        return part.is_culprit

    searched = search_range(64, STEP, probe, on_found=on_found)
    assert found == [(49, 50)] and searched.left_unsearched == 1
    assert [(f.parent, f.last) for f in searched.found] == [(49, 50)]
    assert len(asked) == 6


def test_a_part_short_of_a_quarter_of_the_step_has_a_small_p() -> None:
    quarter = 0.25 * STEP
    near_nothing = [0.001, -0.002, 0.0015, 0.0, -0.001, 0.002, 0.0005, -0.0005]
    assert bisection.part_short_p(near_nothing, quarter) < 0.001
    assert bisection.part_short_p([x + quarter for x in near_nothing], quarter) > 0.3
    # A step the other way: the direction is the part's sign.
    assert bisection.part_short_p([-x - 2 * quarter for x in near_nothing], -quarter) > 0.9
    assert bisection.part_short_p([0.01], quarter) == 1.0
