"""The machine-speed canary: a small fixed workload that each worker times just before and
just after its timed values, so that a results file says how fast the machine itself was
while it was made.

The workload must not move when the code under test moves: it never touches the definitions
module. It mixes what different slowdowns hit differently: a Python loop (interpreter,
frequency), a vectorised transcendental on torch's intra-op threads (SIMD, and the thread
pool: another process on a busy core slows a multi-threaded op far more than a serial
one), a small matrix product (the FPU, caches; numpy) and a copy bigger than any L2 (memory
bandwidth; numpy). torch is used for that one part only, with the worker's thread settings,
because no other library uses its thread pool; `compare` refuses files of different torch
versions, so the part does not move between runs that are compared. Each part is repeated
and the median kept, because this machine's speed switches on a 10 ms scale and a single
sample is hit by interrupts.

Cost: 2 % of a default-profile run of the shipped suite, most of it the first probe's setup
in each fresh worker (docs/validation.md, "Machine speed"). The fork server makes the inputs
once (`prepare`), so a forked worker only warms the parts (its own torch thread pool, its
own pages of the copy's target) before its first probe. Worker side; statistics over the
probes are in `kscperf.stats.machine`.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Callable

from kscperf.results.envinfo import now_iso
from kscperf.spec import CanaryProbe

__all__ = ["REPEATS", "prepare", "probe_machine"]

# Enough repeats that the median ignores one interrupt; few enough to stay near 5 ms.
REPEATS = 5
_LOOP_ITERATIONS = 10_000
# Two of torch's parallel grains (32768 elements), so that two intra-op threads share it.
_VECTOR_LENGTH = 65_536
# Small enough that OpenBLAS stays on one thread (a 128 x 128 product wakes its thread pool,
# which costs 25 ms the first time).
_MATRIX_SIZE = 48
_COPY_BYTES = 4 << 20


def _python_loop() -> None:
    total = 0
    for i in range(_LOOP_ITERATIONS):
        total += i * i


class _Arrays:
    """The inputs, made once per process outside every timed part, or once in the fork
    server for all its children: making them runs no torch op, so no thread pool exists to
    be broken by fork()."""

    def __init__(self) -> None:
        import numpy as np
        import torch

        rng = np.random.default_rng(0)
        self.vector = torch.from_numpy(rng.standard_normal(_VECTOR_LENGTH).astype(np.float32))
        self.torch = torch
        self.matrix = rng.standard_normal((_MATRIX_SIZE, _MATRIX_SIZE))
        self.source = np.ones(_COPY_BYTES // 8)
        self.target = np.empty_like(self.source)
        self.np = np

    def transcendental(self) -> None:
        self.torch.exp(self.torch.sin(self.vector))

    def matmul(self) -> None:
        self.matrix @ self.matrix

    def memory_copy(self) -> None:
        self.np.copyto(self.target, self.source)


_arrays: _Arrays | None = None
# The process that made the first calls of the parts (the fork server never does).
_warmed_pid: int | None = None


def _inputs() -> _Arrays:
    global _arrays
    if _arrays is None:
        _arrays = _Arrays()
    return _arrays


def prepare() -> None:
    """Make the canary's inputs in this process, if not made yet (importing numpy.random
    with them): the fork server calls it once, so that its children share them."""
    _inputs()


def _parts() -> dict[str, Callable[[], Any]]:
    global _warmed_pid
    arrays = _inputs()
    if _warmed_pid != os.getpid():
        # First calls in this process start torch's thread pool, fault in the copy's target
        # and page in the code paths; not part of any probe.
        for part in (arrays.transcendental, arrays.matmul, arrays.memory_copy):
            part()
        _warmed_pid = os.getpid()
    return {"python_loop": _python_loop, "transcendental": arrays.transcendental,
            "matmul": arrays.matmul, "memory_copy": arrays.memory_copy}


def probe_machine(when: str) -> CanaryProbe:
    """Time the canary now: the median of `REPEATS` timings of each part, in seconds, with
    the local time it was taken (as every date in a results file), `when` ("before" or
    "after" the timed values) and what the probe cost, setup included. The parts
    are interleaved so that a short slow spell of the machine touches all of them alike."""
    start = time.perf_counter()
    parts = _parts()
    times: dict[str, list[float]] = {name: [] for name in parts}
    at = now_iso("milliseconds")
    for _ in range(REPEATS):
        for name, part in parts.items():
            t0 = time.perf_counter()
            part()
            times[name].append(time.perf_counter() - t0)
    return CanaryProbe(when=when, at=at,
                       seconds=tuple((name, statistics.median(ts)) for name, ts in times.items()),
                       duration_s=time.perf_counter() - start)
