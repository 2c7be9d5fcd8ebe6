"""The only reader and writer of results files.

A results file is one pyperf `BenchmarkSuite` JSON document (so `python -m pyperf stats`,
`check` and `compare_to` read it) with one extra top-level key, `kscperf`, which pyperf
ignores:

    {"version": "1.0", "metadata": {...}, "benchmarks": [...],        <- pyperf
     "kscperf": {"format_version": 1, "complete": true, "metadata": {...},
                 "cells": [...],   one summary per model/tool/task/config
                 "runs": [...],    every worker process's raw CellResult
                 "instruction_runs": [...]}}   every counting process's (--instructions)

Benchmark names (built by `kscperf.names`): `model/tool/task/config` (run time, seconds per
call), `model/tool/task:compile` (one value per process), `model/tool/task/config:prep`,
and with --instructions `model/tool/task/config:instructions` (one value per counting
process, unit integer). Counting processes are kept apart from the timing ones: nothing
that reads times ever sees a count.

Format history:
    1  first version.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from kscperf.errors import STATUS_SEVERITY, CellStatus, KscperfError, recorded_status
from kscperf.names import Kind, benchmark_name, cell_name, compile_name, prep_name
from kscperf.results.fileio import write_text_atomic
from kscperf.results.pyperfjson import pyperf_suite_json
from kscperf.spec import CellResult, CheckResult, ConfigResult
from kscperf.stats.machine import machine_speed

__all__ = [
    "FORMAT_VERSION",
    "CellSummary",
    "LoadedResults",
    "summarize_cells",
    "build_document",
    "write_results",
    "load_results",
    "load_cell_runs_for_resume",
]

# 2: runs carry the machine-speed canary, the kscperf section its figure (`machine_speed`).
FORMAT_VERSION = 2


@dataclass(frozen=True)
class CellSummary:
    """One model/tool/task/config over all its worker processes: an entry of a results
    file's `kscperf.cells`. `config` is None for the fate of a cell that never reached its
    configs, or died part-way, standing for the configs it never reached.

    The status, reason, phase and check are those of the worst process; `compile_s` and
    `prep_s` hold one value per process that measured one, the peaks are the highest over
    the processes, `values` counts the timed values of all of them.
    """

    model: str
    tool: str
    task: str
    config: str | None
    status: CellStatus = CellStatus.OK
    reason: str = ""
    phase: str = ""
    check: CheckResult | None = None
    compile_s: tuple[float, ...] = ()
    prep_s: tuple[float, ...] = ()
    peak_rss_bytes: int | None = None
    peak_cuda_bytes: int | None = None
    processes: int = 0
    values: int = 0
    numel: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The entry as a results file holds it (plain JSON types)."""
        return {
            "model": self.model, "tool": self.tool, "task": self.task, "config": self.config,
            "status": self.status.value, "reason": self.reason, "phase": self.phase,
            "check": self.check.to_dict() if self.check is not None else None,
            "compile_s": list(self.compile_s), "prep_s": list(self.prep_s),
            "peak_rss_bytes": self.peak_rss_bytes, "peak_cuda_bytes": self.peak_cuda_bytes,
            "processes": self.processes, "values": self.values, "numel": self.numel,
        }

    @classmethod
    def from_dict(cls, d: Any) -> CellSummary:
        """The entry `d` of a results file. Raises KeyError, TypeError or ValueError when
        it is not one: not an object, no status, model, tool, task or config, an unknown
        status, a name that is not a string."""
        if not isinstance(d, dict):
            raise TypeError(f"a cell is an object, not {d!r}")
        status = recorded_status(d["status"])
        model, tool, task, config = d["model"], d["tool"], d["task"], d["config"]
        if not all(isinstance(v, str) for v in (model, tool, task)) or not isinstance(
                config, (str, type(None))):
            raise TypeError(f"a cell's names are strings, not {(model, tool, task, config)!r}")
        return cls(
            model=model, tool=tool, task=task, config=config, status=status,
            reason=str(d.get("reason") or ""), phase=str(d.get("phase") or ""),
            check=_check_from_dict(d.get("check")),
            compile_s=tuple(float(v) for v in d.get("compile_s") or ()),
            prep_s=tuple(float(v) for v in d.get("prep_s") or ()),
            peak_rss_bytes=_count(d.get("peak_rss_bytes")),
            peak_cuda_bytes=_count(d.get("peak_cuda_bytes")),
            processes=int(d.get("processes") or 0), values=int(d.get("values") or 0),
            numel=_count(d.get("numel")))


