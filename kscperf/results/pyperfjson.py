"""The pyperf half of a results file, written in one pass.

pyperf's own objects would do it (`pyperf.BenchmarkSuite(...).dump`), but adding a
benchmark to a suite compares its name with every earlier one, and a partial write every
few seconds of a suite of many benchmarks paid that each time, then serialised twice.
This writes the same JSON directly: the tests load it with `pyperf.BenchmarkSuite.loads`,
check that pyperf dumps it back unchanged, and run `python -m pyperf compare_to` on it.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from kscperf.names import Kind, benchmark_name, compile_name, prep_name
from kscperf.results.metadata import PYPERF_RUN_KEYS
from kscperf.spec import CellResult

__all__ = ["pyperf_suite_json"]


def _run_metadata(r: CellResult, build_metadata: dict[str, Any]) -> dict[str, Any]:
    md: dict[str, Any] = {}
    for key, value in build_metadata.items():
        _put(md, key, value)
    for key in PYPERF_RUN_KEYS:
        _put(md, key, r.metadata.get(key))
    md.update(model=r.model, tool=r.tool, task=r.task, unit="second")
    return md


def _put(md: dict[str, Any], key: str, value: Any) -> None:
    """Set `md[key]` to `value` as pyperf keeps run metadata (a string stripped), unless
    pyperf refuses it: not a number or a string, not finite, empty, or holding a newline."""
    if isinstance(value, str):
        value = value.strip()
        if value and "\n" not in value and "\r" not in value:
            md[key] = value
    elif isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        md[key] = value


def _common(metadatas: list[dict[str, Any]]) -> dict[str, Any]:
    """The items every one of `metadatas` holds alike (pyperf's rule: the first one's
    value, kept while every other compares equal)."""
    common = dict(metadatas[0]) if metadatas else {}
    for md in metadatas[1:]:
        for key in [k for k, v in common.items() if md.get(k) != v]:
            del common[key]
    return common


class _PyperfSuite:
    """The pyperf half of a results file, built run by run in one pass: benchmarks in
    first-seen order, each a list of runs (metadata, values, warmups)."""

    def __init__(self) -> None:
        self.benchmarks: dict[str, list[tuple[dict[str, Any], list[float],
                                              list[list[float]]]]] = {}

    def add(self, name: str, md: dict[str, Any], values: list[float],
            warmups: list[list[float]] | None = None, loops: int = 1) -> None:
        self.benchmarks.setdefault(name, []).append((dict(md, name=name, loops=loops),
                                                     values, warmups or []))

    def to_json(self) -> dict[str, Any]:
        """The suite as pyperf's `BenchmarkSuite.dump` writes it: the metadata all
        benchmarks share at the top, what all runs of one benchmark share on it, the rest
        on each run. Linear in the runs, where pyperf's own objects compare each new
        benchmark's name with every earlier one."""
        if not self.benchmarks:
            return {"version": "1.0", "benchmarks": []}
        commons = [_common(_consistent([md for md, _, _ in runs]))
                   for runs in self.benchmarks.values()]
        suite = _common(commons)
        benchmarks = []
        for runs, common in zip(self.benchmarks.values(), commons):
            out: dict[str, Any] = {"runs": [_run_json(md, values, warmups, common)
                                            for md, values, warmups in runs]}
            own = {k: v for k, v in common.items() if k not in suite}
            if own:
                out["metadata"] = own
            benchmarks.append(out)
        doc: dict[str, Any] = {"version": "1.0", "benchmarks": benchmarks}
        if suite:
            doc["metadata"] = suite
        return doc


def _consistent(metadatas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`metadatas` without the pyperf run keys they disagree on: pyperf refuses to load a
    benchmark whose runs differ in one (processes of one cell merged from two hosts)."""
    for key in PYPERF_RUN_KEYS:
        first = metadatas[0].get(key)
        if any(md.get(key) != first for md in metadatas[1:]):
            for md in metadatas:
                md.pop(key, None)
    return metadatas


def _run_json(md: dict[str, Any], values: list[float], warmups: list[list[float]],
              common: dict[str, Any]) -> dict[str, Any]:
    run: dict[str, Any] = {}
    if warmups:
        run["warmups"] = warmups
    run["values"] = values
    own = {k: v for k, v in md.items() if k not in common}
    if own:
        run["metadata"] = own
    return run


def pyperf_suite_json(runs: Sequence[CellResult], build_metadata: dict[str, Any],
                      counts: Sequence[CellResult] = ()) -> dict[str, Any]:
    """The pyperf document of the worker results `runs` of one build, as plain JSON types:
    per run a compile benchmark (one value), and per config a prep benchmark (one value)
    and the run-time benchmark (its values and warmups, loops and duration), each run
    carrying the build's metadata and its worker's pyperf run keys; per counting process
    of `counts` and config an instructions benchmark (one value, unit integer). Values of
    zero or less are left out, as pyperf refuses them."""
    suite = _PyperfSuite()
    for r in runs:
        md = _run_metadata(r, build_metadata)
        if r.compile_s is not None and r.compile_s > 0:
            suite.add(compile_name(r.model, r.tool, r.task), md, [r.compile_s])
        for c in r.configs:
            cmd = dict(md)
            _put(cmd, "config", c.config)
            _put(cmd, "kscperf_status", c.status.value)
            _put(cmd, "date", c.date)
            if c.peak_rss_bytes:
                cmd["mem_max_rss"] = c.peak_rss_bytes
            if c.prep_s is not None and c.prep_s > 0:
                suite.add(prep_name(r.model, r.tool, r.task, c.config), cmd, [c.prep_s])
            values = [v for v in c.values if v > 0]
            if values and c.loops > 0:
                if c.duration_s is not None:
                    cmd["duration"] = c.duration_s
                warmups = [[n, w] for n, w in c.warmups if n >= 1 and w > 0]
                suite.add(benchmark_name(r.model, r.tool, r.task, c.config), cmd, values,
                          warmups, c.loops)
    for r in counts:
        md = dict(_run_metadata(r, build_metadata), unit=Kind.INSTRUCTIONS.unit)
        for c in r.configs:
            if c.instructions is not None and c.instructions > 0:
                cmd = dict(md)
                _put(cmd, "config", c.config)
                suite.add(benchmark_name(r.model, r.tool, r.task, c.config,
                                         Kind.INSTRUCTIONS), cmd, [c.instructions])
    return suite.to_json()
