"""Where kscperf writes when no path is given, named once for the CLI's options, the API's
keywords and the run loop: the results folder and the history store. Imports nothing, so
that building the argument parser stays cheap.
"""

from __future__ import annotations

__all__ = ["RESULTS_DIR", "DEFAULT_STORE", "BISECT_CACHE"]

# A build's results file is RESULTS_DIR/<build>.json; an `ab` run's folder RESULTS_DIR/ab-<time>.
RESULTS_DIR = "results"

# The history store folder, relative to where the command runs.
DEFAULT_STORE = "history"

# `bisect`'s worktrees, builds and state, relative to where the command runs.
BISECT_CACHE = "bisect-cache"
