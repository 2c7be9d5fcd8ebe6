"""The smallest text helpers every presentation module shares: a string made safe for a
terminal, a duration with its unit, and aligned columns. Imports nothing of kscperf, so
`formatting` and the views it builds on can all use them."""

from __future__ import annotations

import math
import re

__all__ = ["safe_text", "format_seconds", "align_columns"]

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
