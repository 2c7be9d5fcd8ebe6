"""The only reader and writer of results files.

A results file is one pyperf `BenchmarkSuite` JSON document (so `python -m pyperf stats`,
`check` and `compare_to` read it) with one extra top-level key, `kscperf`, which pyperf
ignores:

    {"version": "1.0", "metadata": {...}, "benchmarks": [...],        <- pyperf
     "kscperf": {"format_version": 1, "complete": true, "metadata": {...},
                 "cells": [...],   one summary per model/tool/task/config
                 "runs": [...]}}   every worker process's raw CellResult

Benchmark names (built by `kscperf.names`): `model/tool/task/config` (run time, seconds per
call), `model/tool/task:compile` (one value per process) and `model/tool/task/config:prep`.

Format history:
    1  first version.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from kscperf.errors import STATUS_SEVERITY, CellStatus, KscperfError
from kscperf.names import benchmark_name, compile_name, prep_name
from kscperf.spec import CellResult, CheckResult, ConfigResult

__all__ = [
    "FORMAT_VERSION",
    "CellSummary",
    "LoadedResults",
    "summarize_cells",
    "build_document",
    "write_results",
    "write_text_atomic",
    "load_results",
    "load_cell_runs_for_resume",
    "merge_results",
    "check_writable",
]

FORMAT_VERSION = 1

# Run metadata that pyperf requires to be identical across the runs of one benchmark; they
# come from the worker's environment.
_PYPERF_RUN_KEYS = ("hostname", "cpu_model_name", "cpu_count", "platform", "python_version")


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
        status = CellStatus(d["status"])
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


def _run_metadata(r: CellResult, build_metadata: dict[str, Any]) -> dict[str, Any]:
    md: dict[str, Any] = {k: v for k, v in build_metadata.items() if _pyperf_ok(v)}
    for key in _PYPERF_RUN_KEYS:
        if _pyperf_ok(r.metadata.get(key)):
            md[key] = r.metadata[key]
    md.update(model=r.model, tool=r.tool, task=r.task, unit="second")
    return md


def _pyperf_ok(value: Any) -> bool:
    if isinstance(value, bool) or isinstance(value, int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str) and value != "" and "\n" not in value


def _pyperf_suite_json(runs: list[CellResult], build_metadata: dict[str, Any]) -> dict[str, Any]:
    import pyperf  # ~50 ms; only paid when a file is written

    benches: dict[str, pyperf.Benchmark] = {}

    def add(name: str, run: pyperf.Run) -> None:
        if name in benches:
            benches[name].add_run(run)
        else:
            benches[name] = pyperf.Benchmark([run])

    for r in runs:
        md = _run_metadata(r, build_metadata)
        if r.compile_s is not None and r.compile_s > 0:
            add(compile_name(r.model, r.tool, r.task),
                pyperf.Run([r.compile_s], metadata=dict(md, name=compile_name(
                    r.model, r.tool, r.task), loops=1), collect_metadata=False))
        for c in r.configs:
            cmd = dict(md, config=c.config, kscperf_status=c.status.value)
            if c.date:
                cmd["date"] = c.date
            if c.peak_rss_bytes:
                cmd["mem_max_rss"] = c.peak_rss_bytes
            if c.prep_s is not None and c.prep_s > 0:
                name = prep_name(r.model, r.tool, r.task, c.config)
                add(name, pyperf.Run([c.prep_s], metadata=dict(cmd, name=name, loops=1),
                                     collect_metadata=False))
            values = [v for v in c.values if v > 0]
            if values and c.loops > 0:
                name = benchmark_name(r.model, r.tool, r.task, c.config)
                if c.duration_s is not None:
                    cmd["duration"] = c.duration_s
                add(name, pyperf.Run(values, warmups=[w for w in c.warmups if w[1] > 0] or None,
                                     metadata=dict(cmd, name=name, loops=c.loops),
                                     collect_metadata=False))
    if not benches:
        return {"version": "1.0", "benchmarks": []}
    buffer = io.StringIO()
    pyperf.BenchmarkSuite(list(benches.values())).dump(buffer)
    return json.loads(buffer.getvalue())


def build_document(runs: list[CellResult], metadata: dict[str, Any],
                   complete: bool = True) -> dict[str, Any]:
    """The whole results document for the worker results `runs` of one build."""
    doc = _pyperf_suite_json(runs, metadata)
    doc["kscperf"] = {
        "format_version": FORMAT_VERSION,
        "complete": complete,
        "metadata": metadata,
        "cells": [c.to_dict() for c in summarize_cells(runs)],
        "runs": [r.to_dict() for r in runs],
    }
    return doc


def check_writable(path: str, replace: bool, *, resumable: bool = True,
                   other: str = "-o FILE") -> None:
    """Raise KscperfError now, before any measuring, if `path` cannot be written later. The
    message for an existing file offers --replace, --resume when `resumable`, and `other`."""
    if os.path.exists(path) and not replace:
        resume = f", --resume {path} to finish it," if resumable else ""
        raise KscperfError(f"{path} already exists; pass --replace to overwrite it{resume} or "
                           f"choose another {other}.")
    if os.path.isdir(path):
        raise KscperfError(f"{path} is a directory; -o needs a file name.")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".kscperf-probe-")
        try:
            os.write(fd, b" " * 65536)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise KscperfError(f"cannot write results to {path}: {exc.strerror or exc}.") from None


def write_text_atomic(path: str, text: str, what: str) -> None:
    """Write `text` to `path` atomically (a temporary file in the same folder, synced, then
    renamed): a reader sees the old file or the new one, never half of one. The file gets
    the permissions any new file gets under the umask. Raises KscperfError naming `what`
    ("results", "the report") when it cannot be written."""
    if os.path.isdir(path):
        raise KscperfError(f"{path} is a directory; -o needs a file name.")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".kscperf-", suffix=".tmp")
    except OSError as exc:
        raise KscperfError(f"cannot write {what} to {path}: {exc.strerror or exc}.") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fp:
            fp.write(text)
            fp.flush()
            os.fsync(fp.fileno())
        # mkstemp makes the file readable by its owner only; results and reports are shared.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise KscperfError(f"cannot write {what} to {path}: {exc.strerror or exc}.") from None


def write_results(path: str, runs: list[CellResult], metadata: dict[str, Any],
                  complete: bool = True) -> None:
    """Write the results document of `runs` atomically."""
    doc = build_document(runs, metadata, complete)
    write_text_atomic(path, json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n",
                      "results")


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
    if not isinstance(doc, dict) or "benchmarks" not in doc or "version" not in doc:
        raise KscperfError(f"{path} is JSON but not a pyperf or kscperf results file.")
    return doc


def _pyperf_values(path: str, doc: dict[str, Any]) -> tuple[dict[str, list[float]],
                                                           dict[str, list[list[float]]],
                                                           dict[str, Any]]:
    if not doc["benchmarks"]:
        return {}, {}, {}
    import pyperf

    pyperf_doc = {k: v for k, v in doc.items() if k != "kscperf"}
    try:
        suite = pyperf.BenchmarkSuite.loads(json.dumps(pyperf_doc))
    except Exception as exc:  # pyperf raises ValueError, KeyError, TypeError...
        raise KscperfError(f"{path} is not a valid pyperf results file: {exc}.") from None
    values: dict[str, list[float]] = {}
    runs_values: dict[str, list[list[float]]] = {}
    for bench in suite.get_benchmarks():
        name = bench.get_name()
        per_run = [list(run.values) for run in bench.get_runs() if run.values]
        runs_values[name] = per_run
        values[name] = [v for vs in per_run for v in vs]
    metadata = suite.get_metadata() if hasattr(suite, "get_metadata") else {}
    return values, runs_values, dict(metadata)


def load_results(path: str) -> LoadedResults:
    """Load and validate a results file written by kscperf or by pyperf.

    Never executes anything from the file. Raises KscperfError with one line for a file that
    is missing, empty, not JSON, truncated, not pyperf, or from a newer kscperf format.
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
        cells = [CellSummary.from_dict(c) for c in ksc.get("cells", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise KscperfError(f"{path} has a malformed 'kscperf' section: {exc!r}.") from None
    metadata = dict(pyperf_metadata)
    metadata.update(ksc.get("metadata") or {})
    return LoadedResults(path=path, metadata=metadata, benchmarks=values,
                         runs_values=runs_values, cells=cells, runs=runs,
                         complete=bool(ksc.get("complete", True)))


def load_cell_runs_for_resume(path: str) -> tuple[list[CellResult], dict[str, Any]]:
    """The raw worker results and metadata of a kscperf file, to continue it."""
    loaded = load_results(path)
    if not loaded.has_kscperf:
        raise KscperfError(f"{path} was not written by kscperf, so it cannot be resumed.")
    return loaded.runs, loaded.metadata


def merge_results(paths: list[str], out: str) -> None:
    """Merge shard files of one build (same machine class) into one results file."""
    all_runs: list[CellResult] = []
    metadata: dict[str, Any] = {}
    complete = True
    for p in paths:
        loaded = load_results(p)
        if not loaded.has_kscperf:
            raise KscperfError(f"{p} was not written by kscperf, so it cannot be merged.")
        if metadata and loaded.metadata.get("build") != metadata.get("build"):
            raise KscperfError(
                f"{p} is from build {loaded.metadata.get('build')!r}, not "
                f"{metadata.get('build')!r}; only shards of one build can be merged.")
        metadata = metadata or dict(loaded.metadata)
        complete = complete and loaded.complete
        all_runs.extend(loaded.runs)
    write_results(out, all_runs, metadata, complete)
