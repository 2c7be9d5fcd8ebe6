"""The op diff of a change of the history (`change_explanation`): `compare --explain` of the
change's two stored files, where both were recorded with `--explain`. Loads files; renders
nothing."""

from __future__ import annotations

import functools
import os

from kscperf.compare.builds import compare_builds
from kscperf.compare.explain import Explanation
from kscperf.errors import KscperfError
from kscperf.history.changes import HistoryChange
from kscperf.names import Kind
from kscperf.results.files import load_results

__all__ = ["change_explanation"]

# A file's identity: its path, size and modification time, so that a cached comparison is
# never of a file since replaced.
_FileKey = tuple[str, int, int]


def _file_key(path: str) -> _FileKey | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (path, st.st_size, st.st_mtime_ns)


def _may_be_profiled(path: str) -> bool:
    # A scan of the bytes, before parsing: the dashboard asks of every open change, and most
    # files of a history carry no profile.
    try:
        with open(path, "rb") as fp:
            return b'"op_profile"' in fp.read()
    except OSError:
        return False


@functools.lru_cache(maxsize=16)
def _explanations(before: _FileKey, after: _FileKey) -> dict[str, Explanation]:
    """The op diffs of two stored files, by benchmark; computed once for each pair, since the
    open changes of one night mostly share their two builds."""
    if not (_may_be_profiled(before[0]) and _may_be_profiled(after[0])):
        return {}
    try:
        base, new = load_results(before[0]), load_results(after[0])
    except KscperfError:
        return {}
    # Both files are of one series of the store: one machine class, so comparable; a
    # torch upgrade between them is an environment event, and its ops are still worth seeing.
    return {e.name: e for e in compare_builds(base, new, force=True).explanations}


def change_explanation(change: HistoryChange) -> Explanation | None:
    """The op diff of a run-time change between the builds before and after it, or None for
    another kind, or where a file is gone or either build was not profiled."""
    if change.key.kind is not Kind.TIME:
        return None
    before, after = _file_key(change.before.file), _file_key(change.after.file)
    if before is None or after is None:
        return None
    return _explanations(before, after).get(change.key.benchmark)
