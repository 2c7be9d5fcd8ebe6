"""tools/bisect-bench's scoring of one bisect against its planted truth: what issue 30's
targets count as exact and as wrong."""

from __future__ import annotations

import math

from validation.bisect_bench import Outcome, Trial, score_bisect
from validation.bisect_repo import Scenario


def _out(verdict: str, named: list[int], ranges: list[list[int]] | None = None,
         errors: list[float] | None = None, flagged: bool = False) -> Outcome:
    return Outcome(verdict, named, errors if errors is not None else [0.01] * len(named),
                   ranges or [], 8, 60.0, 1.0, flagged)


def test_a_range_that_holds_a_culprit_is_not_wrong_but_not_exact() -> None:
    trial = Trial("two", Scenario(64, {18: 104, 56: 110}), {18: 0.04, 56: 0.06})
    s = score_bisect(trial, _out("range", [56, 19], [[18, 19]]))
    assert s == {"exact": False, "wrong": False, "wrong_confident": False}
    assert score_bisect(trial, _out("culprit", [56, 18]))["exact"]
    assert score_bisect(trial, _out("culprit", [56], flagged=True))["exact"]
    wrong = score_bisect(trial, _out("range", [56, 12], [[11, 12]]))
    assert wrong["wrong"] and wrong["wrong_confident"]


def test_untestable_needs_the_whole_range_and_never_a_single_commit() -> None:
    trial = Trial("untestable", Scenario(64, {27: 105}, frozenset(range(23, 27))), {27: 0.05})
    assert score_bisect(trial, _out("range", [27], [[23, 24, 25, 26, 27]]))["exact"]
    alone = score_bisect(trial, _out("culprit", [27]))
    assert not alone["exact"] and alone["wrong"]
    outside = score_bisect(trial, _out("range", [27, 11], [[23, 24, 25, 26, 27], [9, 10, 11]],
                                       [0.02, 0.017]))
    assert outside["wrong"] and outside["wrong_confident"]


def test_an_error_that_is_not_stated_is_never_confident() -> None:
    trial = Trial("one", Scenario(64, {30: 105}), {30: 0.05})
    s = score_bisect(trial, _out("culprit", [63], errors=[math.nan]))
    assert s["wrong"] and not s["wrong_confident"]
    assert score_bisect(trial, _out("culprit", [30]))["exact"]
    aa = Trial("aa", Scenario(64), {})
    assert score_bisect(aa, _out("not-reproduced", []))["exact"]
    assert score_bisect(aa, _out("range", [40], [[39, 40]]))["wrong"]
