"""Numbers as text: durations, ratios, byte counts, terminal and markdown tables, and the
JSON form of a comparison.

Only scales and rounds what it is handed; every statistic comes from `stats`/`compare`.
Every string that came from a definition or a results file goes through `safe_text` (and,
in markdown, through markdown escaping), so no terminal escape sequence from a file reaches
the screen. JSON output keeps names exact and relies on `json`'s own escaping with
`ensure_ascii`, which writes every control or non-ASCII character as a `\\uXXXX` escape.
"""

from __future__ import annotations

import json
import math
import textwrap
from typing import Any

from kscperf.compare.builds import Comparison, ComparisonRow, GeoMean, MachineCheck, Verdict
from kscperf.stats import core as stats, machine
from kscperf.views.explaintext import count_explain_json, explain_json, explained, \
    explained_counts, format_count_explanations, format_explanations
from kscperf.views.compileview import compile_changes_json, compile_changes_markdown, \
    format_compile_changes
from kscperf.errors import TIMED_STATUSES, CellStatus
from kscperf.results.files import CellSummary
from kscperf.results.samples import BuildRow, CellView
from kscperf.views.textunits import align_columns as align_table
from kscperf.views.textunits import format_count, format_p, format_percent, format_seconds, \
    json_number, markdown_text, one_line, safe_text

__all__ = [
    "safe_text",
    "format_seconds",
    "format_bytes",
    "format_count",
    "format_ratio",
    "format_interval",
    "format_p",
    "format_percent",
    "format_quantity",
    "verdict_text",
    "machine_lines",
    "status_text",
    "geomean_label",
    "format_confidence",
    "comparison_criteria",
    "format_run_table",
    "format_comparison",
    "COMPARISON_FORMATS",
    "STATUS_MARKS",
    "align_table",
    "one_line",
    "markdown_text",
    "json_number",
    "MACHINE_STATE_MARK",
    "machine_state_note",
    "config_text",
]

# How each status reads where it is shown instead of (or beside) a time: what went wrong
# in capitals, what was not run in lower case.
STATUS_MARKS = {
    CellStatus.OK: "ok",
    CellStatus.INCORRECT: "INCORRECT",
    CellStatus.FAILED: "FAILED",
    CellStatus.TIMEOUT: "TIMEOUT",
    CellStatus.CRASHED: "CRASHED",
    CellStatus.OOM: "OOM",
    CellStatus.SKIPPED: "skipped",
    CellStatus.UNSUPPORTED: "unsupported",
    CellStatus.NOT_RUN: "not run",
}

# Beside a time that includes processes timed while the machine was in another state (the
# canary says so, `kscperf.stats.machine`): that number may be the machine's, not the build's.
MACHINE_STATE_MARK = "~"


def machine_state_note(marked: int, processes: int) -> str:
    """The line that explains `MACHINE_STATE_MARK` under a table; "" when nothing is
    marked."""
    if not marked:
        return ""
    return (f"{MACHINE_STATE_MARK} {marked} value{'s' if marked != 1 else ''} include "
            f"processes timed while the machine was in another state ({processes} "
            f"process{'es' if processes != 1 else ''} of the run, by the canary)")


def config_text(config: str | None) -> str:
    """A row's config as shown: "*" for the fate of a cell that never reached one."""
    return safe_text(config if config is not None else "*")


def format_bytes(n: int | float | None) -> str:
    """A byte count in B, KiB, MiB or GiB; "-" for None or NaN."""
    if n is None or (isinstance(n, float) and not math.isfinite(n)):
        return "-"
    if isinstance(n, float):
        n = round(n)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _run_cell_text(view: CellView | None) -> str:
    if view is None:
        return ""
    if view.status in TIMED_STATUSES and view.n_values:
        text = f"{format_seconds(view.median_s)} ±{format_seconds(view.spread_s)}"
        if math.isfinite(view.speedup) and view.speedup > 0:
            text += f" ({view.speedup:.2f}x)"
        if view.status is not CellStatus.OK:
            text += f" {STATUS_MARKS[view.status]}"
        if view.odd_processes:
            text += f" {MACHINE_STATE_MARK}"
        return text
    return STATUS_MARKS[view.status]


