"""harness-bench's side by side with pyperf (--pyperf): one torch workload under pyperf's
Runner and under kscperf, both on one CPU with one thread, interleaved, and where kscperf's
wall time goes (the fork server's start, the workers, the rest)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from kscperf.spec import PROFILES
from validation.common import MODELS, ROOT
from validation.harness import command_wall

# The same workload and check under pyperf's Runner: kscperf's default profile, in pyperf's
# options. Every process checks the output against float64, as each kscperf worker does.
_PYPERF_SCRIPT = """
import sys
import pyperf
import torch
sys.path.insert(0, {models!r})
import work

runner = pyperf.Runner()
# One thread, as kscperf's workers under --affinity: on a busy machine a two-thread op waits
# for its second thread at every call, which would time the machine's load, not the harness.
torch.set_num_threads(1)
torch.manual_seed(0)
x = next(iter(work.work_bench_configs()))
torch.testing.assert_close(work.work_pytorch(x).double(), work.work_pytorch(x.double()),
                           rtol=1e-4, atol=1e-5)
with torch.inference_mode():
    runner.bench_func("work/pt/inference/4096", work.work_pytorch, x)
"""


def _zygote_start_s() -> float:
    """How long the fork server takes to be ready (torch and the preloads imported, the
    shared setup made), as a run without a compiler tool starts it."""
    from kscperf.orchestrator.workerenv import worker_environment

    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "kscperf.worker", "--serve",
                             "--no-compilers"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=worker_environment(), cwd=ROOT)
    assert proc.stdout is not None and proc.stdin is not None
    proc.stdout.readline()
    ready = time.perf_counter() - t0
    proc.stdin.close()
    proc.wait()
    return ready


def pyperf_side_by_side(repeats: int, tmp: str) -> None:
    """pyperf's Runner and kscperf on one workload at 3 processes x 10 values, each a fresh
    command, interleaved; then where kscperf's wall time went."""
    script = os.path.join(tmp, "work_pyperf.py")
    Path(script).write_text(_PYPERF_SCRIPT.format(models=str(MODELS)))
    profile = PROFILES["default"]
    # Both on the same one CPU, one torch thread.
    cpu = str(max(os.sched_getaffinity(0)))
    pyperf_args = ["--processes", str(profile.processes), "--values", str(profile.values),
                   "--warmups", str(profile.warmups), "--min-time", str(profile.min_time),
                   "--affinity", cpu, "--quiet"]
    out = os.path.join(tmp, "pyperf-side.json")
    ours, theirs = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, script, *pyperf_args, "-o",
                        os.path.join(tmp, "pyperf.json")], check=True, cwd=tmp,
                       stdout=subprocess.DEVNULL)
        theirs.append(time.perf_counter() - t0)
        ours.append(command_wall(str(MODELS / "work.py"), "--tools", "pt", "--tasks",
                                  "inference", "--affinity", cpu, "-o", out, "--replace"))
        os.unlink(os.path.join(tmp, "pyperf.json"))
    pyperf_s, ours_s = statistics.median(theirs), statistics.median(ours)
    print(f"work/pt/inference at {profile.processes} processes x {profile.values} values "
          f"(warmups {profile.warmups}, min_time {profile.min_time} s), check included, "
          f"both on CPU {cpu} with one thread, median of {repeats} interleaved:")
    print(f"  pyperf Runner {pyperf_s:.2f} s  (each: {', '.join(f'{w:.2f}' for w in theirs)})")
    print(f"  kscperf       {ours_s:.2f} s  (each: {', '.join(f'{w:.2f}' for w in ours)})")
    print(f"  pyperf / kscperf: {pyperf_s / ours_s:.1f}x  (aim: >= 10x)")
    _print_run_profile(out, ours_s)


def _print_run_profile(path: str, wall: float) -> None:
    """Where the wall time of kscperf's side went, from its results file and a fresh start
    of the fork server."""
    runs = json.loads(Path(path).read_text())["kscperf"]["runs"]
    workers = sum(r.get("wall_s") or 0.0 for r in runs)
    timed = sum(c.get("duration_s") or 0.0 for r in runs for c in r["configs"])
    canary = sum(p["duration_s"] for r in runs for p in r.get("canary", ()))
    zygote = statistics.median(_zygote_start_s() for _ in range(3))
    print(f"  kscperf's {wall:.2f} s: fork server start (import torch, preloads) "
          f"{zygote:.2f} s (median of 3 starts alone); {len(runs)} workers "
          f"{workers:.2f} s (timed loops, calibration included, {timed:.2f} s; canary "
          f"{canary:.2f} s; check, configs and the rest {workers - timed - canary:.2f} s); "
          f"the rest (interpreter and orchestrator start, plan, results file, exit) "
          f"{wall - zygote - workers:.2f} s")
