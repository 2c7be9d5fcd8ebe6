"""`--explain`'s profiling pass (`profile_ops`): one config's ops, taken with torch.profiler
after the config's timing and its recheck, in the same worker, never inside the timed loop.

The profiler records every op of every profiled call, which costs time per op (its
overhead, stated as `OpProfile.overhead`), so its numbers are never the timed ones: they
say where a call's time goes, and the timed values say how long a call takes. The pass
profiles `iterations_for` calls: enough to last `PROFILED_S` without the profiler, at
least `MIN_ITERATIONS`, and no more than keep the events under `MAX_EVENTS` (summing them
costs torch about 70 µs an event here), as counted in one profiled call first.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, ContextManager

import torch
from torch.profiler import ProfilerActivity, profile

from kscperf.spec import OpProfile, OpRow

__all__ = ["MIN_ITERATIONS", "MAX_EVENTS", "PROFILED_S", "iterations_for", "profile_ops"]

MIN_ITERATIONS = 20
MAX_EVENTS = 2000
PROFILED_S = 0.1


def iterations_for(unprofiled_s: float, events_per_call: int) -> int:
    """How many calls to profile for a call that lasts `unprofiled_s` unprofiled and records
    `events_per_call` profiler events."""
    wanted = math.ceil(PROFILED_S / unprofiled_s) if unprofiled_s > 0 else MIN_ITERATIONS
    return max(MIN_ITERATIONS, min(wanted, MAX_EVENTS // max(1, events_per_call)))


def profile_ops(timed: Callable[[], Any], context: Callable[[], ContextManager[Any]],
                device: str, unprofiled_s: float) -> OpProfile:
    """Profile `iterations_for` calls of `timed` inside `context`: each op's calls per
    iteration and self time per call, and the iteration's time under the profiler (CPU
    activities, and CUDA's on a CUDA device, synchronized before the clock stops)."""
    t_start = time.perf_counter()
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with context():
        pilot, _ = _profiled(timed, activities, device, 1)
        iterations = iterations_for(unprofiled_s, len(pilot.events()))
        prof, profiled_s = _profiled(timed, activities, device, iterations)
    rows = tuple(_row(event, iterations) for event in prof.key_averages() if event.count > 0)
    return OpProfile(iterations=iterations, profiled_s=profiled_s, unprofiled_s=unprofiled_s,
                     seconds=time.perf_counter() - t_start, rows=rows)


def _profiled(timed: Callable[[], Any], activities: list[ProfilerActivity], device: str,
              iterations: int) -> tuple[profile, float]:
    """`iterations` calls of `timed` profiled, and their mean time under the profiler."""
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        for _ in range(iterations):
            timed()
        if device == "cuda":
            torch.cuda.synchronize()
        profiled_s = (time.perf_counter() - t0) / iterations
    return prof, profiled_s


def _row(event: Any, iterations: int) -> OpRow:
    on_device = event.device_type == torch.autograd.DeviceType.CUDA
    self_us = event.self_device_time_total if on_device else event.self_cpu_time_total
    return OpRow(key=str(event.key), calls=event.count / iterations,
                 self_s=float(self_us) * 1e-6 / event.count,
                 device="cuda" if on_device else "cpu")