def _check_from_dict(d: Any) -> CheckResult | None:
    if d is None:
        return None
    check = CheckResult.from_dict(d)
    numbers = (check.max_abs_err, check.max_rel_err, check.rtol, check.atol)
    if not (all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in numbers)
            and isinstance(check.what, str) and isinstance(check.detail, str)):
        raise TypeError(f"a check holds numbers and strings, not {d!r}")
    return check


def _count(value: Any) -> int | None:
    # bool is an int in Python; a flag is not a count.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class LoadedResults:
    """A results file, parsed and validated.

    `benchmarks` maps every pyperf benchmark name to its raw values (all processes pooled, in
    run order) and `runs_values` to the values of each run separately; `cells` is the
    per-config summary (empty for a plain pyperf file, `has_kscperf` False then).
    """

    path: str
    metadata: dict[str, Any]
    benchmarks: dict[str, list[float]]
    runs_values: dict[str, list[list[float]]]
    cells: list[CellSummary] = field(default_factory=list)
    runs: list[CellResult] = field(default_factory=list)
    complete: bool = True
    has_kscperf: bool = True
    # The counting processes' results (--instructions): never among `runs`.
    instruction_runs: list[CellResult] = field(default_factory=list)

    @property
    def build(self) -> str:
        """The build's label: its `build` metadata, else the file's name."""
        return str(self.metadata.get("build") or os.path.basename(self.path))

    def cell(self, model: str, tool: str, task: str, config: str | None) -> CellSummary | None:
        """The summary of one model/tool/task/config (config None: the cell's own fate), or
        None when the file has none."""
        for c in self.cells:
            if (c.model, c.tool, c.task, c.config) == (model, tool, task, config):
                return c
        return None


def _with_outcome(summary: CellSummary, status: CellStatus, reason: str,
                  phase: str) -> CellSummary:
    """`summary` showing `status` when it is worse than the one shown, or the first."""
    if STATUS_SEVERITY[status] > STATUS_SEVERITY[summary.status] or summary.processes == 0:
        return replace(summary, status=status, reason=reason, phase=phase)
    return summary


def _peak(shown: int | None, value: int | None) -> int | None:
    return shown if value is None else max(value, shown or 0)


def _with_config(summary: CellSummary, r: CellResult, c: ConfigResult) -> CellSummary:
    """`summary` after one more process's result `c` for its config."""
    shown = _with_outcome(summary, c.status, c.reason, c.phase)
    check = summary.check
    # The check shown: the first, then that of a worse process, then any failing one.
    if c.check is not None and (check is None or shown.status != summary.status
                                or not c.check.passed):
        check = c.check
    return replace(
        shown, check=check,
        compile_s=summary.compile_s + ((r.compile_s,) if r.compile_s is not None else ()),
        prep_s=summary.prep_s + ((c.prep_s,) if c.prep_s is not None else ()),
        peak_rss_bytes=_peak(summary.peak_rss_bytes, c.peak_rss_bytes),
        peak_cuda_bytes=_peak(summary.peak_cuda_bytes, c.peak_cuda_bytes),
        processes=summary.processes + 1, values=summary.values + len(c.values),
        numel=c.numel if c.numel is not None else summary.numel)


