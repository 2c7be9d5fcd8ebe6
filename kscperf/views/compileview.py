"""Compile panels and their comparison as text, markdown, JSON and the report's rows.

Lays out what `kscperf.compare.compilestats` computed; decides nothing.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Sequence, TypeVar

from kscperf.compare.compilestats import KERNELS, SPLITS, CellPanel, CompileChange
from kscperf.compilepanel import COUNTS, PHASES
from kscperf.history.compilehistory import CompilePoint, compile_series
from kscperf.views.textunits import align_columns, format_seconds, safe_text

__all__ = ["PanelRow", "panel_rows", "ChangeRow", "change_rows", "format_panel_table", "format_compile_changes",
           "compile_changes_markdown", "compile_changes_json", "CompileHistoryView",
           "compile_history_views", "with_compile_tables"]


def _count_text(n: int | None) -> str:
    return "?" if n is None else str(n)


def _cache_text(cache: Sequence[tuple[str, int | None]]) -> str:
    got = dict(cache)
    parts = []
    for name in ("fxgraph", "aotautograd"):
        hit, miss = got.get(f"{name}_hit"), got.get(f"{name}_miss")
        if hit is not None or miss is not None:
            parts.append(f"{name} {_count_text(hit)}/{_count_text((hit or 0) + (miss or 0))}")
    return ", ".join(parts) or "?"


@dataclass(frozen=True)
class PanelRow:
    """One cell's compile panel, as text cells for a table (the report, the terminal)."""

    model: str
    tool: str
    task: str
    every_config: str
    first_compile: str
    recompiles_s: str
    phases: tuple[tuple[str, str], ...]
    graphs: str
    graph_breaks: str
    recompiles: str
    guards: str
    kernels: str
    cache: str
    break_reasons: tuple[str, ...]
    recompile_reasons: tuple[str, ...]
    timed_recompiles: tuple[str, ...]
    figures: tuple[str, ...]
    torch: bool  # torch's compile record was read (not a tool's figures alone)


