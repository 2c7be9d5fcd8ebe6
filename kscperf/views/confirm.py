"""The shell commands that confirm a change of the history, for people: `compare` of the
two stored files, `ab` of the two environments, and a `git bisect run` recipe."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from kscperf.history.changes import HistoryChange

__all__ = ["ConfirmCommands", "confirm_commands"]

@dataclass(frozen=True)
class ConfirmCommands:
    """Shell commands that confirm one change: `compare` of the two builds' files, `ab` of
    the two environments (where both still exist), and a `git bisect run` recipe (empty
    where either build has no commit, or both have the same one)."""

    compare: str
    ab: str
    bisect: str


def _quote(text: str) -> str:
    return shlex.quote(text)


# The bisect run's size: enough processes for the machine-speed canary to give an interval
# (with one process a side every verdict would be "machine-shift"), few values for speed.
_BISECT_PROCESSES = 3
_BISECT_VALUES = 5
_BISECT_OUTPUT = "/tmp/kscperf-bisect.json"


def confirm_commands(change: HistoryChange) -> ConfirmCommands:
    """The commands that confirm `change` (see `ConfirmCommands`). The stored files are
    named by absolute paths, so the commands work from any folder (the bisect runs in the
    repository under test)."""
    key = change.key
    cell = _quote(key.cell)
    before = _quote(os.path.abspath(change.before.file))
    after = _quote(os.path.abspath(change.after.file))
    compare = f"run-benchmarks compare {before} {after}"
    ab = (f"run-benchmarks ab -k {cell} --base-python BEFORE/bin/python "
          f"--new-python AFTER/bin/python")
    bisect = ""
    # Reruns of one commit have nothing to bisect: their difference is not in the code.
    if change.before.git_commit and change.after.git_commit and \
            change.before.git_commit != change.after.git_commit:
        bisect = (f"git bisect start {change.after.short_commit} {change.before.short_commit} "
                  f"&& git bisect run sh -c {_quote(_bisect_test(cell, before))}")
    return ConfirmCommands(compare, ab, bisect)


def _bisect_test(cell: str, before: str) -> str:
    """The shell test of one commit for `git bisect run`: exit 1 only when `compare` finds
    a regression against the build before the change; anything else that fails (the
    install, the run, a refused comparison) is 125, "cannot test this commit", so a broken
    commit is skipped rather than blamed. The run is another size than the stored build's,
    so the comparison is forced; the canary still accounts for the machine's speed."""
    out = _BISECT_OUTPUT
    return (f"rm -f {out}; pip install -q . || exit 125; "
            f"run-benchmarks run -k {cell} --processes {_BISECT_PROCESSES} "
            f"--values {_BISECT_VALUES} -o {out} -q; [ -s {out} ] || exit 125; "
            f"run-benchmarks compare {before} {out} --force --fail-on-regression "
            "|| { rc=$?; [ $rc = 1 ] && exit 1 || exit 125; }")
