"""Results as data for people: the per-build summary (tool against `pt`) and the
build-over-build comparison, with verdicts. Uses `stats`; produces no strings for humans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kscperf import stats
from kscperf.errors import CellStatus
from kscperf.results import LoadedResults, benchmark_name

__all__ = ["REFERENCE_TOOL", "CellView", "BuildRow", "summarize_build"]

REFERENCE_TOOL = "pt"

# Statuses whose timings may be shown as numbers and enter speedups.
_TIMED_STATUSES = {CellStatus.OK.value}


@dataclass(frozen=True)
class CellView:
    """One tool's result for one model/config/task in one build."""

    status: str
    reason: str = ""
    median_s: float = math.nan
    spread_s: float = math.nan
    speedup: float = math.nan
    n_values: int = 0
    compile_s: float = math.nan
    prep_s: float = math.nan
    peak_rss_bytes: int | None = None
    check: dict | None = None


@dataclass(frozen=True)
class BuildRow:
    model: str
    config: str
    task: str
    cells: dict[str, CellView] = field(default_factory=dict)


def summarize_build(results: LoadedResults) -> tuple[list[str], list[BuildRow]]:
    """The tools in first-seen order, and one row per model/config/task with each tool's
    median time, spread (MAD) and speedup over `pt`. Incorrect or failed cells carry their
    status and no speedup, so nothing wrong is ever shown as fast."""
    tools: list[str] = []
    rows: dict[tuple[str, str, str], dict[str, CellView]] = {}
    for c in results.cells:
        if c["tool"] not in tools:
            tools.append(c["tool"])
        config = c["config"] if c["config"] is not None else "*"
        values = results.benchmarks.get(
            benchmark_name(c["model"], c["tool"], c["task"], config), [])
        rows.setdefault((c["model"], config, c["task"]), {})[c["tool"]] = CellView(
            status=c["status"], reason=c.get("reason", ""),
            median_s=stats.median(values), spread_s=stats.median_abs_dev(values),
            n_values=len(values),
            compile_s=stats.median(c.get("compile_s") or []),
            prep_s=stats.median(c.get("prep_s") or []),
            peak_rss_bytes=c.get("peak_rss_bytes"), check=c.get("check"))
    out: list[BuildRow] = []
    for (model, config, task), cells in rows.items():
        ref = cells.get(REFERENCE_TOOL)
        ref_s = ref.median_s if ref is not None and ref.status in _TIMED_STATUSES else math.nan
        with_speedup = {}
        for tool, view in cells.items():
            sp = stats.speedup(ref_s, view.median_s) if view.status in _TIMED_STATUSES else math.nan
            with_speedup[tool] = CellView(**{**view.__dict__, "speedup": sp})
        out.append(BuildRow(model, config, task, with_speedup))
    return tools, out
