"""`--explain`'s profiling pass (`profile_ops`): one config's ops, taken with torch.profiler
in the same worker once all the cell's configs are timed, so never inside a timed loop and
never before a timing in that process.

The profiler records every op of every profiled call, which costs time per op (its
overhead, stated as `OpProfile.overhead`), so its numbers are never the timed ones: they
say where a call's time goes, and the timed values say how long a call takes. The pass
profiles `iterations_for` calls: enough to last `PROFILED_S` without the profiler, at
least `MIN_ITERATIONS`, but never more events than `MAX_EVENTS` (stopping the profiler and
summing its events cost about 10 µs an event here), as counted in one profiled call first:
a call of thousands of ops is profiled as few times as stay under it, at least once.

For a compiler that can name its kernels (torch.compile), the pass profiles a second module,
compiled with those names (`tools.ToolImpl.instrumented`), never the timed one: its first
call for the config compiles, and is timed apart (`OpProfile.compile_s`), with the code
Inductor generated for each graph kept (`OpProfile.code`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

import torch
from torch.autograd.profiler import profile

from kscperf.spec import OpProfile, OpRow
from kscperf.worker import measure

__all__ = ["MIN_ITERATIONS", "MAX_EVENTS", "PROFILED_S", "iterations_for", "profile_ops",
           "explain_pass"]

MIN_ITERATIONS = 20
MAX_EVENTS = 2_000
PROFILED_S = 0.02


def iterations_for(unprofiled_s: float, events_per_call: int) -> int:
    """How many calls to profile for a call that lasts `unprofiled_s` unprofiled and records
    `events_per_call` profiler events."""
    wanted = max(MIN_ITERATIONS, math.ceil(PROFILED_S / unprofiled_s) if unprofiled_s > 0 else 0)
    return max(1, min(wanted, MAX_EVENTS // max(1, events_per_call)))


def profile_ops(timed: Callable[[], Any], context: Callable[[], ContextManager[Any]],
                device: str, unprofiled_s: float) -> OpProfile:
    """Profile `iterations_for` calls of `timed` inside `context`: each op's calls per
    iteration and self time per call, and the iteration's time under the profiler (CPU
    activity, and CUDA's on a CUDA device, synchronized before the clock stops)."""
    t_start = time.perf_counter()
    with context():
        pilot, _ = _profiled(timed, device, 1)
        iterations = iterations_for(unprofiled_s, len(_events(pilot)))
        prof, profiled_s = _profiled(timed, device, iterations)
    rows = _rows(prof, iterations)
    return OpProfile(iterations=iterations, profiled_s=profiled_s, unprofiled_s=unprofiled_s,
                     seconds=time.perf_counter() - t_start, rows=rows)


def explain_pass(prepared: Any, timing_context: Callable[[Any], ContextManager[Any]],
                 device: str, unprofiled_s: float,
                 instrumented: Callable[[], Any] | None = None) -> OpProfile:
    """The profile of one config's prepared task `prepared` (a `tasks.PreparedTask`), its
    calls made inside `timing_context(task)`; or, with `instrumented` (which prepares the
    config on the instrumented module), that task's: its first call, which compiles, is
    made outside the timing context and timed apart, less a steady call, with the code of
    every graph compiled meanwhile."""
    compile_s: float | None = None
    code: tuple[str, ...] = ()
    if instrumented is not None:
        prepared = instrumented()
        compile_s, code = _first_call(prepared, device)
    profile = profile_ops(prepared.timed, lambda: timing_context(prepared), device,
                          unprofiled_s)
    return dataclasses.replace(profile, compile_s=compile_s, code=code)


def _first_call(prepared: Any, device: str) -> tuple[float, tuple[str, ...]]:
    from unittest import mock

    from torch._inductor.graph import GraphLowering

    codes: list[str] = []
    # Inductor hands each graph's generated module to this hook, cache hit or not.
    with prepared.context(), mock.patch.object(GraphLowering, "save_output_code",
                                               codes.append):
        first = _one_call(prepared.timed, device)
        steady = min(_one_call(prepared.timed, device) for _ in range(3))
    return max(0.0, first - steady), tuple(codes)


