"""Numbers as text: durations, ratios, byte counts, terminal and markdown tables.

Only scales and rounds what it is handed; every statistic comes from `stats`/`compare`.
Every string that came from a definition or a results file goes through `safe_text`, so no
terminal escape sequence from a file reaches the screen.
"""

from __future__ import annotations

import math
import re

from kscperf.compare import BuildRow, CellView

__all__ = ["safe_text", "format_seconds", "format_bytes", "format_run_table", "STATUS_MARKS"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

STATUS_MARKS = {
    "incorrect": "INCORRECT",
    "failed": "FAILED",
    "timeout": "TIMEOUT",
    "crashed": "CRASHED",
    "oom": "OOM",
    "skipped": "skipped",
    "unsupported": "unsupported",
}


def safe_text(text: object) -> str:
    """`text` with control characters (ESC, CR, ...) shown as `\\xNN` escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def format_seconds(seconds: float) -> str:
    """A duration with a unit chosen so that 3 significant digits show."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


def format_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _run_cell_text(view: CellView | None) -> str:
    if view is None:
        return ""
    if view.status in ("ok", "incorrect") and view.n_values:
        text = f"{format_seconds(view.median_s)} ±{format_seconds(view.spread_s)}"
        if math.isfinite(view.speedup) and view.speedup > 0:
            text += f" ({view.speedup:.2f}x)"
        if view.status == "incorrect":
            text += " INCORRECT"
        return text
    return STATUS_MARKS.get(view.status, view.status)


def _align(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_run_table(tools: list[str], rows: list[BuildRow]) -> str:
    """The end-of-run table: model, config, task against tools; median ± MAD, speedup over
    pt in parentheses, statuses other than ok spelled out."""
    header = ["model", "config", "task"] + [safe_text(t) for t in tools]
    body = [[safe_text(r.model), safe_text(r.config), r.task]
            + [_run_cell_text(r.cells.get(t)) for t in tools] for r in rows]
    return _align([header] + body)


def format_check_table(cells: list[dict]) -> str:
    """The `check` table: one line per model/tool/task/config with its status, what was
    compared, the worst absolute and relative errors and the tolerance."""
    header = ["model", "tool", "task", "config", "status", "checked", "max abs err",
              "max rel err", "rtol/atol", "reason"]
    body = []
    for c in cells:
        chk = c.get("check") or {}
        body.append([safe_text(c["model"]), safe_text(c["tool"]), c["task"],
                     safe_text(c["config"] if c["config"] is not None else "*"), c["status"],
                     chk.get("what", ""),
                     f"{chk['max_abs_err']:.2e}" if chk else "",
                     f"{chk['max_rel_err']:.2e}" if chk else "",
                     f"{chk['rtol']:g}/{chk['atol']:g}" if chk else "",
                     safe_text(c.get("reason", ""))[:100]])
    return _align([header] + body)
