"""The compile panels over a history store's builds: series of the phases and counts per
cell, and the compile regressions the newest build opened.

Counts (graph breaks, recompiles, graphs) are exact, so a series of them needs no change-point
statistics: the newest build of a machine class opens a regression when it counts more than
the build before it, and the change names the new breaks. Phase seconds are kept as series
(one median over processes per build) for the dashboard. Reads results files only through
`results.files.load_results`; writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from kscperf.compare.compilestats import SPLITS, CompileChange, cell_panels, compare_panels
from kscperf.compilepanel import COUNTS, PHASES
from kscperf.results.files import load_results

__all__ = ["CompilePoint", "compile_series", "opened_compile_regressions"]


@dataclass(frozen=True)
class CompilePoint:
    """One build's value of one compile figure of one cell: a phase or split in seconds
    (median over processes), or a count; None when that build's torch did not tell."""

    build: str
    position: int
    cell: str
    name: str
    value: float | None


def compile_series(builds: Sequence[Any]) -> dict[tuple[str, str], list[CompilePoint]]:
    """(cell, figure) -> its points over `builds` (`history.StoredBuild`s of one machine
    class, oldest first), for every phase, split and count any build's panel has."""
    series: dict[tuple[str, str], list[CompilePoint]] = {}
    for b in builds:
        for p in cell_panels(load_results(b.file).runs):
            cell = f"{p.model}/{p.tool}/{p.task}"
            for name in PHASES + SPLITS:
                value = p.median_s(name)
                series.setdefault((cell, name), []).append(
                    CompilePoint(b.label, b.position, cell, name, value if value == value else None))
            for name in COUNTS:
                count = p.count(name)
                series.setdefault((cell, name), []).append(CompilePoint(
                    b.label, b.position, cell, name, None if count is None else float(count)))
    return series


def opened_compile_regressions(builds: Sequence[Any]) -> tuple[CompileChange, ...]:
    """The count regressions (a new graph break, more recompiles or graphs) of the newest
    build of each machine class in `builds` (`history.StoredBuild`s, oldest first within a
    class) against the build before it."""
    by_class: dict[str, list[Any]] = {}
    for b in builds:
        by_class.setdefault(b.machine_class, []).append(b)
    opened: list[CompileChange] = []
    for members in by_class.values():
        if len(members) < 2:
            continue
        before, newest = load_results(members[-2].file), load_results(members[-1].file)
        opened += [c for c in compare_panels(before.runs, newest.runs)
                   if c.what == "count" and c.is_regression]
    return tuple(opened)
