"""One cell in one process: `python -m kscperf.worker SPEC.json RESULT.json`.

Reads the spec, imports the definition module and the tool, then: compile (timed; for lazy
compilers the first call minus a steady call), and per config: prep (timed), check against
the float64 reference, calibrated timing, peak memory, teardown. Writes one result file
atomically and exits 0 whenever it wrote one. Decides nothing that is not in the spec.

`python -m kscperf.worker --serve` is the fork server ("zygote"): it imports torch and this
module once, never initialises CUDA or runs a torch op (so no thread pool or CUDA context
exists to be broken by fork()), then forks one fresh child per request read from stdin.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
import zlib
from typing import Any, Callable

import torch

from kscperf import check, measure, tasks
from kscperf.definitions import DefinitionError, ResolvedModel, import_definition_module, \
    resolve_model
from kscperf.envinfo import machine_info, now_iso, torch_info
from kscperf.errors import CellStatus, describe_exception
from kscperf.lockstep import Turns
from kscperf.spec import CellResult, CellSpec, ConfigResult, partial_result_path, \
    phase_path
from kscperf.tools import Unsupported, load_tool

__all__ = ["run_cell", "load_configs", "main", "serve"]

_STEADY_CALLS = 3

# Imported up front, outside every timed phase: autograd.grad pulls in symbolic_shapes (and
# sympy, ~0.6 s) on first use, and torch.compile pulls in dynamo and inductor (~4 s). The
# fork server imports them all once; a spawned worker imports what its tool needs in its
# import phase, so compile times mean the same under either isolation.
_PRELOAD_ALWAYS = ("torch.fx.experimental.symbolic_shapes", "torch.autograd.functional")
_PRELOAD_FOR_COMPILERS = ("torch._dynamo", "torch._inductor.compile_fx")


def _preload(modules: tuple[str, ...]) -> None:
    import importlib

    for name in modules:
        importlib.import_module(name)


# Where the worker notes the phase it enters, so that if it dies (signal, os._exit, kill)
# the orchestrator can still say in which phase and config.
_phase_path: str | None = None


def _enter(phase: str, config: str = "") -> str:
    if _phase_path is not None:
        with open(_phase_path, "w", encoding="utf-8") as fp:
            fp.write(f"{phase}\n{config}")
    return phase


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % 2**32)
    except ImportError:
        pass


def _as_args(config: Any) -> tuple[Any, ...]:
    return tuple(config) if isinstance(config, (tuple, list)) else (config,)


def _default_config_name(args: tuple[Any, ...]) -> str:
    for a in args:
        if isinstance(a, torch.Tensor):
            return "x".join(str(d) for d in a.shape) or "scalar"
    return "config"


def _where(exc: BaseException) -> str:
    """The innermost frame of a traceback that is not kscperf's or torch's own, if any."""
    frames = traceback.extract_tb(exc.__traceback__)
    # By package folder, not by name: a checkout is often itself called kscperf/.
    own = tuple(os.path.dirname(os.path.abspath(m.__file__ or "")) + os.sep
                for m in (check, torch))
    for frame in reversed(frames):
        if not os.path.abspath(frame.filename).startswith(own):
            return f" (at {os.path.basename(frame.filename)}:{frame.lineno} in {frame.name})"
    return ""


def _is_oom(exc: BaseException) -> bool:
    # CPU allocation failures in torch are plain RuntimeErrors ("DefaultCPUAllocator: can't
    # allocate memory"); CUDA's are torch.OutOfMemoryError.
    text = str(exc).lower()
    return isinstance(exc, (MemoryError, torch.OutOfMemoryError)) or (
        isinstance(exc, RuntimeError)
        and ("out of memory" in text or "can't allocate memory" in text))


def _status_for(exc: BaseException) -> CellStatus:
    if isinstance(exc, Unsupported):
        return CellStatus.UNSUPPORTED
    return CellStatus.OOM if _is_oom(exc) else CellStatus.FAILED


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _teardown(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def load_configs(model: ResolvedModel, seed: int) -> list[tuple[str, tuple[Any, ...]]]:
    """(name, args) of every config of `model`, generated under `seed` exactly as every
    worker generates them; DefinitionError names the module when the configs are bad."""
    _seed_everything(seed)
    where = f"{model.name}_bench_configs() in {model.module_path}"
    try:
        configs = [_as_args(c) for c in model.configs()]
    except Exception as exc:
        raise DefinitionError(f"{where} raised {describe_exception(exc)}{_where(exc)}") from exc
    if not configs:
        raise DefinitionError(f"{where} yielded no configs")
    if model.config_names is not None:
        if len(model.config_names) != len(configs):
            raise DefinitionError(
                f"{model.name}_config_names has {len(model.config_names)} names for "
                f"{len(configs)} configs in {model.module_path}")
        names = list(model.config_names)
    else:
        names = [_default_config_name(c) for c in configs]
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return list(zip(unique, configs))


def _compile(spec: CellSpec, tool: Any, fn: Callable[..., Any], example: tuple[Any, ...],
             device: str, diff: tuple[int, ...], who: str) -> tuple[Callable[..., Any], float]:
    t0 = time.perf_counter()
    compiled = tool.compile(fn, example, device)
    _sync(device)
    compile_s = time.perf_counter() - t0
    if tool.lazy:
        # torch.compile compiles on the first call, separately for inference and grad mode:
        # make that call in the task's own mode, then subtract what a steady call costs.
        prepared = tasks.prepare_task("fwd" if spec.task != "inference" else "inference",
                                      compiled, example, diff, 0, who)
        with prepared.context():
            t0 = time.perf_counter()
            prepared.timed()
            _sync(device)
            first = time.perf_counter() - t0
            steady = []
            for _ in range(_STEADY_CALLS):
                t0 = time.perf_counter()
                prepared.timed()
                _sync(device)
                steady.append(time.perf_counter() - t0)
        compile_s += max(0.0, first - sorted(steady)[len(steady) // 2])
    return compiled, compile_s


def _run_config(spec: CellSpec, model: ResolvedModel, name: str, config: tuple[Any, ...],
                compiled: Callable[..., Any], tool_lazy: bool, device: str, who: str,
                clock: measure.TimeLoops, loops: dict[str, int],
                after_value: Callable[[], None] | None) -> ConfigResult:
    numel = sum(a.numel() for a in config if isinstance(a, torch.Tensor))
    common: dict[str, Any] = {"config": name, "numel": numel, "date": now_iso()}
    if model.skip is not None:
        reason = model.skip(spec.task, name)
        if reason:
            return ConfigResult(status=CellStatus.SKIPPED, reason=str(reason), **common)
    phase = _enter("prep", name)
    prepared: tasks.PreparedTask | None = None
    args: tuple[Any, ...] | None = None
    try:
        diff = tasks.differentiable_indices(config, model.diff_args)
        if spec.task != "inference" and not diff:
            return ConfigResult(status=CellStatus.SKIPPED, reason=f"config {name} has no "
                                "floating-point tensor argument to differentiate", **common)
        ref_args = tasks.to_reference_args(config)
        ref_who = f"{model.name}_pytorch (the reference)"
        if spec.task == "jacobian":
            ref_outs = tasks.flatten_output(model.reference(*ref_args), ref_who)
            entries = tasks.jacobian_elements(ref_outs, ref_args, diff)
            if entries > spec.jacobian_max_elements:
                return ConfigResult(
                    status=CellStatus.SKIPPED, reason=f"the Jacobian has {entries} entries, "
                    f"over the limit of {spec.jacobian_max_elements}", **common)
        measure.reset_peak_rss()
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        cot_seed = (spec.seed * 1_000_003 + zlib.crc32(name.encode())) % 2**63
        t0 = time.perf_counter()
        args = tasks.to_device_args(config, device)
        prepared = tasks.prepare_task(spec.task, compiled, args, diff, cot_seed, who)
        if tool_lazy:
            # A lazy compiler compiles again for each new shape on the first call: that is
            # part of getting the config ready, not of its check or of its timing.
            with prepared.context():
                prepared.timed()
        _sync(device)
        prep_s = time.perf_counter() - t0

        phase = _enter("check", name)
        ref_value = tasks.task_value(spec.task, model.reference, ref_args, diff, cot_seed,
                                     ref_who)
        got = tasks.task_value(spec.task, compiled, args, diff, cot_seed, who)
        dtype = next((a.dtype for a in config if isinstance(a, torch.Tensor)
                      and a.is_floating_point()), torch.float32)
        rtol, atol = check.tolerance_for(dtype, model.tolerances)
        what = {"inference": "output", "fwd": "output", "bwd": "gradient",
                "jacobian": "jacobian"}[spec.task]
        result = check.compare_values(got, ref_value, what, rtol, atol)
        del got, ref_value
        status = CellStatus.OK if result.passed else CellStatus.INCORRECT
        reason = "" if result.passed else f"{what} differs from the float64 reference: " \
                                          f"{result.detail}"
        common.update(check=result, prep_s=prep_s, status=status, reason=reason,
                      phase="check" if not result.passed else "")
        if spec.check_only:
            common["peak_rss_bytes"] = measure.peak_rss_bytes()
            return ConfigResult(**common)

        phase = _enter("run", name)
        t0 = time.perf_counter()
        m = measure.measure_values(prepared.timed, clock, values=spec.values,
                                   warmups=spec.warmups, min_time=spec.min_time,
                                   loops=loops.get(name), context=prepared.context,
                                   after_value=after_value)
        duration = time.perf_counter() - t0
        peak_cuda = torch.cuda.max_memory_allocated() if device == "cuda" else None
        return ConfigResult(values=tuple(m.values), warmups=tuple(m.warmups), loops=m.loops,
                            cuda_event_values=tuple(m.device_values), duration_s=duration,
                            peak_rss_bytes=measure.peak_rss_bytes(), peak_cuda_bytes=peak_cuda,
                            **common)
    except Exception as exc:
        # What the check found (and prep time) stays; the status is the failure's.
        for key in ("status", "reason", "phase"):
            common.pop(key, None)
        return ConfigResult(status=_status_for(exc), phase=phase,
                            reason=f"{describe_exception(exc)}{_where(exc)}", **common)
    finally:
        prepared = args = None  # noqa: F841 -- drop the graph before the next config
        _teardown(device)


def run_cell(spec: CellSpec, clock: measure.TimeLoops | None = None,
             on_config: Callable[[CellResult], None] | None = None,
             after_value: Callable[[], None] | None = None) -> CellResult:
    """Run every config of one cell in this process; never raises for anything the
    definitions, the tool or the inputs do: that becomes the result's status.
    `on_config` is handed the result so far after each config, so that a crash or a kill
    later in the cell loses nothing already measured. `after_value` is called after every
    timed warmup and value, outside the clock (where `ab` hands the turn over)."""
    t_start = time.perf_counter()
    if spec.affinity:
        # Pinned: one intra-op thread per CPU given, so threads never share a core.
        os.sched_setaffinity(0, spec.affinity)
        torch.set_num_threads(len(spec.affinity))
    metadata = machine_info()
    phase = _enter("import")
    try:
        try:
            tool, device = load_tool(spec.tool, spec.tool_plugins)
        except KeyError:
            return CellResult.for_spec(spec, CellStatus.FAILED, f"unknown tool {spec.tool!r}",
                                       "import")
        if device == "cuda" and not torch.cuda.is_available():
            return CellResult.for_spec(spec, CellStatus.SKIPPED,
                                       "CUDA is not available to torch on this machine", "import")
        _preload(_PRELOAD_ALWAYS + (_PRELOAD_FOR_COMPILERS if tool.lazy else ()))
        metadata.update(torch_info(device))
        model = resolve_model(import_definition_module(spec.module_path), spec.model)
        import_s = time.perf_counter() - t_start
        chosen = model.function_for(tool.source)
        if chosen is None:
            return CellResult.for_spec(
                spec, CellStatus.SKIPPED, f"{model.module_path} defines no "
                f"{model.name}_pytorch_nice for tool {spec.tool}", "import", metadata=metadata)
        who, fn = chosen
        # Everything imported so far lives as long as the process: keep it out of the
        # collections that measure_values and teardown make (each would otherwise walk
        # torch's millions of objects, ~0.3 s).
        gc.freeze()
        phase = _enter("configs")
        configs = load_configs(model, spec.seed)
        phase = _enter("compile")
        example = tasks.to_device_args(configs[0][1], device)
        diff0 = tasks.differentiable_indices(example, model.diff_args)
        compiled, measured_compile_s = _compile(spec, tool, fn, example, device, diff0,
                                                f"{spec.tool} build of {who}")
        compile_s = measured_compile_s if tool.compiles else None
        del example
        clock = clock or (measure.cuda_clock() if device == "cuda" else measure.cpu_clock())
        loops = dict(spec.loops)
        done: list[ConfigResult] = []
        for name, config in configs:
            done.append(_run_config(spec, model, name, config, compiled, tool.lazy, device,
                                    f"{spec.tool} build of {who}", clock, loops,
                                    after_value))
            if on_config is not None:
                on_config(CellResult.for_spec(spec, CellStatus.OK, compile_s=compile_s,
                                              import_s=import_s, configs=tuple(done),
                                              metadata=metadata))
        return CellResult.for_spec(spec, CellStatus.OK, compile_s=compile_s, import_s=import_s,
                                   configs=tuple(done), metadata=metadata,
                                   wall_s=time.perf_counter() - t_start)
    except (DefinitionError, tasks.OutputError) as exc:
        return CellResult.for_spec(spec, CellStatus.FAILED, str(exc), phase, metadata=metadata)
    except Exception as exc:
        return CellResult.for_spec(spec, _status_for(exc), f"{describe_exception(exc)}{_where(exc)}",
                                   phase, metadata=metadata)


def _write_atomic(path: str, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fp:
        json.dump(data, fp)
    os.replace(tmp, path)


def main(spec_path: str, result_path: str) -> int:
    """Run the cell described in `spec_path` and write its CellResult to `result_path`."""
    with open(spec_path, encoding="utf-8") as fp:
        spec = CellSpec.from_dict(json.load(fp))
    cache = None
    if spec.compile_cache == "cold":
        # Fresh, empty compiler caches make every compile a true cold compile.
        cache = tempfile.mkdtemp(prefix="kscperf-cold-cache-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    global _phase_path
    _phase_path = phase_path(result_path)
    turns = None
    if spec.turns:
        turns = Turns(spec.turns[0], spec.turns[1], spec.turn_wait_s)
        turns.take()
    try:
        result = run_cell(spec, on_config=lambda partial: _write_atomic(
            partial_result_path(result_path), partial.to_dict()),
            after_value=turns.after_value if turns is not None else None)
        if turns is not None:
            result = dataclasses.replace(result, metadata={
                **result.metadata, "lockstep_unpaired_values": turns.unpaired_values})
        _write_atomic(result_path, result.to_dict())
    finally:
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
    return 0


def _serve_child(request: dict[str, Any], protocol_fds: tuple[int, int]) -> None:
    try:
        os.setsid()
        for fd in protocol_fds:
            os.close(fd)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        code = main(request["spec"], request["result"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 70
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def serve(preload_compilers: bool = True) -> int:
    """The fork server loop: one JSON request per stdin line ({"spec", "result", "log"});
    answers {"pid"} when the child starts and {"pid", "status", "maxrss_kb"} when it ends.
    `preload_compilers` imports torch.compile's machinery too, for plans that use it."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    # Anything a library prints must not land in the protocol stream.
    os.dup2(2, 1)
    reader = os.fdopen(proto_in, "r", encoding="utf-8")

    def reply(obj: dict[str, Any]) -> None:
        os.write(proto_out, (json.dumps(obj) + "\n").encode())

    _preload(_PRELOAD_ALWAYS + (_PRELOAD_FOR_COMPILERS if preload_compilers else ()))
    # Children inherit these objects; frozen, their collections skip them and their pages
    # stay shared instead of being copied when the collector touches them.
    gc.collect()
    gc.freeze()
    reply({"ready": True, "pid": os.getpid()})
    for line in reader:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _serve_child(request, (proto_in, proto_out))
        reply({"pid": pid})
        _, status, rusage = os.wait4(pid, 0)
        reply({"pid": pid, "status": status, "maxrss_kb": rusage.ru_maxrss})
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"] and len(sys.argv) <= 3:
        sys.exit(serve(preload_compilers=sys.argv[2:] != ["--no-compilers"]))
    if len(sys.argv) != 3:
        sys.stderr.write("usage: python -m kscperf.worker SPEC.json RESULT.json | "
                         "--serve [--no-compilers]\n")
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
