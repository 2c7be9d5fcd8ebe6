"""The clock, loop calibration and memory probes.

pyperf's rules: `loops` is calibrated by doubling until raw values (the time of `loops`
calls) last at least `min_time` (two in a row, so a slow first call cannot end it); then
`warmups` values are taken and thrown away, then `values` values are kept, each the raw
time divided by `loops` (seconds per call). The clock is a parameter
(`time_loops(fn, loops) -> (seconds, device_seconds | None)`), so the calibration logic is
tested with a fake clock and without torch; torch is imported lazily and only by the CUDA
clock.
"""

from __future__ import annotations

import contextlib
import gc
import re
import resource
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

__all__ = [
    "MAX_LOOPS",
    "TimeLoops",
    "Measurement",
    "cpu_clock",
    "cuda_clock",
    "calibrate_loops",
    "measure_values",
    "device_over_wall",
    "sync",
    "reset_peaks",
    "reset_peak_rss",
    "peak_rss_bytes",
]

MAX_LOOPS = 2**32

# A clock runs `fn` `loops` times and returns (host seconds, device seconds or None).
TimeLoops = Callable[[Callable[[], Any], int], tuple[float, float | None]]


@dataclass
class Measurement:
    """What `measure_values` took: the loop count, the (loops, seconds per call) warmups
    (calibration included), the kept values in seconds per call, and device seconds per
    call where the clock gives them."""

    loops: int
    warmups: list[tuple[int, float]] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    device_values: list[float] = field(default_factory=list)


def cpu_clock(timer: Callable[[], float] = time.perf_counter) -> TimeLoops:
    """A clock for CPU work: `timer()` around the loop."""

    def time_loops(fn: Callable[[], Any], loops: int) -> tuple[float, float | None]:
        t0 = timer()
        for _ in range(loops):
            fn()
        return timer() - t0, None

    return time_loops


def cuda_clock() -> TimeLoops:
    """A clock for CUDA work: host time with a synchronize on both sides (wall time, the
    headline), and CUDA events around the same loop (device time)."""
    import torch

    def time_loops(fn: Callable[[], Any], loops: int) -> tuple[float, float | None]:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        # Work queued before the loop must not be charged to it.
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        start.record()
        for _ in range(loops):
            fn()
        end.record()
        # Kernels launch asynchronously: the loop is over only when the device is done.
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        return wall, start.elapsed_time(end) / 1e3

    return time_loops


@contextlib.contextmanager
def _gc_paused() -> Any:
    # A collection inside a timed loop would charge one call with another's garbage.
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def calibrate_loops(fn: Callable[[], Any], clock: TimeLoops, min_time: float,
                    max_loops: int = MAX_LOOPS) -> tuple[int, list[tuple[int, float]]]:
    """Double `loops` from 1 until `loops` calls last at least `min_time` twice in a row
    (jumping by the largest power of two the last value shows to be short). Returns the loop
    count and the calibration values as (loops, seconds per call) warmups."""
    loops = 1
    warmups: list[tuple[int, float]] = []
    long_before = False
    while True:
        raw, _ = clock(fn, loops)
        warmups.append((loops, raw / loops))
        if loops >= max_loops:
            return loops, warmups
        if raw >= min_time:
            # One long value may be a one-off (the first call's lazy compilation, a profiling
            # executor optimising on its second call): like pyperf, which needs every
            # calibration value long, require the next value at this count to be long too.
            if long_before:
                return loops, warmups
            long_before = True
            continue
        long_before = False
        # Jump straight to about the right count, as pyperf's doubling would, in fewer steps.
        factor = 2 if raw <= 0 else max(2, 2 ** (int(min_time / raw).bit_length() - 1))
        loops = min(loops * factor, max_loops)


def measure_values(fn: Callable[[], Any], clock: TimeLoops, *, values: int, warmups: int,
                   min_time: float, loops: int | None = None,
                   context: Callable[[], ContextManager[Any]] = contextlib.nullcontext,
                   after_value: Callable[[], None] | None = None,
                   on_calibrated: Callable[[int], None] | None = None) -> Measurement:
    """Calibrate (unless `loops` is given), then `warmups` values, then `values` values, all
    inside `context` (entered once, so it is not timed per call), with the garbage collector
    paused after one collection. `after_value` is called after each warmup and value, outside
    the clock (`run-benchmarks ab` hands the CPU to the other build there); `on_calibrated`
    with the loops it calibrated, before the first warmup (`ab` shares them there)."""
    with context(), _gc_paused():
        calibration: list[tuple[int, float]] = []
        if loops is None:
            loops, calibration = calibrate_loops(fn, clock, min_time)
            if on_calibrated is not None:
                on_calibrated(loops)
        result = Measurement(loops=loops, warmups=list(calibration))
        for i in range(warmups + values):
            raw, device = clock(fn, loops)
            if after_value is not None:
                after_value()
            if i < warmups:
                result.warmups.append((loops, raw / loops))
            else:
                result.values.append(raw / loops)
                if device is not None:
                    result.device_values.append(device / loops)
    return result


# Events and the host clock disagree by a few microseconds per loop; beyond that, device time
# over wall time means the events did not bracket the work (another stream, a lost sync).
DEVICE_OVER_WALL_SLACK = 0.01


def device_over_wall(values: list[float], device_values: list[float],
                     slack: float = DEVICE_OVER_WALL_SLACK) -> str:
    """Why the values cannot be trusted when some device time exceeds its wall time by more
    than `slack` (relative), else "". The two lists are paired value by value."""
    over = [(w, d) for w, d in zip(values, device_values) if d > w * (1 + slack)]
    if not over:
        return ""
    w, d = max(over, key=lambda pair: pair[1] / pair[0] if pair[0] > 0 else float("inf"))
    return (f"CUDA event time exceeded wall time in {len(over)} of {len(values)} values "
            f"(worst {d * 1e6:.3g} us on the device against {w * 1e6:.3g} us of wall time): "
            "the events did not bracket the timed work")


_HWM = re.compile(rb"VmHWM:\s+(\d+)\s+kB")


def sync(device: str) -> None:
    """Wait until `device` has done what it was given (CUDA runs kernels asynchronously)."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def reset_peaks(device: str) -> None:
    """Start the peak memory of this process, and of `device` on CUDA, again from now."""
    reset_peak_rss()
    if device == "cuda":
        import torch

        torch.cuda.reset_peak_memory_stats()


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS to its current RSS (Linux); False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "wb") as fp:
            fp.write(b"5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    """This process's peak RSS since the last `reset_peak_rss` (or since it started)."""
    try:
        with open("/proc/self/status", "rb") as fp:
            match = _HWM.search(fp.read())
        if match:
            return int(match.group(1)) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
