"""Reading torch.compile's own record of a cell's compiles into a `CompilePanel`.

Through torch's APIs, never its logs: `torch._dynamo.utils.counters` (graph breaks, graphs,
frames, cache hits), `torch._dynamo.utils.get_compilation_metrics()` (per compiled frame: its
phase times, guards, recompile reason) and `torch._inductor.metrics` (generated kernels).
They are private and change between torch versions: each is read behind a guard, and what
one version lacks is None (unknown) in the panel, never an error. Everything is a difference
between two snapshots, so what the process compiled before (the fork server's parent, an
earlier cell) is not counted.

The timed loop runs under `no_recompiles()`: torch's "fail_on_recompile" stance, so a
recompile there raises instead of being timed as running; `refused_recompile` reads the reason
out of that error.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from kscperf.compilepanel import PHASES, CompilePanel, Figure

__all__ = ["PanelRecorder", "no_recompiles", "refused_recompile"]

_MISSING = object()


def _counters() -> dict[str, dict[str, int]] | None:
    try:
        from torch._dynamo.utils import counters

        return {group: dict(values) for group, values in counters.items()}
    except Exception:  # a torch without dynamo's counters: unknown
        return None


def _metrics() -> list[Any] | None:
    try:
        from torch._dynamo.utils import get_compilation_metrics

        return list(get_compilation_metrics())
    except Exception:  # a torch without compilation metrics: unknown
        return None


def _kernel_count() -> int | None:
    try:
        from torch._inductor import metrics

        return int(metrics.generated_kernel_count)
    except Exception:  # a torch without inductor's metrics: unknown
        return None


def _metric_key(m: Any) -> tuple[str, Any]:
    return (str(getattr(m, "compile_id", "")), getattr(m, "start_time", None))


@dataclass(frozen=True)
class _Snapshot:
    counters: dict[str, dict[str, int]] | None
    metric_keys: frozenset[tuple[str, Any]] | None
    kernels: int | None
    at: float

    @classmethod
    def take(cls) -> _Snapshot:
        metrics = _metrics()
        return cls(_counters(), None if metrics is None else frozenset(map(_metric_key, metrics)),
                   _kernel_count(), time.perf_counter())

    def new_metrics(self) -> list[Any] | None:
        metrics = _metrics()
        if metrics is None or self.metric_keys is None:
            return None
        return [m for m in metrics if _metric_key(m) not in self.metric_keys]

    def counter_delta(self, group: str) -> dict[str, int] | None:
        now = _counters()
        if now is None or self.counters is None:
            return None
        before = self.counters.get(group, {})
        delta = {k: v - before.get(k, 0) for k, v in now.get(group, {}).items()}
        return {k: v for k, v in delta.items() if v}


def _field(m: Any, name: str) -> Any:
    # A field this torch's metrics lack is unknown (_MISSING); one it has but did not set
    # (None) is a phase that did not happen in that frame.
    return getattr(m, name, _MISSING)


def _seconds(m: Any, name: str, scale: float = 1.0) -> float | None:
    value = _field(m, name)
    if value is _MISSING:
        return None
    return 0.0 if value is None else float(value) * scale


def _frame_phases(m: Any) -> dict[str, float | None]:
    """One frame's exclusive phase times: each of torch's nested totals minus the next."""
    entire = _seconds(m, "entire_frame_compile_time_s")
    backend = _seconds(m, "backend_compile_time_s")
    inductor = _seconds(m, "inductor_compile_time_s")
    codegen = _seconds(m, "code_gen_time_s")
    triton = _seconds(m, "triton_compile_time_us", 1e-6)
    autotune_parts = [_seconds(m, n, 1e-6) for n in ("runtime_triton_autotune_time_us",
                                                      "compile_time_autotune_time_us")]
    known = [p for p in autotune_parts if p is not None]

    def minus(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else max(0.0, a - b)

    return {"dynamo": minus(entire, backend), "aot_autograd": minus(backend, inductor),
            "inductor": minus(inductor, codegen), "codegen": codegen, "triton": triton,
            "autotune": sum(known) if known else None}


def _sum_phases(metrics: list[Any] | None) -> tuple[tuple[str, float | None], ...]:
    if metrics is None:
        return tuple((p, None) for p in PHASES)
    totals: dict[str, float | None] = {p: 0.0 for p in PHASES}
    for m in metrics:
        for phase, seconds in _frame_phases(m).items():
            total = totals[phase]
            totals[phase] = None if seconds is None or total is None else total + seconds
    return tuple(totals.items())


def _frames_seconds(metrics: list[Any] | None) -> float | None:
    if metrics is None:
        return None
    return sum(_seconds(m, "entire_frame_compile_time_s") or 0.0 for m in metrics)


_BREAK_WHERE = re.compile(r'File "([^"]+)", line (\d+), in ([^,\s]+)(?:, code: (.*))?')


def short_break_reason(message: str) -> str:
    """A graph break's message in one line: its first line and, where torch names it, the
    user's file:line and code."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    head = lines[0] if lines else "graph break"
    where = _BREAK_WHERE.search(message)
    if where is None:
        return head
    path, line, func, code = where.groups()
    place = f"{path.rsplit('/', 1)[-1]}:{line} in {func}"
    return f"{head} (at {place}: {code.strip()})" if code else f"{head} (at {place})"


