"""truth-check's instructions section (issue 32): separate runs of `tools/models/work.py`
(`reps` dependent sin() passes, exactly proportional work) with `--instructions`, scored
by instruction counts and by run time side by side.

  * +1 % work (101 reps against 100): each of `pairs` +1 % runs compared with its own base
    run; the count should call every one slower, and how often time sees it is recorded;
  * A/A: the spread of each run's counting processes, and `pairs * 2` comparisons of two
    runs of one build, none of which may be called changed;
  * a 30-build history, +2 % work from build 15 on: the instruction series should find the
    step at build 15 and nothing else; what the run-time series of the same builds finds is
    printed beside it;
  * cost: the wall time of a run with counts against one without.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from typing import Any

import kscperf
from kscperf.names import Kind
from kscperf.results.samples import build_samples
from validation.common import MODELS, exit_if_interrupted

_WORK = str(MODELS / "work.py")
_BASE_REPS = 100


def _run(tmp: str, name: str, reps: int, instructions: bool = True) -> tuple[str, float]:
    """One separate run of `work` at `reps` (fast profile, pt inference), with counts unless
    told not to: its file and wall seconds."""
    path = os.path.join(tmp, f"{name}.json")
    t0 = time.perf_counter()
    result = kscperf.run(_WORK, tools="pt", tasks="inference", profile="fast",
                         instructions=instructions, build=name, output=path, replace=True,
                         env={"KSCPERF_TRUTH_REPS": str(reps)})
    exit_if_interrupted(result, "truth-check instructions")
    return path, time.perf_counter() - t0


def _row(comparison: Any, kind: Kind) -> Any:
    [row] = [r for r in comparison.rows if r.kind is kind]
    return row


def _spread(path: str) -> tuple[float, float]:
    """The count per call of a run (mean of its processes) and its processes' relative
    range ((max - min) / mean)."""
    [b] = build_samples(kscperf.load(path)).of_kind(Kind.INSTRUCTIONS)
    mean = statistics.fmean(b.values)
    return mean, (max(b.values) - min(b.values)) / mean


def _record(folder: str, pairs: int, history_builds: int
            ) -> tuple[list[str], list[str], list[str], dict[str, list[float]]]:
    """The runs: the history's base and +2 % builds, the +1 % runs, and the wall seconds of
    runs with counts and of two without."""
    half = history_builds // 2
    walls: dict[str, list[float]] = {"counted": [], "plain": []}
    base: list[str] = []
    step: list[str] = []
    plus: list[str] = []
    for i in range(history_builds):
        path, wall = _run(folder, f"n{i:02d}", _BASE_REPS if i < half else _BASE_REPS + 2)
        (base if i < half else step).append(path)
        walls["counted"].append(wall)
    for i in range(pairs):
        path, wall = _run(folder, f"plus1-{i:02d}", _BASE_REPS + 1)
        plus.append(path)
        walls["counted"].append(wall)
    for i in range(2):
        walls["plain"].append(_run(folder, f"plain-{i}", _BASE_REPS, instructions=False)[1])
    return base, step, plus, walls


def _plus_one(base: list[str], plus: list[str]) -> tuple[int, int]:
    """How many +1 % runs the count, and how many time, called slower."""
    caught = time_saw = 0
    print("+1 % work, separate runs (BASE n00.., NEW plus1-..):")
    for b, n in zip(base, plus):
        comparison = kscperf.compare_builds(b, n)
        count, timed = _row(comparison, Kind.INSTRUCTIONS), _row(comparison, Kind.TIME)
        caught += count.verdict.value == "slower"
        time_saw += timed.verdict.value == "slower"
        print(f"  {os.path.basename(n)}: instructions {count.verdict.value} "
              f"{count.ratio:.4f} [{count.ratio_low:.4f}, {count.ratio_high:.4f}]; "
              f"time {timed.verdict.value} {timed.ratio:.3f}")
    return caught, time_saw


def _aa(pairs: list[tuple[str, str]]) -> int:
    """How many of the A/A pairs the count called changed, each printed."""
    false = 0
    for b, n in pairs:
        row = _row(kscperf.compare_builds(b, n), Kind.INSTRUCTIONS)
        if row.verdict.value != "same":
            false += 1
            print(f"  A/A {os.path.basename(b)} vs {os.path.basename(n)}: "
                  f"{row.verdict.value} {row.ratio:.4f}")
    return false


def _history(folder: str, paths: list[str], step_at: str) -> tuple[bool, int, int]:
    """The store of `paths`: whether its instruction series found the step at `step_at`,
    how many other instruction changes it listed, and how many run-time ones."""
    store = os.path.join(folder, "store")
    shutil.rmtree(store, ignore_errors=True)
    kscperf.history_add(paths, store)
    changes = [c for c in kscperf.history_changes(store) if c.key.kind is not None]
    print(f"history of {len(paths)} builds, +2 % from {step_at}:")
    for c in changes:
        print(f"  {c.kind} {c.key.benchmark} ({c.key.kind}) {c.before.label} -> "
              f"{c.after.label}" + (f" {c.change.ratio:.4f}" if c.change.ratio else ""))
    counted = [c for c in changes if c.key.kind is Kind.INSTRUCTIONS]
    found = [c for c in counted if c.after.label == step_at and str(c.kind) == "slower"]
    timed = [c for c in changes if c.key.kind is Kind.TIME]
    return bool(found), len(counted) - len(found), len(timed)


def instructions(tmp: str, pairs: int = 10, history_builds: int = 30) -> None:
    """The section: prints each comparison and history change, then the targets."""
    folder = os.path.join(tmp, "instructions")
    os.makedirs(folder, exist_ok=True)
    half = history_builds // 2
    print(f"\n== instructions: tools/models/work.py, pt inference, fast profile, "
          f"--instructions; {pairs} runs at +1 % work, a {history_builds}-build history "
          f"with +2 % from build {half} ==")
    base, step, plus, walls = _record(folder, pairs, history_builds)
    caught, time_saw = _plus_one(base, plus)
    counts = [_spread(p) for p in base + step + plus]
    print(f"A/A spread of the counting processes (range / mean) over {len(counts)} runs: "
          f"median {statistics.median(s for _, s in counts):.4%}, largest "
          f"{max(s for _, s in counts):.4%}; counts per call "
          f"{min(c for c, _ in counts):,.0f}-{max(c for c, _ in counts):,.0f}")
    aa_pairs = (list(zip(base, base[1:])) + list(zip(step, step[1:])))[:2 * pairs]
    false = _aa(aa_pairs)
    found, others, timed = _history(folder, base + step, f"n{half:02d}")
    cost = statistics.median(walls["counted"]) - statistics.median(walls["plain"])
    print(f"targets: +1 % called slower by instructions in {caught} of {len(plus)} "
          f"(target {len(plus)} of {len(plus)}); by time in {time_saw} of {len(plus)} "
          f"(recorded)")
    print(f"         A/A called changed by instructions in {false} of {len(aa_pairs)} "
          f"(target 0 of 20)")
    print(f"         history: the step found at n{half:02d} by instructions: "
          f"{'yes' if found else 'NO'}, other instruction changes: {others} (target 0); "
          f"run-time changes: {timed}")
    print(f"         cost: a run with counts {statistics.median(walls['counted']):.0f} s, "
          f"without {statistics.median(walls['plain']):.0f} s: the counts of one cell "
          f"(2 processes) {cost:.0f} s (target <= 180 s)")
    print(f"(on {os.cpu_count()} CPUs; load average now {os.getloadavg()[0]:.1f})")
