"""harness-bench's measurements of the harness itself: the orchestrator's start-up, the
marginal cost of one more cell (fork against spawn, with its CPU time and where a forked
worker's time goes), the shipped suite's wall time at --fast and what it spends outside
timed loops and compiles and in the machine-speed canary, the canary's share at the default
profile, and the suite in balanced shards."""

from __future__ import annotations

import json
import os
import resource
import statistics
import tempfile
from pathlib import Path
from typing import Any

import kscperf
from validation.common import MODELS, run_build, timed_cli


def command_wall(*args: str) -> float:
    """Wall time of the `run-benchmarks ARGS` command in a new interpreter: its start-up is
    what is measured here (an exit status of 1, a problem it reports, is no failure)."""
    return timed_cli("harness-bench", *args, ok=(0, 1))[0]


def _run_wall(*paths: str, **settings: Any) -> float:
    """Wall time of one run through the Python API (fork server, workers, files)."""
    return run_build("harness-bench", *paths, **settings)


def startup(repeats: int) -> None:
    """Prints the orchestrator's start-up: the median wall time of `run-benchmarks --help`
    and of `run-benchmarks list` (the shipped suite) in new interpreters, `repeats` each."""
    help_s = statistics.median(command_wall("--help") for _ in range(repeats))
    list_s = statistics.median(command_wall("list") for _ in range(repeats))
    print(f"orchestrator start-up: --help {help_s * 1e3:.0f} ms, "
          f"list (shipped suite) {list_s * 1e3:.0f} ms  (median of {repeats})")


