"""`compare --explain`'s text: each explained benchmark's op diff (`compare.explain`) as a
table for a terminal, as markdown, or as the JSON rows of its `explain` list; and the
report's view of compiled cells' generated code (`compare.codediff`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from kscperf.compare.codediff import CodeDiff
from kscperf.compare.countdiff import CountExplanation, FunctionChange
from kscperf.compare.explain import Explanation, OpChange
from kscperf.views.textunits import align_columns, format_count, format_p, format_percent, format_seconds, \
    json_number, markdown_text, one_line, safe_text

__all__ = ["TABLE_ROWS", "OP_HEADER", "FUNCTION_HEADER", "explained", "explained_counts",
           "explanation_title", "count_explanation_title", "format_delta", "op_verdict",
           "op_cells", "function_cells", "explain_json", "count_explain_json",
           "format_explanations", "format_count_explanations", "GraphView", "CodeView",
           "code_views"]

# The ops a table or markdown shows per benchmark; JSON has them all.
TABLE_ROWS = 10


def _asked_for(comparison: Any, which: str, kind: str, found: Sequence[Any]
               ) -> tuple[list[Any], list[str]]:
    """Of the rows of `kind` that `which` asks for ("regressions", "all" or "": none), the
    diffs in `found` (by benchmark name) and the names with none."""
    if not which:
        return [], []
    wanted = [r.name for r in comparison.rows if r.kind == kind
              and (which == "all" or r.is_regression)]
    by_name = {e.name: e for e in found}
    return ([by_name[n] for n in wanted if n in by_name],
            [n for n in wanted if n not in by_name])


def explained(comparison: Any, which: str) -> tuple[list[Explanation], list[str]]:
    """The explanations `which` asks for ("regressions": of the run-time regressions, "all":
    every one; "": none), and the asked-for benchmarks that a build did not profile."""
    return _asked_for(comparison, which, "time", comparison.explanations)


def explained_counts(comparison: Any, which: str) -> tuple[list[CountExplanation], list[str]]:
    """The function diffs `which` asks for ("regressions": of the instruction rows called
    slower, "all": every one; "": none), and the asked-for instruction rows that a build
    did not keep functions for (`run --instructions --explain`)."""
    return _asked_for(comparison, which, "instructions", comparison.count_explanations)


def format_delta(seconds: float) -> str:
    """A change of time with its sign ("+86.2 us"); "-" when unknown."""
    if math.isnan(seconds):
        return "-"
    return ("+" if seconds > 0 else "") + format_seconds(seconds)


def op_verdict(o: OpChange) -> str:
    """An op's verdict, with the build it alone ran ("slower, only in NEW")."""
    return o.verdict + (f", only in {o.only_in.upper()}" if o.only_in else "")


def op_cells(o: OpChange) -> list[str]:
    """One op's row as the cells of `OP_HEADER` (text, not yet escaped)."""
    return [o.op, _count(o.calls_base), _count(o.calls_new), format_seconds(o.self_s_base),
            format_seconds(o.self_s_new), format_delta(o.delta_s), format_percent(o.share),
            format_p(o.q_value), op_verdict(o)]


def _count(calls: float) -> str:
    return "-" if math.isnan(calls) else f"{calls:.3g}"


OP_HEADER = ["op", "calls base", "calls new", "self base", "self new", "Δ per call", "share",
           "q", "verdict"]


def explanation_title(e: Explanation) -> str:
    """What one op diff is of, and how far to trust it, in one line."""
    return (f"Ops of {e.name}: measured {format_delta(e.measured_delta_s)} a call; "
            f"{e.processes_base} and {e.processes_new} processes profiled, profiler overhead "
            f"{format_percent(e.overhead_base)} and {format_percent(e.overhead_new)}; the ops "
            f"called slower or faster explain {format_percent(e.explained_share)} of it")


def _diff_block(title: str, header: list[str], rows: list[list[str]], total: int,
                what: str, fmt: str) -> list[str]:
    """One diff's lines: its title, then its first rows as a markdown table ("markdown",
    the first column text, the others numbers but the last) or aligned columns, then how
    many more `what` JSON holds, then a blank line."""
    if fmt == "markdown":
        lines = [f"**{markdown_text(title)}**", "", "| " + " | ".join(header) + " |",
                 "|---|" + "---:|" * (len(header) - 2) + "---|"]
        lines += ["| " + " | ".join(markdown_text(c) for c in r) + " |" for r in rows]
    else:
        lines = [one_line(title),
                 align_columns([header] + [[one_line(c) for c in r] for r in rows])]
    left = total - len(rows)
    return lines + ([f"({left} more {what} in --format json)"] if left > 0 else []) + [""]


FUNCTION_HEADER = ["function", "base", "new", "Δ per call", "share", "verdict"]


def _count_delta(n: float) -> str:
    if math.isnan(n):
        return "-"
    return ("+" if n > 0 else "") + format_count(n)