def format_run_table(tools: list[str], rows: list[BuildRow]) -> str:
    """The end-of-run table: model, config, task against tools; median ± MAD, speedup over
    pt in parentheses, statuses other than ok spelled out. A tool skipped everywhere for
    one reason (CUDA twins on a machine without a GPU) gets a line under the table instead
    of a column."""
    skipped_everywhere: dict[str, str] = {}
    for tool in tools:
        views = [r.cells[tool] for r in rows if tool in r.cells]
        reasons = {v.reason for v in views}
        if views and all(v.status is CellStatus.SKIPPED for v in views) and len(reasons) == 1:
            skipped_everywhere[tool] = reasons.pop()
    shown = [t for t in tools if t not in skipped_everywhere]
    header = ["model", "config", "task"] + [safe_text(t) for t in shown]
    body = [[safe_text(r.model), config_text(r.config), r.task]
            + [_run_cell_text(r.cells.get(t)) for t in shown]
            for r in rows if any(t in r.cells for t in shown)]
    lines = [align_table([header] + body)] if body else []
    by_reason: dict[str, list[str]] = {}
    for tool, reason in skipped_everywhere.items():
        by_reason.setdefault(reason, []).append(tool)
    for reason, skipped in by_reason.items():
        lines.append(f"skipped everywhere: {', '.join(map(safe_text, skipped))} "
                     f"({safe_text(reason)})")
    return "\n".join(lines)


def format_compile_table(tools: list[str], rows: list[BuildRow]) -> str:
    """The compile times of the end of a run: one line per model and tool that compiles
    (median over processes), one column per task; empty when nothing was compiled."""
    compile_s: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        for tool in tools:
            view = r.cells.get(tool)
            if view is not None and math.isfinite(view.compile_s):
                compile_s.setdefault((r.model, tool), {}).setdefault(r.task, view.compile_s)
    if not compile_s:
        return ""
    tasks = list(dict.fromkeys(r.task for r in rows))
    header = ["model", "tool"] + [f"{t} compile" for t in tasks]
    body = [[safe_text(model), safe_text(tool)]
            + [format_seconds(per_task.get(t, math.nan)) for t in tasks]
            for (model, tool), per_task in compile_s.items()]
    return align_table([header] + body)


def format_check_table(cells: list[CellSummary]) -> str:
    """The `check` table: one line per model/tool/task/config with its status, what was
    compared, the worst absolute and relative errors and the tolerance."""
    header = ["model", "tool", "task", "config", "status", "checked", "max abs err",
              "max rel err", "rtol/atol", "reason"]
    body = []
    for c in cells:
        chk = c.check
        errors = ([chk.what, f"{chk.max_abs_err:.2e}", f"{chk.max_rel_err:.2e}",
                   f"{chk.rtol:g}/{chk.atol:g}"] if chk is not None else ["", "", "", ""])
        body.append([safe_text(c.model), safe_text(c.tool), c.task,
                     config_text(c.config), c.status.value,
                     *errors, safe_text(c.reason)])
    return align_table([header] + body)


# --------------------------------------------------------------------------------------
# Build-over-build comparison
# --------------------------------------------------------------------------------------

COMPARISON_FORMATS = ("table", "markdown", "json")

# For memory rows the verdicts faster/slower mean less/more memory; people read these.
_MEMORY_VERDICT_TEXT = {Verdict.SLOWER: "more memory", Verdict.FASTER: "less memory"}
_COUNT_VERDICT_TEXT = {Verdict.SLOWER: "more instructions",
                       Verdict.FASTER: "fewer instructions"}

# Column cap for free text (failure reasons) in the terminal table.
_REASON_WIDTH = 60


def format_ratio(ratio: float) -> str:
    """NEW/BASE as "1.23x"; "-" when unknown."""
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"{ratio:.3f}x" if 0.995 <= ratio < 1.005 and ratio != 1.0 else f"{ratio:.2f}x"


def format_interval(low: float, high: float) -> str:
    """An interval of ratios as "[1.18x, 1.22x]"; "-" when unknown."""
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return "-"
    return f"[{low:.2f}x, {high:.2f}x]"


