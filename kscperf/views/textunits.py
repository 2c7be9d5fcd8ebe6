"""The smallest text helpers every presentation module shares: a string made safe for a
terminal, a table cell or markdown, a duration, a p-value and a percentage, a number for JSON,
and aligned columns. Imports nothing of kscperf, so
`formatting` and the views it builds on can all use them."""

from __future__ import annotations

import math
import re

__all__ = ["safe_text", "one_line", "markdown_text", "format_seconds", "format_count",
           "format_p", "format_percent", "json_number", "align_columns"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


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


def align_columns(rows: list[list[str]]) -> str:
    """`rows` (the first one the header) as left-aligned columns with a rule under the
    header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|#!{}])")


def format_count(n: float | None) -> str:
    """An instruction count with an SI prefix ("3.05 M instr"); "-" for None or NaN."""
    if n is None or not math.isfinite(n):
        return "-"
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.4g} {prefix} instr"
    return f"{n:.4g} instr"


def format_p(p: float) -> str:
    """A p-value with 2 significant digits, "<0.001" below that; "-" when unknown."""
    if p is None or math.isnan(p):
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.2g}"


def format_percent(fraction: float) -> str:
    """0.052 as "5.2%"; "-" when unknown, "inf" when infinite."""
    if fraction is None or math.isnan(fraction):
        return "-"
    if math.isinf(fraction):
        return "inf"
    return f"{fraction * 100:.2g}%" if abs(fraction) < 0.1 else f"{fraction * 100:.0f}%"


def one_line(text: object) -> str:
    # safe_text leaves tab and newline alone (they are harmless on a terminal), but either
    # one breaks a table row.
    return safe_text(text).replace("\t", "\\t").replace("\n", "\\n")


def markdown_text(text: object) -> str:
    """Text safe in a GitHub markdown table cell: no control characters, markdown
    punctuation backslash-escaped, HTML metacharacters as entities."""
    plain = one_line(text)
    plain = _MARKDOWN_SPECIAL.sub(r"\\\1", plain)
    return plain.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def json_number(x: float | int | None) -> float | int | None:
    """JSON has no NaN or infinity: both become null."""
    if x is None or isinstance(x, bool):
        return x
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