CounterDelta = Callable[[str], "dict[str, int] | None"]


def _graph_breaks(counter_delta: CounterDelta) -> tuple[tuple[str, int], ...] | None:
    # torch 2.6+ counts breaks under "unimplemented", older ones under "graph_break".
    found: dict[str, int] = {}
    known = False
    for group in ("graph_break", "unimplemented"):
        delta = counter_delta(group)
        if delta is None:
            continue
        known = True
        for message, times in delta.items():
            reason = short_break_reason(message)
            found[reason] = found.get(reason, 0) + times
    return tuple(sorted(found.items())) if known else None


def _recompiles(metrics: list[Any] | None) -> tuple[str, ...] | None:
    if metrics is None or not all(_field(m, "recompile_reason") is not _MISSING for m in metrics):
        return None
    reasons: list[str] = []
    for m in metrics:
        reason = m.recompile_reason
        if reason:
            one = " ".join(str(reason).split())
            if one not in reasons:
                reasons.append(one)
    return tuple(reasons)


def _guards(metrics: list[Any] | None) -> int | None:
    if metrics is None or any(_field(m, "guard_count") is _MISSING for m in metrics):
        return None
    return sum(int(m.guard_count or 0) for m in metrics)


def _cache(counter_delta: CounterDelta) -> tuple[tuple[str, int | None], ...]:
    inductor = counter_delta("inductor")
    aot = counter_delta("aot_autograd")

    def get(group: dict[str, int] | None, key: str) -> int | None:
        return None if group is None else group.get(key, 0)

    return (("fxgraph_hit", get(inductor, "fxgraph_cache_hit")),
            ("fxgraph_miss", get(inductor, "fxgraph_cache_miss")),
            ("aotautograd_hit", get(aot, "autograd_cache_hit")),
            ("aotautograd_miss", get(aot, "autograd_cache_miss")))


