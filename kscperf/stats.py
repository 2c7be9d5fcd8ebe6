"""Pure statistics on sequences of floats: medians, spreads, intervals, tests, geometric means.

No I/O, no formatting, no torch, no pyperf. Thresholds are named constants here, never
literals in formatting or templates.
"""

from __future__ import annotations

import math
import statistics
from typing import Sequence

__all__ = ["median", "median_abs_dev", "speedup"]


def median(values: Sequence[float]) -> float:
    """The median; NaN for an empty sequence."""
    return statistics.median(values) if values else math.nan


def median_abs_dev(values: Sequence[float]) -> float:
    """The median absolute deviation from the median (pyperf's spread); 0 for one value."""
    if len(values) < 2:
        return 0.0
    m = statistics.median(values)
    return statistics.median(abs(v - m) for v in values)


def speedup(reference_s: float, time_s: float) -> float:
    """How many times faster `time_s` is than `reference_s` (>1: faster)."""
    if not (time_s > 0 and reference_s > 0):
        return math.nan
    return reference_s / time_s
