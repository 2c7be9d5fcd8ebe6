"""One cell in one process, from spec file to result file (`python -m kscperf.worker SPEC RESULT`).

Owns a cell's phases, each noted in the phase file as it starts (so the orchestrator can say
where a worker that died was) and each the `phase` of a failure inside it:

    import    load the tool and the definition module          _load
    configs   generate the configs under the seed              configs.load_configs
    compile   the tool's build, timed (for lazy compilers the   _compile_cell
              first call minus a steady call)
    then per config (_run_config): skip hooks, prep (timed, _prep), check against the float64
    reference (_check), calibrated timing and peak memory (run, _measure), the check again
    (recheck), teardown (the tool's own example_done timed, _example_done); then, with
    --explain and once every config is timed, each config timed ok made ready again and its
    ops profiled (explain, _explain_all).

A counting worker (`CellSpec.count_instructions`, by Callgrind or the CPU's counter) counts the
prepared call's instructions (count, _count) in place of check, run and recheck: the timing
run beside it checked the same calls.

Writes the result so far after each config and one result file at the end, atomically, and
exits 0 whenever it wrote one. Decides nothing that is not in the spec.
The fork server that runs it in forked children is `kscperf.worker.server`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import os
import shutil
import statistics
import time
import uuid
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

from kscperf.plan.definitions import DefinitionError, ResolvedModel, import_definition_module, \
    resolve_model
from kscperf.compilepanel import CompilePanel
from kscperf.errors import CellStatus
from kscperf.results.envinfo import machine_info, now_iso
from kscperf.results.fileio import write_text_atomic
from kscperf.results.metadata import ZYGOTE_KEY
from kscperf.spec import CanaryProbe, CellResult, CellSpec, CheckResult, ConfigResult, \
    callgrind_out_path, partial_result_path, phase_path
from kscperf.worker import caches, canary, check, compilepanel, configs, instructions, \
    measure, opprofile, tasks
from kscperf.worker.failures import reason_for, status_for
from kscperf.worker.tools import Built, ToolImpl, Unavailable, Unsupported, as_built, load_tool
from kscperf.worker.torchinfo import torch_info
from kscperf.worker.turns import Turns

__all__ = ["run_cell", "main", "preload", "PRELOAD_ALWAYS", "PRELOAD_FOR_COMPILERS"]

_STEADY_CALLS = 3

# Imported up front, outside every timed phase: autograd.grad pulls in symbolic_shapes (and
# sympy, ~0.6 s) on first use, and torch.compile pulls in dynamo and inductor (~4 s). The
# fork server imports them all once; a spawned worker imports what its tool needs in its
# import phase, so compile times mean the same under either isolation.
PRELOAD_ALWAYS = ("torch.fx.experimental.symbolic_shapes", "torch.autograd.functional")
PRELOAD_FOR_COMPILERS = ("torch._dynamo", "torch._inductor.compile_fx")


def preload(modules: tuple[str, ...]) -> None:
    import importlib

    for name in modules:
        importlib.import_module(name)


# Where the worker notes its phase, for the orchestrator if it dies. Overwritten in place,
# newline-padded (reopening it with O_TRUNC cost 5-10 ms a note on ext4's auto_da_alloc).
_phase_fd: int | None = None
_phase_note_len = 0


# Which of the cell's configs is running ("2 of 3"), noted with the phase for progress.
_position = ""


def _enter(phase: str, config: str = "") -> str:
    global _phase_note_len
    if _phase_fd is not None:
        note = f"{phase}\n{config}\n{_position if config else ''}".encode()
        os.pwrite(_phase_fd, note.ljust(_phase_note_len, b"\n"), 0)
        _phase_note_len = max(_phase_note_len, len(note))
    return phase


# -- one cell: import, configs, compile, then each config: skip, prep, check, run, teardown ---

@dataclass(frozen=True)
class _Loaded:
    """What the import phase found: the tool, its device, the model, and the function the
    tool takes (`who` names the tool's build of it in errors)."""

    tool: ToolImpl
    device: str
    model: ResolvedModel
    fn: Callable[..., Any]
    who: str
    import_s: float


@dataclass(frozen=True)
class _Cell:
    """What every config of one cell shares, settled by the compile phase."""

    spec: CellSpec
    model: ResolvedModel
    task: tasks.Task
    compiled: Callable[..., Any]
    built: Built
    lazy: bool
    device: str
    who: str
    clock: measure.TimeLoops
    loops: dict[str, int]
    turns: Turns | None  # the lockstep partner's, in `ab`
    panel: compilepanel.PanelRecorder
    instrumented: Callable[[], Callable[..., Any]] | None  # --explain's module, made once

    def compile_panel(self) -> CompilePanel | None:
        """The compile panel so far: for a lazy compiler, or a tool with figures."""
        if not (self.lazy or self.built.figures):
            return None
        return self.panel.panel(self.built.figures)

    @property
    def ref_who(self) -> str:
        return f"{self.model.name}_pytorch (the reference)"


@dataclass(frozen=True)
class _Ready:
    """One config after its prep phase: what its check and its timing need."""

    args: tuple[Any, ...]
    ref_args: tuple[Any, ...]
    diff: tuple[int, ...]
    cotangent_seed: int
    prepared: tasks.PreparedTask
    prep_s: float


def run_cell(spec: CellSpec, clock: measure.TimeLoops | None = None,
             on_config: Callable[[CellResult], None] | None = None,
             turns: Turns | None = None, callgrind_out: str = "") -> CellResult:
    """Run every config of one cell (those `spec.configs` names, if any) in this process;
    never raises for anything the definitions, the tool or the inputs do: that becomes the
    result's status. `on_config` is handed the result so far after each config, so that a
    crash or a kill later in the cell loses nothing already measured. In `ab`, `turns` is
    handed the turn after every timed warmup and value, outside the clock, and shares each
    config's loops. A counting spec counts instructions instead, Callgrind writing its dumps
    at `callgrind_out`."""
    t_start = time.perf_counter()
    _pin(spec.affinity)
    metadata = machine_info()
    phase = _enter("import")
    try:
        loaded = _load(spec, metadata, t_start)
        if isinstance(loaded, CellResult):
            return loaded
        # Everything imported so far lives as long as the process: keep it out of the
        # collections that measure_values and teardown make (each would otherwise walk
        # torch's millions of objects, ~0.3 s).
        gc.freeze()
        phase = _enter("configs")
        cell_configs = configs.load_configs(loaded.model, spec.seed)
        phase = _enter("compile")
        cell, compile_s = _compile_cell(spec, loaded, cell_configs[0][1], clock, turns)
        cell_configs = [c for c in cell_configs if not spec.configs or c[0] in spec.configs]
        # A count is not a time: no compile time is recorded beside it.
        cell_result = functools.partial(CellResult.for_spec, spec, CellStatus.OK,
                                        compile_s=None if spec.count_instructions
                                        else compile_s, import_s=loaded.import_s,
                                        metadata=metadata)
        # What escapes a config (its skip hook, on_config) fails the cell in phase "compile".
        done: list[ConfigResult] = []
        # The canary runs while this worker holds its turn in `ab`, like everything but the
        # partner's values.
        probes: tuple[CanaryProbe, ...] = () if spec.check_only or spec.count_instructions \
            else (canary.probe_machine("before"),)
        global _position
        for i, (name, config) in enumerate(cell_configs):
            _position = f"{i + 1} of {len(cell_configs)}"
            done.append(_run_config(cell, name, config, callgrind_out))
            cell.panel.config_done(name)
            if on_config is not None:
                on_config(cell_result(configs=tuple(done), canary=probes,
                                      compile_panel=cell.compile_panel()))
        if probes:
            probes += (canary.probe_machine("after"),)
        if spec.explain:
            done = _explain_all(cell, cell_configs, done)
        return cell_result(configs=tuple(done), canary=probes, compile_panel=cell.compile_panel(),
                           wall_s=time.perf_counter() - t_start)
    except (DefinitionError, tasks.OutputError) as exc:
        return CellResult.for_spec(spec, CellStatus.FAILED, str(exc), phase, metadata=metadata)
    except Exception as exc:
        return CellResult.for_spec(spec, status_for(exc), reason_for(exc), phase,
                                   metadata=metadata)


def _pin(affinity: tuple[int, ...]) -> None:
    if affinity:
        # One intra-op thread per CPU given, so threads never share a core.
        os.sched_setaffinity(0, affinity)
        torch.set_num_threads(len(affinity))


def _load(spec: CellSpec, metadata: dict[str, Any], t_start: float) -> _Loaded | CellResult:
    """The import phase: the model and the tool (a tool the model defines for itself, else a
    built-in or plug-in), or the result that ends the cell here: an unknown tool, a tool
    that is not available or needs CUDA here, a task the tool declines. Adds the torch
    metadata of the tool's device to `metadata`, and for a model's own tool which
    extensions cache its build uses."""
    model = resolve_model(import_definition_module(spec.module_path), spec.model)
    try:
        tool, device = load_tool(spec.tool, spec.tool_plugins, model.tools, model.module_path)
    except KeyError:
        return CellResult.for_spec(spec, CellStatus.FAILED, f"unknown tool {spec.tool!r}",
                                   "import")
    except Unavailable as exc:
        return CellResult.for_spec(spec, CellStatus.SKIPPED, str(exc), "import")
    if (device == "cuda" or tool.needs_cuda) and not torch.cuda.is_available():
        return CellResult.for_spec(spec, CellStatus.SKIPPED,
                                   "CUDA is not available to torch on this machine", "import")
    refusal = tool.support.refusal(spec.tool, spec.task)
    if refusal:
        return CellResult.for_spec(spec, CellStatus.UNSUPPORTED, refusal, "compile")
    preload(PRELOAD_ALWAYS + (PRELOAD_FOR_COMPILERS if tool.lazy else ()))
    metadata.update(torch_info("cuda" if tool.needs_cuda else device))
    if tool.model_defined:
        metadata.update(torch_extensions_cache=spec.compile_cache,
                        torch_extensions_dir=os.environ.get("TORCH_EXTENSIONS_DIR", ""))
    import_s = time.perf_counter() - t_start
    chosen = model.function_for(tool.source)
    if chosen is None:
        return CellResult.for_spec(
            spec, CellStatus.SKIPPED, f"{model.module_path} defines no "
            f"{model.name}_pytorch_nice for tool {spec.tool}", "import", metadata=metadata)
    who, fn = chosen
    return _Loaded(tool, device, model, fn, f"{spec.tool} build of {who}", import_s)


def _compile_cell(spec: CellSpec, loaded: _Loaded, first_config: tuple[Any, ...],
                  clock: measure.TimeLoops | None,
                  turns: Turns | None) -> tuple[_Cell, float | None]:
    """The compile phase, on the first config: the cell's shared state, and the compile
    time (None for tools that run the function as it is)."""
    task = tasks.task_for(spec.task)
    panel = compilepanel.PanelRecorder(watch_torch=loaded.tool.lazy)
    example = tasks.to_device_args(first_config, loaded.device)
    diff = tasks.differentiable_indices(example, loaded.model.diff_args)
    built, compile_s = _compile(loaded, example, diff, task)
    refusal = built.support.refusal(spec.tool, spec.task)
    if refusal:
        raise Unsupported(refusal)
    device = built.device if loaded.tool.model_defined and built.device else loaded.device
    if clock is None:
        clock = measure.cuda_clock() if device == "cuda" else measure.cpu_clock()
    make = loaded.tool.instrumented
    instrumented = functools.cache(functools.partial(make, loaded.fn)) \
        if make is not None and spec.explain else None
    cell = _Cell(spec, loaded.model, task, built.fn, built, loaded.tool.lazy, device,
                 loaded.who, clock, dict(spec.loops), turns, panel, instrumented)
    return cell, (compile_s if loaded.tool.compiles else None)


def _compile(loaded: _Loaded, example: tuple[Any, ...], diff: tuple[int, ...],
             task: tasks.Task) -> tuple[Built, float]:
    t0 = time.perf_counter()
    compiled = loaded.tool.compile(loaded.fn, example, loaded.device)
    measure.sync(loaded.device)
    compile_s = time.perf_counter() - t0
    built = as_built(compiled, loaded.who)
    if loaded.tool.lazy:
        compile_s += _first_call_compile_s(built.fn, example, diff, task, loaded)
    return built, compile_s


def _first_call_compile_s(compiled: Callable[..., Any], example: tuple[Any, ...],
                          diff: tuple[int, ...], task: tasks.Task, loaded: _Loaded) -> float:
    # torch.compile compiles on the first call, separately for inference and grad mode:
    # make that call in the task's own mode, then subtract what a steady call costs.
    mode = tasks.TASK_TABLE["fwd" if task.differentiates else "inference"]
    prepared = mode.prepare(compiled, example, diff, 0, loaded.who)
    with prepared.context():
        first = _timed_call(prepared.timed, loaded.device)
        steady = sorted(_timed_call(prepared.timed, loaded.device) for _ in range(_STEADY_CALLS))
    return max(0.0, first - steady[len(steady) // 2])


def _timed_call(fn: Callable[[], Any], device: str) -> float:
    t0 = time.perf_counter()
    fn()
    measure.sync(device)
    return time.perf_counter() - t0


def _run_config(cell: _Cell, name: str, config: tuple[Any, ...],
                callgrind_out: str = "") -> ConfigResult:
    """One config: skip, prep, check, run (timing), teardown; a counting worker's: skip,
    prep, count, teardown. Whatever the tool or the config raises becomes the result's
    status, in the phase it was raised in."""
    common: dict[str, Any] = {"config": name, "numel": _numel(config), "date": now_iso()}
    # Outside the try: a skip hook that raises fails the whole cell, not one config.
    reason = cell.model.skip_reason(cell.spec.task, name, cell.spec.tool)
    if reason:
        return ConfigResult(status=CellStatus.SKIPPED, reason=reason, **common)
    phase = _enter("prep", name)
    ready: _Ready | str | None = None
    try:
        ready = _prep(cell, name, config)
        if isinstance(ready, str):
            return ConfigResult(status=CellStatus.SKIPPED, reason=ready, **common)
        if cell.spec.count_instructions:
            phase = _enter("count", name)
            return _example_done(cell, ready, _count(cell, name, ready, common, callgrind_out))
        phase = _enter("check", name)
        checked, ref_value = _check(cell, config, ready)
        common.update(checked)
        if cell.spec.check_only:
            result = ConfigResult(peak_rss_bytes=measure.peak_rss_bytes(), **common)
        else:
            phase = _enter("run", name)
            # Prep and the check hold copies the timed calls never need (the inputs while
            # they move to the device, the checked value's clone, the float64 reference):
            # a timed config's peaks are those of its timed calls, its inputs held.
            measure.reset_peaks(cell.device)
            result = _measure(cell, name, ready.prepared, common)
            phase = _enter("recheck", name)
            result = _recheck(cell, config, ready, ref_value, result)
        if cell.built.example_done is not None:
            phase = _enter("teardown", name)
        return _example_done(cell, ready, result)
    except Exception as exc:
        # What the check found (and prep time) stays; the status is the failure's.
        kept = {k: v for k, v in common.items() if k not in ("status", "reason", "phase")}
        return ConfigResult(status=status_for(exc), phase=phase, reason=reason_for(exc),
                            **kept)
    finally:
        ready = None  # drop the graph before the next config
        _teardown(cell.device)


def _count(cell: _Cell, name: str, ready: _Ready, common: dict[str, Any],
           callgrind_out: str) -> ConfigResult:
    """The count phase: the prepared call's instructions per call (`instructions.count_calls`
    by the spec's counter; Callgrind's dumps at `callgrind_out`) over as many calls as the
    timing run calibrated, within `instructions.CALLS_RANGE`; with --explain (under
    Callgrind), its functions' counts too."""
    low, high = instructions.CALLS_RANGE
    counted = instructions.count_calls(
        ready.prepared.timed, functools.partial(_timing_context, ready.prepared, cell.lazy),
        min(max(cell.loops.get(name, low), low), high), callgrind_out, cell.spec.count_method)
    return ConfigResult(status=CellStatus.OK, instructions=counted.per_call,
                        instruction_functions=counted.functions if cell.spec.explain else (),
                        **common)


def _prep(cell: _Cell, name: str, config: tuple[Any, ...]) -> _Ready | str:
    """The prep phase: the config ready to check and time (timed as prep_s), or the reason
    it is skipped."""
    diff = tasks.differentiable_indices(config, cell.model.diff_args)
    if cell.task.differentiates and not diff:
        return f"config {name} has no floating-point tensor argument to differentiate"
    ref_args = tasks.to_reference_args(config)
    if cell.spec.task == "jacobian":
        too_big = _jacobian_too_big(cell, ref_args, diff)
        if too_big:
            return too_big
    measure.reset_peaks(cell.device)
    cotangent_seed = (cell.spec.seed * 1_000_003 + zlib.crc32(name.encode())) % 2**63
    t0 = time.perf_counter()
    args = tasks.to_device_args(config, cell.device)
    if cell.built.example_prep is not None:
        prepped = cell.built.example_prep(*args)
        args = args if prepped is None else configs.as_args(prepped)
    prepared = cell.task.prepare(cell.compiled, args, diff, cotangent_seed, cell.who)
    if cell.lazy:
        # A lazy compiler compiles again for each new shape on the first call: that is
        # part of getting the config ready, not of its check or of its timing.
        with prepared.context():
            prepared.timed()
    measure.sync(cell.device)
    return _Ready(args, ref_args, diff, cotangent_seed, prepared, time.perf_counter() - t0)


def _example_done(cell: _Cell, ready: _Ready, result: ConfigResult) -> ConfigResult:
    """The tool's own teardown of one config (its `example_done`), timed as teardown_s."""
    if cell.built.example_done is None:
        return result
    t0 = time.perf_counter()
    cell.built.example_done(*ready.args)
    measure.sync(cell.device)
    return dataclasses.replace(result, teardown_s=time.perf_counter() - t0)


def _jacobian_too_big(cell: _Cell, ref_args: tuple[Any, ...], diff: tuple[int, ...]) -> str:
    ref_outs = tasks.flatten_output(cell.model.reference(*ref_args), cell.ref_who)
    entries = tasks.jacobian_elements(ref_outs, ref_args, diff)
    if entries > cell.spec.jacobian_max_elements:
        return (f"the Jacobian has {entries} entries, over the limit of "
                f"{cell.spec.jacobian_max_elements}")
    return ""


def _compare(cell: _Cell, config: tuple[Any, ...], got: list[torch.Tensor],
             ref_value: list[torch.Tensor]) -> CheckResult:
    rtol, atol = check.tolerance_for(_input_dtype(config), cell.model.tolerances)
    return check.compare_values(got, ref_value, cell.task.checks, rtol, atol)


def _check(cell: _Cell, config: tuple[Any, ...],
           ready: _Ready) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """The check phase: the tool's value against the float64 reference's, as the config's
    check, prep_s, status, reason and phase; and the reference's value, for the recheck."""
    ref_value = cell.task.value(cell.model.reference, ready.ref_args, ready.diff,
                                ready.cotangent_seed, cell.ref_who)
    got = cell.task.value(cell.compiled, ready.args, ready.diff, ready.cotangent_seed, cell.who)
    result = _compare(cell, config, got, ref_value)
    if result.passed:
        return dict(check=result, prep_s=ready.prep_s, status=CellStatus.OK, reason="",
                    phase=""), ref_value
    return dict(check=result, prep_s=ready.prep_s, status=CellStatus.INCORRECT,
                reason=f"{cell.task.checks} differs from the float64 reference: {result.detail}",
                phase="check"), ref_value


def _recheck(cell: _Cell, config: tuple[Any, ...], ready: _Ready,
             ref_value: list[torch.Tensor], result: ConfigResult) -> ConfigResult:
    """The check again, one call right after the timed loop: a tool that was right before
    timing and is wrong now went wrong during timing, and its times are of a wrong answer."""
    if result.status != CellStatus.OK:
        return result
    got = cell.task.value(cell.compiled, ready.args, ready.diff, ready.cotangent_seed, cell.who)
    again = _compare(cell, config, got, ref_value)
    if again.passed:
        return result
    return dataclasses.replace(
        result, check=again, status=CellStatus.INCORRECT, phase="recheck",
        reason=f"{cell.task.checks} went wrong during timing: it matched the float64 "
               f"reference before the timed loop and differs from it after: {again.detail}")


def _explain_all(cell: _Cell, cell_configs: list[tuple[str, tuple[Any, ...]]],
                 done: list[ConfigResult]) -> list[ConfigResult]:
    """--explain's passes, once every config is timed, so that no config is timed after a
    profile in this process: each config timed ok made ready again (untimed) and profiled.
    A config whose pass fails stays as it was timed, without a profile."""
    out = []
    for (name, config), result in zip(cell_configs, done):
        ready: _Ready | str | None = None
        if result.status == CellStatus.OK and result.values:
            _enter("explain", name)
            try:
                ready = _prep(cell, name, config)
                if not isinstance(ready, str):
                    result = _explain(cell, ready, result)
                    _example_done(cell, ready, result)
            except Exception:
                pass  # a prep or teardown that fails only now: the timing stands
            finally:
                ready = None
                _teardown(cell.device)
        out.append(result)
    return out


def _explain(cell: _Cell, ready: _Ready, result: ConfigResult) -> ConfigResult:
    """--explain's profiling pass of one config: of the timed module, or of an instrumented
    one where the tool has one (its compile left out of the panel). A profiler that fails
    leaves the config as it was timed, without a profile."""
    instrumented = None if cell.instrumented is None else functools.partial(
        cell.task.prepare, cell.instrumented(), ready.args, ready.diff, ready.cotangent_seed,
        cell.who)
    try:
        with cell.panel.aside():
            profile = opprofile.explain_pass(
                ready.prepared, functools.partial(_timing_context, lazy=cell.lazy),
                cell.device, statistics.median(result.values), instrumented)
    except Exception:
        return result
    return dataclasses.replace(result, op_profile=profile)


@contextlib.contextmanager
def _timing_context(prepared: tasks.PreparedTask, lazy: bool) -> Iterator[None]:
    # A lazy compiler may not compile inside the timed loop: that would be timed as running.
    with prepared.context(), (compilepanel.no_recompiles() if lazy else contextlib.nullcontext()):
        yield


def _measure_values(cell: _Cell, name: str, prepared: tasks.PreparedTask) -> measure.Measurement:
    spec, turns = cell.spec, cell.turns
    loops = cell.loops.get(name) or (turns.partner_loops.get(name) if turns else None)
    return measure.measure_values(prepared.timed, cell.clock, values=spec.values,
                                  warmups=spec.warmups, min_time=spec.min_time, loops=loops,
                                  context=functools.partial(_timing_context, prepared, cell.lazy),
                                  after_value=turns.after_value if turns else None,
                                  on_calibrated=functools.partial(turns.share_loops, name)
                                  if turns else None)


def _measure(cell: _Cell, name: str, prepared: tasks.PreparedTask,
             common: dict[str, Any]) -> ConfigResult:
    """The run phase: calibrated timing of the prepared callable (recompiles refused), then
    peak memory. A recompile torch wants anyway is recorded, made outside the clock, and the
    config timed again; a second one fails the config."""
    t0 = time.perf_counter()
    try:
        m = _measure_values(cell, name, prepared)
    except RuntimeError as exc:
        reason = compilepanel.refused_recompile(exc)
        if reason is None:
            raise
        cell.panel.timed_recompile(name, reason)
        with prepared.context():
            prepared.timed()
        measure.sync(cell.device)
        m = _measure_values(cell, name, prepared)
    duration = time.perf_counter() - t0
    peak_cuda = torch.cuda.max_memory_allocated() if cell.device == "cuda" else None
    return ConfigResult(values=tuple(m.values), warmups=tuple(m.warmups), loops=m.loops,
                        cuda_event_values=tuple(m.device_values), duration_s=duration,
                        peak_rss_bytes=measure.peak_rss_bytes(), peak_cuda_bytes=peak_cuda,
                        clock_warning=measure.device_over_wall(m.values, m.device_values),
                        **common)


def _numel(config: tuple[Any, ...]) -> int:
    return sum(a.numel() for a in config if isinstance(a, torch.Tensor))


def _input_dtype(config: tuple[Any, ...]) -> torch.dtype:
    # Tolerances follow the dtype of the first floating-point input.
    return next((a.dtype for a in config if isinstance(a, torch.Tensor)
                 and a.is_floating_point()), torch.float32)


# -- devices ---------------------------------------------------------------------------

def _teardown(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


# -- the process: spec file in, result file out ---------------------------

def main(spec_path: str, result_path: str, zygote: str | None = None) -> int:
    """Run the cell described in `spec_path` and write its CellResult to `result_path`
    (and the result so far, after each config, beside it); 0 whenever it wrote one. Its
    metadata names the `zygote` it was forked from (`ZYGOTE_KEY`), or, for a worker
    started on its own, an id of its own."""
    with open(spec_path, encoding="utf-8") as fp:
        spec = CellSpec.from_dict(json.load(fp))
    cache = caches.cold_compiler_caches() if spec.compile_cache == "cold" else None
    if cache is None:
        os.environ.setdefault("TORCH_EXTENSIONS_DIR", caches.warm_extensions_dir())
    global _phase_fd, _phase_note_len
    if _phase_fd is not None:
        os.close(_phase_fd)
    _phase_fd, _phase_note_len = os.open(phase_path(result_path), os.O_WRONLY | os.O_CREAT
                                         | os.O_TRUNC, 0o644), 0
    turns = None
    if spec.turns:
        turns = Turns(spec.turns[0], spec.turns[1], spec.turn_wait_s)
        turns.take()
    try:
        result = run_cell(spec, on_config=lambda partial: _write_result(
            partial_result_path(result_path), partial, "the worker's partial result"),
            turns=turns,
            callgrind_out=callgrind_out_path(result_path))
        result = dataclasses.replace(result, metadata={
            **result.metadata, ZYGOTE_KEY: zygote or f"own-{uuid.uuid4().hex[:12]}"})
        if turns is not None:
            result = dataclasses.replace(result, metadata={
                **result.metadata, "lockstep_unpaired_values": turns.unpaired_values})
        _write_result(result_path, result, "the worker's result")
    finally:
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
    return 0


def _write_result(path: str, result: CellResult, what: str) -> None:
    # Not synced: the orchestrator here reads it as the worker ends (a machine crash loses
    # its run too), and a sync cost 4-12 ms a file on a busy disk.
    write_text_atomic(path, json.dumps(result.to_dict()), what, durable=False)
