"""truth-check's machine sections: separate-run trials on a machine whose speed changes
(base, the same build again, +20 % work in `ptnice`; another tenant during one run of most
trials), the outcome each comparison is judged to have, and whether the machine-speed
canary could serve as a covariate of the benchmark's process medians."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

import numpy as np

import kscperf
from kscperf.compare import builds as compare
from kscperf.errors import CellStatus
from kscperf.names import benchmark_name
from kscperf.stats import machine as machine_speed
from validation.common import MODELS, WORK_FIXTURE, run_build

# Which of a machine trial's three runs (base, again, new) shares the machine with a busy
# process, trial by trial, under --machine-load cycle.
_LOADED_RUN = (None, "base", "again", "new")


def _busy_process() -> subprocess.Popen[bytes]:
    """Another tenant: one process spinning on a core until it is killed."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def _machine_run(label: str, output: str, work: float, loaded: bool) -> None:
    """One run of the work fixture, `ptnice` doing `work` times the work, with another
    tenant on the machine while it runs when `loaded`."""
    busy = _busy_process() if loaded else None
    try:
        run_build("truth-check", str(WORK_FIXTURE), build=label, output=output,
                  tools="pt,ptnice", tasks="inference",
                  env={"KSCPERF_TEST_NICE_WORK": str(work)})
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()


def trial_outcome(comparison: compare.Comparison, slower_tool: str | None) -> tuple[str, str]:
    """(outcome, details) of one comparison: "run failed" (a cell not ok: nothing to
    judge), "wrong", "caught", "machine changed", "machine unresolved", "unresolved" or
    (with no change made) "right"."""
    verdicts = {r.tool: r for r in comparison.rows if r.kind == "time"}
    notes = []
    for tool, row in sorted(verdicts.items()):
        notes.append(f"{tool} {row.verdict.value} {row.ratio:.2f}x "
                     f"(detectable {row.min_detectable_effect:.0%})")
    shift = comparison.machine.shift
    if shift is not None:
        notes.append(f"machine {shift.ratio:.2f}x [{shift.low:.2f}, {shift.high:.2f}] "
                     f"{shift.state.value}")
    notes += [f"REGRESSION {r.name} {r.kind} {r.verdict.value} {r.ratio:.2f}x"
              for r in comparison.regressions if r.tool != slower_tool]
    details = "; ".join(notes)
    if any(row.base_status is not CellStatus.OK or row.new_status is not CellStatus.OK
           for row in verdicts.values()):
        return "run failed", details
    untouched = [row for tool, row in verdicts.items() if tool != slower_tool]
    if any(row.verdict.value in ("slower", "faster") for row in untouched):
        return "wrong", details
    if slower_tool is None:
        return ("wrong" if comparison.has_regression else "right"), details
    verdict = verdicts[slower_tool].verdict.value
    if verdict == "faster":
        return "wrong", details
    if verdict == "slower":
        return "caught", details
    if comparison.machine.shifted:
        return "machine changed", details
    if comparison.machine.could_have_shifted:
        return "machine unresolved", details
    return "unresolved", details


def machine(tmp: str, trials: int, load: str) -> None:
    """Separate-run trials (base, base again, +20 % in `ptnice`), compared as a nightly
    would, with another tenant on the machine during one run of most trials under `load`
    "cycle"."""
    print(f"\n== machine: separate runs on a changing machine, default profile, {trials} "
          f"trials, machine load {load} ==")
    outcomes: dict[str, dict[str, int]] = {"A/A": {}, "+20 %": {}}
    # (canary ratio, untouched tool's ratio) per comparison: were the canary a sound
    # covariate, the second would follow the first.
    tracking: list[tuple[float, float]] = []
    for trial in range(trials):
        loaded_run = _LOADED_RUN[trial % len(_LOADED_RUN)] if load == "cycle" else None
        paths = {label: os.path.join(tmp, f"machine-{label}.json")
                 for label in ("base", "again", "new")}
        for label, path in paths.items():
            _machine_run(label, path, 1.2 if label == "new" else 1.0, loaded_run == label)
        base = kscperf.load(paths["base"])
        for what, other, slower_tool in (("A/A", "again", None),
                                         ("+20 %", "new", "ptnice")):
            comparison = kscperf.compare_builds(base, paths[other])
            outcome, details = trial_outcome(comparison, slower_tool)
            untouched = comparison.row(benchmark_name("work", "pt", "inference", "4096"))
            if comparison.machine.shift is not None and untouched is not None:
                tracking.append((comparison.machine.shift.ratio, untouched.ratio))
            outcomes[what][outcome] = outcomes[what].get(outcome, 0) + 1
            print(f"  trial {trial + 1} {what:5s} (busy during: {loaded_run or 'none'}): "
                  f"{outcome}: {details}")
    for what, counts in outcomes.items():
        print(f"{what}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if tracking:
        residual = sorted(untouched / canary for canary, untouched in tracking)
        print("canary as a covariate: the untouched tool's ratio divided by the canary's "
              f"ranged {residual[0]:.2f}-{residual[-1]:.2f} (median "
              f"{statistics.median(residual):.2f}; 1.00 everywhere would make it sound)")
    print("target: no wrong verdict; each +20 % trial caught, machine changed or unresolved")


def covariate(tmp: str, processes: int = 40) -> None:
    """One cell timed in many processes: does the benchmark's process median follow the
    process's canary score?"""
    out = os.path.join(tmp, "covariate.json")
    run_build("truth-check", str(MODELS / "work.py"), output=out, tools="pt",
              tasks="inference", processes=processes)
    canary, medians = [], []
    for run in kscperf.load(out).runs:
        speed = machine_speed.machine_speed([run])
        if speed is not None and run.configs and run.configs[0].values:
            canary.append(speed.canary_s)
            medians.append(statistics.median(run.configs[0].values))
    correlation = float(np.corrcoef(np.log(canary), np.log(medians))[0, 1])
    print(f"\n== covariate: one cell in {processes} processes, default profile ==")
    print(f"processes {len(canary)}: canary {min(canary) * 1e6:.1f}-{max(canary) * 1e6:.1f} us "
          f"({max(canary) / min(canary):.2f}x), benchmark {min(medians) * 1e6:.0f}-"
          f"{max(medians) * 1e6:.0f} us ({max(medians) / min(medians):.2f}x), correlation of "
          f"logs {correlation:.2f}")