def summarize_cells(runs: Iterable[CellResult]) -> list[CellSummary]:
    """One summary per model/tool/task/config over all processes, in first-seen order.

    A cell that never reached its configs, or died part-way (import error, crash, timeout),
    has an entry with `config` None.
    The shown status, reason, phase and check are those of the worst process.
    """
    summary: dict[tuple[str, str, str, str | None], CellSummary] = {}

    def entry(r: CellResult, config: str | None) -> CellSummary:
        found = summary.get((r.model, r.tool, r.task, config))
        return found if found is not None else CellSummary(r.model, r.tool, r.task, config)

    for r in runs:
        # A cell that died part-way keeps its finished configs, and its fate is recorded
        # under config None, for the configs it never reached.
        if not r.configs or r.status != CellStatus.OK:
            e = _with_outcome(entry(r, None), r.status, r.reason, r.phase)
            summary[r.model, r.tool, r.task, None] = replace(e, processes=e.processes + 1)
        for c in r.configs:
            summary[r.model, r.tool, r.task, c.config] = _with_config(entry(r, c.config), r, c)
    return list(summary.values())


def build_document(runs: list[CellResult], metadata: dict[str, Any],
                   complete: bool = True, counts: Sequence[CellResult] = ()) -> dict[str, Any]:
    """The whole results document for the worker results `runs` of one build, and its
    counting processes' results `counts` (--instructions)."""
    doc = pyperf_suite_json(runs, metadata, counts)
    speed = machine_speed(runs)
    doc["kscperf"] = {
        "format_version": FORMAT_VERSION,
        "complete": complete,
        "metadata": metadata,
        "machine_speed": speed.to_dict() if speed is not None else None,
        "cells": [c.to_dict() for c in summarize_cells(runs)],
        "runs": [r.to_dict() for r in runs],
    }
    if counts:
        doc["kscperf"]["instruction_runs"] = [r.to_dict() for r in counts]
    return doc


def write_results(path: str, runs: list[CellResult], metadata: dict[str, Any],
                  complete: bool = True, counts: Sequence[CellResult] = ()) -> None:
    """Write the results document of `runs` (and of the counting processes `counts`)
    atomically."""
    doc = build_document(runs, metadata, complete, counts)
    write_text_atomic(path, json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n",
                      "results")


# A results file nests eight levels deep (kscperf.runs[].configs[].warmups[]); one nested
# far deeper is hostile. Nesting near Python's recursion limit crashes whatever walks the
# document next (repr, Jinja, comparisons of metadata), so it is refused as it is read.
_MAX_NESTING = 64
# A number too large for a float is no time: the statistics would overflow on it.
_LARGEST_FLOAT = math.nextafter(math.inf, 0.0)


def _shown(value: Any) -> str:
    """`value` as its repr, cut short: a hostile file may hold a name of megabytes."""
    text = repr(value)
    return text if len(text) <= 200 else text[:180] + "...(cut)"


def _too_deep(path: str) -> KscperfError:
    return KscperfError(f"{path} nests lists or objects more than {_MAX_NESTING} levels "
                        "deep; it is not a results file.")


def _nests_too_deep(doc: Any) -> bool:
    """Whether `doc` holds lists or objects more than _MAX_NESTING levels deep. Walks one
    level at a time, so no depth can exhaust the stack."""
    level: list[Any] = [doc]
    for _ in range(_MAX_NESTING):
        level = [child for node in level
                 for child in (node.values() if isinstance(node, dict) else node)
                 if isinstance(child, (dict, list))]
        if not level:
            return False
    return True


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fp:
            raw = fp.read()
    except FileNotFoundError:
        raise KscperfError(f"{path}: no such results file.") from None
    except IsADirectoryError:
        raise KscperfError(f"{path} is a directory, not a results file.") from None
    except OSError as exc:
        raise KscperfError(f"cannot read {path}: {exc.strerror or exc}.") from None
    if not raw.strip():
        raise KscperfError(f"{path} is empty; it is not a results file.")
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise _too_deep(path) from None
    except UnicodeDecodeError:
        raise KscperfError(f"{path} is not a results file (not UTF-8 JSON).") from None
    except json.JSONDecodeError as exc:
        # A cut file fails at its end, inside an unterminated string, or is an object
        # whose closing brace is missing.
        stripped = raw.strip()
        truncated = (exc.pos >= len(raw.rstrip()) - 1 or exc.msg.startswith("Unterminated")
                     or (stripped.startswith(b"{") and not stripped.endswith(b"}")))
        hint = " (the file looks truncated)" if truncated else ""
        raise KscperfError(
            f"{path} is not valid JSON{hint}: {exc.msg} at line {exc.lineno}.") from None
    except ValueError:
        # json.loads raises a plain ValueError for an integer of more digits than CPython
        # converts (sys.get_int_max_str_digits(), 4300 by default).
        raise KscperfError(f"{path} is not a results file: it holds an integer of thousands "
                           "of digits.") from None
    if not isinstance(doc, dict) or "benchmarks" not in doc or "version" not in doc:
        raise KscperfError(f"{path} is JSON but not a pyperf or kscperf results file.")
    if _nests_too_deep(doc):
        raise _too_deep(path)
    return doc