def format_quantity(value: float, unit: str) -> str:
    """A median in its pyperf unit: seconds, bytes or (integer) instruction counts."""
    if unit == "integer":
        return format_count(value)
    return format_bytes(value) if unit == "byte" else format_seconds(value)


def verdict_text(row: ComparisonRow) -> str:
    """The verdict as people read it: memory and instruction-count changes in their own
    words, and a trailing "~" where the change is beyond the minimum effect but not
    significant."""
    text = row.verdict.value
    if row.unit == "byte":
        text = _MEMORY_VERDICT_TEXT.get(row.verdict, text)
    elif row.unit == "integer":
        text = _COUNT_VERDICT_TEXT.get(row.verdict, text)
    return text + ("~" if row.inconclusive else "")


def status_text(base: CellStatus | None, new: CellStatus | None, reason: str = "",
                arrow: str = "->") -> str:
    """How a benchmark's status went from BASE to NEW: "" when ok in both builds, else the
    status, or `BASE -> NEW` when it changed ("absent" for a build without the benchmark),
    then `: reason` when there is one. Escapes nothing: `reason` comes from a file."""
    if base is new is CellStatus.OK:
        return ""
    before = base.value if base is not None else "absent"
    after = new.value if new is not None else "absent"
    text = before if before == after else f"{before} {arrow} {after}"
    return f"{text}: {reason}" if reason else text


def geomean_label(g: GeoMean) -> str:
    """What a geometric mean is over: "all", or "tool NAME" / "task NAME". Escapes nothing:
    the name comes from a file."""
    return "all" if g.by == "all" else f"{g.by} {g.key}"


def format_confidence(alpha: float) -> str:
    """The confidence of intervals at level `alpha`: 0.05 as "95%"."""
    return f"{(1 - alpha) * 100:.0f}%"


def _rows_to_show(comparison: Comparison, only_changed: bool) -> list[ComparisonRow]:
    if not only_changed:
        return list(comparison.rows)
    return [r for r in comparison.rows if r.verdict != Verdict.SAME]


def comparison_criteria(comparison: Comparison) -> str:
    """One paragraph saying what a verdict of `comparison` means: the minimum effect, the
    significance level and its adjustment, the intervals, the detectable effect, "~" and
    the memory verdicts; where there are instruction rows, their minimum effect and test."""
    confidence = format_confidence(comparison.alpha)
    return (f"A change needs NEW/BASE beyond {format_percent(comparison.min_effect)} and "
            f"q < {comparison.alpha:g} (Benjamini-Hochberg over the benchmarks of each "
            f"kind). Intervals are {confidence}. Detectable: the smallest change the spread "
            f"lets the test find with {stats.DEFAULT_POWER * 100:.0f}% power. A trailing ~ "
            "marks a change beyond the minimum effect that is not significant. For memory, "
            "slower and faster mean more and less memory. machine-shift: the machine's own "
            "speed changed in a way that could explain the change or hide one; it is not a "
            "regression." + (_UNTIL_RESOLVED_TEXT if _until_resolved(comparison) else "")
            + (_counts_text(comparison) if any(r.kind == "instructions"
                                               for r in comparison.rows) else ""))


def _counts_text(comparison: Comparison) -> str:
    return (" Instruction counts (run --instructions) need NEW/BASE beyond "
            f"{format_percent(comparison.instructions_min_effect)}, tested by Student's t on "
            "the logs of one count per counting process; more and fewer instructions are "
            "slower and faster.")


_UNTIL_RESOLVED_TEXT = (
    " Run until resolved: run-time intervals are confidence sequences, valid at whatever "
    "pair the run stopped; pairs: the process pairs the verdict took, with open where the "
    "interval was neither wholly beyond nor wholly within the minimum effect when the budget "
    "ran out.")


def _until_resolved(comparison: Comparison) -> bool:
    return any(r.resolution for r in comparison.rows)


def _pairs_text(r: ComparisonRow) -> str:
    if not r.resolution:
        return ""
    return f"{r.n_base} open" if r.resolution == "open" else str(r.n_base)


