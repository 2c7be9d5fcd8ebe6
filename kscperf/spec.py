"""What a worker must do (`CellSpec`) and what it did (`CellResult`, `ConfigResult`).

Plain data with `to_dict`/`from_dict` over JSON types only, so the orchestrator, the worker
and the results file agree without importing torch or pyperf.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import zlib
from dataclasses import dataclass, field
from typing import Any

from kscperf.compilepanel import CompilePanel
from kscperf.errors import STATUS_SEVERITY, CellStatus, KscperfError, recorded_status
from kscperf.names import cell_name

__all__ = [
    "TimingProfile",
    "PROFILES",
    "ISOLATIONS",
    "COMPILE_CACHES",
    "WorkerSettings",
    "CellSpec",
    "CheckResult",
    "OpRow",
    "OpProfile",
    "ConfigResult",
    "CanaryProbe",
    "CellResult",
    "callgrind_out_path",
    "partial_result_path",
    "phase_path",
    "TURN",
    "PARTNER_ENDED",
    "LOOPS",
]

# The bytes of `ab`'s turn-taking FIFOs: the turn itself, and the orchestrator's word that
# the partner's process has ended. The orchestrator (kscperf.orchestrator.lockstep) writes
# both; the workers (kscperf.worker.turns) pass TURN to each other and read anything else as
# the partner's end, except LOOPS: a worker that calibrated a config's loops sends LOOPS, a
# 2-byte big-endian length and the JSON `[config, loops]`, so that its partner times that
# config with the same loops (one write, under PIPE_BUF: it never interleaves with another).
TURN = b"t"
PARTNER_ENDED = b"e"
LOOPS = b"l"


@dataclass(frozen=True)
class TimingProfile:
    """pyperf's knobs: worker processes per cell, values and warmups per process, and the
    minimum duration of one value (loops are calibrated until a value lasts this long)."""

    processes: int
    values: int
    warmups: int
    min_time: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


PROFILES: dict[str, TimingProfile] = {
    "fast": TimingProfile(processes=1, values=5, warmups=1, min_time=0.01),
    "default": TimingProfile(processes=3, values=10, warmups=2, min_time=0.02),
    "rigorous": TimingProfile(processes=6, values=20, warmups=3, min_time=0.05),
}


ISOLATIONS = ("fork", "spawn")
COMPILE_CACHES = ("warm", "cold")


@dataclass(frozen=True, kw_only=True)
class WorkerSettings:
    """The settings of one run that reach every worker alike, each declared once here with
    its default: `RunConfig` (what a run is asked), the scheduler's `RunOptions` and
    `CellSpec` (what one worker is told) extend it, and the CLI's options and the API's
    keywords take their defaults from it.

    `isolation` (fork from the preloaded server, or spawn), `timeout_s` and
    `max_rss_bytes` are the launcher's to enforce; a spec records the ones its worker ran
    under. Invalid choices raise KscperfError when the settings are made.
    """

    seed: int = 0
    check_only: bool = False
    tool_plugins: tuple[str, ...] = ()
    compile_cache: str = "warm"
    jacobian_max_elements: int = 1_000_000
    affinity: tuple[int, ...] = ()
    isolation: str = "fork"
    timeout_s: float | None = 600.0
    max_rss_bytes: int | None = None
    # --explain: profile each timed config's ops once all its cell's configs are timed
    # (kscperf.worker.opprofile).
    explain: bool = False

    def __post_init__(self) -> None:
        for name, value, allowed in (("isolation", self.isolation, ISOLATIONS),
                                     ("compile_cache", self.compile_cache, COMPILE_CACHES)):
            if value not in allowed:
                raise KscperfError(f"{name} {value!r} is not one of {', '.join(allowed)}.")

    def worker_settings(self) -> dict[str, Any]:
        """This record's `WorkerSettings` fields by name, to pass on to the next record."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(WorkerSettings)}


_FAST = PROFILES["fast"]


