"""The op diff of a change of the history (`change_explanation`): `compare --explain` of the
change's two stored files, where both were recorded with `--explain`. Loads files; renders
nothing."""

from __future__ import annotations

from kscperf.compare.builds import compare_builds
from kscperf.compare.explain import Explanation
from kscperf.errors import KscperfError
from kscperf.history.changes import HistoryChange
from kscperf.names import Kind
from kscperf.results.files import LoadedResults, load_results

__all__ = ["change_explanation"]


def _may_be_profiled(path: str) -> bool:
    # A scan of the bytes, before parsing: the dashboard asks of every open change, and most
    # files of a history carry no profile.
    try:
        with open(path, "rb") as fp:
            return b'"op_profile"' in fp.read()
    except OSError:
        return False


def _profiled(results: LoadedResults) -> bool:
    return any(c.op_profile is not None for r in results.runs for c in r.configs)


def change_explanation(change: HistoryChange) -> Explanation | None:
    """The op diff of a run-time change between the builds before and after it, or None for
    another kind, or where a file is gone or either build was not profiled."""
    if change.key.kind is not Kind.TIME or not all(
            _may_be_profiled(b.file) for b in (change.before, change.after)):
        return None
    try:
        before, after = load_results(change.before.file), load_results(change.after.file)
    except KscperfError:
        return None
    if not (_profiled(before) and _profiled(after)):
        return None
    # Both files are of one series of the store: one machine class, so comparable; a
    # torch upgrade between them is an environment event, and its ops are still worth seeing.
    return compare_builds(before, after, force=True).explanation(change.key.benchmark)
