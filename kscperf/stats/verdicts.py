"""What happened to one benchmark between two builds, and the one definition of a
regression that `compare` and the history share.

A verdict decided by statuses alone (`status_verdict`) comes first; where both builds
timed the benchmark correctly, the timings decide (`compare`, `kscperf.stats.changepoints`).
Imports only `errors` and `stats.core` (for `Direction`).
"""

from __future__ import annotations

import enum

from kscperf.errors import CellStatus
from kscperf.stats.core import Direction

__all__ = ["Verdict", "REGRESSION_VERDICTS", "Direction", "status_verdict",
           "direction_verdict", "is_absent", "is_failing"]


class Verdict(enum.StrEnum):
    """What happened to one benchmark from BASE to NEW. Declared in report order: the
    regressions first, the improvements last."""

    FAILING_NOW = "failing-now"
    INCORRECT_NOW = "incorrect-now"
    SLOWER = "slower"
    # The machine's own speed changed between or within the runs in a way that could explain
    # the change, or hide one: no verdict with confidence.
    MACHINE_SHIFT = "machine-shift"
    MISSING = "missing"
    SAME = "same"
    NEW = "new"
    FIXED = "fixed"
    FASTER = "faster"


# What `--fail-on-regression` and `history check` fail on.
REGRESSION_VERDICTS = frozenset({Verdict.FAILING_NOW, Verdict.INCORRECT_NOW, Verdict.SLOWER})


def direction_verdict(direction: int) -> Verdict:
    """The verdict of a change in `direction` decided by the timings."""
    return {Direction.SLOWER: Verdict.SLOWER, Direction.FASTER: Verdict.FASTER,
            Direction.SAME: Verdict.SAME}[Direction(direction)]


class _Category(enum.Enum):
    """What a cell status means for a comparison."""

    OK = enum.auto()
    INCORRECT = enum.auto()
    ABSENT = enum.auto()  # not run here, by choice or by absence: nothing failed
    FAILING = enum.auto()


_CATEGORY = {
    CellStatus.OK: _Category.OK,
    CellStatus.INCORRECT: _Category.INCORRECT,
    CellStatus.SKIPPED: _Category.ABSENT,
    CellStatus.UNSUPPORTED: _Category.ABSENT,
    CellStatus.NOT_RUN: _Category.ABSENT,
    CellStatus.FAILED: _Category.FAILING,
    CellStatus.TIMEOUT: _Category.FAILING,
    CellStatus.CRASHED: _Category.FAILING,
    CellStatus.OOM: _Category.FAILING,
}


def _category(status: CellStatus | None) -> _Category:
    return _CATEGORY[status] if status is not None else _Category.ABSENT


def is_absent(status: CellStatus | None) -> bool:
    """Whether a benchmark with `status` was not run (skipped, unsupported, not there)."""
    return _category(status) is _Category.ABSENT


def is_failing(status: CellStatus | None) -> bool:
    """Whether `status` says the benchmark failed or gave wrong results."""
    return _category(status) in (_Category.FAILING, _Category.INCORRECT)


def status_verdict(before: CellStatus | None, after: CellStatus | None) -> Verdict | None:
    """The verdict decided by the two statuses alone (None: absent), or None when the
    timings decide: `new` from nothing run, `missing` to nothing run, `failing-now`,
    `incorrect-now`, `fixed`, or `same` between two failures."""
    b, n = _category(before), _category(after)
    if b is _Category.ABSENT:
        return Verdict.NEW
    if n is _Category.ABSENT:
        return Verdict.MISSING
    if n is _Category.FAILING:
        return Verdict.SAME if b is _Category.FAILING else Verdict.FAILING_NOW
    if n is _Category.INCORRECT and b is not _Category.INCORRECT:
        return Verdict.INCORRECT_NOW
    if n is _Category.OK and b in (_Category.INCORRECT, _Category.FAILING):
        return Verdict.FIXED
    return None
