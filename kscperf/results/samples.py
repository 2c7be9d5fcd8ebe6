"""What one build measured: the one typed record that compare, history, report and
dashboard read, built once from a loaded results file.

Per benchmark (name and `Kind`) the record holds its values by process, its status and
reason, and which of its processes ran while the machine was in another state (the canary
marks them, `kscperf.stats.machine`); per cell that never reached a config (an import error, a
crash), its fate. The rules that every view shares live here and only here:

- **the central value** of a benchmark is the median of all its values pooled over its
  processes (`central_value`; pyperf's own median, so `python -m pyperf stats` shows the
  same number, and `compare`'s ratio is exactly NEW's over BASE's; docs/method.md says
  why);
- **the memory fallback**: peak memory per process from the worker results, else the
  cell's peak over its processes (a file written without raw runs);
- **the compile-status rule**: a cell's compile time has the status of its first config
  that was checked and timed (ok or incorrect), else the cell's own fate, else the worst
  of its configs';
- **the speedup over `pt`**: `speedup_over_reference`, only between correct (ok) timings.

Imports no presentation and never torch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Iterator

from kscperf.errors import STATUS_SEVERITY, TIMED_STATUSES, CellStatus
from kscperf.stats import core as stats, machine
from kscperf.names import (
    BenchmarkName,
    Kind,
    benchmark_name,
    cell_name,
    compile_name,
    parse_benchmark_name,
    prep_name,
)
from kscperf.results.files import CellSummary, LoadedResults
from kscperf.results.metadata import ZYGOTE_KEY
from kscperf.spec import CheckResult

__all__ = ["REFERENCE_TOOL", "central_value", "speedup_over_reference", "benchmark_parts",
           "BenchmarkSamples", "CellFate", "BuildSamples", "build_samples", "CellView",
           "BuildRow", "summarize_build", "odd_value_count"]

# The tool every speedup is measured against.
REFERENCE_TOOL = "pt"

Cell = tuple[str, str, str]

# The attribute of a config's result (and of a cell summary) that holds each memory kind.
_MEMORY_ATTRS = {Kind.PEAK_RSS: "peak_rss_bytes", Kind.PEAK_CUDA: "peak_cuda_bytes"}


def central_value(runs: tuple[tuple[float, ...], ...]) -> float:
    """The build's one number for a benchmark: the median of all its values pooled over
    processes (NaN when it has none)."""
    return stats.median([v for run in runs for v in run])


def speedup_over_reference(reference: BenchmarkSamples | None,
                           measured: BenchmarkSamples | None) -> float:
    """How many times faster `measured` ran than the reference tool's same benchmark, by
    their central values; NaN unless both are correct (ok) timings."""
    if reference is None or measured is None or reference.status is not CellStatus.OK \
            or measured.status is not CellStatus.OK:
        return math.nan
    return stats.speedup(reference.central, measured.central)


def benchmark_parts(name: str) -> BenchmarkName:
    """The parts of benchmark `name` (`kscperf.names.parse_benchmark_name`). A name
    kscperf did not make (a plain pyperf file may hold any) is a run time whose model, tool,
    task and config are all ""."""
    parts = parse_benchmark_name(name)
    return parts if parts is not None else BenchmarkName("", "", "", "")


@dataclass(frozen=True)
class BenchmarkSamples:
    """One benchmark of one build. `runs` holds the values of each process (one value per
    process for compile, prep and memory); `by_process` the run-time values by process
    index where the file has its worker results (what pairs the two builds of a lockstep
    run); `odd_processes` the indices of processes that ran in another machine state;
    `by_zygote`, for prep and compile, their values grouped by the zygote each process was
    forked from, where every process that measured one names its zygote (None otherwise)."""

    name: str
    parts: BenchmarkName
    status: CellStatus
    reason: str = ""
    runs: tuple[tuple[float, ...], ...] = ()
    by_process: dict[int, tuple[float, ...]] | None = None
    odd_processes: frozenset[int] = frozenset()
    check: CheckResult | None = None
    by_zygote: tuple[tuple[float, ...], ...] | None = None

    @property
    def kind(self) -> Kind:
        """What it measures."""
        return self.parts.kind

    @property
    def cell(self) -> Cell:
        """(model, tool, task)."""
        return self.parts.model, self.parts.tool, self.parts.task

    @property
    def values(self) -> list[float]:
        """Every value, processes pooled in run order."""
        return [v for run in self.runs for v in run]

    @property
    def has_values(self) -> bool:
        """Whether anything was measured."""
        return any(self.runs)

    @property
    def central(self) -> float:
        """`central_value` of its runs."""
        return central_value(self.runs)

    @property
    def spread(self) -> float:
        """The median absolute deviation of its pooled values (pyperf's spread)."""
        return stats.median_abs_dev(self.values)

    @property
    def process_medians(self) -> list[float]:
        """The median of each process's values (the samples of the change-point test)."""
        return stats.process_medians(self.runs)

    def usual_runs(self) -> list[tuple[float, ...]]:
        """The runs of the processes timed in their run's usual machine state (by index;
        all runs when the file has no worker results)."""
        if self.by_process is None:
            return list(self.runs)
        return [v for i, v in sorted(self.by_process.items()) if i not in self.odd_processes]


@dataclass(frozen=True)
class CellFate:
    """A cell that did not reach all its configs: its worst status and reason, standing for
    the configs it never reached."""

    status: CellStatus
    reason: str = ""


@dataclass(frozen=True)
class BuildSamples:
    """Everything one build measured: its benchmarks by name (in file order), the fates of
    cells that never reached a config, and its machine speed (None without a canary)."""

    benchmarks: dict[str, BenchmarkSamples]
    fates: dict[Cell, CellFate] = field(default_factory=dict)
    machine: machine.MachineSpeed | None = None

    def of_kind(self, kind: Kind) -> Iterator[BenchmarkSamples]:
        """Its benchmarks of one kind, in file order."""
        return (b for b in self.benchmarks.values() if b.kind is kind)

    def reference_of(self, b: BenchmarkSamples) -> BenchmarkSamples | None:
        """The reference tool's benchmark of the same model, task, config and kind."""
        p = b.parts
        if p.config is None or not p.model:
            return None
        return self.benchmarks.get(benchmark_name(p.model, REFERENCE_TOOL, p.task, p.config,
                                                  p.kind) if p.kind is not Kind.COMPILE
                                   else compile_name(p.model, REFERENCE_TOOL, p.task))

    def speedup(self, b: BenchmarkSamples) -> float:
        """`speedup_over_reference` of `b` in this build."""
        return speedup_over_reference(self.reference_of(b), b)

    @property
    def odd_processes(self) -> int:
        """How many worker processes ran in another machine state."""
        return len(self.machine.odd) if self.machine is not None else 0


# --------------------------------------------------------------------------------------
# Building the record
# --------------------------------------------------------------------------------------

def _process_values(loaded: LoadedResults) -> tuple[
        dict[str, dict[int, tuple[float, ...]]], dict[tuple[Kind, str], list[float]]]:
    """From the worker results: run-time values by benchmark name and process index, and
    peak memory per process by (kind, benchmark name)."""
    times: dict[str, dict[int, tuple[float, ...]]] = {}
    memory: dict[tuple[Kind, str], list[float]] = {}
    for r in loaded.runs:
        for c in r.configs:
            # Unfiltered: the position of a value is what pairs it with the other build's.
            if c.values and c.loops > 0:
                times.setdefault(benchmark_name(r.model, r.tool, r.task, c.config), {})[
                    r.process_index] = tuple(c.values)
            for kind, attr in _MEMORY_ATTRS.items():
                value = getattr(c, attr)
                if value:
                    memory.setdefault((kind, benchmark_name(r.model, r.tool, r.task, c.config,
                                                            kind)), []).append(float(value))
    return times, memory


def _zygote_values(loaded: LoadedResults) -> dict[str, tuple[tuple[float, ...], ...] | None]:
    """Prep and compile values by benchmark name, grouped by zygote (in first-seen order):
    None for a benchmark with a process that does not name its zygote (older files)."""
    grouped: dict[str, dict[str, list[float]] | None] = {}

    def put(name: str, zygote: Any, value: float | None) -> None:
        if value is None:
            return
        if not isinstance(zygote, str) or not zygote:
            grouped[name] = None
            return
        groups = grouped.setdefault(name, {})
        if groups is not None:
            groups.setdefault(zygote, []).append(float(value))

    for r in loaded.runs:
        zygote = r.metadata.get(ZYGOTE_KEY)
        put(compile_name(r.model, r.tool, r.task), zygote, r.compile_s)
        for c in r.configs:
            put(prep_name(r.model, r.tool, r.task, c.config), zygote, c.prep_s)
    return {name: None if groups is None else tuple(tuple(v) for v in groups.values())
            for name, groups in grouped.items()}


def _memory_runs(kind: Kind, name: str, c: CellSummary,
                 memory: dict[tuple[Kind, str], list[float]]) -> tuple[tuple[float, ...], ...]:
    values = memory.get((kind, name))
    if values is not None:
        return tuple((v,) for v in values)
    # A file without raw runs still has the cell's peak over its processes.
    peak = getattr(c, _MEMORY_ATTRS[kind])
    return ((float(peak),),) if peak else ()


def _runs(loaded: LoadedResults, name: str) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(run) for run in loaded.runs_values.get(name, []))