def _speed_shift_line(check: MachineCheck) -> str:
    shift = check.shift
    if shift is None:
        return ("machine speed: not compared (the two builds of one `ab` run share the "
                "machine's state pair by pair).")
    interval = format_interval(shift.low, shift.high)
    if shift.state is machine.ShiftState.UNCHANGED:
        return (f"machine speed: unchanged (canary NEW/BASE {format_ratio(shift.ratio)} "
                f"{interval}).")
    if shift.state is machine.ShiftState.UNRESOLVED:
        return (f"machine speed: unresolved (canary NEW/BASE {format_ratio(shift.ratio)} "
                f"{interval}): too few or too noisy canaries to tell whether the machine "
                "changed; time verdicts a change within that interval could explain are "
                "machine-shift.")
    slower = "slower" if shift.ratio > 1 else "faster"
    return (f"machine changed: NEW's machine ran {format_ratio(max(shift.ratio, 1 / shift.ratio))}"
            f" {slower} than BASE's by the canary (NEW/BASE {format_ratio(shift.ratio)} "
            f"{interval}, p {format_p(shift.p_value)}); time verdicts it could explain are "
            "machine-shift. Compare builds on a changing machine with `ab`.")


def machine_lines(check: MachineCheck) -> list[str]:
    """What the canaries say, one line each: whether the machine's speed changed between
    the runs (with the ratio and its interval) or is unknown, then, per run, how many
    processes ran in another machine state."""
    missing = [side for side, speed in (("BASE", check.base), ("NEW", check.new))
               if speed is None]
    if missing:
        lines = [f"machine speed: unknown ({' and '.join(missing)} "
                 f"{'has' if len(missing) == 1 else 'have'} no canary: written by an older "
                 "kscperf, or nothing was timed); verdicts cannot allow for a change of "
                 "the machine."]
    else:
        lines = [_speed_shift_line(check)]
    for side, speed in (("BASE", check.base), ("NEW", check.new)):
        if speed is not None and speed.odd:
            lines.append(
                f"machine states: {len(speed.odd)} of {len(speed.processes)} {side} processes "
                f"ran with the canary {format_ratio(machine.ODD_STATE_FACTOR)} or more off "
                "the run's usual speed; a verdict that does not hold without them is "
                "machine-shift.")
    return lines


def _header_lines(comparison: Comparison) -> list[str]:
    lines = [f"BASE  {one_line(comparison.base.build)}  ({one_line(comparison.base.path)})",
             f"NEW   {one_line(comparison.new.build)}  ({one_line(comparison.new.path)})"]
    lines += machine_lines(comparison.machine)
    for side in (comparison.base, comparison.new):
        if not side.complete:
            lines.append(f"warning: {one_line(side.path)} is incomplete (the run was "
                         "interrupted).")
    for difference in comparison.ignored_differences:
        lines.append(f"warning: compared anyway despite {one_line(difference)}.")
    return lines


def _table_row(r: ComparisonRow) -> list[str]:
    reason = one_line(r.reason)
    if len(reason) > _REASON_WIDTH:
        reason = reason[: _REASON_WIDTH - 3] + "..."
    note = status_text(r.base_status, r.new_status, reason)
    return [one_line(r.name), r.kind, format_quantity(r.base_value, r.unit),
            format_quantity(r.new_value, r.unit), format_ratio(r.ratio),
            format_interval(r.ratio_low, r.ratio_high), format_p(r.p_value),
            format_percent(r.min_detectable_effect), verdict_text(r), note]


