"""The changes of a history store as text for people (an aligned table, markdown for a pull
request, the `history check` summary) and as JSON for programs. Computes nothing: the
changes come from `kscperf.history`, the numbers' text from `formatting`.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Iterable

from kscperf.compare.explain import Explanation
from kscperf.views.confirm import ConfirmCommands
from kscperf.views.explaintext import format_delta, op_verdict
from kscperf.views.formatting import (
    align_table,
    format_interval,
    format_p,
    format_percent,
    format_ratio,
    json_number,
    markdown_text,
    one_line,
)
from kscperf.history import ChangeKind, HistoryChange, HistoryCheck, StoredBuild, too_noisy
from kscperf.names import Kind

__all__ = ["HISTORY_FORMATS", "build_text", "change_what", "format_history_changes",
           "format_history_check"]

HISTORY_FORMATS = ("table", "markdown", "json")


def build_text(label: str, commit: str) -> str:
    """A build as people read it: its label, and its short commit when the label is not it."""
    short = commit[:12]
    return label if not short or label.startswith(short) else f"{label} ({short})"


def change_what(change: HistoryChange) -> str:
    """What a `history.HistoryChange` is, in words: `slower`, `faster`, `environment` with
    what changed, or `status` with the statuses on either side."""
    if change.kind is ChangeKind.ENVIRONMENT:
        return f"environment: {change.detail}" if change.detail else "environment"
    if change.kind is ChangeKind.STATUS:
        return f"status {change.before_status} -> {change.after_status}"
    if change.kind is ChangeKind.UNSETTLED:
        return f"unsettled: {change.detail}"
    if change.kind is ChangeKind.TOO_NOISY:
        return f"too noisy: {change.detail}"
    if change.kind is ChangeKind.AB_ONLY:
        return f"not listed: {change.differs}"
    what = str(change.kind)
    if change.key.kind is not None and change.key.kind.unit == "byte":
        what = {"slower": "slower (more memory)", "faster": "faster (less memory)"}.get(
            what, what)
    elif change.key.kind is not None and change.key.kind.unit == "integer":
        what = {"slower": "slower (more instructions)",
                "faster": "faster (fewer instructions)"}.get(what, what)
    if not getattr(change.change, "confirmed", True):
        what += " (newest build only)"
    if change.differs:
        what += f" ({change.differs})"
    return what


def _change_cells(change: HistoryChange) -> list[str]:
    c = change.change
    return [change_what(change), change.key.benchmark, _kind_text(change.key.kind),
            build_text(change.before.label, change.before.git_commit),
            build_text(change.after.label, change.after.git_commit), format_ratio(c.ratio),
            format_interval(c.low, c.high), change.key.machine_class]


_CHANGE_HEADER = ["change", "benchmark", "kind", "last before", "first after", "ratio",
                  "interval", "machine"]


def _kind_text(kind: Kind | None) -> str:
    # None: environment events merged over every series of a machine class.
    return "*" if kind is None else str(kind)


def _change_json(change: HistoryChange) -> dict[str, Any]:
    c = change.change

    def build(b: StoredBuild) -> dict[str, Any]:
        return {"build": b.label, "commit": b.git_commit, "file": b.file,
                "date": b.commit_date or b.run_date}

    return {"change": change.kind, "detail": change.detail,
            "confirmed": bool(getattr(c, "confirmed", True)),
            "regression": change.is_regression, "benchmark": change.key.benchmark,
            "kind": _kind_text(change.key.kind), "model": change.key.model, "tool": change.key.tool,
            "task": change.key.task, "config": change.key.config,
            "machine_class": change.key.machine_class, "before": build(change.before),
            "after": build(change.after), "before_status": str(change.before_status),
            "after_status": str(change.after_status), "ratio": json_number(c.ratio),
            "ratio_low": json_number(c.low), "ratio_high": json_number(c.high),
            "p_value": json_number(c.p_value), "q_value": json_number(c.q_value),
            "detectable_step": json_number(change.detectable_step),
            "ab_verdict": change.ab_verdict or None, "ab_q_value": json_number(change.ab_q),
            "ab_min_effect": json_number(change.ab_min_effect),
            "differs": change.differs or None}


def format_history_changes(changes: Iterable[HistoryChange], fmt: str = "table") -> str:
    """The changes of a history store (`history.HistoryChange`s, in the order given) in
    `fmt`, one of `HISTORY_FORMATS`: an aligned table, a markdown table, or a JSON list of
    objects (change, detail, benchmark, kind, before, after, ratio, ratio_low, ratio_high,
    ...; NaN is null). Every name is escaped as in `format_comparison`. Raises ValueError
    for an unknown format."""
    changes = list(changes)
    if fmt == "json":
        return json.dumps([_change_json(c) for c in changes], indent=2, ensure_ascii=True,
                          allow_nan=False)
    if fmt == "markdown":
        return _markdown_changes(changes) if changes else "No changes found."
    if fmt == "table":
        if not changes:
            return "no changes found"
        rows = [_CHANGE_HEADER] + [[one_line(x) for x in _change_cells(c)] for c in changes]
        return align_table(rows)
    raise ValueError(f"unknown format {fmt!r}; expected one of {HISTORY_FORMATS}")


def _markdown_changes(changes: list[HistoryChange]) -> str:
    lines = ["| " + " | ".join(_CHANGE_HEADER) + " |",
             "|" + "|".join(["---"] * 5 + ["---:"] * 2 + ["---"]) + "|"]
    for c in changes:
        lines.append("| " + " | ".join(markdown_text(x) for x in _change_cells(c)) + " |")
    return "\n".join(lines)


def format_history_check(check: HistoryCheck,
                         confirm: Callable[[HistoryChange], ConfirmCommands],
                         explain: Callable[[HistoryChange], Explanation | None] = lambda c: None
                         ) -> str:
    """The markdown summary of `history check` (a `history.HistoryCheck`) for a pull request
    or a nightly message: the newest builds, the regressions they opened with the commands
    that confirm each (`confirm(change)` gives them) and, where `explain(change)` gives its
    op diff, its top op, and the count of other changes."""
    newest = ", ".join(f"{markdown_text(build_text(b.label, b.git_commit))} on {markdown_text(b.machine_class)}"
                       for b in check.newest)
    lines = [f"**kscperf history check**: newest {newest or 'nothing: the store is empty'}", ""]
    if check.compile_opened:
        lines += [f"**{len(check.compile_opened)} compile regression(s) opened by the newest "
                  "build:**", ""] + [
            f"- `{markdown_text(c.cell)}`: {markdown_text(c.name)} {c.base:g} → {c.new:g}"
            + "".join(f"; new: {markdown_text(r)}" for r in c.added)
            for c in check.compile_opened] + [""]
    if not check.opened:
        lines.append("No time, memory or status regression opened by the newest build."
                     if check.compile_opened else "No regression opened by the newest build.")
    else:
        lines += [f"**{len(check.opened)} regression(s) opened by the newest build:**", "",
                  _markdown_changes(list(check.opened)), ""]
        for change in check.opened:
            commands = confirm(change)
            lines += [f"- `{markdown_text(change.key.benchmark)}` ({change.key.kind}): confirm with",
                      f"  `{commands.compare}`"]
            if commands.bisect:
                lines.append(f"  ; bisect with `{commands.bisect}`")
            explained = explain(change)
            if explained is not None:
                lines.append(f"  ; top op: {_top_op(explained)}")
    others = len(check.changes) - len(check.opened)
    lines += ["", f"{others} other change(s) in the history (`run-benchmarks history changes`)."]
    return "\n".join(lines)


def _top_op(e: Explanation) -> str:
    """The op that changed most, as markdown: its change per call, share and verdict."""
    top = e.top(1)
    if not top:
        return "no ops profiled"
    o = top[0]
    return (f"`{markdown_text(o.op)}` {markdown_text(format_delta(o.delta_s))} a call, "
            f"{format_percent(o.share)} of the change ({markdown_text(op_verdict(o))}, q "
            f"{format_p(o.q_value)}; `compare --explain` has every op)")


def sight_text(step: float, min_effect: float) -> str:
    """What one series can see, in words, from its smallest findable step now
    (`history.detectable_steps`)."""
    if math.isnan(step):
        return "Smallest step it could find now: not known yet (too few builds)."
    if too_noisy(step, min_effect):
        return (f"Too noisy to see a {format_percent(min_effect)} step: the smallest it could "
                f"find now is {format_percent(step)}. No change shown here is not no change.")
    return f"Smallest step it could find now: {format_percent(step)}."


def too_noisy_text(steps: Iterable[float], min_effect: float) -> str:
    """How many of the series whose smallest findable steps are `steps` cannot see a step
    of `min_effect`, in words for the dashboard's front page."""
    steps = list(steps)
    blind = sum(too_noisy(d, min_effect) for d in steps)
    if not blind:
        return (f"Every one of the {len(steps)} series whose noise is known can see a "
                f"{format_percent(min_effect)} step.")
    return (f"{blind} of {len(steps)} series are too noisy to see a "
            f"{format_percent(min_effect)} step: where they show no change, a change of that "
            "size could still be there. Each benchmark's page says the smallest step each of "
            "its series could find now.")