def _config_benchmarks(loaded: LoadedResults, c: CellSummary,
                       times: dict[str, dict[int, tuple[float, ...]]],
                       memory: dict[tuple[Kind, str], list[float]],
                       odd: frozenset[int],
                       zygotes: dict[str, tuple[tuple[float, ...], ...] | None]
                       ) -> Iterator[BenchmarkSamples]:
    """The run-time, prep and memory benchmarks of one config of a cell."""
    assert c.config is not None
    for kind in (Kind.TIME, Kind.PREP, Kind.PEAK_RSS, Kind.PEAK_CUDA):
        name = benchmark_name(c.model, c.tool, c.task, c.config, kind)
        if kind in _MEMORY_ATTRS:
            runs = _memory_runs(kind, name, c, memory)
        else:
            runs = _runs(loaded, name if kind is Kind.TIME
                         else prep_name(c.model, c.tool, c.task, c.config))
        yield BenchmarkSamples(
            name, BenchmarkName(c.model, c.tool, c.task, c.config, kind), c.status, c.reason,
            runs, times.get(name) if kind is Kind.TIME else None, odd,
            c.check if kind is Kind.TIME else None,
            zygotes.get(prep_name(c.model, c.tool, c.task, c.config))
            if kind is Kind.PREP else None)


def _count_benchmarks(loaded: LoadedResults) -> Iterator[BenchmarkSamples]:
    """One instructions benchmark per config that a counting process (--instructions)
    reached: its counts per call, one per process, with the worst status and reason of
    those processes."""
    found: dict[str, BenchmarkSamples] = {}
    for r in loaded.instruction_runs:
        for c in r.configs:
            name = benchmark_name(r.model, r.tool, r.task, c.config, Kind.INSTRUCTIONS)
            seen = found.get(name)
            if seen is None:
                seen = BenchmarkSamples(name, BenchmarkName(r.model, r.tool, r.task, c.config,
                                                            Kind.INSTRUCTIONS), c.status,
                                        c.reason)
            elif STATUS_SEVERITY[c.status] > STATUS_SEVERITY[seen.status]:
                seen = dataclasses.replace(seen, status=c.status, reason=c.reason)
            if c.instructions is not None:
                seen = dataclasses.replace(seen, runs=seen.runs + ((c.instructions,),))
            found[name] = seen
    return iter(found.values())


