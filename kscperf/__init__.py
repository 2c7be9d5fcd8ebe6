"""kscperf: correctness-checked, process-isolated pyperf benchmarks of differentiable
functions across tools (eager, TorchScript, torch.compile, plug-ins) and tasks
(inference, fwd, bwd, jacobian).

The public API (`kscperf.api`, documented in docs/api.md) is re-exported here: `run`,
`run_checks`, `run_ab`, `load`, `compare_builds`, `write_report`, `merge_shards`,
`history_add`, `history_rebuild`, `history_changes`, `history_check`, `build_dashboard`,
`bisect_commits`, `BisectInterrupted`, `Build`, `RunConfig`, `SessionResult` and
`KscperfError`. It is imported on first use, so that
`import kscperf` stays cheap for the worker processes, and it never imports torch. (Its
names differ from the stage packages' names, `kscperf.compare` or `kscperf.results`, on
purpose: a subpackage, once imported, is an attribute of the package.)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["__version__", "KscperfError", "run", "run_checks", "run_ab", "load", "compare_builds",
           "write_report", "merge_shards", "history_add", "history_rebuild", "history_changes",
           "history_check", "build_dashboard", "bisect_commits", "BisectInterrupted", "Build",
           "RunConfig", "SessionResult"]
_API = frozenset(__all__) - {"__version__", "KscperfError"}

if TYPE_CHECKING:
    from kscperf.api import (BisectInterrupted, Build, RunConfig, SessionResult,
                             bisect_commits, build_dashboard, compare_builds,
                             history_add, history_changes, history_check, history_rebuild,
                             load, merge_shards, run, run_ab, run_checks, write_report)
    from kscperf.errors import KscperfError


def __getattr__(name: str) -> Any:
    if name == "KscperfError":
        return importlib.import_module("kscperf.errors").KscperfError
    if name in _API:
        return getattr(importlib.import_module("kscperf.api"), name)
    raise AttributeError(f"module 'kscperf' has no attribute {name!r}")