def _cpu_s() -> tuple[float, float]:
    """CPU seconds of this process (the orchestrator) and of every child it has reaped (the
    fork server is reaped at the end of each run, with its workers' time in its own)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _worker_profile(path: str) -> dict[str, float]:
    """Where each worker of a results file spent its time, median over the workers: its
    import phase, its canary probes, its configs' timed loops, the rest of the worker's
    own wall time (configs, check, compile, metadata)."""
    runs = json.loads(Path(path).read_text())["kscperf"]["runs"]
    parts: dict[str, list[float]] = {"worker": [], "import": [], "canary": [], "timed": []}
    for run in runs:
        parts["worker"].append(run.get("wall_s") or 0.0)
        parts["import"].append(run.get("import_s") or 0.0)
        parts["canary"].append(sum(p["duration_s"] for p in run.get("canary", ())))
        parts["timed"].append(sum(c.get("duration_s") or 0.0 for c in run["configs"]))
    return {k: statistics.median(v) for k, v in parts.items()}


def marginal(cells: int, repeats: int, isolations: list[str]) -> None:
    """Wall time of runs of 1 and of `cells` worker processes of a trivial cell; the
    difference over cells - 1 is what one more cell costs, all included."""
    with tempfile.TemporaryDirectory() as tmp:
        module = MODELS / "tiny.py"
        common: dict[str, Any] = dict(tools="pt", tasks="inference", values=1, warmups=0,
                                      min_time=1e-6)
        # Unmeasured: this process imports what a run needs (results, pyperf) only once.
        _run_wall(str(module), output=os.path.join(tmp, "warmup.json"), **common)
        costs = {}
        for isolation in isolations:
            samples, cpu, profiles = [], [], []
            for _ in range(repeats):
                walls, cpus = [], []
                for n in (1, cells):
                    out = os.path.join(tmp, f"{isolation}-{n}.json")
                    cpu0 = _cpu_s()
                    walls.append(_run_wall(str(module), processes=n, isolation=isolation,
                                           output=out, **common))
                    cpus.append([b - a for a, b in zip(cpu0, _cpu_s())])
                samples.append((walls[1] - walls[0]) / (cells - 1))
                cpu.append([(b - a) / (cells - 1) for a, b in zip(*cpus)])
                profiles.append(_worker_profile(out))
            costs[isolation] = statistics.median(samples)
            print(f"marginal cost of one more cell, {isolation:5}: "
                  f"{costs[isolation] * 1e3:7.1f} ms  (median of {repeats}, "
                  f"{cells} cells against 1; each: "
                  f"{', '.join(f'{s * 1e3:.0f}' for s in samples)} ms; CPU time: "
                  f"orchestrator {statistics.median(c[0] for c in cpu) * 1e3:.0f} ms, "
                  f"workers {statistics.median(c[1] for c in cpu) * 1e3:.0f} ms)")
            print_worker_profile(profiles, costs[isolation])
        if len(costs) == 2:
            print(f"spawn / fork: {costs['spawn'] / costs['fork']:.1f}x   "
                  f"(target: fork <= 50 ms and >= 7x below spawn)")


def print_worker_profile(profiles: list[dict[str, float]], marginal_s: float) -> None:
    """Prints where a worker's time went, the median over `profiles` (`_worker_profile`'s),
    and what of `marginal_s` (one more cell's cost) lies outside the worker."""
    p = {k: statistics.median(d[k] for d in profiles) for k in profiles[0]}
    rest = p["worker"] - p["import"] - p["canary"] - p["timed"]
    print(f"  per worker (median): its own wall time {p['worker'] * 1e3:.1f} ms = import "
          f"{p['import'] * 1e3:.1f} + canary {p['canary'] * 1e3:.1f} + timed loops "
          f"{p['timed'] * 1e3:.1f} + the rest {rest * 1e3:.1f} (configs, check, metadata); "
          f"outside it {(marginal_s - p['worker']) * 1e3:.1f} ms (start, spec and result "
          "files, exit, the orchestrator)")


_SUITE: dict[str, Any] = dict(profile="fast", tools="pt,ptnice,ts,compiled")


def suite(warmup_run: bool, tmp: str) -> str:
    """The shipped suite's wall time and where it goes; returns its results file."""
    out = os.path.join(tmp, "suite.json")
    if warmup_run:
        _run_wall(output=out, **_SUITE)
    wall = _run_wall(output=out, **_SUITE)
    doc = json.loads(Path(out).read_text())
    timed = compile_s = 0.0
    for run in doc["kscperf"]["runs"]:
        compile_s += run.get("compile_s") or 0.0
        timed += sum(c.get("duration_s") or 0.0 for c in run["configs"])
    cells = len({(r["model"], r["tool"], r["task"]) for r in doc["kscperf"]["runs"]})
    print(f"shipped suite --fast: {wall:.1f} s wall for {cells} cells "
          f"({'warm compiler cache, second of two runs' if warmup_run else 'one run'}; "
          f"target < 120 s)")
    outside = wall - timed - compile_s
    print(f"  in timed loops {timed:.1f} s, in compiles {compile_s:.1f} s, "
          f"outside both {outside:.1f} s = {outside / wall:.0%} of the wall time")
    _print_canary_share(doc, wall)
    return out


def _print_canary_share(doc: dict[str, Any], wall: float) -> None:
    """The canary's seconds in the results document `doc` and their share of `wall`."""
    probes = [p for run in doc["kscperf"]["runs"] for p in run.get("canary", ())]
    canary_s = sum(p["duration_s"] for p in probes)
    per_process = canary_s / max(1, len(probes) // 2)
    print(f"  in the machine-speed canary {canary_s:.1f} s = {canary_s / wall:.2%} of the wall "
          f"time ({len(probes)} probes, {per_process * 1e3:.1f} ms per worker process)")


def canary_default(tmp: str) -> None:
    """The shipped suite at the default profile, every tool: what the canary costs it."""
    out = os.path.join(tmp, "default.json")
    wall = _run_wall(output=out, tools="pt,ptnice,ts,compiled")
    print(f"shipped suite, default profile: {wall:.1f} s wall (target for the canary: at most "
          "3 % of it)")
    _print_canary_share(json.loads(Path(out).read_text()), wall)


def shards(count: int, balance: str, tmp: str) -> None:
    """The suite in `count` shards balanced by `balance`'s costs, one after another: what
    each was expected to take and what it took."""
    print(f"shipped suite --fast in {count} shards, --balance from the run above:")
    walls, expected = [], []
    for i in range(1, count + 1):
        out = os.path.join(tmp, f"shard{i}.json")
        walls.append(_run_wall(shard=f"{i}/{count}", balance=balance, output=out, **_SUITE))
        md = kscperf.load(out).metadata
        expected.append(float(md["shard_expected_s"]))
        print(f"  shard {i}/{count}: {md['shard_expected_s']:.1f} s of worker time expected, "
              f"{walls[-1]:.1f} s wall")
    for what, values in (("expected", expected), ("measured", walls)):
        mean = sum(values) / count
        print(f"  {what}: largest shard {max(values) / mean - 1:+.0%} over the mean "
              f"({mean:.1f} s)" + ("  (target: at most +25 %)" if what == "expected" else ""))