def _bad_time(path: str, name: str, where: str, value: Any, rule: str,
              of: str = "benchmark") -> KscperfError:
    return KscperfError(f"{path} is not a valid results file: {of} {_shown(name)} has "
                        f"{_shown(value)} in {where}, and a time must be {rule}.")


# pyperf's file format versions whose runs hold their timings under "values" (pyperf 0.9.6
# and later write 6 or "1.0"; version 5 was pyperf 0.8's).
_PYPERF_VERSIONS = ("1.0", 6)


def _not_pyperf(path: str, what: str) -> KscperfError:
    return KscperfError(f"{path} is not a valid pyperf results file: {what}.")


def _pyperf_label(index: int | None) -> str:
    return "the suite" if index is None else f"benchmark number {index + 1}"


def _pyperf_metadata(path: str, holder: dict[str, Any], index: int | None) -> dict[str, Any]:
    """The metadata object of the suite (`index` None), a benchmark or a run."""
    metadata = holder.get("metadata")
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise _not_pyperf(path, f"{_pyperf_label(index)} has metadata {_shown(metadata)}, "
                          "not an object")
    return metadata


def _pyperf_benchmark(path: str, index: int, bench: Any,
                      suite_name: Any) -> tuple[str, list[list[float]]]:
    """The name and the values of each run of benchmark `index` of a pyperf document, by
    pyperf's rules: the name comes from the first run's metadata (over the benchmark's and
    the suite's) and is the same in every run, and a value is a finite number of seconds
    above zero (pyperf itself lets infinity through, which no comparison survives)."""
    runs = bench.get("runs") if isinstance(bench, dict) else None
    if not isinstance(runs, list) or not runs:
        raise _not_pyperf(path, f"{_pyperf_label(index)} has no list of runs")
    bench_name = _pyperf_metadata(path, bench, index).get("name", suite_name)
    name: Any = None
    per_run: list[list[float]] = []
    for run in runs:
        if not isinstance(run, dict):
            raise _not_pyperf(path, f"{_pyperf_label(index)} has a run that is not an object")
        run_name = _pyperf_metadata(path, run, index).get("name", bench_name)
        if run_name != name:
            if name is not None:
                raise _not_pyperf(path, f"benchmark {_shown(name)} has a run named "
                                  f"{_shown(run_name)}")
            if not isinstance(run_name, str) or not run_name:
                raise _not_pyperf(path, f"{_pyperf_label(index)} has no name")
            name = run_name
        values = run.get("values", [])
        if not isinstance(values, list):
            raise _not_pyperf(path, f"benchmark {_shown(name)} has run values that are not "
                              "a list")
        for value in values:
            if type(value) not in (int, float) or not 0 < value <= _LARGEST_FLOAT:
                raise _bad_time(path, name, "its pyperf values", value, "finite and above zero")
        if values:
            per_run.append([float(v) for v in values])
    return name, per_run


