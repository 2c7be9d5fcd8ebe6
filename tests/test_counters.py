"""Tests of choosing the instruction counter (`kscperf.orchestrator.counting`): the hardware
counter (perf_event_open, as torch's instruction counter reads it) where the machine has
one, Callgrind where it does not, never mixed. This VM has no PMU, so the hardware path is
tested for what it does here (found missing, refused when asked for, the worker's count
failing with a reason) and, on a machine with a counter, for counting for real."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import synthetic
from kscperf import api, history
from kscperf.errors import CellStatus, KscperfError
from kscperf.names import Kind
from kscperf.orchestrator import counting
from kscperf.orchestrator.session import RunConfig
from kscperf.results.files import write_results
from kscperf.spec import CellResult, ConfigResult
from kscperf.worker.instructions import CallgrindError, count_calls
from runner_testing import DEFS, QUICK, cli

MISSING = counting.hardware_counter_missing()
_TORCH_COUNTER = ("import torch\n"
                  "try:\n    print(torch._C._instruction_counter.start())\n"
                  "except RuntimeError:\n    print(-1)\n")


def test_the_probe_opens_an_event_here_and_agrees_with_torchs_own_counter() -> None:
    # The same perf_event_attr for a software event (task clock) opens on any Linux that
    # lets a process count itself, so the structure and the call are right; whether the
    # hardware one opens is then the machine's answer, and torch's counter must agree.
    fd = counting._open_event((1, 1))
    assert fd >= 0, os.strerror(-fd)
    os.close(fd)
    torch_fd = int(subprocess.run([sys.executable, "-c", _TORCH_COUNTER], capture_output=True,
                                  text=True, check=True).stdout.split()[-1])
    assert (torch_fd >= 0) == (MISSING == ""), (torch_fd, MISSING)
    if MISSING:
        assert MISSING.startswith("perf_event_open of the instruction counter failed: ")
        assert counting._open_event(counting.HW_INSTRUCTIONS) in (
            -errno.ENOENT, -errno.EACCES, -errno.EPERM, -errno.EOPNOTSUPP, -errno.ENODEV)


def test_auto_is_the_hardware_counter_where_there_is_one_and_callgrind_elsewhere() -> None:
    assert counting.counter_for("auto") == ("callgrind" if MISSING else "perf")
    assert counting.counter_for("callgrind") == "callgrind"
    md = counting.count_metadata("perf")
    assert md["instructions_method"] == "perf" and md["instructions_isa"] == "native"
    assert md["instructions_tool"].startswith("perf_event_open, Linux ")
    md = counting.count_metadata("callgrind")
    assert md["instructions_method"] == "callgrind"
    assert md["instructions_isa"] == counting.CALLGRIND_ISA["ATEN_CPU_CAPABILITY"]
    with pytest.raises(KscperfError, match="must be auto, perf or callgrind, not 'pmu'"):
        RunConfig(instructions=True, instruction_counter="pmu")


@pytest.mark.skipif(not MISSING, reason="this machine has a hardware instruction counter")
def test_asking_for_the_hardware_counter_without_one_is_one_sentence() -> None:
    with pytest.raises(KscperfError, match="--instruction-counter perf: perf_event_open"):
        RunConfig(instructions=True, instruction_counter="perf")
    assert counting.counter_missing("perf") == MISSING
    proc = cli(DEFS / "toy.py", "--tools", "pt", "--tasks", "inference", *QUICK,
               "--instructions", "--instruction-counter", "perf")
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "use callgrind (or auto) here." in line and "Traceback" not in line


def test_the_workers_hardware_count_fails_with_a_reason_or_counts() -> None:
    x = torch.randn(4096)
    if MISSING:
        with pytest.raises(CallgrindError, match="hardware instruction counter could not"):
            count_calls(lambda: torch.sin(x), contextlib.nullcontext, 10, "", "perf")
        return
    one = count_calls(lambda: torch.sin(x), contextlib.nullcontext, 20, "", "perf")
    two = count_calls(lambda: torch.sin(torch.sin(x)), contextlib.nullcontext, 20, "", "perf")
    assert one.per_call > 1_000 and one.functions == ()
    assert 1.5 < two.per_call / one.per_call < 2.5, (one.per_call, two.per_call)


def _counted_build(folder: Path, i: int, counter: str, per_call: float) -> str:
    """Synthetic build `i`: timed (pt, fwd, config c) and counted by `counter`, two
    processes at `per_call` instructions a call."""
    path = str(folder / f"b{i:02d}.json")
    md = synthetic.metadata(f"b{i:02d}", date=f"2024-05-{i + 1:02d}T12:00:00",
                            git_commit=f"{i:04d}" + "c" * 36,
                            **counting.count_metadata(counter))
    counts = [CellResult(model="m", tool="pt", task="fwd", process_index=p,
                         status=CellStatus.OK, configs=(ConfigResult(
                             config="c", status=CellStatus.OK, instructions=per_call),))
              for p in range(2)]
    runs = synthetic.make_runs(seed=100 + i, models=("m",), tools=("pt",), tasks=("fwd",),
                               configs=("c",))
    write_results(path, runs, md, counts=counts)
    return path


def test_the_history_never_sets_counts_of_two_counters_in_one_stretch(tmp_path: Path) -> None:
    # Builds 0-7 counted by Callgrind, 8-15 by the hardware counter, which counts 3 % more
    # for the same code (another ISA): an environment event of the instruction series, never
    # a regression, and nothing at all in the time series, which the counter did not touch.
    files = [_counted_build(tmp_path, i, "callgrind" if i < 8 else "perf",
                            1_000_000.0 if i < 8 else 1_030_000.0) for i in range(16)]
    store = str(tmp_path / "store")
    api.history_add(files, store)
    changes = api.history_changes(store)
    assert not any(c.is_regression for c in changes), changes
    [event] = [c for c in changes if c.kind == "environment"]
    assert (event.before.label, event.after.label) == ("b07", "b08")
    assert "instructions_method callgrind -> perf" in event.detail
    assert "instructions_isa avx2 -> native" in event.detail
    # Of the class's series (time, prep, memory, compile, instructions) only one saw it.
    assert event.key.benchmark == "all 1 series", event.key
    with history.open_store(store) as opened:
        [seen] = [c for c in history.find_changes(opened, per_series_environment=True)
                  if c.kind == "environment"]
    assert seen.key.kind is Kind.INSTRUCTIONS and seen.key.benchmark == "m/pt/fwd/c", seen.key
