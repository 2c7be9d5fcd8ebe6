"""The only reader and writer of results files.

A results file is one pyperf `BenchmarkSuite` JSON document (so `python -m pyperf stats`,
`check` and `compare_to` read it) with one extra top-level key, `kscperf`, which pyperf
ignores:

    {"version": "1.0", "metadata": {...}, "benchmarks": [...],        <- pyperf
     "kscperf": {"format_version": 1, "complete": true, "metadata": {...},
                 "cells": [...],   one summary per model/tool/task/config
                 "runs": [...]}}   every worker process's raw CellResult

Benchmark names: `model/tool/task/config` (run time, seconds per call),
`model/tool/task:compile` (one value per process) and `model/tool/task/config:prep`.

Format history:
    1  first version.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Iterable

from kscperf.errors import STATUS_SEVERITY, CellStatus, KscperfError
from kscperf.spec import CellResult

__all__ = [
    "FORMAT_VERSION",
    "LoadedResults",
    "benchmark_name",
    "compile_name",
    "prep_name",
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


def benchmark_name(model: str, tool: str, task: str, config: str) -> str:
    return f"{model}/{tool}/{task}/{config}"


def compile_name(model: str, tool: str, task: str) -> str:
    return f"{model}/{tool}/{task}:compile"


def prep_name(model: str, tool: str, task: str, config: str) -> str:
    return f"{model}/{tool}/{task}/{config}:prep"


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
    cells: list[dict[str, Any]] = field(default_factory=list)
    runs: list[CellResult] = field(default_factory=list)
    complete: bool = True
    has_kscperf: bool = True

    @property
    def build(self) -> str:
        return str(self.metadata.get("build") or os.path.basename(self.path))

    def cell(self, model: str, tool: str, task: str, config: str) -> dict[str, Any] | None:
        for c in self.cells:
            if (c["model"], c["tool"], c["task"], c["config"]) == (model, tool, task, config):
                return c
        return None


def _worst(statuses: Iterable[CellStatus]) -> CellStatus:
    return max(statuses, key=STATUS_SEVERITY.__getitem__)


def summarize_cells(runs: Iterable[CellResult]) -> list[dict[str, Any]]:
    """One summary dict per model/tool/task/config over all processes, in first-seen order.

    A cell that never reached its configs, or died part-way (import error, crash, timeout),
    has an entry with `config` None.
    The shown status, reason, phase and check are those of the worst process.
    """
    summary: dict[tuple[str, str, str, str | None], dict[str, Any]] = {}

    def entry(r: CellResult, config: str | None) -> dict[str, Any]:
        key = (r.model, r.tool, r.task, config)
        if key not in summary:
            summary[key] = {
                "model": r.model, "tool": r.tool, "task": r.task, "config": config,
                "status": CellStatus.OK.value, "reason": "", "phase": "", "check": None,
                "compile_s": [], "prep_s": [], "peak_rss_bytes": None,
                "peak_cuda_bytes": None, "processes": 0, "values": 0, "numel": None,
            }
        return summary[key]

    def absorb(e: dict[str, Any], status: CellStatus, reason: str, phase: str) -> None:
        if STATUS_SEVERITY[status] > STATUS_SEVERITY[CellStatus(e["status"])] or (
                e["processes"] == 0):
            e["status"], e["reason"], e["phase"] = status.value, reason, phase

    for r in runs:
        # A cell that died part-way keeps its finished configs, and its fate is recorded
        # under config None, for the configs it never reached.
        if not r.configs or r.status != CellStatus.OK:
            e = entry(r, None)
            absorb(e, r.status, r.reason, r.phase)
            e["processes"] += 1
        for c in r.configs:
            e = entry(r, c.config)
            before = e["status"]
            absorb(e, c.status, c.reason, c.phase)
            if c.check is not None and (e["check"] is None or e["status"] != before
                                        or not c.check.passed):
                e["check"] = c.check.to_dict()
            if r.compile_s is not None:
                e["compile_s"].append(r.compile_s)
            if c.prep_s is not None:
                e["prep_s"].append(c.prep_s)
            for key in ("peak_rss_bytes", "peak_cuda_bytes"):
                value = getattr(c, key)
                if value is not None:
                    e[key] = max(value, e[key] or 0)
            e["processes"] += 1
            e["values"] += len(c.values)
            if c.numel is not None:
                e["numel"] = c.numel
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
        "cells": summarize_cells(runs),
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
        cells = list(ksc.get("cells", []))
        for c in cells:
            CellStatus(c["status"])
            c["model"], c["tool"], c["task"]
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