@dataclass(frozen=True, kw_only=True)
class CellSpec(WorkerSettings):
    """One worker process's instructions: one model, tool and task, all of its configs (or
    those named in `configs`, in the model's order), and the run's `WorkerSettings`.
    `values`, `warmups` and `min_time` default to the fast profile's.

    `loops` maps config names to a loop count already calibrated by an earlier process of
    the same cell (pyperf calibrates once and reuses it); configs missing from it are
    calibrated here.

    `turns`, set only by `run-benchmarks ab`, names two FIFOs (this worker's, its partner's):
    the worker runs only while it holds the turn, and hands it over after each warmup and
    value (not during calibration), so that the two builds' workers alternate value by
    value. A worker whose partner ends goes on alone; so does one that waits longer than
    `turn_wait_s` (None: no limit) for its turn, for the rest of its process.
    """

    model: str
    tool: str
    task: str
    module_path: str
    process_index: int = 0
    values: int = _FAST.values
    warmups: int = _FAST.warmups
    min_time: float = _FAST.min_time
    loops: tuple[tuple[str, int], ...] = ()
    # Only these configs are run (empty: every config); `ab --until-resolved` names the ones
    # still open. The first config is still every compiler's example input.
    configs: tuple[str, ...] = ()
    turns: tuple[str, ...] = ()
    turn_wait_s: float | None = None
    # --instructions: this worker counts each config's instructions per call
    # (`ConfigResult.instructions`) instead of checking and timing it, by `count_method`:
    # "callgrind" (it runs under Valgrind's Callgrind, its dumps written at
    # `callgrind_out_path(result path)`) or "perf" (the CPU's hardware counter).
    count_instructions: bool = False
    count_method: str = "callgrind"

    @property
    def name(self) -> str:
        return cell_name(self.model, self.tool, self.task)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["loops"] = [list(item) for item in self.loops]
        d["tool_plugins"] = list(self.tool_plugins)
        d["affinity"] = list(self.affinity)
        d["turns"] = list(self.turns)
        d["configs"] = list(self.configs)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CellSpec:
        d = dict(d)
        d["loops"] = tuple((str(k), int(v)) for k, v in d.get("loops", ()))
        d["tool_plugins"] = tuple(d.get("tool_plugins", ()))
        d["affinity"] = tuple(int(c) for c in d.get("affinity", ()))
        d["turns"] = tuple(str(p) for p in d.get("turns", ()))
        d["configs"] = tuple(str(c) for c in d.get("configs", ()))
        return cls(**d)


@dataclass(frozen=True)
class CheckResult:
    """The comparison of one config's output, gradient or Jacobian with the float64
    reference: elementwise |got - ref| <= atol * scale + rtol * |ref|, where scale is
    max(1, max |ref|) (check.compare_values)."""

    passed: bool
    what: str
    max_abs_err: float
    max_rel_err: float
    rtol: float
    atol: float
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CheckResult:
        return cls(**d)


@dataclass(frozen=True)
class OpRow:
    """One op (or kernel) of a profiled config, as the profiler named it (`key`, not
    normalised): `calls` per iteration of the timed callable and `self_s`, its self time per
    call in seconds (device time for a CUDA kernel, `device` "cuda"; CPU time otherwise)."""

    key: str
    calls: float
    self_s: float
    device: str = "cpu"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OpRow:
        return cls(key=str(d["key"]), calls=float(d["calls"]), self_s=float(d["self_s"]),
                   device=str(d.get("device", "cpu")))


