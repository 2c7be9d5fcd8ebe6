"""Series: what the history keeps of each build, per benchmark and kind.

A **series** is one benchmark, one kind (`time`, `compile`, `prep`, `memory`,
`cuda_memory`) and one machine class. Per build and series the index holds the per-process
values the change-point test uses (per-process medians for run time), their median and
spread (MAD), the cell status, and what the minimum detectable effect is computed from
(`stats.detectable_spread_of_runs`; scipy's quantiles wait until it is read); per build it
holds the environment fingerprint (torch, CUDA, driver, CPU, GPU, Python, profile) and the
canary scores of the machine. This module projects one loaded results file onto those
points and assembles a stored series; it neither stores nor decides.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from kscperf import machine, stats
from kscperf.errors import CellStatus
from kscperf.names import cell_name, compile_name, prep_name
from kscperf.results import CellSummary, LoadedResults

__all__ = ["SERIES_KINDS", "ENVIRONMENT_KEYS", "StoredBuild", "SeriesKey", "SeriesPoint", "Series",
           "PointRow", "point_rows", "summarize_samples", "floats_json", "machine_scores_of",
           "machine_class_of", "environment_of", "assemble_series", "detectable_effect"]

SERIES_KINDS = ("time", "compile", "prep", "memory", "cuda_memory")
# The metadata that makes a build's environment: a change of any of them inside a series is
# an environment event, never a regression of the build. The machine class itself (the
# host) is not among them: another host is another series.
ENVIRONMENT_KEYS = (
    "torch_version", "cuda_version", "cudnn_version", "triton_version", "gpu_driver",
    "gpu_name", "cpu_model_name", "cpu_count", "python_version", "profile", "processes",
    "values", "warmups", "min_time", "compile_cache", "isolation",
)


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

    @property
    def short_commit(self) -> str:
        """The first 12 hex digits of the commit, "" when the file carries none."""
        return self.git_commit[:12]


@dataclass(frozen=True)
class SeriesKey:
    """What names one series. `config` is "" for a compile time (it belongs to the cell)."""

    machine_class: str
    kind: str
    benchmark: str
    model: str
    tool: str
    task: str
    config: str

    @property
    def cell(self) -> str:
        """`model/tool/task`."""
        return cell_name(self.model, self.tool, self.task)


@dataclass(frozen=True)
class SeriesPoint:
    """One build of one series: status "missing" (and no samples) where the build has no
    such benchmark."""

    build: StoredBuild
    status: str
    samples: tuple[float, ...]
    median: float
    spread: float
    min_detectable: float | None


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
    """The environment fingerprint of a build: the `ENVIRONMENT_KEYS` it records, as text."""
    return {k: str(loaded.metadata[k]) for k in ENVIRONMENT_KEYS if k in loaded.metadata}


# --------------------------------------------------------------------------------------
# Rows from one results file
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PointRow:
    kind: str
    benchmark: str
    model: str
    tool: str
    task: str
    config: str
    status: str
    samples: tuple[float, ...]


def _memory_samples(loaded: LoadedResults) -> dict[tuple[str, str, str, str, str], list[float]]:
    """Per-process peak memory per (kind, model, tool, task, config)."""
    out: dict[tuple[str, str, str, str, str], list[float]] = {}
    for r in loaded.runs:
        for c in r.configs:
            for kind, value in (("memory", c.peak_rss_bytes), ("cuda_memory", c.peak_cuda_bytes)):
                if value:
                    out.setdefault((kind, r.model, r.tool, r.task, c.config), []).append(
                        float(value))
    return out


def _config_rows(loaded: LoadedResults, c: CellSummary,
                 memory: dict[tuple[str, str, str, str, str], list[float]]) -> list[PointRow]:
    assert c.config is not None
    base = f"{cell_name(c.model, c.tool, c.task)}/{c.config}"
    status = c.status.value
    # Statuses are judged on run time; another kind measured is "ok" as a measurement (an
    # incorrect config still has its prep time), so one status change is reported once.
    measured = "ok"
    times = stats.process_medians(loaded.runs_values.get(base, []))
    prep = [v for run in loaded.runs_values.get(prep_name(c.model, c.tool, c.task, c.config), [])
            for v in run]
    rows = [PointRow("time", base, c.model, c.tool, c.task, c.config, status, tuple(times))]
    if prep:
        rows.append(PointRow("prep", base, c.model, c.tool, c.task, c.config, measured,
                              tuple(prep)))
    for kind in ("memory", "cuda_memory"):
        values = memory.get((kind, c.model, c.tool, c.task, c.config))
        if values is None:
            peak = c.peak_rss_bytes if kind == "memory" else c.peak_cuda_bytes
            values = [float(peak)] if peak else []
        if values:
            rows.append(PointRow(kind, base, c.model, c.tool, c.task, c.config, measured,
                                  tuple(values)))
    return rows


def point_rows(loaded: LoadedResults) -> list[PointRow]:
    """Every series point of one build: run time, prep and memory per config, compile per
    cell. A config that never ran (its cell ended before it) has no point; the cell's status
    is kept as its compile point (no samples), and the run-time series shows the cell's
    status there (`_assemble`)."""
    memory = _memory_samples(loaded)
    rows: list[PointRow] = []
    cell_status: dict[tuple[str, str, str], CellStatus] = {}
    for c in loaded.cells:
        key = (c.model, c.tool, c.task)
        if c.config is None:
            cell_status[key] = c.status
            continue
        rows.extend(_config_rows(loaded, c, memory))
        # The cell's own fate (config None) wins over its configs' when the file has one.
        cell_status.setdefault(key, c.status)
    for (model, tool, task), status in cell_status.items():
        compile_s = [v for run in loaded.runs_values.get(compile_name(model, tool, task), [])
                     for v in run]
        if compile_s:
            rows.append(PointRow("compile", cell_name(model, tool, task), model, tool, task,
                                  "", "ok", tuple(compile_s)))
        elif status is not CellStatus.OK:
            rows.append(PointRow("compile", cell_name(model, tool, task), model, tool, task,
                                  "", status.value, ()))
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
              fates: dict[tuple[int, str, str, str], str]) -> Series:
    """The series from its points, a build without one shown as "missing"; in the run-time
    series, a config that never ran because its cell ended before it (a crash at import)
    shows the cell's status instead, so a cell that stops running is a regression. The
    other kinds stay "missing": the run-time series reports what happened once."""
    first = min(found[bid].build.position for bid in found) if found else 0
    points = []
    for b in class_builds[first:]:
        point = found.get(b.id)
        if point is None:
            status = fates.get((b.id, key.model, key.tool, key.task), "missing") \
                if key.kind == "time" else "missing"
            point = SeriesPoint(b, status, (), math.nan, math.nan, None)
        points.append(point)
    return Series(key, tuple(points))
