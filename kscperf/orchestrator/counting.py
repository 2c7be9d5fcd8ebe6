"""`--instructions`: counting each cell's instructions per call under Valgrind's Callgrind,
after its timing and apart from it (docs/method.md, "Counting instructions").

Owns which cells can be counted, the Callgrind command line and the environment a counting
worker runs in (one vector ISA and one thread for every build), and what the results file
records of the method. The count itself is the worker's (`kscperf.worker.instructions`);
the order of workers is `schedule.run_counts`'s. Never imports torch and never prints.

Callgrind counts what the process executes in user space, on the CPU Valgrind simulates:
every counting worker is a fresh interpreter started under Valgrind (a forked worker
cannot be), one at a time, in at least two processes, whose spread is the count's noise.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from typing import Any, Sequence

from kscperf.errors import KscperfError
from kscperf.names import split_device
from kscperf.orchestrator import schedule
from kscperf.orchestrator.launch import SpawnLauncher
from kscperf.orchestrator.workerenv import python_environment
from kscperf.plan.cells import PlannedCell
from kscperf.spec import CellResult, callgrind_out_path

__all__ = ["CALLGRIND_OPTIONS", "PINNED_ENV", "METHOD", "DEFAULT_PROCESSES",
           "check_settings", "callgrind_missing", "not_counted_reason", "count_metadata", "count_cells"]

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
PINNED_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
              "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
# The method named in the results file: counts of two methods are never compared.
METHOD = "callgrind"
# Counting processes per cell: two at least, since their spread is the count's noise.
DEFAULT_PROCESSES = 2


def check_settings(instructions: bool, processes: int, check_only: bool) -> None:
    """KscperfError, one sentence, for counting settings that cannot work: fewer than two
    processes (their spread is the count's noise), or counts asked of a check-only run."""
    if processes < 2:
        raise KscperfError(f"--instruction-processes must be 2 or more, not {processes}: "
                           "the spread of the processes is the count's noise.")
    if instructions and check_only:
        raise KscperfError("--instructions counts what a run times; a check-only run times "
                           "nothing: leave out one of them.")


def callgrind_missing() -> str:
    """Why counting cannot run on this machine ("" when `valgrind` is on PATH)."""
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


def count_metadata() -> dict[str, Any]:
    """What a results file with counts records of how they were made: the method, the
    pinned ISA and the Valgrind version."""
    return {"instructions_method": METHOD,
            "instructions_isa": PINNED_ENV["ATEN_CPU_CAPABILITY"],
            "instructions_tool": _valgrind_version() or "valgrind"}


def _under_callgrind(result_path: str) -> list[str]:
    return ["valgrind", "--quiet", *CALLGRIND_OPTIONS,
            f"--callgrind-out-file={callgrind_out_path(result_path)}"]


def count_cells(cells: Sequence[PlannedCell], options: schedule.RunOptions, python: str,
                env: dict[str, str] | None, timed: Sequence[CellResult], *,
                processes: int = DEFAULT_PROCESSES, module_root: schedule.ModuleRoot = (),
                on_result: schedule.OnResult | None = None) -> list[CellResult]:
    """The counting results of `cells`: `processes` fresh processes of each, one at a time,
    run by `python` under Callgrind with `env`, the ISA and one thread pinned; each config
    counting as many calls as `timed` (the timing results) calibrated, reading its
    definition module from `module_root` as `schedule.run_counts` does. A cell that cannot
    be counted here (`not_counted_reason`, or no valgrind) gets a skipped result saying why,
    and no worker."""
    missing = callgrind_missing()
    marked = [dataclasses.replace(c, skip_reason=c.skip_reason or missing
                                  or not_counted_reason(c, options.compile_cache) or None)
              for c in cells]
    rounds = [(p, c) for p in range(processes) for c in marked]
    pinned = python_environment(python, {**(env or {}), **PINNED_ENV})
    launcher = SpawnLauncher(python, pinned, prefix=_under_callgrind)
    return schedule.run_counts(rounds, options, launcher, timed=timed,
                               module_root=module_root, on_result=on_result)