@dataclass(frozen=True)
class OpProfile:
    """What `--explain`'s profiling pass found of one config in one process, after its
    timing: `iterations` calls of the timed callable profiled, lasting `profiled_s` each
    on average under the profiler, against `unprofiled_s` (the median timed value) without
    it; `seconds` is the whole pass, setup included, and `rows` its ops.

    For a compiler that names its kernels when asked (torch.compile), the pass profiles a
    second, instrumented module, never the timed one: `compile_s` is that module's compile
    for this config (None for a tool that compiles nothing for the pass), and `code` the
    generated code of each graph it compiled then (stored compressed; none when the config
    reused graphs an earlier config compiled)."""

    iterations: int
    profiled_s: float
    unprofiled_s: float
    seconds: float
    rows: tuple[OpRow, ...]
    compile_s: float | None = None
    code: tuple[str, ...] = ()

    @property
    def overhead(self) -> float:
        """The profiler's relative cost per iteration: profiled over unprofiled time, less 1."""
        return self.profiled_s / self.unprofiled_s - 1.0 if self.unprofiled_s > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["rows"] = [r.to_dict() for r in self.rows]
        for name, empty in (("compile_s", None), ("code", ())):
            if getattr(self, name) == empty:
                del d[name]  # older readers see what they always saw
        if self.code:
            d["code"] = [_compressed(text) for text in self.code]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OpProfile:
        compile_s = d.get("compile_s")
        return cls(iterations=int(d["iterations"]), profiled_s=float(d["profiled_s"]),
                   unprofiled_s=float(d["unprofiled_s"]), seconds=float(d["seconds"]),
                   rows=tuple(OpRow.from_dict(r) for r in d["rows"]),
                   compile_s=None if compile_s is None else float(compile_s),
                   code=tuple(_decompressed(c) for c in d.get("code", ())))


def _compressed(text: str) -> str:
    """`text` as zlib-compressed UTF-8 in base64: generated code is kilobytes a graph."""
    return base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii")


def _decompressed(stored: str) -> str:
    try:
        return zlib.decompress(base64.b64decode(stored)).decode("utf-8")
    except (ValueError, zlib.error) as exc:
        raise KscperfError(f"a stored graph's generated code cannot be read: {exc}.") from None


