"""The search of a bisect, as data: given a probe that says where a commit's level lies
between the levels of a range's two ends, the commits (or the stretches of commits that
could not be split) where the step's parts lie, largest first.

Commits are numbered 0 (the good end) to `count - 1` (the bad end); levels are log times
over the good end's, so the good end is at 0 and the bad end at the confirmed step. A
range is split at its middle testable commit (the earlier of two middles); a like-good
verdict moves its lower end up, a like-bad one its upper end down, and a partial one splits
it in two, each part with the probed level as one end. A commit that cannot be built or run
is untestable and skipped; one that the probe cannot tell within its cap is skipped for that
range, and a neighbour is tried. A range whose middle and a neighbour both cannot tell is
left as it stands, for the caller's verification to keep or reject: two commits that the
probe cannot place within its cap say that the range's two levels are too close for it
(its lower end a partial verdict's noisy level, most often), and probing every other
commit would cost a cap each. A range the caller calls too small to hold is left after its
first can't-tell. A range with nothing left to probe inside is the answer: one commit when its ends are
neighbours, else the stretch after its lower end (`range`), never a guess inside it.

Two hooks let the caller spend a comparison where a noisy level would cost many. A partial
verdict whose part above the probed commit looks at least as large as the part below (so it
would be searched first) is handed to `split_check`, which may call it like-bad: a commit
at the upper end's level that a noisy level made look partial splits off a part that holds
nothing. And each part is handed to `on_found` as soon as it is found, which may end the
search: once the parts that hold explain the step, what is left cannot hold a part large
enough to verify.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Callable

from kscperf.stats.bisection import ProbeDecision, ProbeVerdict

__all__ = ["Found", "Searched", "Prober", "TooSmall", "SplitCheck", "OnFound", "search_range",
           "default_max_probes", "CANT_TELLS_A_RANGE"]

# Commits of one range that may say can't-tell before the range is left unsplit: its
# middle and one neighbour.
CANT_TELLS_A_RANGE = 2

# Told (commit index, lower-end level, upper-end level); says the commit's verdict, or None
# when the commit is untestable.
Prober = Callable[[int, float, float], "ProbeDecision | None"]
# Told a range's (lower-end level, upper-end level); says whether its step is too small to
# hold at verification.
TooSmall = Callable[[float, float], bool]
# Told (probed commit, the range's upper end, the partial verdict); says the verdict to act
# on: the same, or like-bad when no part lies above the commit.
SplitCheck = Callable[[int, int, ProbeDecision], ProbeDecision]
# Told a part as soon as it is found; says whether the search may stop there.
OnFound = Callable[["Found"], bool]


@dataclass(frozen=True)
class Found:
    """Where one part of the step lies: between commit `parent` (at `low_level`) and
    commit `last` (at `high_level`), every commit after `parent` up to `last` a candidate;
    one commit (`is_culprit`) when `last` is `parent`'s child. `errors` are the error bounds
    of the two verdicts that put the part there (0 for an end of the bisected range, whose
    step the confirmation showed)."""

    parent: int
    last: int
    low_level: float
    high_level: float
    errors: tuple[float, float]

    @property
    def is_culprit(self) -> bool:
        """Whether the part lies at one commit."""
        return self.last == self.parent + 1

    @property
    def commits(self) -> range:
        """The candidate commits, oldest first."""
        return range(self.parent + 1, self.last + 1)


@dataclass(frozen=True)
class Searched:
    """What the search found (largest part first), which commits were untestable,
    whether it stopped at its probe cap with ranges left unsplit, and how many ranges it
    left unsearched because `on_found` said the step was explained."""

    found: list[Found]
    untestable: list[int]
    capped: bool
    left_unsearched: int = 0


@dataclass(order=True)
class _Range:
    priority: float
    order: int
    lo: int = field(compare=False)
    hi: int = field(compare=False)
    low_level: float = field(compare=False)
    high_level: float = field(compare=False)
    errors: tuple[float, float] = field(compare=False)
    skipped: frozenset[int] = field(compare=False, default=frozenset())


def default_max_probes(count: int) -> int:
    """The probe cap of a range of `count` commits: room for four culprits' binary
    searches and their neighbours (Pinpoint caps a job at 60 changes)."""
    return 4 * max(1, math.ceil(math.log2(max(2, count)))) + 8


def search_range(count: int, step_level: float, probe: Prober, *,
                 max_probes: int | None = None, too_small: TooSmall | None = None,
                 split_check: SplitCheck | None = None, on_found: OnFound | None = None
                 ) -> Searched:
    """The parts of a step of log size `step_level` among commits 0..count-1, found with
    `probe` (see the module docstring). Promises: every `Found` lies inside 0..count-1
    with no untestable commit left between its ends, and untold ones only where its range
    was left at `CANT_TELLS_A_RANGE` can't-tells (one when `too_small`); no commit is
    probed twice for the same range; at most `max_probes` probes (default `default_max_probes`), after which
    the ranges left are returned as they stand (`capped`); `split_check` is asked only of
    a partial verdict whose upper part is at least as large as its lower; once `on_found`
    says True, no further range is probed or found (`left_unsearched` counts them)."""
    cap = default_max_probes(count) if max_probes is None else max_probes
    untestable: set[int] = set()
    found: list[Found] = []
    order = 0
    todo = [_Range(-abs(step_level), order, 0, count - 1, 0.0, step_level, (0.0, 0.0))]
    probes, capped = 0, False
    while todo:
        r = heapq.heappop(todo)
        inner = [i for i in range(r.lo + 1, r.hi) if i not in untestable and i not in r.skipped]
        untold = sum(1 for i in r.skipped if r.lo < i < r.hi)
        given_up = untold >= CANT_TELLS_A_RANGE or (
            untold >= 1 and too_small is not None and too_small(r.low_level, r.high_level))
        if not inner or probes >= cap or given_up:
            capped |= bool(inner) and not given_up
            found.append(Found(r.lo, r.hi, r.low_level, r.high_level, r.errors))
            if on_found is not None and on_found(found[-1]):
                break
            continue
        middle = min(inner, key=lambda i: (abs(2 * i - r.lo - r.hi), i))
        decision = probe(middle, r.low_level, r.high_level)
        if decision is None:
            untestable.add(middle)
            heapq.heappush(todo, r)
            continue
        probes += 1
        if (split_check is not None and decision.verdict is ProbeVerdict.PARTIAL
                and abs(r.high_level - decision.level) >= abs(decision.level - r.low_level)):
            decision = split_check(middle, r.hi, decision)
        for part in _parts(r, middle, decision):
            order += 1
            part.order = order
            heapq.heappush(todo, part)
    found.sort(key=lambda f: -abs(f.high_level - f.low_level))
    return Searched(found, sorted(untestable), capped, len(todo))


def _parts(r: _Range, middle: int, d: ProbeDecision) -> list[_Range]:
    """The ranges left after `middle`'s verdict `d` in range `r`."""
    if d.verdict is ProbeVerdict.LIKE_GOOD:
        return [_Range(r.priority, 0, middle, r.hi, r.low_level, r.high_level,
                       (d.error, r.errors[1]), r.skipped)]
    if d.verdict is ProbeVerdict.LIKE_BAD:
        return [_Range(r.priority, 0, r.lo, middle, r.low_level, r.high_level,
                       (r.errors[0], d.error), r.skipped)]
    if d.verdict is ProbeVerdict.PARTIAL:
        return [_Range(-abs(d.level - r.low_level), 0, r.lo, middle, r.low_level, d.level,
                       (r.errors[0], d.error), r.skipped),
                _Range(-abs(r.high_level - d.level), 0, middle, r.hi, d.level, r.high_level,
                       (d.error, r.errors[1]), r.skipped)]
    return [_Range(r.priority, 0, r.lo, r.hi, r.low_level, r.high_level, r.errors,
                   r.skipped | {middle})]
