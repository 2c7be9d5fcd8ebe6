"""truth-check's lockstep history (with --lockstep-history DIR): a real nightly history, build 1
a plain run and each later build run in lockstep with the one before, with a planted step and
a simulated torch upgrade in a second environment, added to a store and judged by what
`history changes` reports.

Two plans: the until-resolved nights (10 builds, `ptnice` +15 % at build 6, upgrade at build 9,
each night `ab --until-resolved` with more processes than the default), and with
`--lockstep-plain` the plain nights (12 builds, `ptnice` +10 % at a night from 4 to 10 drawn
per repetition, upgrade at build 11, each night a plain `ab` at the default profile, as a user
runs it by hand or as a nightly whose budget ends early)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kscperf
from kscperf.names import benchmark_name
from validation.common import WORK_FIXTURE, exit_if_interrupted

# The budget of each night's `ab --until-resolved` (examples/nightly-ab.sh's AB_BUDGET).
LOCKSTEP_BUDGET_S = 60.0
# More processes and values than the default profile for the until-resolved nights: a link's
# interval narrows with the number of process pairs, and on a machine shared by six engineers
# the default's three pairs (two degrees of freedom) missed the step (docs/validation.md).
LOCKSTEP_PROFILE: dict[str, Any] = dict(values=12, warmups=1, min_time=0.02)
# The plain nights' seed of the step's night: repetition K steps at
# random.Random(PLAIN_SEED + K).randint(4, 10).
PLAIN_SEED = 20261202


@dataclass(frozen=True)
class NightPlan:
    """One repetition's history: `builds` builds; `ptnice` does `work` times the work from
    build `step_at` on; builds from `upgrade_at` on run in the second environment; each night
    `ab` with `until_resolved` (then `LOCKSTEP_PROFILE` and `processes`) or plain at the
    default profile (`settings` empty)."""

    builds: int
    step_at: int
    work: float
    upgrade_at: int
    until_resolved: bool
    settings: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """The plan in one line, for the section's heading."""
        how = (f"`ab --until-resolved --budget {LOCKSTEP_BUDGET_S:g}`, "
               f"{self.settings.get('processes')} processes of {self.settings.get('values')} "
               f"values (min_time {self.settings.get('min_time')} s)"
               if self.until_resolved else "a plain `ab` at the default profile")
        return (f"{self.builds} builds, ptnice +{self.work - 1:.0%} work, environment change "
                f"at build {self.upgrade_at}, each night {how}")


def until_resolved_plan(processes: int) -> NightPlan:
    """The until-resolved nights: 10 builds, +15 % at build 6, upgrade at build 9."""
    return NightPlan(10, 6, 1.15, 9, True, dict(**LOCKSTEP_PROFILE, processes=processes))


def plain_plan(repetition: int) -> NightPlan:
    """The plain nights of one repetition: 12 builds, +10 % at a night from 4 to 10 drawn
    from the repetition's number, upgrade at build 11."""
    return NightPlan(12, random.Random(PLAIN_SEED + repetition).randint(4, 10), 1.10, 11, False)


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


def _lockstep_build(plan: NightPlan, n: int, upgraded: str) -> kscperf.Build:
    """Build `n` of the history: its label, its environment (the upgraded one from
    `upgrade_at` on) and its work (`work` times in `ptnice` from `step_at` on)."""
    work = f"{plan.work:g}" if n >= plan.step_at else "1"
    return kscperf.Build(f"b{n:02d}", python=upgraded if n >= plan.upgrade_at else sys.executable,
                         env=(("KSCPERF_TEST_NICE_WORK", work),))


def _lockstep_nights(folder: Path, plan: NightPlan, upgraded: str) -> list[str]:
    """Build 1 alone, then each build in lockstep with the one before; what was recorded
    already under `folder` is kept (so the detection can be rerun on the same nights)."""
    paths = []
    for n in range(1, plan.builds + 1):
        new = _lockstep_build(plan, n, upgraded)
        out = folder / (f"{new.label}.json" if n == 1 else f"ab-{new.label}")
        if not out.exists():
            settings: dict[str, Any] = dict(tools="pt,ptnice", tasks="inference",
                                            **plan.settings)
            if n == 1:
                result = kscperf.run(str(WORK_FIXTURE), build=new.label, output=str(out),
                                     env=dict(new.env), **settings)
            elif plan.until_resolved:
                # Until resolved, as examples/nightly-ab.sh runs: fresh zygotes every round,
                # or one pair of zygotes' memory layout offsets a whole night's link.
                result = kscperf.run_ab(str(WORK_FIXTURE),
                                        base=_lockstep_build(plan, n - 1, upgraded), new=new,
                                        output_dir=str(out), until_resolved=True,
                                        budget_s=LOCKSTEP_BUDGET_S, **settings)
            else:
                result = kscperf.run_ab(str(WORK_FIXTURE),
                                        base=_lockstep_build(plan, n - 1, upgraded), new=new,
                                        output_dir=str(out), **settings)
            exit_if_interrupted(result, "truth-check")
            with open(folder / "load.txt", "a") as fp:  # the machine's load as it ran
                fp.write(f"{os.getloadavg()[0]:.1f}\n")
        paths.append(str(out))
    return paths