def _figure_text(name: str, unit: str, values: Sequence[float]) -> str:
    value = sorted(values)[len(values) // 2] if values else math.nan
    shown = format_seconds(value) if unit == "s" else f"{value:.4g} {unit}"
    return f"{name} {shown}"


def _seconds(value: float) -> str:
    # A phase that did not run (a cache hit, no GPU) reads as 0, not as "0 ns".
    return "0" if value == 0 else format_seconds(value)


def panel_rows(panels: Sequence[CellPanel]) -> list[PanelRow]:
    """The rows of the compile table, one per cell, medians over processes."""
    rows = []
    for p in panels:
        rows.append(PanelRow(
            p.model, p.tool, p.task, _seconds(p.median_s("all_configs")),
            _seconds(p.median_s("first_compile")), _seconds(p.median_s("recompile_time")),
            tuple((phase, _seconds(p.median_s(phase))) for phase in PHASES),
            _count_text(p.count("graphs")), _count_text(p.count("graph_breaks")),
            _count_text(p.count("recompiles")), _count_text(p.guards), _count_text(p.kernels),
            _cache_text(p.cache), p.graph_breaks, p.recompiles, p.timed_recompiles,
            tuple(_figure_text(*f) for f in p.figures), p.has_torch))
    return rows


def format_panel_table(panels: Sequence[CellPanel]) -> str:
    """The compile panel of a run for a terminal: per cell every config's compile, how it
    splits between the first compile and recompiles, the counts and the cache, then each
    graph break, recompile and tool figure on a line of its own; "" when no cell has one."""
    rows = panel_rows(panels)
    torch_rows = [r for p, r in zip(panels, rows) if p.has_torch]
    lines = []
    if torch_rows:
        header = ["cell", "compile (all configs)", "first", "recompile time", "graphs", "breaks",
                  "recompiled", "guards", "kernels", "cache hits"]
        lines.append(align_columns([header] + [
            [safe_text(f"{r.model}/{r.tool}/{r.task}"), r.every_config, r.first_compile,
             r.recompiles_s, r.graphs, r.graph_breaks, r.recompiles, r.guards, r.kernels,
             r.cache] for r in torch_rows]))
    for r in rows:
        cell = safe_text(f"{r.model}/{r.tool}/{r.task}")
        lines += [f"  {cell}: graph break: {safe_text(b)}" for b in r.break_reasons]
        lines += [f"  {cell}: recompiled: {safe_text(x)}" for x in r.recompile_reasons]
        lines += [f"  {cell}: recompile refused in the timed loop: {safe_text(x)}"
                  for x in r.timed_recompiles]
        if r.figures:
            lines.append(f"  {cell}: {safe_text(', '.join(r.figures))}")
    return "\n".join(lines)


def _value_text(c: CompileChange, value: float) -> str:
    if not math.isfinite(value):
        return "-"
    if c.unit == "s":
        return format_seconds(value)
    return f"{value:.4g}" if c.unit == "count" else f"{value:.4g} {c.unit}"


def _change_note(c: CompileChange) -> str:
    notes = [f"new: {r}" for r in c.added] + [f"gone: {r}" for r in c.removed]
    if c.name == KERNELS and c.verdict in ("more", "fewer"):
        notes.append("in the code --explain kept; not a regression by itself (fewer can be "
                     "a better fusion)")
    return "; ".join(notes)


def _shown(changes: Sequence[CompileChange], only_changed: bool) -> list[CompileChange]:
    return [c for c in changes if not only_changed or c.verdict != "same" or c.added]


@dataclass(frozen=True)
class ChangeRow:
    """One compile change as text cells (the report's table, the terminal's)."""

    verdict: str
    regression: bool
    cell: str
    what: str
    base: str
    new: str
    ratio: str
    note: str


def change_rows(changes: Sequence[CompileChange], only_changed: bool = True) -> list[ChangeRow]:
    """The rows of the compile comparison (by default only what changed), regressions
    first as `compare_panels` sorted them."""
    return [ChangeRow(c.verdict, c.is_regression, safe_text(c.cell), f"{c.what} {c.name}",
                      _value_text(c, c.base), _value_text(c, c.new),
                      f"{c.ratio:.2f}x" if math.isfinite(c.ratio) else "-",
                      safe_text(_change_note(c)))
            for c in _shown(changes, only_changed)]


def format_compile_changes(changes: Sequence[CompileChange], only_changed: bool = True) -> str:
    """The compile comparison for a terminal: one line per cell and figure (by default only
    those that changed), each new graph break or recompile named; "" when there is none."""
    rows = change_rows(changes, only_changed)
    if not rows:
        return ""
    header = ["cell", "compile", "base", "new", "ratio", "verdict", "what changed"]
    body = [[r.cell, r.what, r.base, r.new, r.ratio, r.verdict, r.note] for r in rows]
    return "Compile (phases, counts, tools' figures):\n" + align_columns([header] + body)


def compile_changes_markdown(changes: Sequence[CompileChange], md: Any,
                             only_changed: bool = True) -> list[str]:
    """The compile comparison as markdown table lines, `md` escaping each cell."""
    rows = change_rows(changes, only_changed)
    if not rows:
        return []
    lines = ["", "| verdict | cell | compile | base | new | what changed |",
             "|---|---|---|---:|---:|---|"]
    for r in rows:
        cells = [r.verdict, r.cell, r.what, r.base, r.new, r.note]
        lines.append("| " + " | ".join(md(x) for x in cells) + " |")
    return lines


def compile_changes_json(changes: Sequence[CompileChange]) -> list[dict[str, Any]]:
    """The compile comparison as JSON objects; NaN is null."""
    def num(x: float) -> float | None:
        return x if math.isfinite(x) else None

    return [{"cell": c.cell, "what": c.what, "name": c.name, "unit": c.unit,
             "base": num(c.base), "new": num(c.new), "ratio": num(c.ratio),
             "p_value": num(c.p_value), "verdict": c.verdict, "added": list(c.added),
             "removed": list(c.removed), "is_regression": c.is_regression}
            for c in changes]



@dataclass(frozen=True)
class CompileHistoryView:
    """A cell's compile panel over the builds of one machine class: one column per split,
    phase and count, one row (build label, texts) per build, newest first."""

    machine_class: str
    columns: list[str]
    builds: list[tuple[str, list[str]]]


def compile_history_views(series_by_class: dict[str, dict[tuple[str, str], list[CompilePoint]]],
                          cell: str) -> list[CompileHistoryView]:
    """The compile table of `cell` for each machine class whose builds have its panel."""
    views = []
    for cls, series in sorted(series_by_class.items()):
        names = [n for n in SPLITS + PHASES + COUNTS if (cell, n) in series]
        if not names:
            continue
        rows: dict[str, dict[str, str]] = {}
        for name in names:
            for point in series[cell, name]:
                if point.value is None:
                    text = "?"
                else:
                    text = f"{point.value:g}" if name in COUNTS else format_seconds(point.value)
                rows.setdefault(point.build, {})[name] = text
        builds = [(safe_text(label), [cells.get(n, "-") for n in names])
                  for label, cells in reversed(rows.items())]
        views.append(CompileHistoryView(safe_text(cls), [n.replace("_", " ") for n in names],
                                        builds))
    return views


_Page = TypeVar("_Page")


def with_compile_tables(pages: dict[str, _Page], builds: Sequence[Any],
                        newest: int) -> dict[str, _Page]:
    """The dashboard's benchmark pages (views with `benchmark` and `compile`) with their
    cell's compile table over the newest `newest` builds of each machine class in `builds`
    (`history.StoredBuild`s, oldest first): each of those builds' files is read for it."""
    classes = dict.fromkeys(b.machine_class for b in builds)
    by_class = {cls: compile_series([b for b in builds if b.machine_class == cls][-newest:])
                for cls in classes}
    return {href: dataclasses.replace(view, compile=compile_history_views(  # type: ignore
                by_class, "/".join(str(getattr(view, "benchmark")).split("/", 3)[:3])))
            for href, view in pages.items()}