def function_cells(f: FunctionChange) -> list[str]:
    """One function's row as the cells of `FUNCTION_HEADER` (text, not yet escaped)."""
    return [f.function[:120], format_count(f.base), format_count(f.new),
            _count_delta(f.delta), format_percent(f.share),
            f.verdict + (f", only in {f.only_in.upper()}" if f.only_in else "")]


def count_explanation_title(e: CountExplanation) -> str:
    """What one function diff is of, in one line."""
    return (f"Functions of {e.name}: measured {_count_delta(e.measured_delta)} a call "
            f"({format_percent(e.measured_delta / e.base_count if e.base_count else math.nan)}"
            f"); {e.processes_base} and {e.processes_new} processes counted; the functions "
            f"that moved explain {format_percent(e.explained_share)} of it")


def format_count_explanations(explanations: list[CountExplanation], missing: list[str],
                              fmt: str) -> str:
    """The function diffs as a table per instructions benchmark ("table") or markdown
    ("markdown"), each with its first `TABLE_ROWS` functions, and a line naming the
    benchmarks asked for that a build kept no functions for; "" when none was asked for."""
    parts = []
    for e in explanations:
        parts += _diff_block(count_explanation_title(e), FUNCTION_HEADER,
                             [function_cells(f) for f in e.functions[:TABLE_ROWS]],
                             len(e.functions), "functions", fmt)
    if missing:
        parts.append(f"No function counts in both builds for {len(missing)} of the "
                     f"instruction rows asked to explain ({one_line(', '.join(missing[:3]))}"
                     f"{', ...' if len(missing) > 3 else ''}): count both builds with "
                     "--instructions --explain.")
    return "\n".join(parts).rstrip("\n")


def format_explanations(explanations: list[Explanation], missing: list[str], fmt: str) -> str:
    """The op diffs as a table per benchmark ("table") or markdown ("markdown"), each with
    its first `TABLE_ROWS` ops, and a line naming the benchmarks asked for that a build did
    not profile, or saying that there was nothing to explain."""
    parts = []
    for e in explanations:
        parts += _diff_block(explanation_title(e), OP_HEADER,
                             [op_cells(o) for o in e.ops[:TABLE_ROWS]], len(e.ops), "ops", fmt)
    if not explanations and not missing:
        parts.append("No run-time regression to explain; --explain-all explains every "
                     "benchmark both builds profiled.")
    if missing:
        parts.append(f"No op profiles in both builds for {len(missing)} of the benchmarks asked "
                     f"to explain ({one_line(', '.join(missing[:3]))}"
                     f"{', ...' if len(missing) > 3 else ''}): run both builds with --explain.")
    return "\n".join(parts).rstrip("\n")


def explain_json(e: Explanation) -> list[dict[str, Any]]:
    """One explained benchmark's `explain` list: every op, largest |Δ| first."""
    return [{"op": o.op, "calls_base": json_number(o.calls_base),
             "calls_new": json_number(o.calls_new), "self_s_base": json_number(o.self_s_base),
             "self_s_new": json_number(o.self_s_new), "delta_s": json_number(o.delta_s),
             "delta_low": json_number(o.delta_low), "delta_high": json_number(o.delta_high),
             "share": json_number(o.share), "p_value": json_number(o.p_value),
             "q_value": json_number(o.q_value), "only_in": o.only_in or None,
             "verdict": o.verdict} for o in e.ops]


def count_explain_json(e: CountExplanation) -> list[dict[str, Any]]:
    """One explained instructions benchmark's `explain` list: every function kept, largest
    |Δ| first."""
    return [{"function": f.function, "base": json_number(f.base), "new": json_number(f.new),
             "delta": json_number(f.delta), "share": json_number(f.share),
             "only_in": f.only_in or None, "verdict": f.verdict} for f in e.functions]


@dataclass(frozen=True)
class GraphView:
    """One compiled graph's kernels in each build and its code's unified diff, as text."""

    title: str
    kernels_base: str
    kernels_new: str
    diff: str


@dataclass(frozen=True)
class CodeView:
    """One compiled cell's generated code, BASE against NEW, as text: a one-line summary
    and its graphs, the changed ones first."""

    cell: str
    summary: str
    graphs: list[GraphView]


def _kernel_list(kernels: tuple[str, ...]) -> str:
    return ", ".join(kernels) if kernels else "(no kernels)"


def code_views(diffs: Sequence[CodeDiff]) -> list[CodeView]:
    """The report's generated-code section: one view per cell whose code both builds kept,
    the cells whose code changed first."""
    views = []
    for d in sorted(diffs, key=lambda d: not d.changed):
        changed = sum(g.changed for g in d.graphs)
        summary = (f"{d.kernels_base} → {d.kernels_new} kernels; {changed} of "
                   f"{len(d.graphs)} graphs changed")
        graphs = [GraphView(f"graph {g.graph}" + ("" if g.changed else " (same code)"),
                            safe_text(_kernel_list(g.kernels_base)),
                            safe_text(_kernel_list(g.kernels_new)), safe_text(g.diff))
                  for g in sorted(d.graphs, key=lambda g: not g.changed)]
        views.append(CodeView(safe_text(d.cell), summary, graphs))
    return views