def _compile_status(configs: list[CellSummary], fate: CellFate | None) -> CellSummary:
    """The config whose status and reason a cell's compile time carries (the rule of the
    module docstring); a fate stands in as a summary of its own."""
    timed = [c for c in configs if c.status in TIMED_STATUSES]
    if timed:
        return timed[0]
    first = configs[0]
    if fate is not None:
        return dataclasses.replace(first, status=fate.status, reason=fate.reason)
    return max(configs, key=lambda c: STATUS_SEVERITY[c.status])


def _odd_by_cell(speed: machine.MachineSpeed | None) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for cell, index in (speed.odd_keys() if speed is not None else ()):
        out.setdefault(cell, set()).add(index)
    return {cell: frozenset(indices) for cell, indices in out.items()}


def build_samples(loaded: LoadedResults) -> BuildSamples:
    """The record of what `loaded` measured. Promises: one benchmark per run-time, prep and
    memory of each config a cell reached and one compile time per cell that reached a
    config, whether or not values exist (statuses say why); one instructions benchmark per
    config a counting process reached (`_count_benchmarks`); each other name of the file (a
    plain pyperf file) as an ok run time; a fate for each cell summary without a config."""
    times, memory = _process_values(loaded)
    zygotes = _zygote_values(loaded)
    speed = machine.machine_speed(loaded.runs)
    odd = _odd_by_cell(speed)
    named: dict[str, BenchmarkSamples] = {}
    fates: dict[Cell, CellFate] = {}
    configs: dict[Cell, list[CellSummary]] = {}
    for c in loaded.cells:
        key = (c.model, c.tool, c.task)
        if c.config is None:
            fates[key] = CellFate(c.status, c.reason)
            continue
        configs.setdefault(key, []).append(c)
        for b in _config_benchmarks(loaded, c, times, memory,
                                    odd.get(cell_name(*key), frozenset()), zygotes):
            named[b.name] = b
    for key, cell_configs in configs.items():
        shown = _compile_status(cell_configs, fates.get(key))
        name = compile_name(*key)
        named[name] = BenchmarkSamples(
            name, BenchmarkName(*key, None, Kind.COMPILE), shown.status, shown.reason,
            _runs(loaded, name), None, odd.get(cell_name(*key), frozenset()),
            by_zygote=zygotes.get(name))
    for b in _count_benchmarks(loaded):
        named[b.name] = b
    for name in loaded.runs_values:
        if name not in named:
            named[name] = BenchmarkSamples(name, benchmark_parts(name), CellStatus.OK, "",
                                           _runs(loaded, name))
    return BuildSamples(named, fates, speed)


