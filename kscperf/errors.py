"""The one user-facing exception and the vocabulary of cell outcomes.

Owns `KscperfError` (anything a user can fix, printed by `cli.main()` as one line) and
`CellStatus`. Imports no other kscperf module.
"""

from __future__ import annotations

import enum
import os
import re

__all__ = ["KscperfError", "CellStatus", "BAD_STATUSES", "GOOD_STATUSES", "STATUS_SEVERITY",
           "TIMED_STATUSES", "NOT_RUN_STATUSES", "RECORDED_STATUSES", "recorded_status",
           "describe_exception"]


class KscperfError(Exception):
    """A problem the user can fix: bad input, a bad file, an unknown name.

    The message is one sentence that names the culprit and, where possible, the fix.
    """


class CellStatus(enum.StrEnum):
    """The fate of one model/tool/task/config. Each fact about a status is one table below,
    keyed by it."""

    OK = "ok"
    INCORRECT = "incorrect"
    SKIPPED = "skipped"
    UNSUPPORTED = "unsupported"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    OOM = "oom"
    # Not in this build at all (a benchmark another build has): what the analysis says of
    # an absence. Never recorded by a worker, never read from a file.
    NOT_RUN = "not run"


# What a worker or a results file may record: every status but NOT_RUN.
RECORDED_STATUSES = frozenset(set(CellStatus) - {CellStatus.NOT_RUN})

# What a run may end with and still exit 0; any other recorded status makes it 1.
GOOD_STATUSES = frozenset({CellStatus.OK, CellStatus.SKIPPED, CellStatus.UNSUPPORTED})
BAD_STATUSES = frozenset(RECORDED_STATUSES - GOOD_STATUSES)

# Not run, by choice or by absence: nothing to compare, nothing failed, no pass rate.
NOT_RUN_STATUSES = frozenset({CellStatus.SKIPPED, CellStatus.UNSUPPORTED, CellStatus.NOT_RUN})

# Checked and then timed: the values exist. An incorrect cell is still timed (and marked
# wherever it is shown); only an ok one enters speedups and geometric means.
TIMED_STATUSES = frozenset({CellStatus.OK, CellStatus.INCORRECT})

# When one cell has several processes or configs, the one shown is the worst.
STATUS_SEVERITY = {
    CellStatus.NOT_RUN: -1,
    CellStatus.OK: 0,
    CellStatus.SKIPPED: 1,
    CellStatus.UNSUPPORTED: 2,
    CellStatus.INCORRECT: 3,
    CellStatus.FAILED: 4,
    CellStatus.OOM: 5,
    CellStatus.TIMEOUT: 6,
    CellStatus.CRASHED: 7,
}


def recorded_status(text: str) -> CellStatus:
    """The recorded status spelled `text`; ValueError for anything else (NOT_RUN
    included: a file never records an absence)."""
    status = CellStatus(text)
    if status not in RECORDED_STATUSES:
        raise ValueError(f"{text!r} is not a recorded status")
    return status


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


# Where a compiler's message names the user's code: TorchScript's `File "x.py", line 5`,
# dynamo's `from user code: File "x.py", line 5, in f`.
_MESSAGE_LOCATION = re.compile(r'File "([^"]+)", line (\d+)')


def _message_location(exc: BaseException) -> str:
    """The last file:line the message names outside torch's own package, as " (at x.py:5)";
    "" when it names none (the first line of such a message would lose it)."""
    text = str(exc)
    found = [(path, line) for path, line in _MESSAGE_LOCATION.findall(text)
             if f"{os.sep}torch{os.sep}" not in path]
    if not found or len(text.strip().splitlines()) < 2:
        return ""
    path, line = found[-1]
    place = f"{os.path.basename(path)}:{line}"
    return "" if place in _first_line(exc) else f" (at {place})"


def describe_exception(exc: BaseException, with_type: bool = True) -> str:
    """An exception in one line, without its traceback: `Type: first line of the message`
    (only the first line when not `with_type`), or the type's name when the message is
    empty; with the user's file:line appended when a later line of the message names it
    (a compiler's error, whose first line alone would lose where)."""
    first = _first_line(exc)
    if not first:
        return type(exc).__name__
    first += _message_location(exc)
    return f"{type(exc).__name__}: {first}" if with_type else first
