"""truth-check's lockstep history (with --lockstep-history DIR): a real nightly history of
10 builds, build 1 a plain run and each later build run in lockstep with the one before
(`ab --until-resolved`), with a planted step and a simulated torch upgrade in a second
environment, added to a store and judged by what `history changes` reports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kscperf
from kscperf.names import benchmark_name
from validation.common import WORK_FIXTURE, exit_if_interrupted

# The planted history: `ptnice` does 15 % more work from build STEP_AT on; builds from
# UPGRADE_AT on run in the second environment.
LOCKSTEP_BUILDS, STEP_AT, UPGRADE_AT = 10, 6, 9
# The budget of each night's `ab --until-resolved` (examples/nightly-ab.sh's AB_BUDGET).
LOCKSTEP_BUDGET_S = 60.0
# More processes and values than the default profile: a link's interval narrows with the
# number of process pairs, and on a machine shared by six engineers the default's three
# pairs (two degrees of freedom) missed the step (docs/validation.md).
LOCKSTEP_PROFILE: dict[str, Any] = dict(values=12, warmups=1, min_time=0.02)


def _upgraded_python(folder: Path) -> str:
    """A second environment: a virtual environment that reads this one's packages and whose
    torch reports version `<this one>.next`, as an upgraded torch would report its own."""
    import site

    if not (folder / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    packages = [p for p in site.getsitepackages() if p.endswith("site-packages")][0]
    (target,) = (folder / "lib").glob("python*/site-packages")
    # Once, though venv's lib64 link makes site read this file twice.
    text = (f"{packages}\nimport torch; torch.__version__ = "
            "torch.__version__.removesuffix('.next') + '.next'\n")
    pth = target / "zz_simulated_upgrade.pth"
    if not pth.exists() or pth.read_text() != text:
        pth.write_text(text)
    return str(folder / "bin" / "python")


def _lockstep_build(n: int, upgraded: str) -> kscperf.Build:
    """Build `n` of the history: its label, its environment (the upgraded one from
    UPGRADE_AT on) and its work (+15 % in `ptnice` from STEP_AT on)."""
    work = "1.15" if n >= STEP_AT else "1"
    return kscperf.Build(f"b{n:02d}", python=upgraded if n >= UPGRADE_AT else sys.executable,
                         env=(("KSCPERF_TEST_NICE_WORK", work),))


def _lockstep_nights(folder: Path, upgraded: str, processes: int) -> list[str]:
    """Build 1 alone, then each build in lockstep with the one before; what was recorded
    already under `folder` is kept (so the detection can be rerun on the same nights)."""
    paths = []
    for n in range(1, LOCKSTEP_BUILDS + 1):
        new = _lockstep_build(n, upgraded)
        out = folder / (f"{new.label}.json" if n == 1 else f"ab-{new.label}")
        if not out.exists():
            settings: dict[str, Any] = dict(tools="pt,ptnice", tasks="inference",
                                            **LOCKSTEP_PROFILE, processes=processes)
            if n == 1:
                result = kscperf.run(str(WORK_FIXTURE), build=new.label, output=str(out),
                                     env=dict(new.env), **settings)
            else:
                # Until resolved, as examples/nightly-ab.sh runs: fresh zygotes every round,
                # or one pair of zygotes' memory layout offsets a whole night's link.
                result = kscperf.run_ab(str(WORK_FIXTURE), base=_lockstep_build(n - 1, upgraded),
                                        new=new, output_dir=str(out), until_resolved=True,
                                        budget_s=LOCKSTEP_BUDGET_S, **settings)
            exit_if_interrupted(result, "truth-check")
            with open(folder / "load.txt", "a") as fp:  # the machine's load as it ran
                fp.write(f"{os.getloadavg()[0]:.1f}\n")
        paths.append(str(out))
    return paths


def lockstep_history(root: Path, repetitions: int, processes: int, first: int = 1) -> None:
    """The real lockstep history, `repetitions` times, each in `root/rep-K/`."""
    print(f"\n== lockstep history: {LOCKSTEP_BUILDS} builds, ptnice +15 % work at build "
          f"{STEP_AT}, environment change at build {UPGRADE_AT}, {processes} processes of "
          f"{LOCKSTEP_PROFILE['values']} values (min_time {LOCKSTEP_PROFILE['min_time']} s) per "
          f"build and cell, each night `ab --until-resolved --budget {LOCKSTEP_BUDGET_S:g}`, "
          f"{repetitions} repetitions ==")
    upgraded = _upgraded_python(root / "upgraded-env")
    met = 0
    for rep in range(first, first + repetitions):
        folder = root / f"rep-{rep}"
        folder.mkdir(parents=True, exist_ok=True)
        store = folder / "store"
        shutil.rmtree(store, ignore_errors=True)
        kscperf.history_add(_lockstep_nights(folder, upgraded, processes), str(store))
        changes = kscperf.history_changes(str(store))
        found = [f"{c.kind} {c.key.benchmark} ({c.key.kind or '*'}) {c.before.label} -> "
                 f"{c.after.label}"
                 f"{' ' + format(c.change.ratio, '.3f') if c.change.ratio else ''}"
                 f"{' [' + c.detail + ']' if c.detail else ''}" for c in changes]
        step = [c for c in changes if c.is_regression]
        environment = [c for c in changes if c.kind == "environment"]
        ok = (len(changes) == 2 and len(step) == 1 and len(environment) == 1
              and step[0].key.benchmark == benchmark_name("work", "ptnice", "inference", "4096")
              and str(step[0].key.kind) == "time"
              and step[0].after.label == f"b{STEP_AT:02d}"
              and step[0].before.label == f"b{STEP_AT - 1:02d}"
              and environment[0].after.label == f"b{UPGRADE_AT:02d}")
        met += ok
        loads = [float(v) for v in (folder / "load.txt").read_text().split()] \
            if (folder / "load.txt").exists() else []
        shown = f"; load average {min(loads):.1f}-{max(loads):.1f}" if loads else ""
        print(f"  repetition {rep}: {'met' if ok else 'NOT met'}; {len(changes)} changes{shown}")
        for line in found:
            print(f"    {line}")
    print(f"target met in {met} of {repetitions} repetitions (target: every one)")
    print(f"(on {os.cpu_count()} CPUs; load average now {os.getloadavg()[0]:.1f})")
