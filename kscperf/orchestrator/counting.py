"""`--instructions`: counting each cell's instructions per call after its timing and apart
from it (docs/method.md, "Counting instructions"), by one of two counters, never mixed: the
CPU's hardware counter (`perf`, Linux's perf_event_open, as torch's instruction counter
reads it) where the machine has one, and Valgrind's Callgrind where it does not.

Owns which counter a run uses, which cells can be counted, the command line and the
environment a counting worker runs in (one thread and one hash seed for every build; under
Callgrind one vector ISA too), and what the results file records of the method. The count
itself is the worker's (`kscperf.worker.instructions`); the order of workers is
`schedule.run_counts`'s. Never imports torch and never prints.

Every counting worker is a fresh interpreter (under Callgrind, started under Valgrind: a
forked worker cannot be), one at a time, in at least two processes, whose spread is the
count's noise.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import functools
import os
import platform
import shutil
import struct
import subprocess
from typing import Any, Sequence

from kscperf.errors import KscperfError
from kscperf.names import split_device
from kscperf.orchestrator import schedule
from kscperf.orchestrator.launch import SpawnLauncher
from kscperf.orchestrator.workerenv import python_environment
from kscperf.plan.cells import PlannedCell
from kscperf.spec import CellResult, callgrind_out_path

__all__ = ["CALLGRIND_OPTIONS", "PINNED_ENV", "CALLGRIND_ISA", "COUNTERS", "DEFAULT_PROCESSES",
           "check_settings", "counter_for", "counter_missing", "hardware_counter_missing",
           "not_counted_reason", "count_metadata", "count_cells"]

# Ir only; instrumentation off until the worker turns it on once imports are done (Python
# and torch start at Valgrind's 4x, not Callgrind's 20-100x), collection off until the
# worker's first toggle; no cache or branch simulation.
CALLGRIND_OPTIONS = ("--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                     "--dump-instr=no", "--cache-sim=no", "--branch-sim=no")
# One vector ISA for every build under Valgrind (ATen's dispatch and oneDNN's): Valgrind
# shows the program a CPU without AVX-512, and a kernel chosen at run time must be the same
# kernel in both builds. One thread: Callgrind serialises threads, and a pool would count
# its spinning. One hash seed: with Python's random one, each process lays out its dicts
# and sets, and so its heap, differently, and glibc's malloc took up to 0.57 % more
# instructions a call in one process than in another; with it fixed, processes count the
# same to the instruction (docs/validation.md, "Counting instructions").
# A native count (the hardware counter) keeps the machine's own ISA.
PINNED_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
CALLGRIND_ISA = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
# The counters, as the results file names them (`instructions_method`): counts of two
# counters are never compared. `auto` is the hardware counter where the machine has one.
COUNTERS = ("perf", "callgrind")
# Counting processes per cell: two at least, since their spread is the count's noise.
DEFAULT_PROCESSES = 2


def check_settings(instructions: bool, processes: int, check_only: bool,
                   counter: str = "auto") -> None:
    """KscperfError, one sentence, for counting settings that cannot work: fewer than two
    processes (their spread is the count's noise), counts asked of a check-only run, a
    counter that is not `auto` or one of `COUNTERS`, or `perf` on a machine without a
    hardware counter."""
    if counter not in ("auto", *COUNTERS):
        raise KscperfError(f"the instruction counter must be auto, perf or callgrind, not "
                           f"{counter!r}.")
    if instructions and counter == "perf" and hardware_counter_missing():
        raise KscperfError(f"--instruction-counter perf: {hardware_counter_missing()}; "
                           "use callgrind (or auto) here.")
    if processes < 2:
        raise KscperfError(f"--instruction-processes must be 2 or more, not {processes}: "
                           "the spread of the processes is the count's noise.")
    if instructions and check_only:
        raise KscperfError("--instructions counts what a run times; a check-only run times "
                           "nothing: leave out one of them.")


# perf_event_open's system call number; elsewhere the hardware counter is not looked for.
_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
# perf_event_attr: type, size, config, three zero fields, then the flags disabled |
# exclude_kernel | exclude_hv (user space only, as torch's counter reads it). The rest of the
# structure stays zero.
_ATTR_SIZE = 112  # PERF_ATTR_SIZE_VER5
_USER_ONLY = (1 << 0) | (1 << 5) | (1 << 6)
# (type, config) of the hardware instruction counter: PERF_TYPE_HARDWARE,
# PERF_COUNT_HW_INSTRUCTIONS.
HW_INSTRUCTIONS = (0, 1)


def _open_event(event: tuple[int, int]) -> int:
    """perf_event_open of `event` (type, config) in user space for this process: the
    descriptor, or minus the errno."""
    attr = ctypes.create_string_buffer(
        struct.pack("=IIQQQQQ", event[0], _ATTR_SIZE, event[1], 0, 0, 0, _USER_ONLY),
        _ATTR_SIZE)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(ctypes.c_long(_PERF_EVENT_OPEN[platform.machine()]), attr,
                      ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(-1), ctypes.c_ulong(0))
    return fd if fd >= 0 else -ctypes.get_errno()


@functools.lru_cache(maxsize=None)
def hardware_counter_missing() -> str:
    """Why this machine has no hardware instruction counter that this process may read
    ("" when it has): the system call perf_event_open is tried once, as torch's instruction
    counter opens it."""
    if platform.system() != "Linux" or platform.machine() not in _PERF_EVENT_OPEN:
        return f"no hardware instruction counter is read on {platform.system()} " \
               f"{platform.machine()}"
    fd = _open_event(HW_INSTRUCTIONS)
    if fd >= 0:
        os.close(fd)
        return ""
    why = {errno.ENOENT: "the CPU shows no instruction counter (no PMU, as in many VMs)",
           errno.EACCES: "/proc/sys/kernel/perf_event_paranoid forbids it",
           errno.EPERM: "/proc/sys/kernel/perf_event_paranoid forbids it"}.get(
        -fd, os.strerror(-fd))
    return f"perf_event_open of the instruction counter failed: {why}"


def counter_for(requested: str) -> str:
    """The counter a run that asked for `requested` uses: `auto` is `perf` where the
    machine has a hardware counter and `callgrind` where it does not."""
    if requested != "auto":
        return requested
    return "callgrind" if hardware_counter_missing() else "perf"


def counter_missing(counter: str) -> str:
    """Why `counter` cannot count on this machine ("" when it can)."""
    if counter == "perf":
        return hardware_counter_missing()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return ("valgrind is not installed (Debian: apt-get install valgrind), so no "
                "instructions were counted")
    return ""


def not_counted_reason(cell: PlannedCell, compile_cache: str) -> str:
    """Why `cell` is not counted ("" when it is): CUDA tools (the count is of the CPU's
    work), and compiled tools without a warm compile cache (their compile would run under
    Valgrind, for many minutes)."""
    base, device = split_device(cell.tool)
    if device != "cpu":
        return "instructions are counted on the CPU only; a CUDA tool's work is the GPU's"
    if base == "compiled" and compile_cache != "warm":
        return ("a compiled tool is counted only with a warm compile cache (its compile "
                "would run under Valgrind); run without --compile-cache cold")
    return ""


def _valgrind_version() -> str:
    try:
        out = subprocess.run(["valgrind", "--version"], capture_output=True, text=True,
                             timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return out


def count_metadata(requested: str) -> dict[str, Any]:
    """What a results file counted by the counter of `requested` (`counter_for`) records
    of how: the method, the ISA (pinned under Callgrind, the machine's own natively) and
    the tool."""
    counter = counter_for(requested)
    if counter == "perf":
        return {"instructions_method": counter, "instructions_isa": "native",
                "instructions_tool": f"perf_event_open, Linux {platform.release()}"}
    return {"instructions_method": counter,
            "instructions_isa": CALLGRIND_ISA["ATEN_CPU_CAPABILITY"],
            "instructions_tool": _valgrind_version() or "valgrind"}


def _under_callgrind(result_path: str) -> list[str]:
    return ["valgrind", "--quiet", *CALLGRIND_OPTIONS,
            f"--callgrind-out-file={callgrind_out_path(result_path)}"]


def count_cells(cells: Sequence[PlannedCell], options: schedule.RunOptions, python: str,
                env: dict[str, str] | None, timed: Sequence[CellResult],
                processes: int = DEFAULT_PROCESSES, counter: str = "auto", *,
                module_root: schedule.ModuleRoot = (),
                on_result: schedule.OnResult | None = None) -> list[CellResult]:
    """The counting results of `cells`: `processes` fresh processes of each, one at a time,
    run by `python` with `env` and `PINNED_ENV` (under Callgrind, started under Valgrind
    with the ISA pinned too), counted by `counter`; each config counting as many calls as
    `timed` (the timing results) calibrated, reading its definition module from
    `module_root` as `schedule.run_counts` does (`auto`: `counter_for`). A cell that
    cannot be counted here (`not_counted_reason`, or `counter_missing`) gets a skipped
    result saying why, and no worker."""
    counter = counter_for(counter)
    missing = counter_missing(counter)
    marked = [dataclasses.replace(c, skip_reason=c.skip_reason or missing
                                  or not_counted_reason(c, options.compile_cache) or None)
              for c in cells]
    rounds = [(p, c) for p in range(processes) for c in marked]
    callgrind = counter == "callgrind"
    pinned = python_environment(python, {**(env or {}), **PINNED_ENV,
                                         **(CALLGRIND_ISA if callgrind else {})})
    launcher = SpawnLauncher(python, pinned, prefix=_under_callgrind if callgrind else None)
    return schedule.run_counts(rounds, options, launcher, counter, timed=timed,
                               module_root=module_root, on_result=on_result)
