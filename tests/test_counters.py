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

import pytest
import torch

from kscperf.errors import KscperfError
from kscperf.orchestrator import counting
from kscperf.orchestrator.session import RunConfig
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
