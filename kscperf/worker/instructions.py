"""Counting a call's instructions where the machine has no hardware counter: in a worker
started under Valgrind's Callgrind (`kscperf.orchestrator.counting` starts it, with
`--callgrind-out-file=FILE`), `count_calls` makes `calls` calls of a timed callable with
Callgrind collecting only meanwhile, and reads the count from the dump it wrote.

Callgrind counts every user-space instruction the process executes (Ir), nothing else:
no cache simulation, no branch simulation. Collection is off from the start, so the import,
the compile, the warm-up calls and the garbage collector (disabled while counting) are never
counted; `torch._C._valgrind_toggle` turns it on and `_valgrind_toggle_and_dump_stats` off,
writing the counts since the last dump to `FILE.N` (Callgrind numbers its dumps from 1). The
count is exact for the instructions that ran, but which instructions run depends on the
vector ISA: Valgrind 3.19 shows the program a CPU without AVX-512, so kernels chosen at run
time can differ from a native run's, and every build is pinned to the same ISA (the
orchestrator's `counting.PINNED_ISA`) so that two builds count the same kernels'
instructions.
"""

from __future__ import annotations

import gc
import re
from typing import Any, Callable, ContextManager

import torch

__all__ = ["WARMUP_CALLS", "CALLS_RANGE", "CallgrindError", "count_calls", "callgrind_count"]

# Calls counted per config: the timing run's calibrated loops, at least 10 (so that a
# call's one-time work is a tenth at most) and at most 1,000 (so that a fast call costs
# seconds, not minutes, under Valgrind's 20-100x).
CALLS_RANGE = (10, 1000)
# Calls made before counting: a first call's one-time work (allocator growth, lazy
# initialisation) is not the steady call's.
WARMUP_CALLS = 3

_SUMMARY = re.compile(r"^(?:summary|totals):\s*(\d+)", re.MULTILINE)
_EVENTS = re.compile(r"^events:\s*(.+)$", re.MULTILINE)


class CallgrindError(RuntimeError):
    """Counting failed: not under Callgrind, or its dump is missing or unreadable."""


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


def count_calls(timed: Callable[[], Any], context: Callable[[], ContextManager[Any]],
                calls: int, out_file: str, dump: int) -> float:
    """Instructions per call of `timed`, over `calls` calls made inside `context()` after
    `WARMUP_CALLS` uncounted ones, in a process under Callgrind writing `out_file`; `dump`
    is the number this dump will get (1 for the process's first). Raises CallgrindError
    when this process is not under Callgrind or the dump cannot be read."""
    if calls < 1:
        raise ValueError(f"calls must be at least 1, not {calls}")
    if not torch._C._valgrind_supported_platform():
        raise CallgrindError("this torch was built without Valgrind's client requests.")
    with context():
        for _ in range(WARMUP_CALLS):
            timed()
        gc.collect()
        gc.disable()
        try:
            torch._C._valgrind_toggle()
            try:
                for _ in range(calls):
                    timed()
            except BaseException:
                # Collection off again, with no dump: the next config's toggle must turn
                # it on, and its dump keep the number it expects.
                torch._C._valgrind_toggle()
                raise
            torch._C._valgrind_toggle_and_dump_stats()
        finally:
            gc.enable()
    path = f"{out_file}.{dump}"
    try:
        with open(path, encoding="utf-8", errors="replace") as fp:
            text = fp.read()
    except OSError as exc:
        raise CallgrindError(f"no Callgrind dump at {path} ({exc.strerror or exc}): is this "
                             "process running under valgrind --tool=callgrind?") from None
    return callgrind_count(text, path) / calls
