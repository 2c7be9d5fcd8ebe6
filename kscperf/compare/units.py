"""What a comparison row tests and shows: for prep and compile, the zygotes as the units of
replication (`zygote_units`); for every row, the two values whose ratio is the ratio tested
(`shown_values`). Pure functions over `results.samples` records and `stats.core` estimates,
for `compare.builds`; docs/method.md, "One statistic" and "Single-shot kinds", says why."""

from __future__ import annotations

import math

from kscperf.names import Kind
from kscperf.results.samples import BenchmarkSamples
from kscperf.stats import core as stats

__all__ = ["zygote_units", "shown_values"]


def zygote_units(entry: BenchmarkSamples | None) -> tuple[tuple[float, ...], ...] | None:
    """A prep or compile benchmark's units: one value per zygote (the median of its
    processes'), or None where the file does not say which zygote each process came from.
    Processes forked from one zygote share its memory layout and the run's state, and a
    kind measured once per process shows that shared offset in every process alike
    (identical builds' prep: 0.73-1.66x from run to run, with processes within a few
    percent): the zygote, not the process, is the replicate."""
    if entry is None or entry.kind not in (Kind.PREP, Kind.COMPILE) or not entry.by_zygote:
        return None
    return tuple((stats.median(values),) for values in entry.by_zygote if values)


def shown_values(est: stats.RatioEstimate, base: BenchmarkSamples | None,
                 new: BenchmarkSamples | None, base_tested: tuple[tuple[float, ...], ...],
                 new_tested: tuple[tuple[float, ...], ...]) -> tuple[float, float]:
    """The BASE and NEW values a row shows, so that NEW/BASE is exactly the ratio `est`
    tested on `base_tested` and `new_tested` (one sequence per unit): the levels of the
    per-process test (`stats.process_level`, the geometric mean of the per-unit medians);
    for lockstep pairs, BASE's level and BASE's level times the paired ratio (the new
    build's time in the base's machine states); for pooled values (fewer processes, or
    zygotes) the medians of the values tested; for a side alone, the central values."""
    if base is None or new is None or est.method == "none":
        return (base.central if base is not None else math.nan,
                new.central if new is not None else math.nan)
    if est.method == "values":
        return (stats.median([v for run in base_tested for v in run]),
                stats.median([v for run in new_tested for v in run]))
    level = stats.process_level(base_tested)
    if est.method == "processes":
        return level, stats.process_level(new_tested)
    return level, level * est.ratio