@dataclass(frozen=True)
class ConfigResult:
    """One config of one cell in one worker process."""

    config: str
    status: CellStatus
    reason: str = ""
    phase: str = ""
    values: tuple[float, ...] = ()
    warmups: tuple[tuple[int, float], ...] = ()
    loops: int = 0
    prep_s: float | None = None
    check: CheckResult | None = None
    peak_rss_bytes: int | None = None
    peak_cuda_bytes: int | None = None
    cuda_event_values: tuple[float, ...] = ()
    date: str = ""
    duration_s: float | None = None
    numel: int | None = None
    teardown_s: float | None = None  # the tool's own example_done, when it has one
    # Set when the clock's figures cannot both be true (CUDA device time over wall time).
    clock_warning: str = ""
    # --explain's profile of the config's ops, taken once its cell's configs were all
    # timed; None without it.
    op_profile: OpProfile | None = None
    # A counting worker's (CellSpec.count_instructions) instructions per call; None in a
    # timing worker's result. With --explain, (function, instructions per call) of the
    # functions with the most, most first (kscperf.worker.instructions.FUNCTIONS_KEPT).
    instructions: float | None = None
    instruction_functions: tuple[tuple[str, float], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["status"] = self.status.value
        d["values"] = list(self.values)
        d["warmups"] = [list(w) for w in self.warmups]
        d["cuda_event_values"] = list(self.cuda_event_values)
        d["check"] = self.check.to_dict() if self.check else None
        if not self.clock_warning:
            # Left out when empty, so that a file with nothing to warn of stays readable by
            # the kscperf versions before the field (results format 2 either way).
            del d["clock_warning"]
        if self.op_profile is None:
            del d["op_profile"]  # as clock_warning
        else:
            d["op_profile"] = self.op_profile.to_dict()
        if self.instructions is None:
            del d["instructions"]  # as clock_warning
        if self.instruction_functions:
            d["instruction_functions"] = [list(f) for f in self.instruction_functions]
        else:
            del d["instruction_functions"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ConfigResult:
        d = dict(d)
        d["status"] = recorded_status(d["status"])
        d["values"] = tuple(float(v) for v in d.get("values", ()))
        d["warmups"] = tuple((int(n), float(v)) for n, v in d.get("warmups", ()))
        d["cuda_event_values"] = tuple(float(v) for v in d.get("cuda_event_values", ()))
        d["check"] = CheckResult.from_dict(d["check"]) if d.get("check") else None
        profile = d.get("op_profile")
        d["op_profile"] = OpProfile.from_dict(profile) if profile is not None else None
        if d.get("instructions") is not None:
            d["instructions"] = float(d["instructions"])
        d["instruction_functions"] = tuple((str(name), float(n)) for name, n
                                           in d.get("instruction_functions", ()))
        return cls(**d)


@dataclass(frozen=True)
class CanaryProbe:
    """One timing of the machine-speed canary (`kscperf.worker.canary`) in a worker process:
    `when` it was taken relative to the timed values ("before" or "after"), `at` (local time, ISO
    8601), the median seconds of each of its parts, as (part, seconds) pairs, and what the
    probe cost the worker, `duration_s`, setup included."""

    when: str
    at: str
    seconds: tuple[tuple[str, float], ...]
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"when": self.when, "at": self.at, "seconds": dict(self.seconds),
                "duration_s": self.duration_s}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CanaryProbe:
        seconds = d["seconds"]
        if not isinstance(seconds, dict):
            raise TypeError(f"a canary's seconds should be an object, not {type(seconds).__name__}")
        return cls(when=str(d["when"]), at=str(d["at"]),
                   seconds=tuple((str(k), float(v)) for k, v in seconds.items()),
                   duration_s=float(d.get("duration_s", 0.0)))


@dataclass(frozen=True)
class CellResult:
    """What one worker process did for one cell.

    `status` is the cell's own fate when it never reached its configs (an import error, a
    crash, a timeout); otherwise it is the worst of its configs' statuses.
    """

    model: str
    tool: str
    task: str
    process_index: int
    status: CellStatus
    reason: str = ""
    phase: str = ""
    compile_s: float | None = None
    import_s: float | None = None
    configs: tuple[ConfigResult, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    wall_s: float | None = None
    # The machine-speed canary around the timed values; empty when nothing was timed, and in
    # files written before kscperf had it.
    canary: tuple[CanaryProbe, ...] = ()
    # What the compiler did (kscperf.compilepanel); None for files written before kscperf
    # had it, and for tools that neither compile lazily nor report figures of their own.
    compile_panel: CompilePanel | None = None

    @property
    def name(self) -> str:
        return cell_name(self.model, self.tool, self.task)

    @classmethod
    def for_spec(cls, spec: CellSpec, status: CellStatus, reason: str = "", phase: str = "",
                 **fields: Any) -> CellResult:
        """A result that carries `spec`'s identity."""
        return cls(model=spec.model, tool=spec.tool, task=spec.task,
                   process_index=spec.process_index, status=status, reason=reason,
                   phase=phase, **fields)

    def worst_status(self) -> CellStatus:
        statuses = [self.status] + [c.status for c in self.configs]
        return max(statuses, key=STATUS_SEVERITY.__getitem__)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["status"] = self.status.value
        d["configs"] = [c.to_dict() for c in self.configs]
        d["canary"] = [p.to_dict() for p in self.canary]
        if self.compile_panel:
            d["compile_panel"] = self.compile_panel.to_dict()
        else:
            del d["compile_panel"]  # as clock_warning: older readers take such files
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CellResult:
        d = dict(d)
        d["status"] = recorded_status(d["status"])
        d["configs"] = tuple(ConfigResult.from_dict(c) for c in d.get("configs", ()))
        d["metadata"] = dict(d.get("metadata") or {})
        d["canary"] = tuple(CanaryProbe.from_dict(p) for p in d.get("canary", ()))
        panel = d.get("compile_panel")
        d["compile_panel"] = CompilePanel.from_dict(panel) if panel is not None else None
        return cls(**d)


def callgrind_out_path(result_path: str) -> str:
    """Where Callgrind writes the dumps of a counting worker whose result goes to
    `result_path` (`valgrind --callgrind-out-file`; dump N is this path with `.N`)."""
    return result_path + ".callgrind"


def partial_result_path(result_path: str) -> str:
    """Where a worker keeps the configs it finished so far, until its result is written."""
    return result_path + ".partial"


def phase_path(result_path: str) -> str:
    """Where a worker notes the phase (and config) it is in, for when it dies."""
    return result_path + ".phase"
