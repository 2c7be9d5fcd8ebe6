"""The shell commands that confirm a change of the history, for people: `compare` of the
two stored files, `ab` of the two environments, and the `run-benchmarks bisect` that finds
its commit."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Any

from kscperf.history.changes import HistoryChange

__all__ = ["ConfirmCommands", "confirm_commands", "bisect_command"]

@dataclass(frozen=True)
class ConfirmCommands:
    """Shell commands that confirm one change: `compare` of the two builds' files, `ab` of
    the two environments (where both still exist), and the `bisect` of its commits (empty
    where either build has no commit, or both have the same one)."""

    compare: str
    ab: str
    bisect: str


def _quote(text: str) -> str:
    return shlex.quote(text)


# How each commit is built when the nightly did not read the package from its checkout: a
# venv over the nightly's Python (its torch and other packages), the checkout installed in
# it without dependencies.
_VENV_BUILD = "{python} -m venv --system-site-packages .venv && .venv/bin/pip install -q --no-deps ."


def confirm_commands(change: HistoryChange) -> ConfirmCommands:
    """The commands that confirm `change` (see `ConfirmCommands`). The stored files are
    named by absolute paths, so the commands work from any folder."""
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
        bisect = bisect_command(change.before.git_commit, change.after.git_commit, key.cell,
                                change.after.source)
    return ConfirmCommands(compare, ab, bisect)


def bisect_command(good: str, bad: str, cell: str, source: dict[str, Any]) -> str:
    """The `run-benchmarks bisect` of the step from commit `good` to `bad` in `cell`, from
    where the build's code came from (`StoredBuild.source`): its repository and definition
    paths (REPO and PATH where the file does not say), and its package read from each
    checkout (`--env PYTHONPATH={checkout}`) or installed into a venv in it."""
    repo = _quote(str(source.get("git_toplevel") or "REPO"))
    paths = str(source.get("definition_paths") or "PATH")
    if source.get("source_on_pythonpath"):
        how = "--env 'PYTHONPATH={checkout}'"
    else:
        python = str(source.get("source_python") or "python3")
        how = (f"--build-cmd {_quote(_VENV_BUILD.format(python=_quote(python)))} "
               "--python .venv/bin/python")
    return (f"run-benchmarks bisect --repo {repo} --good {good[:12]} --bad {bad[:12]} "
            f"-k {_quote(cell)} {how} {paths}")