def _pyperf_values(path: str, doc: dict[str, Any]) -> tuple[dict[str, list[float]],
                                                           dict[str, list[list[float]]],
                                                           dict[str, Any]]:
    """The values of every pyperf benchmark of `doc`, pooled and per run, and the suite's
    metadata (pyperf writes there what all benchmarks share).

    Read here rather than by `pyperf.BenchmarkSuite.loads`, which compares each benchmark's
    name with every earlier one: a 30 MB file of many small benchmarks took it hours."""
    benchmarks = doc["benchmarks"]
    if not benchmarks:
        return {}, {}, {}
    if doc["version"] not in _PYPERF_VERSIONS:
        raise _not_pyperf(path, f"its format version {_shown(doc['version'])} is not one of "
                          f"{', '.join(map(repr, _PYPERF_VERSIONS))}")
    if not isinstance(benchmarks, list):
        raise _not_pyperf(path, "its benchmarks are not a list")
    metadata = _pyperf_metadata(path, doc, None)
    for key, value in metadata.items():
        if not isinstance(value, (str, int, float)):
            raise _not_pyperf(path, f"the suite has metadata {_shown(key)} of "
                              f"{_shown(value)}, not a string or a number")
    values: dict[str, list[float]] = {}
    runs_values: dict[str, list[list[float]]] = {}
    for index, bench in enumerate(benchmarks):
        name, per_run = _pyperf_benchmark(path, index, bench, metadata.get("name"))
        if name in runs_values:
            raise _not_pyperf(path, f"benchmark {_shown(name)} appears twice")
        runs_values[name] = per_run
        values[name] = [v for vs in per_run for v in vs]
    return values, runs_values, dict(metadata)


def _check_kscperf_times(path: str, name: str, where: str, values: Iterable[float | None],
                         of: str = "benchmark") -> None:
    # Zero is allowed here, unlike in pyperf's values: the worker records a compile time of
    # zero (warm cache), and the writer leaves values <= 0 out of the pyperf benchmarks.
    for value in values:
        if value is not None and (type(value) not in (int, float)
                                  or not 0 <= value <= _LARGEST_FLOAT):
            raise _bad_time(path, name, f"kscperf {where}", value,
                            "a finite number of seconds, zero or more", of)


def _check_kscperf_types(path: str, cell: str, fields: dict[str, Any],
                         kinds: type | tuple[type, ...]) -> None:
    for what, value in fields.items():
        if not isinstance(value, kinds) or isinstance(value, bool) or (
                isinstance(value, int) and value < 0):
            raise KscperfError(f"{path} has a malformed 'kscperf' section: cell "
                               f"{_shown(cell)} has {what} {_shown(value)}.")


def _check_kscperf_runs(path: str, runs: list[CellResult], cells: list[CellSummary]) -> None:
    """KscperfError naming the cell or benchmark for a worker result or cell summary whose
    names are not strings, whose counts are not whole numbers, or whose times are not
    finite numbers of seconds, zero or more: the readers would crash on them or compare
    them silently wrong."""
    for r in runs:
        cell = cell_name(str(r.model), str(r.tool), str(r.task))
        _check_kscperf_types(path, cell, {"model": r.model, "tool": r.tool, "task": r.task,
                                          "reason": r.reason, "phase": r.phase}, str)
        _check_kscperf_types(path, cell, {"process_index": r.process_index}, int)
        _check_kscperf_times(path, compile_name(r.model, r.tool, r.task), "compile_s",
                             (r.compile_s,))
        _check_kscperf_times(path, cell, "import_s", (r.import_s,), of="cell")
        _check_kscperf_times(path, cell, "wall_s", (r.wall_s,), of="cell")
        for c in r.configs:
            _check_kscperf_types(path, cell, {"config": c.config, "reason": c.reason,
                                              "phase": c.phase, "date": c.date}, str)
            _check_kscperf_types(path, cell, {"loops": c.loops}, int)
            _check_kscperf_types(path, cell, {
                "peak_rss_bytes": c.peak_rss_bytes, "peak_cuda_bytes": c.peak_cuda_bytes,
                "numel": c.numel}, (int, type(None)))
            name = benchmark_name(r.model, r.tool, r.task, c.config)
            _check_kscperf_times(path, name, "values", c.values)
            _check_kscperf_times(path, name, "warmups", (v for _, v in c.warmups))
            _check_kscperf_times(path, name, "cuda_event_values", c.cuda_event_values)
            _check_kscperf_times(path, name, "duration_s", (c.duration_s,))
            _check_kscperf_times(path, prep_name(r.model, r.tool, r.task, c.config),
                                 "prep_s", (c.prep_s,))
    for s in cells:
        _check_kscperf_times(path, compile_name(s.model, s.tool, s.task), "cells' compile_s",
                             s.compile_s)
        _check_kscperf_times(path, prep_name(s.model, s.tool, s.task, s.config or "*"),
                             "cells' prep_s", s.prep_s)


