"""Series: what the history keeps of each build, per benchmark and kind.

A **series** is one benchmark, one kind (`names.Kind`: `time`, `compile`, `prep`,
`peak_rss`, `peak_cuda`) and one machine class. Per build and series the index holds the
per-process values the change-point test uses (per-process medians for run time), the
build's central value and speedup over `pt` (`kscperf.results.samples`, as every view shows them),
the spread (MAD), the cell status, and what the minimum detectable effect is computed from
(`stats.detectable_spread_of_runs`; scipy's quantiles wait until it is read); per build it
holds the environment fingerprint (torch, CUDA, driver, CPU, GPU, Python, profile) and the
canary scores of the machine. This module projects the record of one build
(`samples.BuildSamples`) onto those points and assembles a stored series; it neither stores
nor decides.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

from kscperf.errors import CellStatus
from kscperf.names import Kind, cell_name
from kscperf.results import metadata
from kscperf.results.files import LoadedResults
from kscperf.results.samples import BenchmarkSamples, BuildSamples, build_samples
from kscperf.stats import machine
from kscperf.stats import core as stats

__all__ = ["SERIES_KINDS", "StoredBuild", "SeriesKey", "SeriesPoint", "Series",
           "PointRow", "point_rows", "summarize_samples", "floats_json", "machine_scores_of",
           "machine_class_of", "environment_of", "source_of", "assemble_series", "detectable_effect"]

SERIES_KINDS = tuple(Kind)


@dataclass(frozen=True)
class StoredBuild:
    """One build of the store. `file` is the path of its results file in the store;
    `position` its place among the builds of its machine class (0 the oldest)."""

    id: int
    label: str
    file: str
    machine_class: str
    git_commit: str
    git_dirty: bool
    commit_date: str
    run_date: str
    environment: dict[str, str]
    # The canary scores of the run's processes in their usual machine state (None for a
    # file without a canary).
    machine_scores: tuple[float, ...] | None
    position: int = 0
    # Where its code came from (`source_of`): the repository, the definition paths in it,
    # and whether the workers read the package from the checkout; {} when not recorded.
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def short_commit(self) -> str:
        """The first 12 hex digits of the commit, "" when the file carries none."""
        return self.git_commit[:12]


@dataclass(frozen=True)
class SeriesKey:
    """What names one series. `config` is "" for a compile time (it belongs to the cell);
    `kind` is None only for the key of environment events merged over every series."""

    machine_class: str
    kind: Kind | None
    benchmark: str
    model: str
    tool: str
    task: str
    config: str

    @property
    def cell(self) -> str:
        """`model/tool/task`."""
        return cell_name(self.model, self.tool, self.task)

    @property
    def single_shot(self) -> bool:
        """Whether its kind is measured once per process (`Kind.is_single_shot`: compile,
        prep, memory); False for the key of merged environment events."""
        return self.kind is not None and Kind(self.kind).is_single_shot


@dataclass(frozen=True)
class SeriesPoint:
    """One build of one series: status NOT_RUN (and no samples) where the build has no
    such benchmark. `median` is the build's central value (`samples.central_value`) and
    `speedup` its speedup over `pt` (NaN where there is none), as every view shows them."""

    build: StoredBuild
    status: CellStatus
    samples: tuple[float, ...]
    median: float
    spread: float
    min_detectable: float | None
    speedup: float = math.nan
    # Its processes timed while the machine was in another state (the canary's mark).
    odd_processes: int = 0


@dataclass(frozen=True)
class Series:
    """One series over every build of its machine class from its first appearance on."""

    key: SeriesKey
    points: tuple[SeriesPoint, ...]


def floats_json(values: Sequence[float]) -> str:
    """`values` as the index stores them: JSON, six significant digits."""
    return json.dumps([float(f"{v:.6g}") for v in values])


def machine_scores_of(loaded: LoadedResults) -> list[float] | None:
    """The canary scores of the run's processes in their usual machine state, or None when
    the file has no canary. A shift between consecutive builds is an environment event
    ("machine speed"), so a slow machine is never blamed on a build."""
    speed = machine.machine_speed(loaded.runs)
    return None if speed is None else machine.usual_scores(speed)


def machine_class_of(loaded: LoadedResults, machine: str | None = None) -> str:
    """The machine class of a build: `machine` when given, else the file's `machine_class`
    metadata, else its host (the sorted hosts of merged shards)."""
    for value in (machine, loaded.metadata.get("machine_class"), loaded.metadata.get("hostname"),
                  loaded.metadata.get("merged_hostnames")):
        if value:
            return str(value)
    return "unknown"


def environment_of(loaded: LoadedResults) -> dict[str, str]:
    """The environment fingerprint of a build: the `metadata.ENVIRONMENT_KEYS` it records, as
    text."""
    return {k: str(loaded.metadata[k]) for k in metadata.ENVIRONMENT_KEYS if k in loaded.metadata}


def source_of(loaded: LoadedResults) -> dict[str, Any]:
    """Where a build's code came from, as its file records it (`metadata.SOURCE_KEYS`):
    the git repository, the definition paths the run was given (relative to it when
    inside), whether the workers' PYTHONPATH held the repository; {} for older files."""
    return {k: loaded.metadata[k] for k in metadata.SOURCE_KEYS if k in loaded.metadata}