def _format_table(comparison: Comparison, only_changed: bool, explain: str) -> str:
    confidence = f"{format_confidence(comparison.alpha)} interval"
    header = ["benchmark", "kind", "base", "new", "ratio", confidence, "p", "detectable",
              "verdict", "status"]
    shown = _rows_to_show(comparison, only_changed)
    rows = [_table_row(r) for r in shown]
    if _until_resolved(comparison):
        header.insert(-1, "pairs")
        rows = [row[:-1] + [_pairs_text(r), row[-1]] for row, r in zip(rows, shown)]
    parts = _header_lines(comparison) + [textwrap.fill(comparison_criteria(comparison), 100), ""]
    parts.append(align_table([header] + rows) if rows else "(no benchmarks to show)")
    if comparison.geomeans:
        parts += ["", "Geometric mean of NEW/BASE run time (benchmarks correct in both builds):"]
        geo = [[one_line(geomean_label(g)), format_ratio(g.ratio), format_interval(g.low, g.high),
                f"{g.n} benchmarks"] for g in comparison.geomeans]
        width = [max(len(row[i]) for row in geo) for i in range(4)]
        parts += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, width)).rstrip()
                  for row in geo]
    compile_changes = format_compile_changes(comparison.compile_changes, only_changed=True)
    if compile_changes:
        parts += ["", compile_changes]
    if explain:
        parts += ["", format_explanations(*explained(comparison, explain), "table")]
        counts = format_count_explanations(*explained_counts(comparison, explain), "table")
        parts += ["", counts] if counts else []
    parts.append("")
    parts.append(_regression_line(comparison))
    return "\n".join(parts)


def _regression_line(comparison: Comparison) -> str:
    shifted = sum(r.verdict is Verdict.MACHINE_SHIFT for r in comparison.rows)
    line = "regression: yes" if comparison.has_regression else "regression: no"
    if shifted:
        line += (f" ({shifted} machine-shift {'row is' if shifted == 1 else 'rows are'} "
                 "not counted as regressions)")
    return line


def _format_markdown(comparison: Comparison, only_changed: bool, explain: str) -> str:
    lines = [f"**BASE** {markdown_text(comparison.base.build)} ({markdown_text(comparison.base.path)}) "
             f"&rarr; **NEW** {markdown_text(comparison.new.build)} ({markdown_text(comparison.new.path)})", ""]
    for line in _header_lines(comparison)[2:]:
        lines += [f"> {markdown_text(line)}", ""]
    lines += [markdown_text(comparison_criteria(comparison)), ""]
    confidence = f"{format_confidence(comparison.alpha)} interval"
    header = ["verdict", "benchmark", "kind", "base", "new", "ratio", confidence, "p", "q",
              "detectable", "status"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] * 3 + ["---:"] * 7 + ["---"]) + "|")
    for r in _rows_to_show(comparison, only_changed):
        status = status_text(r.base_status, r.new_status, r.reason)
        cells = [verdict_text(r), r.name, r.kind, format_quantity(r.base_value, r.unit),
                 format_quantity(r.new_value, r.unit), format_ratio(r.ratio),
                 format_interval(r.ratio_low, r.ratio_high), format_p(r.p_value),
                 format_p(r.q_value), format_percent(r.min_detectable_effect), status]
        lines.append("| " + " | ".join(markdown_text(c) for c in cells) + " |")
    if comparison.geomeans:
        lines += ["", "| geometric mean of NEW/BASE run time | ratio | interval | benchmarks |",
                  "|---|---:|---:|---:|"]
        for g in comparison.geomeans:
            lines.append(f"| {markdown_text(geomean_label(g))} | {format_ratio(g.ratio)} | "
                         f"{markdown_text(format_interval(g.low, g.high))} | {g.n} |")
    lines += compile_changes_markdown(comparison.compile_changes, markdown_text,
                                      only_changed=True)
    if explain:
        lines += ["", format_explanations(*explained(comparison, explain), "markdown")]
        counts = format_count_explanations(*explained_counts(comparison, explain), "markdown")
        lines += ["", counts] if counts else []
    regression = _regression_line(comparison).removeprefix("regression: ")
    lines += ["", f"Regression: {regression.replace('yes', '**yes**', 1)}"]
    return "\n".join(lines)