@dataclass
class PanelRecorder:
    """Snapshots of torch's compile record over one cell: made at the start of its compile
    phase and after each config, read into a panel at any time (the partial result after
    each config carries the panel so far). The compile phase and the first config's getting
    ready are the first compile; what a later config compiles is its recompile. What
    compiles inside `aside()` (--explain's instrumented module) is none of them."""

    watch_torch: bool
    _start: _Snapshot | None = None
    _mark: _Snapshot | None = None
    _configs_done: int = 0
    _first_s: float | None = None
    _by_config: list[tuple[str, float]] = field(default_factory=list)
    _timed: list[str] = field(default_factory=list)
    _aside_metrics: set[tuple[str, Any]] = field(default_factory=set)
    _aside_kernels: int = 0
    _aside_counters: dict[str, dict[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Only a lazy compiler's cell reads torch's record: importing dynamo and inductor to
        # read it would make their caches in any other cell.
        if self.watch_torch:
            self._start = _Snapshot.take()

    def config_done(self, config: str) -> None:
        """`config` is done: what compiled since the last mark is its compile."""
        if self._start is None:
            return
        if self._configs_done == 0:
            self._first_s = _frames_seconds(self._new_metrics(self._start))
        else:
            seconds = _frames_seconds(self._new_metrics(self._mark or self._start))
            if seconds is not None:
                self._by_config.append((config, seconds))
        self._configs_done += 1
        self._mark = _Snapshot.take()

    @contextlib.contextmanager
    def aside(self) -> Iterator[None]:
        """What torch compiles inside this block is left out of the cell's panel."""
        if self._start is None:
            yield
            return
        before = _Snapshot.take()
        try:
            yield
        finally:
            self._aside_metrics |= {_metric_key(m) for m in before.new_metrics() or ()}
            kernels = _kernel_count()
            if kernels is not None and before.kernels is not None:
                self._aside_kernels += kernels - before.kernels
            for group in (before.counters or {}).keys() | (_counters() or {}).keys():
                totals = self._aside_counters.setdefault(group, {})
                for key, value in (before.counter_delta(group) or {}).items():
                    totals[key] = totals.get(key, 0) + value

    def _new_metrics(self, snapshot: _Snapshot) -> list[Any] | None:
        metrics = snapshot.new_metrics()
        if metrics is None:
            return None
        return [m for m in metrics if _metric_key(m) not in self._aside_metrics]

    def _counter_delta(self, group: str) -> dict[str, int] | None:
        assert self._start is not None
        delta = self._start.counter_delta(group)
        if delta is None:
            return None
        aside = self._aside_counters.get(group, {})
        delta = {k: v - aside.get(k, 0) for k, v in delta.items()}
        return {k: v for k, v in delta.items() if v}

    def timed_recompile(self, config: str, reason: str) -> None:
        """The timed loop of `config` refused a recompile for `reason`."""
        self._timed.append(f"{config}: {reason}")

    def panel(self, figures: tuple[Figure, ...] = ()) -> CompilePanel:
        """Everything compiled since the cell's compile phase began, with `figures`."""
        s = self._start
        if s is None:
            return CompilePanel(figures=figures)
        metrics = self._new_metrics(s)
        kernels = _kernel_count()
        if kernels is not None:
            kernels -= self._aside_kernels
        stats = self._counter_delta("stats")
        frames = self._counter_delta("frames")
        return CompilePanel(
            phases_s=_sum_phases(metrics), first_compile_s=self._first_s,
            recompile_s=tuple(self._by_config),
            frames=None if frames is None else frames.get("ok", 0),
            graphs=None if stats is None else stats.get("unique_graphs", 0),
            graph_breaks=_graph_breaks(self._counter_delta), recompiles=_recompiles(metrics),
            timed_recompiles=tuple(self._timed), guards=_guards(metrics),
            kernels=None if kernels is None or s.kernels is None else kernels - s.kernels,
            cache=_cache(self._counter_delta), figures=figures)


@contextlib.contextmanager
def no_recompiles() -> Iterator[None]:
    """torch.compile may not recompile inside this block: a recompile raises (torch's
    "fail_on_recompile" stance). Where this torch has no stances, nothing is refused."""
    try:
        import torch.compiler

        stance = torch.compiler.set_stance("fail_on_recompile")
    except Exception:  # no set_stance in this torch: the loop runs as before
        stance = contextlib.nullcontext()
    with stance:
        yield


def refused_recompile(exc: BaseException) -> str | None:
    """The guard failures that made `exc` a recompile refused by `no_recompiles`, in one
    line; None when `exc` is something else."""
    text = str(exc)
    if "fail_on_recompile" not in text:
        return None
    failures = [line.strip(" -") for line in text.splitlines()[1:]
                if line.strip().startswith("- ")]
    head = text.splitlines()[0]
    where = re.search(r"function name: '([^']+)', line number: (\d+)", head)
    place = f"{where.group(1)} line {where.group(2)}: " if where else ""
    return place + ("; ".join(failures) or head)