def _one_call(timed: Callable[[], Any], device: str) -> float:
    t0 = time.perf_counter()
    timed()
    measure.sync(device)
    return time.perf_counter() - t0


def _profiled(timed: Callable[[], Any], device: str, iterations: int) -> tuple[profile, float]:
    """`iterations` calls of `timed` profiled, and their mean time under the profiler.
    torch.autograd's profiler, the one under torch.profiler's: that one's start imports
    torch._inductor (1.5 s here) to read a setting of CUDA graphs."""
    with profile(use_cpu=True, use_device="cuda" if device == "cuda" else None,
                 use_kineto=True) as prof:
        t0 = time.perf_counter()
        for _ in range(iterations):
            timed()
        measure.sync(device)
        profiled_s = (time.perf_counter() - t0) / iterations
    return prof, profiled_s


def _events(prof: profile) -> list[Any]:
    """The raw events of a finished profile."""
    results = prof.kineto_results
    if results is None:
        raise RuntimeError("the profiler recorded no results")
    return list(results.events())


def _rows(prof: profile, iterations: int) -> tuple[OpRow, ...]:
    """Each op's calls per iteration and self time per call, from the profiler's raw events:
    summed here, since torch's own `key_averages` builds a Python object per event (70 µs
    each here, against about 4 µs). A CPU op's self time is its duration less that of the ops
    directly inside it on its thread, and an op whose only child has its own name (a
    redispatch, `aten::sum` inside `aten::sum`) is one call, as in `key_averages`; a device
    kernel's self time is its duration."""
    totals: dict[tuple[str, str], list[float]] = {}
    by_thread: dict[int, list[tuple[int, int, str]]] = {}
    for event in _events(prof):
        if event.is_async():
            continue
        if event.device_type() == torch.autograd.DeviceType.CUDA:
            _add(totals, (event.name(), "cuda"), event.duration_ns())
        else:
            by_thread.setdefault(event.start_thread_id(), []).append(
                (event.start_ns(), -event.duration_ns(), event.name()))
    for events in by_thread.values():
        events.sort()
        stack: list[_Frame] = []
        for start, minus_duration, name in events:
            while stack and stack[-1].end <= start:
                _close(totals, stack)
            if stack:
                stack[-1].children.append(-minus_duration)
            stack.append(_Frame(start - minus_duration, name, -minus_duration))
        while stack:
            _close(totals, stack)
    return tuple(OpRow(key=name, calls=count / iterations, self_s=self_ns * 1e-9 / count,
                       device=device) for (name, device), (count, self_ns) in totals.items())


@dataclass
class _Frame:
    """An open CPU op: when it ends, its name and duration, its direct children's durations,
    and the closed child of its own name, if any (its duration and its children's)."""

    end: int
    name: str
    duration: int
    children: list[int] = field(default_factory=list)
    same_name_child: tuple[int, int] | None = None


def _add(totals: dict[tuple[str, str], list[float]], key: tuple[str, str],
         self_ns: float) -> None:
    entry = totals.setdefault(key, [0, 0.0])
    entry[0] += 1
    entry[1] += max(0.0, self_ns)


def _close(totals: dict[tuple[str, str], list[float]], stack: list[_Frame]) -> None:
    frame = stack.pop()
    inside = sum(frame.children)
    parent = stack[-1] if stack else None
    if frame.same_name_child is not None:
        child_duration, child_inside = frame.same_name_child
        if len(frame.children) == 1:
            # Merged into one call whose children are the child's.
            inside = child_inside
        else:
            _add(totals, (frame.name, "cpu"), child_duration - child_inside)
    if parent is not None and parent.name == frame.name and parent.same_name_child is None:
        parent.same_name_child = (frame.duration, inside)
        return
    _add(totals, (frame.name, "cpu"), frame.duration - inside)