def _row_json(r: ComparisonRow) -> dict[str, Any]:
    # An `ab --until-resolved` row also says where its interval stopped and after how many
    # pairs; other rows keep exactly the keys they always had.
    extra: dict[str, Any] = ({"resolution": r.resolution, "pairs": r.n_base}
                             if r.resolution else {})
    return {
        "name": r.name, "kind": r.kind, "model": r.model, "tool": r.tool, "task": r.task,
        "config": r.config, "verdict": r.verdict.value, "inconclusive": r.inconclusive,
        "ratio": json_number(r.ratio), "ratio_low": json_number(r.ratio_low),
        "ratio_high": json_number(r.ratio_high), "p_value": json_number(r.p_value),
        "q_value": json_number(r.q_value),
        "min_detectable_effect": json_number(r.min_detectable_effect),
        "base_value": json_number(r.base_value), "new_value": json_number(r.new_value),
        "unit": r.unit,
        "base_status": r.base_status.value if r.base_status is not None else "",
        "new_status": r.new_status.value if r.new_status is not None else "",
        "reason": r.reason, "method": r.method, "n_base": r.n_base, "n_new": r.n_new,
        **extra,
    }


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float):
        return json_number(value)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def _machine_json(check: MachineCheck) -> dict[str, Any]:
    def speed(s: machine.MachineSpeed | None) -> dict[str, Any] | None:
        if s is None:
            return None
        return {**_json_safe(s.to_dict()),
                "odd": [{"cell": p.cell, "process_index": p.process_index,
                         "canary_s": json_number(p.score_s)} for p in s.odd]}

    shift = check.shift
    return {"base": speed(check.base), "new": speed(check.new),
            "shift": None if shift is None else {
                "ratio": json_number(shift.ratio), "ratio_low": json_number(shift.low),
                "ratio_high": json_number(shift.high), "p_value": json_number(shift.p_value),
                "state": shift.state.value, "shifted": shift.shifted}}


def _format_json(comparison: Comparison, only_changed: bool, explain: str) -> str:
    def side(info: Any) -> dict[str, Any]:
        return {"build": info.build, "path": info.path, "complete": info.complete,
                "metadata": _json_safe(info.metadata)}

    explanations, missing = explained(comparison, explain)
    ops = {e.name: explain_json(e) for e in explanations}
    count_explanations, count_missing = explained_counts(comparison, explain)
    ops.update({e.name: count_explain_json(e) for e in count_explanations})
    missing = missing + count_missing
    benchmarks = [dict(_row_json(r), **({"explain": ops[r.name]} if r.name in ops else {}))
                  for r in _rows_to_show(comparison, only_changed)]
    doc: dict[str, Any] = {
        "base": side(comparison.base),
        "new": side(comparison.new),
        "min_effect": comparison.min_effect,
        "alpha": comparison.alpha,
        "has_regression": comparison.has_regression,
        "ignored_differences": list(comparison.ignored_differences),
        "machine": _machine_json(comparison.machine),
        "benchmarks": benchmarks,
        "geomeans": [{"by": g.by, "key": g.key, "ratio": json_number(g.ratio),
                      "ratio_low": json_number(g.low), "ratio_high": json_number(g.high), "n": g.n}
                     for g in comparison.geomeans],
        "compile": compile_changes_json(comparison.compile_changes),
    }
    if explain:
        doc["explain_missing"] = missing
    return json.dumps(doc, indent=2, ensure_ascii=True, allow_nan=False)


def format_comparison(comparison: Comparison, fmt: str = "table", *,
                      only_changed: bool = False, explain: str = "") -> str:
    """The comparison as text in `fmt`, one of `COMPARISON_FORMATS`:

    - "table": aligned columns for a terminal, rows as `compare_builds` sorted them (slowest
      change first), then the geometric means and whether there is a regression;
    - "markdown": the same as GitHub-flavoured markdown tables;
    - "json": one object with `benchmarks` (one object per row: name, kind, verdict, ratio,
      ratio_low, ratio_high, p_value, q_value, min_detectable_effect, medians, statuses...)
      and `geomeans`; NaN is null.

    `only_changed` leaves out rows whose verdict is "same". `explain` ("regressions" or
    "all") adds the op diffs of the run-time regressions or of every run-time benchmark
    both builds profiled (`views.explaintext`): tables after the comparison, or in JSON an
    `explain` list in each explained benchmark and `explain_missing`, the benchmarks asked
    for that a build did not profile. No string from a file reaches the output unescaped.
    Raises ValueError for an unknown format.
    """
    if fmt == "table":
        return _format_table(comparison, only_changed, explain)
    if fmt == "markdown":
        return _format_markdown(comparison, only_changed, explain)
    if fmt == "json":
        return _format_json(comparison, only_changed, explain)
    raise ValueError(f"unknown comparison format {fmt!r}; expected one of {COMPARISON_FORMATS}")

