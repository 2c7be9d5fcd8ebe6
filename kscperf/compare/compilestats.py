"""Compile panels as data: one summary per cell over its worker processes, and the
build-over-build comparison of their phases, counts and tools' own figures.

Phase seconds and figures are measurements: they get the statistics `compare` uses for time
(`stats.compare_samples` on one value per process, Benjamini-Hochberg over the rows, the
minimum effect). Graph breaks, recompiles and graphs are counts, exact and the same in every
process: any increase is a regression, and the change names the breaks and recompiles that
are new. A cell without a panel on either side (a file written before kscperf had them, a
tool that reports none) compares nothing; one side without is `new` or `missing`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable

from kscperf.compare.codediff import generated_kernels
from kscperf.compilepanel import COUNTS, PHASES, CompilePanel
from kscperf.spec import CellResult
from kscperf.stats import core as stats

__all__ = ["SPLITS", "CellPanel", "CompileChange", "cell_panels", "compare_panels",
           "REGRESSION_VERDICTS", "KERNELS"]

# How a cell's compile seconds split: the first compile (the compile phase and the first
# config's getting ready) and the recompiles later configs caused; their sum is every
# config's compile.
SPLITS = ("first_compile", "recompile_time", "all_configs")
REGRESSION_VERDICTS = frozenset({"slower", "more"})
# The count of kernels in the code --explain kept (`codediff.generated_kernels`): named
# beside the panel's counts, never a regression by itself (fewer can be a better fusion,
# more a fusion lost; the run time says which matters).
KERNELS = "kernels"

Key = tuple[str, str, str]


@dataclass(frozen=True)
class CellPanel:
    """The compile panels of one cell over its processes: per-process seconds of each phase
    and split (only the processes where torch told), the counts (the largest over processes;
    None when unknown), each break and recompile reason once, and each figure's per-process
    values with its unit."""

    model: str
    tool: str
    task: str
    processes: int
    phases: tuple[tuple[str, tuple[float, ...]], ...]
    splits: tuple[tuple[str, tuple[float, ...]], ...]
    counts: tuple[tuple[str, int | None], ...]
    graph_breaks: tuple[str, ...]
    recompiles: tuple[str, ...]
    timed_recompiles: tuple[str, ...]
    guards: int | None
    kernels: int | None
    cache: tuple[tuple[str, int | None], ...]
    figures: tuple[tuple[str, str, tuple[float, ...]], ...]

    @property
    def key(self) -> Key:
        return (self.model, self.tool, self.task)

    def count(self, name: str) -> int | None:
        """One of `compilepanel.COUNTS`, None when unknown."""
        return dict(self.counts).get(name)

    def median_s(self, name: str) -> float:
        """The median over processes of a phase or split, NaN when unknown."""
        values = dict(self.phases + self.splits).get(name, ())
        return stats.median(values) if values else math.nan

    @property
    def has_torch(self) -> bool:
        """Whether torch's compile record was read (not a tool's figures alone)."""
        return any(values for _, values in self.phases)


def _merge_reasons(seen: list[str], reasons: Iterable[str]) -> None:
    for r in reasons:
        if r not in seen:
            seen.append(r)


def _max_count(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _summarize(key: Key, panels: list[CompilePanel]) -> CellPanel:
    phases = {p: [v for panel in panels if (v := panel.phase_s(p)) is not None] for p in PHASES}
    first = [p.first_compile_s for p in panels if p.first_compile_s is not None]
    again = [p.total_recompile_s for p in panels if p.first_compile_s is not None]
    counts: dict[str, int | None] = {name: None for name in COUNTS}
    breaks: list[str] = []
    recompiles: list[str] = []
    timed: list[str] = []
    figures: dict[tuple[str, str], list[float]] = {}
    for panel in panels:
        for name in COUNTS:
            counts[name] = _max_count(counts[name], panel.count(name))
        _merge_reasons(breaks, panel.break_reasons)
        _merge_reasons(recompiles, panel.recompiles or ())
        _merge_reasons(timed, panel.timed_recompiles)
        for f in panel.figures:
            figures.setdefault((f.name, f.unit), []).append(f.value)
    last = panels[-1]
    return CellPanel(
        *key, processes=len(panels), phases=tuple((p, tuple(v)) for p, v in phases.items()),
        splits=(("first_compile", tuple(first)), ("recompile_time", tuple(again)),
                ("all_configs", tuple(a + b for a, b in zip(first, again)))),
        counts=tuple(counts.items()), graph_breaks=tuple(breaks), recompiles=tuple(recompiles),
        timed_recompiles=tuple(timed), guards=last.guards, kernels=last.kernels,
        cache=last.cache,
        figures=tuple((name, unit, tuple(v)) for (name, unit), v in figures.items()))


def cell_panels(runs: Iterable[CellResult]) -> list[CellPanel]:
    """One summary per cell that has a compile panel in any process, in first-seen order."""
    by_cell: dict[Key, list[CompilePanel]] = {}
    for r in runs:
        if r.compile_panel is not None:
            by_cell.setdefault((r.model, r.tool, r.task), []).append(r.compile_panel)
    return [_summarize(key, panels) for key, panels in by_cell.items()]


@dataclass(frozen=True)
class CompileChange:
    """One compile figure of one cell, BASE against NEW.

    `what` is "phase" (one of `PHASES`), "split" (one of `SPLITS`), "count" (one of
    `compilepanel.COUNTS`) or "figure" (a tool's own, `name` as the tool called it). The
    verdict: "slower", "faster" or "same" for seconds and figures (by the statistics of
    `compare`), "more", "fewer" or "same" for counts (exact), "new" or "missing" where one
    side has no such figure. `added` names the break or recompile reasons that only NEW
    has, `removed` those only BASE had.
    """

    model: str
    tool: str
    task: str
    what: str
    name: str
    unit: str
    base: float
    new: float
    ratio: float
    p_value: float
    verdict: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def cell(self) -> str:
        return f"{self.model}/{self.tool}/{self.task}"

    @property
    def is_regression(self) -> bool:
        """Whether NEW is slower, or counts more, than BASE (more kernels is not)."""
        return self.verdict in REGRESSION_VERDICTS and self.name != KERNELS


def _count_change(b: CellPanel, n: CellPanel, name: str) -> CompileChange | None:
    base, new = b.count(name), n.count(name)
    if base is None and new is None:
        return None
    reasons = {"graph_breaks": (b.graph_breaks, n.graph_breaks),
               "recompiles": (b.recompiles, n.recompiles)}.get(name, ((), ()))
    added = tuple(r for r in reasons[1] if r not in reasons[0])
    removed = tuple(r for r in reasons[0] if r not in reasons[1])
    if base is None or new is None:
        verdict = "new" if base is None else "missing"
    else:
        verdict = "more" if new > base else "fewer" if new < base else "same"
    as_float = (lambda c: math.nan if c is None else float(c))
    ratio = as_float(new) / as_float(base) if base else math.nan
    return CompileChange(*n.key, "count", name, "count", as_float(base), as_float(new), ratio,
                         math.nan, verdict, added, removed)


def _kernel_change(key: Key, base: int, new: int) -> CompileChange:
    verdict = "more" if new > base else "fewer" if new < base else "same"
    return CompileChange(*key, "count", KERNELS, "count", float(base), float(new),
                         new / base if base else math.nan, math.nan, verdict)


def _measured(b: CellPanel | None, n: CellPanel | None) -> list[tuple[str, str, str,
                                                                      tuple[float, ...],
                                                                      tuple[float, ...]]]:
    """(what, name, unit, BASE values, NEW values) of every measured figure of the cell."""
    def seconds(p: CellPanel | None) -> dict[tuple[str, str, str], tuple[float, ...]]:
        if p is None:
            return {}
        out = {("phase", k, "s"): v for k, v in p.phases}
        out.update({("split", k, "s"): v for k, v in p.splits})
        out.update({("figure", name, unit): v for name, unit, v in p.figures})
        return out

    sb, sn = seconds(b), seconds(n)
    keys = list(sb) + [k for k in sn if k not in sb]
    return [(w, name, unit, sb.get((w, name, unit), ()), sn.get((w, name, unit), ()))
            for w, name, unit in keys if sb.get((w, name, unit)) or sn.get((w, name, unit))]


def _measured_changes(key: Key, b: CellPanel | None, n: CellPanel | None,
                      alpha: float) -> list[tuple[CompileChange, float]]:
    out = []
    for what, name, unit, vb, vn in _measured(b, n):
        if not vb or not vn:
            verdict = "new" if not vb else "missing"
            est = None
        else:
            verdict = ""
            est = stats.compare_samples([[v] for v in vb], [[v] for v in vn], alpha=alpha)
        median = (lambda v: stats.median(v) if v else math.nan)
        change = CompileChange(*key, what, name, unit, median(vb), median(vn),
                               est.ratio if est else math.nan, est.p_value if est else math.nan,
                               verdict)
        out.append((change, est.p_value if est else math.nan))
    return out


def compare_panels(base_runs: Iterable[CellResult], new_runs: Iterable[CellResult], *,
                   min_effect: float = stats.DEFAULT_MIN_EFFECT,
                   alpha: float = stats.ALPHA) -> tuple[CompileChange, ...]:
    """NEW's compile panels against BASE's, cell by cell: every count, phase, split and
    figure either side has. Regressions first (counts, then seconds), then the rest.

    Promises: a count's verdict is exact (`more` for any increase), with the count of
    kernels in the kept generated code where both builds kept it (`KERNELS`, never a
    regression); a measured figure is
    `slower` or `faster` only when its q-value (Benjamini-Hochberg over all measured rows)
    is under `alpha` and its ratio beyond `min_effect`, else `same`."""
    base_runs, new_runs = tuple(base_runs), tuple(new_runs)
    base = {p.key: p for p in cell_panels(base_runs)}
    new = {p.key: p for p in cell_panels(new_runs)}
    kernels = (generated_kernels(base_runs), generated_kernels(new_runs))
    counted: list[CompileChange] = []
    measured: list[tuple[CompileChange, float]] = []
    for key in list(base) + [k for k in new if k not in base]:
        b, n = base.get(key), new.get(key)
        if b is not None and n is not None:
            counted += [c for name in COUNTS if (c := _count_change(b, n, name)) is not None]
            if key in kernels[0] and key in kernels[1]:
                counted.append(_kernel_change(key, kernels[0][key], kernels[1][key]))
        measured += _measured_changes(key, b, n, alpha)
    q_values = stats.adjust_p_values([p for _, p in measured])
    decided = []
    for (change, _), q in zip(measured, q_values):
        if not change.verdict:
            direction = stats.classify_change(change.ratio, q, min_effect=min_effect,
                                              alpha=alpha)
            change = replace(change, verdict={1: "slower", -1: "faster"}.get(direction, "same"))
        decided.append(change)
    rows = counted + decided
    rows.sort(key=lambda c: (not c.is_regression, c.what != "count"))
    return tuple(rows)

