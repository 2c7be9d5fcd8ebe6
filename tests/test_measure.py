"""Tests of kscperf.worker.measure: loop calibration and the values/warmups protocol with a
deterministic fake clock (no torch, no real timing), the CPU clock, and the memory probes."""

from __future__ import annotations

import contextlib
import gc
import random
import sys
from typing import Any, Callable, Iterator

import pytest

from kscperf.worker import measure
from kscperf.worker.measure import calibrate_loops, cpu_clock, measure_values


class FakeClock:
    """A clock whose calls cost `per_call` seconds each (times a seeded jitter), that runs
    the function for real (so its calls can be counted) and records every loop count."""

    def __init__(self, per_call: float, jitter: float = 0.0, seed: int = 0,
                 device_ratio: float | None = None) -> None:
        self.per_call = per_call
        self.jitter = jitter
        self.rng = random.Random(seed)
        self.device_ratio = device_ratio
        self.loops_seen: list[int] = []

    def __call__(self, fn: Callable[[], Any], loops: int) -> tuple[float, float | None]:
        self.loops_seen.append(loops)
        for _ in range(min(loops, 4)):  # run it, but not 2**20 times
            fn()
        factor = 1.0 + self.jitter * (2 * self.rng.random() - 1)
        raw = loops * self.per_call * factor
        return raw, None if self.device_ratio is None else raw * self.device_ratio


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def noop() -> None:
    pass