def _met(plan: NightPlan, changes: list[Any]) -> bool:
    """Whether `history changes` found exactly the planted step, at its build, and the
    environment change, and nothing else (what the nights' `ab` called and the history
    does not list, `ab-only`, is shown and lists no step)."""
    listed = [c for c in changes if c.kind != "ab-only"]
    step = [c for c in listed if c.kind in ("slower", "faster")]
    environment = [c for c in listed if c.kind == "environment"]
    return (len(listed) == 2 and len(step) == 1 and len(environment) == 1
            and step[0].kind == "slower"
            and step[0].key.benchmark == benchmark_name("work", "ptnice", "inference", "4096")
            and str(step[0].key.kind) == "time"
            and step[0].after.label == f"b{plan.step_at:02d}"
            and step[0].before.label == f"b{plan.step_at - 1:02d}"
            and environment[0].after.label == f"b{plan.upgrade_at:02d}")


def _agreement(paths: list[str], changes: list[Any]) -> tuple[int, int, int]:
    """Of the rows every night's `ab` called slower or faster (its comparison of the
    folder's two files, at the minimum effect it ran at): how many, how many `history
    changes` lists as that step at that night, and how many it lists as `ab-only` with a
    reason."""
    from kscperf.history import links

    called = as_step = as_ab_only = 0
    for path in paths:
        if not os.path.isdir(path):
            continue
        folder = links.read_ab_folder(path)
        min_effect = links.recorded_min_effect(folder.new)
        for r in kscperf.compare_builds(folder.base, folder.new, min_effect=min_effect,
                                        force=True).rows:
            if r.verdict.value not in ("slower", "faster"):
                continue
            called += 1
            at = [c for c in changes if c.after.label == folder.new.build
                  and str(c.key.kind) == str(r.kind)
                  and r.name.startswith(c.key.benchmark)]
            as_step += any(c.kind == r.verdict.value for c in at)
            as_ab_only += any(c.kind == "ab-only" and c.differs for c in at)
    return called, as_step, as_ab_only


def lockstep_history(root: Path, repetitions: int, processes: int, first: int = 1,
                     plain: bool = False) -> None:
    """The real lockstep history, `repetitions` times, each in `root/rep-K/` (with `plain`,
    `plain_plan`; otherwise `until_resolved_plan`)."""
    plans = {rep: plain_plan(rep) if plain else until_resolved_plan(processes)
             for rep in range(first, first + repetitions)}
    print(f"\n== lockstep history: {plans[first].describe()}, {repetitions} repetitions ==")
    upgraded = _upgraded_python(root / "upgraded-env")
    met = 0
    agreement = [0, 0, 0]
    for rep, plan in plans.items():
        folder = root / f"rep-{rep}"
        folder.mkdir(parents=True, exist_ok=True)
        store = folder / "store"
        shutil.rmtree(store, ignore_errors=True)
        paths = _lockstep_nights(folder, plan, upgraded)
        kscperf.history_add(paths, str(store))
        changes = kscperf.history_changes(str(store))
        agreement = [a + b for a, b in zip(agreement, _agreement(paths, changes))]
        found = [f"{c.kind} {c.key.benchmark} ({c.key.kind or '*'}) {c.before.label} -> "
                 f"{c.after.label}"
                 f"{' ' + format(c.change.ratio, '.3f') if c.change.ratio else ''}"
                 f"{' [' + c.detail + ']' if c.detail else ''}" for c in changes]
        ok = _met(plan, changes)
        met += ok
        loads = [float(v) for v in (folder / "load.txt").read_text().split()] \
            if (folder / "load.txt").exists() else []
        shown = f"; load average {min(loads):.1f}-{max(loads):.1f}" if loads else ""
        print(f"  repetition {rep} (step at b{plan.step_at:02d}): {'met' if ok else 'NOT met'}; "
              f"{len(changes)} changes{shown}")
        for line in found:
            print(f"    {line}")
    print(f"target met in {met} of {repetitions} repetitions")
    called, as_step, as_ab_only = agreement
    print(f"agreement: of {called} rows the nights' ab called slower or faster, "
          f"{as_step} are listed as that step at that night and {as_ab_only} as ab-only "
          f"with the reason ({(as_step + as_ab_only) / max(called, 1):.0%}; target 100 %)")
    print(f"(on {os.cpu_count()} CPUs; load average now {os.getloadavg()[0]:.1f})")
