"""The history: a store of results files in build order (`store`), the series it keeps per
benchmark and kind (`series`), and the changes found over them (`changes`). See
docs/dashboard.md. The names most callers need are re-exported here, on first use.

Also the store's folder and lock (`folder`), the lockstep links (`links`), kill safety of
adds (`journal`), the front page's numbers (`summary`), compile panels over builds
(`compilehistory`) and the op diff of a change (`explained`). May import: the vocabulary, `kscperf.stats`, `kscperf.results` and
`kscperf.compare`. Renders nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Where each re-exported name lives. They are imported on first use: a module of another
# stage that needs one submodule of the history (the views need `compilehistory`) does not
# pay for the store, its links and the change policy when it is imported.
_HOMES = {
    "kscperf.history.changes": (
        "MACHINE_SPEED_DETAIL", "ChangeKind", "HistoryChange", "HistoryCheck", "build_points",
        "check_newest", "detectable_steps", "find_changes", "too_noisy"),
    "kscperf.history.series": (
        "SERIES_KINDS", "Series", "SeriesKey", "SeriesPoint", "StoredBuild", "environment_of",
        "machine_class_of"),
    "kscperf.history.folder": (
        "BUILDS_DIR", "INDEX_NAME", "LOCK_NAME", "MACHINE_SUFFIX", "remove_empty_store"),
    "kscperf.history.store": ("HistoryStore", "open_store", "rebuild_index"),
    "kscperf.history.explained": ("change_explanation",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "INDEX_NAME", "BUILDS_DIR", "LOCK_NAME", "MACHINE_SUFFIX", "SERIES_KINDS",
    "MACHINE_SPEED_DETAIL", "StoredBuild", "SeriesKey", "SeriesPoint", "Series", "ChangeKind",
    "HistoryChange", "HistoryCheck", "HistoryStore", "open_store", "rebuild_index",
    "remove_empty_store", "machine_class_of", "environment_of", "build_points", "find_changes",
    "detectable_steps", "too_noisy", "check_newest", "change_explanation",
]

if TYPE_CHECKING:
    from kscperf.history.changes import (
        MACHINE_SPEED_DETAIL, ChangeKind, HistoryChange, HistoryCheck, build_points,
        check_newest, detectable_steps, find_changes, too_noisy)
    from kscperf.history.folder import (
        BUILDS_DIR, INDEX_NAME, LOCK_NAME, MACHINE_SUFFIX, remove_empty_store)
    from kscperf.history.series import (
        SERIES_KINDS, Series, SeriesKey, SeriesPoint, StoredBuild, environment_of,
        machine_class_of)
    from kscperf.history.explained import change_explanation
    from kscperf.history.store import HistoryStore, open_store, rebuild_index


def __getattr__(name: str) -> Any:
    if name in _HOME_OF:
        return getattr(importlib.import_module(_HOME_OF[name]), name)
    raise AttributeError(f"module 'kscperf.history' has no attribute {name!r}")
