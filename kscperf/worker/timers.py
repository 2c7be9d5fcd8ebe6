"""The timer-agreement harness: kscperf's clock beside `torch.utils.benchmark.Timer` and
Triton's `do_bench` on the same callables, in one interleaved run.

Three workloads, each chosen for what bounds it: a square matrix product (compute), an
elementwise op over many elements (memory bandwidth) and the same op over a handful of
elements (the fixed cost of a call: a kernel launch on CUDA, the dispatcher on the CPU).
Each round times every workload with every timer, the timers in an order rotated by one
each round, so that a slow spell of the machine lands on all of them alike; a timer's
figure is the median of its per-round medians.

kscperf's figure is `measure.measure_values` with the clock a worker uses on that device
(`measure.cuda_clock` on CUDA: host time with a synchronize, the headline, and CUDA events
for device time). `do_bench` times device work alone, flushing the L2 cache between calls;
it is reported beside the others and never mixed with them. Worker side (imports torch);
judging the figures is `kscperf.gpukit.gpucheck`'s.
"""

from __future__ import annotations

import importlib
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import torch

from kscperf.worker import measure

__all__ = ["Workload", "TimerFigure", "AgreementRow", "TIMERS", "workloads",
           "timer_median_s", "do_bench_median_s", "measure_agreement"]

# The timers in the order of a row: kscperf's wall (headline) and event times first.
TIMERS = ("kscperf_wall", "kscperf_event", "timer", "do_bench")

# (matrix side, elementwise elements, small-op elements) per device and scale. CUDA "full"
# is the issue's: 4096² matmul, 2^24 elements, a launch-bound small op. The CPU sizes keep
# a round to about a second on two cores.
_SIZES: dict[tuple[str, str], tuple[int, int, int]] = {
    ("cuda", "full"): (4096, 2**24, 1024),
    ("cuda", "quick"): (2048, 2**22, 1024),
    ("cpu", "full"): (512, 2**22, 64),
    ("cpu", "quick"): (128, 2**18, 64),
}


@dataclass(frozen=True)
class Workload:
    """One timed callable: its name, what bounds it (`compute`, `memory` or `launch`), its
    size in words, and the callable (inputs made once, on the device)."""

    name: str
    bound: str
    size: str
    fn: Callable[[], Any]


@dataclass(frozen=True)
class TimerFigure:
    """One timer's figure for one workload: the median over rounds of its per-round median
    (seconds per call), the per-round medians, or why the timer could not run."""

    median_s: float | None
    rounds_s: tuple[float, ...] = ()
    unavailable: str = ""


@dataclass(frozen=True)
class AgreementRow:
    """One workload's figures from every timer, keyed by the names in `TIMERS`."""

    workload: str
    bound: str
    size: str
    device: str
    figures: dict[str, TimerFigure] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        return asdict(self)


def workloads(device: str, scale: str = "full") -> list[Workload]:
    """The three workloads on `device` ("cpu" or "cuda") at `scale` ("full" or "quick"),
    float32, inputs from a fixed seed."""
    side, elements, small = _SIZES[(device, scale)]
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(side, side, generator=gen).to(device)
    b = torch.randn(side, side, generator=gen).to(device)
    x = torch.randn(elements, generator=gen).to(device)
    s = torch.randn(small, generator=gen).to(device)
    return [
        Workload("matmul", "compute", f"{side}x{side} @ {side}x{side}", lambda: a @ b),
        Workload("elementwise", "memory", f"{elements} elements", lambda: x * 2.0 + 1.0),
        Workload("small_op", "launch", f"{small} elements", lambda: s * 2.0 + 1.0),
    ]


def timer_median_s(fn: Callable[[], Any], *, min_run_time: float,
                   num_threads: int | None = None) -> float:
    """`torch.utils.benchmark.Timer(...).blocked_autorange(min_run_time).median` of `fn()`,
    seconds per call, with torch's thread count (or `num_threads`). On CUDA the Timer
    synchronizes around each block of calls, as kscperf's wall clock does around its loop."""
    import torch.utils.benchmark as tub

    timer = tub.Timer(stmt="fn()", globals={"fn": fn},
                      num_threads=num_threads or torch.get_num_threads())
    return float(timer.blocked_autorange(min_run_time=min_run_time).median)


def do_bench_median_s(fn: Callable[[], Any]) -> float:
    """Triton's `do_bench(fn, return_mode="median")` in seconds per call: device time of
    `fn` alone, L2 flushed between calls. ImportError without triton."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=25, rep=100, return_mode="median")) / 1e3


def _kscperf_medians(fn: Callable[[], Any], clock: measure.TimeLoops, min_time: float
                     ) -> tuple[float, float | None]:
    m = measure.measure_values(fn, clock, values=5, warmups=1, min_time=min_time)
    event = statistics.median(m.device_values) if m.device_values else None
    return statistics.median(m.values), event


def _do_bench_unavailable(device: str) -> str:
    if device != "cuda":
        return "do_bench times CUDA work only"
    try:
        importlib.import_module("triton.testing")
    except ImportError as exc:
        return f"triton does not import ({exc})"
    return ""


def _round(workload: Workload, order: list[str], clock: measure.TimeLoops, min_time: float,
           skip: set[str]) -> dict[str, float]:
    """One round of `workload`: every timer not in `skip`, in `order`."""
    got: dict[str, float] = {}
    for name in order:
        if name in skip:
            continue
        if name == "kscperf_wall":
            got["kscperf_wall"], event = _kscperf_medians(workload.fn, clock, min_time)
            if event is not None:
                got["kscperf_event"] = event
        elif name == "timer":
            got["timer"] = timer_median_s(workload.fn, min_run_time=min_time * 10)
        elif name == "do_bench":
            got["do_bench"] = do_bench_median_s(workload.fn)
    return got


def measure_agreement(device: str, scale: str = "full", rounds: int = 5,
                      min_time: float = 0.01) -> list[AgreementRow]:
    """Every workload timed by every timer that runs on `device`, interleaved over `rounds`
    rounds. kscperf's event time exists on CUDA only, `do_bench` on CUDA with triton; a
    timer that cannot run says why in its figure."""
    clock = measure.cuda_clock() if device == "cuda" else measure.cpu_clock()
    unavailable = {"do_bench": _do_bench_unavailable(device)}
    if device != "cuda":
        unavailable["kscperf_event"] = "CUDA events exist on CUDA only"
    skip = {name for name, why in unavailable.items() if why}
    # kscperf's wall and event times come from one loop: they rotate as one timer.
    rotating = ["kscperf_wall", "timer", "do_bench"]
    chosen = workloads(device, scale)
    per_round: dict[str, dict[str, list[float]]] = {w.name: {t: [] for t in TIMERS}
                                                   for w in chosen}
    for r in range(rounds):
        order = rotating[r % len(rotating):] + rotating[:r % len(rotating)]
        for workload in chosen:
            for name, seconds in _round(workload, order, clock, min_time, skip).items():
                per_round[workload.name][name].append(seconds)
    rows = []
    for workload in chosen:
        figures = {}
        for name in TIMERS:
            values = per_round[workload.name][name]
            figures[name] = (TimerFigure(statistics.median(values), tuple(values)) if values
                             else TimerFigure(None, unavailable=unavailable.get(name, "")))
        rows.append(AgreementRow(workload.name, workload.bound, workload.size, device, figures))
    return rows