@pytest.mark.parametrize("per_call", [1e-9, 3e-7, 1e-6, 2.5e-5, 0.0031, 0.02, 1.0])
@pytest.mark.parametrize("min_time", [0.001, 0.01, 0.1])
def test_calibration_gives_the_smallest_power_of_two_reaching_min_time(
        per_call: float, min_time: float) -> None:
    clock = FakeClock(per_call)
    loops, warmups = calibrate_loops(noop, clock, min_time)
    assert is_power_of_two(loops)
    assert loops * per_call >= min_time or loops == 1
    if loops > 1:
        assert (loops // 2) * per_call < min_time  # no more loops than needed
    assert all(is_power_of_two(n) for n in clock.loops_seen)
    assert clock.loops_seen == sorted(clock.loops_seen)
    assert clock.loops_seen[-2:] == [loops, loops]  # confirmed by a second long value
    # every calibration value is a warmup: (loops, seconds per call)
    assert [n for n, _ in warmups] == clock.loops_seen
    assert all(v == pytest.approx(per_call) for _, v in warmups)
    # jumps, not 1, 2, 4, ... one at a time
    assert len(clock.loops_seen) <= 4


class SlowFirstCalls(FakeClock):
    """The first `slow` clock calls cost `first` seconds each, whatever the loop count: lazy
    compilation, or TorchScript's profiling executor optimising on a later call."""

    def __init__(self, per_call: float, first: float, slow: int) -> None:
        super().__init__(per_call)
        self.first, self.slow = first, slow

    def __call__(self, fn: Callable[[], Any], loops: int) -> tuple[float, float | None]:
        raw, device = super().__call__(fn, loops)
        if len(self.loops_seen) <= self.slow:
            raw += self.first
        return raw, device


def test_a_slow_first_call_does_not_end_calibration() -> None:
    clock = SlowFirstCalls(per_call=1e-6, first=0.06, slow=1)
    loops, warmups = calibrate_loops(noop, clock, 0.001)
    assert loops == 1024  # as if the first call had been as fast as the others
    assert warmups[0] == (1, pytest.approx(0.06 + 1e-6))
    assert clock.loops_seen[-2:] == [1024, 1024]


def test_calibrated_values_reach_min_time_after_a_slow_first_call() -> None:
    clock = SlowFirstCalls(per_call=2e-5, first=0.06, slow=1)
    m = measure_values(noop, clock, values=3, warmups=1, min_time=0.001)
    assert m.loops == 64
    assert all(v * m.loops >= 0.001 for v in m.values)


@pytest.mark.parametrize("seed", range(20))
def test_calibration_with_a_noisy_clock_still_reaches_min_time(seed: int) -> None:
    clock = FakeClock(per_call=4e-6, jitter=0.5, seed=seed)
    loops, warmups = calibrate_loops(noop, clock, 0.01)
    assert is_power_of_two(loops)
    assert warmups[-1][0] == warmups[-2][0] == loops
    assert warmups[-1][1] * loops >= 0.01 and warmups[-2][1] * loops >= 0.01
    # a long value ends calibration only when the next one at that count is long too
    for (n, v), (m, w) in zip(warmups, warmups[1:]):
        assert m == n if v * n >= 0.01 else m > n


def test_calibration_of_a_clock_that_reads_zero_stops_at_max_loops() -> None:
    clock = FakeClock(per_call=0.0)
    loops, warmups = calibrate_loops(noop, clock, 0.01, max_loops=2**10)
    assert loops == 2**10
    assert clock.loops_seen == [2**k for k in range(11)]
    assert len(warmups) == 11


def test_measure_values_counts_exactly() -> None:
    clock = FakeClock(per_call=1e-5)
    m = measure_values(noop, clock, values=7, warmups=3, min_time=0.01)
    assert m.loops == 1024
    calibration = clock.loops_seen[:-10]
    assert len(m.values) == 7
    assert len(m.warmups) == len(calibration) + 3
    assert m.warmups[-3:] == [(1024, pytest.approx(1e-5))] * 3
    assert clock.loops_seen[-10:] == [1024] * 10
    assert m.values == [pytest.approx(1e-5)] * 7  # seconds per call, not per loop
    assert m.device_values == []


def test_given_loops_skips_calibration() -> None:
    clock = FakeClock(per_call=1e-5)
    m = measure_values(noop, clock, values=4, warmups=2, min_time=0.01, loops=64)
    assert clock.loops_seen == [64] * 6
    assert m.loops == 64
    assert m.warmups == [(64, pytest.approx(1e-5))] * 2
    assert len(m.values) == 4


def test_zero_warmups_and_device_values() -> None:
    clock = FakeClock(per_call=2e-3, device_ratio=0.5)
    m = measure_values(noop, clock, values=3, warmups=0, min_time=0.01, loops=8)
    assert m.warmups == []
    assert m.values == [pytest.approx(2e-3)] * 3
    assert m.device_values == [pytest.approx(1e-3)] * 3


def test_context_is_entered_once_and_gc_is_paused_while_timing() -> None:
    entered: list[str] = []
    gc_enabled_during: list[bool] = []

    @contextlib.contextmanager
    def context() -> Iterator[None]:
        entered.append("in")
        yield
        entered.append("out")

    def fn() -> None:
        gc_enabled_during.append(gc.isenabled())

    assert gc.isenabled()
    measure_values(fn, FakeClock(1e-3), values=3, warmups=1, min_time=0.01, context=context)
    assert entered == ["in", "out"]
    assert gc_enabled_during and not any(gc_enabled_during)
    assert gc.isenabled()


def test_gc_is_re_enabled_when_the_function_raises() -> None:
    def boom() -> None:
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        measure_values(boom, FakeClock(1e-3), values=1, warmups=0, min_time=0.01)
    assert gc.isenabled()


def test_cpu_clock_runs_the_loop_with_the_given_timer() -> None:
    ticks = iter([10.0, 10.25])
    calls: list[int] = []
    clock = cpu_clock(timer=lambda: next(ticks))
    assert clock(lambda: calls.append(1), 5) == (0.25, None)
    assert len(calls) == 5


def test_cpu_clock_measures_real_time() -> None:
    import time

    raw, device = cpu_clock()(lambda: time.sleep(0.002), 3)
    assert device is None
    assert 0.005 <= raw < 1.0


@pytest.mark.integration
def test_measure_does_not_import_torch() -> None:
    import subprocess

    code = ("import sys, kscperf.worker.measure as m; "
            "m.measure_values(lambda: None, m.cpu_clock(), values=1, warmups=0, "
            "min_time=0.0001); assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_peak_rss_is_sane_and_follows_a_big_allocation() -> None:
    before = measure.peak_rss_bytes()
    assert 10 * 2**20 < before < 64 * 2**30  # a Python process: over 10 MiB, under 64 GiB
    size = 200 * 2**20
    block = bytearray(size)  # zero-filled: every page is touched
    during = measure.peak_rss_bytes()
    assert during >= before
    assert during >= size
    del block
    if not measure.reset_peak_rss():
        pytest.skip("this kernel cannot reset the peak RSS")
    after_reset = measure.peak_rss_bytes()
    assert after_reset < during - size // 2  # the peak forgot the freed block
    assert measure.peak_rss_bytes() >= after_reset // 2
