"""Counting a call's instructions: `count_calls` makes `calls` calls of a timed callable
with a counter running only meanwhile. Where the machine has a hardware counter, it is
torch's instruction counter (perf_event_open, user space). Where it does not, the worker is
started under Valgrind's Callgrind (`kscperf.orchestrator.counting` starts it, with
`--callgrind-out-file=FILE`), collecting only meanwhile, and the count is read from the dump
it wrote.

Callgrind counts every user-space instruction the process executes (Ir), nothing else:
no cache simulation, no branch simulation. Collection is off from the start, so the import,
the compile, the warm-up calls and the garbage collector (disabled while counting) are never
counted; `torch._C._valgrind_toggle` turns it on and `_valgrind_toggle_and_dump_stats` off,
writing the counts since the last dump to `FILE.N` (Callgrind numbers its dumps from 1). The
count is exact for the instructions that ran, but which instructions run depends on the
vector ISA: Valgrind 3.19 shows the program a CPU without AVX-512, so kernels chosen at run
time can differ from a native run's, and every build is pinned to the same ISA (the
orchestrator's `counting.CALLGRIND_ISA`) so that two builds count the same kernels'
instructions.
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

import torch

__all__ = ["WARMUP_CALLS", "CALLS_RANGE", "FUNCTIONS_KEPT", "CallgrindError", "Counted",
           "count_calls", "callgrind_count", "callgrind_functions"]

# Calls counted per config: the timing run's calibrated loops, at least 10 (so that a
# call's one-time work is a tenth at most) and at most 1,000 (so that a fast call costs
# seconds, not minutes, under Valgrind's 20-100x).
CALLS_RANGE = (10, 1000)
# Calls made before counting: a first call's one-time work (allocator growth, lazy
# initialisation) is not the steady call's.
WARMUP_CALLS = 3

# The functions a count keeps for `--explain`: those with the most instructions, at most
# this many.
FUNCTIONS_KEPT = 100

_SUMMARY = re.compile(r"^(?:summary|totals):\s*(\d+)", re.MULTILINE)
_EVENTS = re.compile(r"^events:\s*(.+)$", re.MULTILINE)


class CallgrindError(RuntimeError):
    """Counting failed: not under Callgrind, or its dump is missing or unreadable; or the
    hardware counter could not start or be read."""


def callgrind_count(text: str, where: str) -> int:
    """The instruction count (Ir) of one Callgrind dump's text; CallgrindError naming
    `where` when it has no Ir event or no summary line."""
    events = _EVENTS.search(text)
    if events is None or events.group(1).split()[0] != "Ir":
        raise CallgrindError(f"{where} is not a Callgrind dump of instructions (no 'events: Ir').")
    summary = _SUMMARY.search(text)
    if summary is None:
        raise CallgrindError(f"{where} has no summary line: the dump was cut short.")
    return int(summary.group(1))


# A compressed name, "(id) name" where it is defined and "(id)" after.
_COMPRESSED = re.compile(r"^\((\d+)\)(?: (.*))?$")
# Code Valgrind found no symbol for: one bucket, whatever its address in this process.
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
# Callgrind's mark of a recursion level (`_PyEval_EvalFrameDefault'2`): one function.
_RECURSION = re.compile(r"'\d+$")
UNKNOWN_CODE = "(code without a symbol)"


def _function_name(names: dict[str, str], value: str) -> str:
    m = _COMPRESSED.match(value)
    if m is None:
        name = value
    elif m.group(2) is not None:
        name = names[m.group(1)] = m.group(2)
    else:
        name = names.get(m.group(1), value)
    return UNKNOWN_CODE if _ADDRESS.match(name) else _RECURSION.sub("", name)


def callgrind_functions(text: str) -> dict[str, int]:
    """The self instruction count (Ir) of each function of one Callgrind dump's text: the
    cost lines under its `fn=`, not the inclusive costs of the calls it makes (the cost
    line after each `calls=`). Names are Callgrind's, which carry no file path, without
    its recursion-level mark; code without a symbol is one entry, `UNKNOWN_CODE`."""
    names: dict[str, str] = {}
    counts: dict[str, int] = {}
    current: str | None = None
    after_call = False
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        if line[0].isdigit() or line[0] in "+-*":
            if after_call:
                after_call = False  # the call's inclusive cost: the callee's, not self
            elif current is not None:
                parts = line.split()
                if len(parts) > 1:
                    counts[current] = counts.get(current, 0) + int(parts[1])
            continue
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key == "fn":
            current = _function_name(names, value)
        elif key == "cfn":
            _function_name(names, value)  # defines the name for a later fn=
        elif key == "calls":
            after_call = True
    return counts


@dataclass(frozen=True)
class Counted:
    """One config's count: instructions per call, and per call of each of the
    `FUNCTIONS_KEPT` functions with the most (self) instructions, most first."""

    per_call: float
    functions: tuple[tuple[str, float], ...]


_instrumented = [False]
# The dumps this process has written: Callgrind numbers them from 1.
_dumps = [0]


def _start_instrumentation() -> None:
    """Turn Callgrind's instrumentation on in this process, once. The counting worker is
    started with it off (`--instr-atstart=no`), so that starting Python and importing torch
    run at Valgrind's bare 4x instead of Callgrind's 20-100x; `callgrind_control` reaches
    this process through Valgrind's gdbserver while it waits here."""
    if _instrumented[0]:
        return
    try:
        proc = subprocess.run(["callgrind_control", "--instr=on", str(os.getpid())],
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CallgrindError(f"callgrind_control could not turn instrumentation on: {exc}"
                             ) from None
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no message"]
        raise CallgrindError(f"callgrind_control could not turn instrumentation on "
                             f"(exit {proc.returncode}: {said[0]})")
    _instrumented[0] = True


def _callgrind_count(timed: Callable[[], Any], calls: int, out_file: str) -> Counted:
    """`calls` calls of `timed` with Callgrind collecting, read from the dump they wrote."""
    if not torch._C._valgrind_supported_platform():
        raise CallgrindError("this torch was built without Valgrind's client requests.")
    if "vgpreload" not in os.environ.get("LD_PRELOAD", ""):
        # Valgrind preloads its own library into every process it runs.
        raise CallgrindError(f"no Callgrind dump at {out_file}.{_dumps[0] + 1}: is this "
                             "process running under valgrind --tool=callgrind?")
    _start_instrumentation()
    torch._C._valgrind_toggle()
    try:
        for _ in range(calls):
            timed()
    except BaseException:
        # Collection off again, with no dump: the next config's toggle must turn it on,
        # and its dump keep the number it expects.
        torch._C._valgrind_toggle()
        raise
    torch._C._valgrind_toggle_and_dump_stats()
    _dumps[0] += 1
    path = f"{out_file}.{_dumps[0]}"
    try:
        with open(path, encoding="utf-8", errors="replace") as fp:
            text = fp.read()
    except OSError as exc:
        raise CallgrindError(f"no Callgrind dump at {path} ({exc.strerror or exc}): is this "
                             "process running under valgrind --tool=callgrind?") from None
    functions = sorted(callgrind_functions(text).items(), key=lambda kv: (-kv[1], kv[0]))
    return Counted(callgrind_count(text, path) / calls,
                   tuple((name, n / calls) for name, n in functions[:FUNCTIONS_KEPT]))


def _hardware_count(timed: Callable[[], Any], calls: int) -> Counted:
    """`calls` calls of `timed` between a start and an end of torch's instruction counter
    (the CPU's, through perf_event_open, user space only). It keeps no function counts."""
    counter = torch._C._instruction_counter
    try:
        fd = counter.start()
    except RuntimeError as exc:  # newer torch raises where older returns -1
        raise CallgrindError(f"the hardware instruction counter could not start: {exc}"
                             ) from None
    if fd < 0:
        raise CallgrindError("the hardware instruction counter could not start "
                             "(perf_event_open failed in the worker)")
    try:
        for _ in range(calls):
            timed()
    finally:
        count = counter.end(fd)
    if count < 0 or count >= 2**63:  # end()'s -1, as an unsigned number or not
        raise CallgrindError("the hardware instruction counter could not be read")
    return Counted(count / calls, ())


def count_calls(timed: Callable[[], Any], context: Callable[[], ContextManager[Any]],
                calls: int, out_file: str, method: str = "callgrind") -> Counted:
    """Instructions per call of `timed` over `calls` calls made inside `context()` after
    `WARMUP_CALLS` uncounted ones, with the garbage collector off, by `method`: "callgrind"
    (in a process under Callgrind writing its dumps at `out_file`, `out_file.N` for its
    N-th; per function too) or "perf" (the hardware counter). Raises CallgrindError when
    the counter cannot count here or its count cannot be read."""
    if calls < 1:
        raise ValueError(f"calls must be at least 1, not {calls}")
    with context():
        for _ in range(WARMUP_CALLS):
            timed()
        gc.collect()
        gc.disable()
        try:
            if method == "perf":
                return _hardware_count(timed, calls)
            return _callgrind_count(timed, calls, out_file)
        finally:
            gc.enable()