# --------------------------------------------------------------------------------------
# Rows from one results file
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PointRow:
    """One point of one build as the index stores it. `fate` marks the compile point that
    stands for a cell which ended badly before any compile value (no samples): the run-time
    series of the configs it never reached show its status."""

    kind: Kind
    benchmark: str
    model: str
    tool: str
    task: str
    config: str
    status: CellStatus
    samples: tuple[float, ...]
    central: float = math.nan
    speedup: float = math.nan
    fate: bool = False
    odd_processes: int = 0


def _series_name(b: BenchmarkSamples) -> str:
    # A series is named by its benchmark without the kind's suffix: the kind is its own
    # column.
    return b.name[: len(b.name) - len(b.kind.suffix)] if b.kind.suffix else b.name


def _point(build: BuildSamples, b: BenchmarkSamples, status: CellStatus,
           samples: list[float]) -> PointRow:
    p = b.parts
    odd = len(b.odd_processes & set(b.by_process)) if b.by_process else 0
    return PointRow(b.kind, _series_name(b), p.model, p.tool, p.task, p.config or "", status,
                    tuple(samples), b.central if samples else math.nan, build.speedup(b),
                    odd_processes=odd)


def _compile_fate(build: BuildSamples, b: BenchmarkSamples | None,
                  cell: tuple[str, str, str]) -> CellStatus | None:
    """The status a compile point without values stands for: the cell's fate, else its
    compile status; None when that is ok (nothing to say)."""
    fate = build.fates.get(cell)
    status = fate.status if fate is not None else b.status if b is not None else None
    return status if status is not None and status is not CellStatus.OK else None


def point_rows(loaded: LoadedResults) -> list[PointRow]:
    """Every series point of one build, projected from its record: run time, prep and
    memory per config, compile per cell. Statuses are judged on run time; a point of
    another kind that was measured is ok as a measurement (an incorrect config still has
    its prep time), so one status change is reported once. A config that never ran (its
    cell ended before it) has no point; the cell's status is kept as its compile point
    (`fate`, no samples), and the run-time series shows the cell's status there."""
    if not loaded.has_kscperf:
        return []
    build = build_samples(loaded)
    rows: list[PointRow] = []
    cells: dict[tuple[str, str, str], BenchmarkSamples | None] = {}
    for b in build.benchmarks.values():
        if not b.parts.model:
            continue
        if b.kind is Kind.TIME:
            rows.append(_point(build, b, b.status, b.process_medians))
        elif b.kind is Kind.COMPILE:
            cells[b.cell] = b
        elif b.has_values:
            rows.append(_point(build, b, CellStatus.OK, b.values))
    for cell in build.fates:
        cells.setdefault(cell, None)
    for cell, compiled in cells.items():
        if compiled is not None and compiled.has_values:
            rows.append(_point(build, compiled, CellStatus.OK, compiled.values))
        elif (status := _compile_fate(build, compiled, cell)) is not None:
            rows.append(PointRow(Kind.COMPILE, cell_name(*cell), *cell, "", status, (),
                                 fate=True))
    return rows


def summarize_samples(samples: Sequence[float]) -> tuple[float | None, float | None, float | None,
                                               float | None]:
    """(median, spread, and the standard error and degrees of freedom of the minimum
    detectable effect) of one point's samples. The effect itself needs scipy's t quantiles,
    whose import alone costs more than adding a build; it is computed as the index is read."""
    if not samples:
        return None, None, None, None
    se, df = stats.detectable_spread_of_runs([[v] for v in samples])
    return (statistics.median(samples), stats.median_abs_dev(samples),
            se if math.isfinite(se) else None, df if math.isfinite(df) else None)


def detectable_effect(se: float | None, df: float | None) -> float | None:
    if se is None or df is None:
        return None
    mde = stats.min_detectable_effect(se, df)
    return mde if math.isfinite(mde) else None


def assemble_series(key: SeriesKey, found: dict[int, SeriesPoint], class_builds: list[StoredBuild],
              fates: dict[tuple[int, str, str, str], CellStatus]) -> Series:
    """The series from its points, a build without one shown as NOT_RUN; in the run-time
    series, a config that never ran because its cell ended before it (a crash at import)
    shows the cell's status instead, so a cell that stops running is a regression. The
    other kinds stay NOT_RUN: the run-time series reports what happened once."""
    first = min(found[bid].build.position for bid in found) if found else 0
    points = []
    for b in class_builds[first:]:
        point = found.get(b.id)
        if point is None:
            status = fates.get((b.id, key.model, key.tool, key.task), CellStatus.NOT_RUN) \
                if key.kind is Kind.TIME else CellStatus.NOT_RUN
            point = SeriesPoint(b, status, (), math.nan, math.nan, None)
        points.append(point)
    return Series(key, tuple(points))