# --------------------------------------------------------------------------------------
# The per-build summary: each tool against `pt`
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CellView:
    """One tool's result for one model/config/task in one build. `odd_processes` counts
    its processes that ran in another machine state: its time is marked wherever shown."""

    status: CellStatus
    reason: str = ""
    median_s: float = math.nan
    spread_s: float = math.nan
    speedup: float = math.nan
    n_values: int = 0
    compile_s: float = math.nan
    prep_s: float = math.nan
    peak_rss_bytes: int | None = None
    check: CheckResult | None = None
    peak_cuda_bytes: int | None = None
    numel: int | None = None
    odd_processes: int = 0
    # --instructions: the median count per call over the counting processes, and their
    # spread (MAD); NaN without counts.
    instructions: float = math.nan
    instructions_spread: float = math.nan


@dataclass(frozen=True)
class BuildRow:
    """One model/config/task of a build: each tool's `CellView` by tool name. `config` is
    None for the fate of cells that never reached their configs."""

    model: str
    config: str | None
    task: str
    cells: dict[str, CellView] = field(default_factory=dict)


def _cell_view(build: BuildSamples, c: CellSummary) -> CellView:
    if c.config is None:
        return CellView(status=c.status, reason=c.reason)
    time = build.benchmarks[benchmark_name(c.model, c.tool, c.task, c.config)]
    compile_s = build.benchmarks.get(compile_name(c.model, c.tool, c.task))
    prep = build.benchmarks[prep_name(c.model, c.tool, c.task, c.config)]
    counted = build.benchmarks.get(benchmark_name(c.model, c.tool, c.task, c.config,
                                                  Kind.INSTRUCTIONS))
    counts = counted if counted is not None and counted.has_values else None
    odd = len(time.odd_processes & set(time.by_process or ())) if time.has_values else 0
    return CellView(
        status=c.status, reason=c.reason, median_s=time.central, spread_s=time.spread,
        speedup=build.speedup(time), n_values=len(time.values),
        compile_s=compile_s.central if compile_s is not None else math.nan,
        prep_s=prep.central, peak_rss_bytes=c.peak_rss_bytes, check=c.check,
        peak_cuda_bytes=c.peak_cuda_bytes,
        numel=c.numel if c.numel is not None and c.numel > 0 else None, odd_processes=odd,
        instructions=counts.central if counts is not None else math.nan,
        instructions_spread=counts.spread if counts is not None else math.nan)


def summarize_build(results: LoadedResults, build: BuildSamples | None = None
                    ) -> tuple[list[str], list[BuildRow]]:
    """The tools in first-seen order, and one row per model/config/task with each tool's
    central time, spread (MAD) and speedup over `pt`, from `build` (the record of `results`,
    built when not given). Incorrect or failed cells carry their status and no speedup, so
    nothing wrong is ever shown as fast."""
    build = build if build is not None else build_samples(results)
    tools = list(dict.fromkeys(c.tool for c in results.cells))
    rows: dict[tuple[str, str | None, str], dict[str, CellView]] = {}
    for c in results.cells:
        rows.setdefault((c.model, c.config, c.task), {})[c.tool] = _cell_view(build, c)
    return tools, [BuildRow(model, config, task, views)
                   for (model, config, task), views in rows.items()]


def odd_value_count(rows: list[BuildRow]) -> int:
    """How many shown times include a process that ran in another machine state."""
    return sum(1 for r in rows for v in r.cells.values() if v.odd_processes)