def _check_counts(path: str, counts: list[CellResult]) -> None:
    """A count that is not a positive finite number is refused, naming the benchmark."""
    for r in counts:
        for c in r.configs:
            if c.instructions is not None and not (math.isfinite(c.instructions)
                                                   and c.instructions > 0):
                name = benchmark_name(r.model, r.tool, r.task, c.config, Kind.INSTRUCTIONS)
                raise KscperfError(f"{path}: {name} has the instruction count "
                                   f"{_shown(c.instructions)}; a count is a positive number.")


def load_results(path: str) -> LoadedResults:
    """Load and validate a results file written by kscperf or by pyperf.

    Never executes anything from the file. Raises KscperfError with one line for a file that
    is missing, empty, not JSON, truncated, nested absurdly deep, not pyperf, from a newer
    kscperf format, or holding a time that is negative, not finite, or (in pyperf's values)
    zero; the line names the file and, for a bad time, the benchmark.
    """
    doc = _read_json(path)
    ksc = doc.get("kscperf")
    if ksc is not None:
        if not isinstance(ksc, dict) or not isinstance(ksc.get("format_version"), int):
            raise KscperfError(f"{path} has a malformed 'kscperf' section.")
        if ksc["format_version"] > FORMAT_VERSION:
            raise KscperfError(
                f"{path} was written by a newer kscperf (results format "
                f"{ksc['format_version']}, this one reads up to {FORMAT_VERSION}); upgrade "
                "kscperf to read it.")
    values, runs_values, pyperf_metadata = _pyperf_values(path, doc)
    if ksc is None:
        return LoadedResults(path=path, metadata=pyperf_metadata, benchmarks=values,
                             runs_values=runs_values, has_kscperf=False)
    try:
        runs = [CellResult.from_dict(r) for r in ksc.get("runs", [])]
        counts = [CellResult.from_dict(r) for r in ksc.get("instruction_runs", [])]
        cells = [CellSummary.from_dict(c) for c in ksc.get("cells", [])]
        ksc_metadata = ksc.get("metadata") or {}
        if not isinstance(ksc_metadata, dict):
            raise TypeError(f"its metadata should be an object, not {_shown(ksc_metadata)}")
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise KscperfError(f"{path} has a malformed 'kscperf' section: {_shown(exc)}.") from None
    _check_kscperf_runs(path, runs, cells)
    _check_counts(path, counts)
    metadata = dict(pyperf_metadata)
    metadata.update(ksc_metadata)
    return LoadedResults(path=path, metadata=metadata, benchmarks=values,
                         runs_values=runs_values, cells=cells, runs=runs,
                         complete=bool(ksc.get("complete", True)), instruction_runs=counts)


def load_cell_runs_for_resume(path: str) -> tuple[list[CellResult], dict[str, Any]]:
    """The raw worker results and metadata of a kscperf file, to continue it."""
    loaded = load_results(path)
    if not loaded.has_kscperf:
        raise KscperfError(f"{path} was not written by kscperf, so it cannot be resumed.")
    return loaded.runs, loaded.metadata
