"""The report's opening of the shown build (`run_summary`): what the run found before
anything else: how many results of each status, each tool's geometric mean of its speedup
over `pt`, and the times marked as timed partly in another machine state."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kscperf.errors import STATUS_SEVERITY, CellStatus
from kscperf.names import cell_name
from kscperf.results.files import LoadedResults
from kscperf.results.samples import BuildRow
from kscperf.stats import core as stats
from kscperf.views import formatting
from kscperf.views.style import STATUS_TONE

__all__ = ["MARKED_SHOWN", "ToolMean", "RunSummary", "run_summary"]

# The marked times the summary names; the model tables mark every one.
MARKED_SHOWN = 10


@dataclass(frozen=True)
class ToolMean:
    """One tool's geometric mean of its speedup over `pt`, over `n` results, as text."""

    tool: str
    speedup: str
    n: str


@dataclass(frozen=True)
class RunSummary:
    """The opening of the report, as text: (status, css class, count) worst first, each
    tool's mean speedup, the marked results and what the mark means."""

    statuses: list[tuple[str, str, str]]
    tools: list[ToolMean]
    marked: list[str]  # the first `MARKED_SHOWN` of them
    mark: str
    marked_count: int = 0
    marked_more: int = 0  # how many of them are not named


def run_summary(results: LoadedResults, summary: tuple[list[str], list[BuildRow]]
                ) -> RunSummary:
    """The shown build's statuses, tools' geometric mean speedups over `pt` (over the results
    correct and timed in both the tool and `pt`) and the results whose time includes a
    process in another machine state, from its `summarize_build` (tools, rows)."""
    counts: dict[CellStatus, int] = {}
    for c in results.cells:
        counts[c.status] = counts.get(c.status, 0) + 1
    statuses = [(s.value, STATUS_TONE[s].value, str(n)) for s, n in
                sorted(counts.items(), key=lambda item: -STATUS_SEVERITY[item[0]])]
    tools, rows = summary
    means = []
    for tool in tools:
        speedups = [r.cells[tool].speedup for r in rows if tool in r.cells
                    and math.isfinite(r.cells[tool].speedup) and r.cells[tool].speedup > 0]
        if speedups:
            means.append(ToolMean(formatting.safe_text(tool),
                                  f"{stats.geometric_mean(speedups):.2f}x", str(len(speedups))))
    marked = [formatting.safe_text(f"{cell_name(r.model, tool, r.task)}/{r.config}")
              for r in rows for tool, view in r.cells.items() if view.odd_processes]
    return RunSummary(statuses, means, marked[:MARKED_SHOWN], formatting.MACHINE_STATE_MARK,
                      len(marked), max(0, len(marked) - MARKED_SHOWN))
