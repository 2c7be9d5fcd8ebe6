"""dashboard-bench's concurrency section: many `history add` commands started at once into a
store that does not exist yet, trial after trial, each its own process; how many builds
landed, how many adds failed (and with what line), and how many files the store holds that
its index does not list."""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from validation.common import ROOT


@dataclass(frozen=True)
class TrialOutcome:
    """One trial: builds given, builds the store lists, the adds' failure lines, and the
    files under `builds/` its index does not list."""

    given: int
    landed: int
    failures: tuple[str, ...]
    unlisted: tuple[str, ...]


def write_builds(folder: Path, count: int) -> list[str]:
    """`count` small synthetic builds (the tests' generator), a day apart, in `folder`."""
    sys.path.insert(0, str(ROOT / "tests"))
    synthetic = importlib.import_module("synthetic")
    return [synthetic.write_build(
        str(folder / f"b{i}.json"), f"b{i}", seed=100 + i, models=("vrelu3",),
        tools=("pt", "compiled"), tasks=("fwd",), configs=("1024", "16384"),
        metadata_overrides={"date": f"2024-05-{i + 1:02d}T12:00:00",
                            "git_commit": f"{i:04d}" + "c" * 36})
        for i in range(count)]


def store_trial(files: list[str], store: str) -> TrialOutcome:
    """`history add FILE --store STORE` for each of `files` at once, one process each, into
    the store `store` (new or not), and what came of it."""
    from kscperf import history

    procs = [subprocess.Popen([sys.executable, "-m", "kscperf", "history", "add", path,
                               "--store", store], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for path in files]
    errors = [p.communicate()[1] for p in procs]
    failures = tuple(err.strip() for p, err in zip(procs, errors) if p.returncode != 0)
    with history.open_store(store) as opened:
        listed = {os.path.basename(b.file) for b in opened.builds()}
    present = set(os.listdir(os.path.join(store, history.BUILDS_DIR)))
    return TrialOutcome(len(files), len(listed), failures, tuple(sorted(present - listed)))


def section_concurrency(args: argparse.Namespace) -> None:
    """`--concurrency-trials` trials of `--concurrent-adds` adds at once into a new store:
    the builds that landed of those given, the failed adds and the unlisted files."""
    print(f"\n## Concurrent adds: {args.concurrency_trials} trials of "
          f"{args.concurrent_adds} `history add` at once into a new store")
    with tempfile.TemporaryDirectory(prefix="dashboard-bench-adds-") as tmp:
        files = write_builds(Path(tmp), args.concurrent_adds)
        outcomes = []
        t0 = time.perf_counter()
        for trial in range(args.concurrency_trials):
            outcomes.append(store_trial(files, os.path.join(tmp, f"store{trial}")))
        wall = time.perf_counter() - t0
    print(summarize_trials(outcomes, wall))


def summarize_trials(outcomes: list[TrialOutcome], wall_s: float) -> str:
    """The section's lines: builds landed of builds given, failed adds (each distinct line
    once, with its count), files the index does not list, and the mean trial time."""
    given = sum(o.given for o in outcomes)
    landed = sum(o.landed for o in outcomes)
    failures = [line for o in outcomes for line in o.failures]
    unlisted = sum(len(o.unlisted) for o in outcomes)
    lines = [f"builds landed: {landed} of {given}; failed adds: {len(failures)}; "
             f"files the index does not list: {unlisted}; "
             f"{wall_s / max(1, len(outcomes)):.2f} s a trial"]
    lines += [f"  {failures.count(line)}x {line}" for line in sorted(set(failures))]
    return "\n".join(lines)
