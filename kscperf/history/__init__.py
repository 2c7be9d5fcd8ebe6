"""The history: a store of results files in build order (`store`), the series it keeps per
benchmark and kind (`series`), and the changes found over them (`changes`). See
docs/dashboard.md. The names most callers need are re-exported here.

Also the lockstep links (`links`), kill safety of adds (`journal`), the front page's numbers
(`summary`) and compile panels over builds (`compilehistory`). May import: the vocabulary,
`kscperf.stats`, `kscperf.results` and `kscperf.compare`. Renders nothing.
"""

from __future__ import annotations

from kscperf.history.changes import (
    MACHINE_SPEED_DETAIL, ChangeKind, HistoryChange, HistoryCheck, build_points, check_newest,
    detectable_steps, find_changes, too_noisy)
from kscperf.history.series import (
    SERIES_KINDS, Series, SeriesKey, SeriesPoint, StoredBuild, environment_of, machine_class_of)
from kscperf.history.folder import (
    BUILDS_DIR, INDEX_NAME, LOCK_NAME, MACHINE_SUFFIX, remove_empty_store)
from kscperf.history.store import HistoryStore, open_store, rebuild_index

__all__ = [
    "INDEX_NAME", "BUILDS_DIR", "LOCK_NAME", "MACHINE_SUFFIX", "SERIES_KINDS", "MACHINE_SPEED_DETAIL",
    "StoredBuild", "SeriesKey", "SeriesPoint", "Series", "ChangeKind", "HistoryChange", "HistoryCheck",
    "HistoryStore", "open_store", "rebuild_index", "remove_empty_store", "machine_class_of",
    "environment_of", "build_points", "find_changes", "detectable_steps", "too_noisy",
    "check_newest",
]
