"""The device-side probes of `tools/gpu-check`, each run in a fresh process of its own:

    python -m kscperf.worker.gpuprobe facts OUT.json [--device cuda|cpu]
    python -m kscperf.worker.gpuprobe agreement OUT.json [--device D] [--scale S] [--rounds N]
    python -m kscperf.worker.gpuprobe memory OUT.json --cells JSON
    python -m kscperf.worker.gpuprobe plain-peak OUT.json --cells JSON

`facts`: the device and its state (name, memory, SMs, L2, TF32 settings, and through NVML
the driver, clocks, temperature and throttle reasons). `agreement`: `kscperf.worker.timers`.
`memory`: kscperf's own worker code (`cell.run_cell`, in this process) on each cell, with
the CUDA memory allocated after each config's teardown and the peak the worker recorded.
`plain-peak`: the same functions and inputs measured as a user would in a plain script
(`reset_peak_memory_stats`, one call, `max_memory_allocated`), with nothing of kscperf.
Each writes one JSON file; judging is `kscperf.gpukit.gpucheck`'s. Worker side (imports torch).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import sys
from typing import Any, Callable

import torch

from kscperf.results.fileio import write_text_atomic
from kscperf.worker import timers
from kscperf.worker.torchinfo import torch_info

__all__ = ["device_facts", "nvml_facts", "teardown_levels", "plain_peaks", "main"]

# NVML's clock-event ("throttle") reason bits, as nvml.h documents them.
_THROTTLE_REASONS = (
    (0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"))


def nvml_facts() -> dict[str, Any]:
    """Driver, clocks (MHz), temperature (°C), power (W) and throttle reasons of the first
    GPU through NVML (nvidia-ml-py), or {"unavailable": why}."""
    try:
        import pynvml
    except ImportError as exc:
        return {"unavailable": f"nvidia-ml-py does not import ({exc})"}
    try:
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            get_reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
            reasons = int(get_reasons(handle))
            driver = pynvml.nvmlSystemGetDriverVersion()
            return {
                "driver": driver.decode() if isinstance(driver, bytes) else str(driver),
                "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                "memory_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle,
                                                                 pynvml.NVML_CLOCK_MEM),
                "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle,
                                                                    pynvml.NVML_CLOCK_SM),
                "temperature_c": pynvml.nvmlDeviceGetTemperature(handle,
                                                                 pynvml.NVML_TEMPERATURE_GPU),
                "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
                "throttle_reasons": [name for bit, name in _THROTTLE_REASONS if reasons & bit],
            }
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # NVMLError and its many subclasses, a missing function
        return {"unavailable": f"NVML: {exc}"}


def device_facts(device: str) -> dict[str, Any]:
    """torch's build and, where CUDA is available and `device` is "cuda", the device: name,
    memory, capability, SM count, L2 size, TF32 settings, and NVML's facts."""
    available = bool(torch.cuda.is_available())
    facts: dict[str, Any] = {"device": device, "cuda_available": available,
                             "python_version": sys.version.split()[0]}
    facts.update(torch_info(device))
    try:
        import triton

        facts["triton_version"] = triton.__version__
    except ImportError:
        facts["triton_version"] = "none"
    if device == "cuda" and available:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        facts.update(
            cuda_device_count=torch.cuda.device_count(),
            sm_count=int(props.multi_processor_count),
            l2_cache_bytes=int(getattr(props, "L2_cache_size", 0)),
            allow_tf32_cudnn=bool(torch.backends.cudnn.allow_tf32),
            nvml=nvml_facts())
    return facts


def _warm_cuda_libraries() -> None:
    # cuBLAS and cuBLASLt workspaces come from the caching allocator, once per thread and
    # stream, and torch keeps them: the backward runs on autograd's own device thread. Made
    # here first, they count in the baseline, not as a config's leftovers.
    a = torch.ones(64, 64, device="cuda", requires_grad=True)
    bias = torch.ones(64, device="cuda")
    (torch.addmm(bias, a, a) + a @ a).sum().backward()
    torch.cuda.synchronize()
    del a, bias


def teardown_levels(cells: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Each cell ({"module_path", "model", "tool", "task"}) run by kscperf's worker code in
    this process at a short profile: per config its status, the peak CUDA memory the worker
    recorded, and the CUDA memory allocated once its teardown was over, beside the level
    before the cell (bytes)."""
    from kscperf.spec import CellSpec
    from kscperf.worker import cell as worker_cell

    _warm_cuda_libraries()
    out = []
    for cell in cells:
        baseline = torch.cuda.memory_allocated()
        levels: list[int] = []
        spec = CellSpec(model=cell["model"], tool=cell["tool"], task=cell["task"],
                        module_path=cell["module_path"], values=3, warmups=1, min_time=0.005)
        result = worker_cell.run_cell(
            spec, on_config=lambda _: levels.append(torch.cuda.memory_allocated()))
        out.append({
            **cell, "status": result.status.value, "reason": result.reason,
            "baseline_bytes": baseline,
            "configs": [{"config": c.config, "status": c.status.value, "reason": c.reason,
                         "peak_cuda_bytes": c.peak_cuda_bytes, "allocated_after_bytes": level}
                        for c, level in zip(result.configs, levels)]})
    return out


def _import_plainly(path: str, model: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_plain_{model}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"gpuprobe: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _plain_peak(fn: Callable[..., Any], args: list[Any], task: str) -> int:
    mode = torch.inference_mode if task == "inference" else contextlib.nullcontext
    with mode():
        fn(*args)  # kernels loaded, library handles made: what a first call does once
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    with mode():
        fn(*args)
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated())


def plain_peaks(cells: list[dict[str, str]]) -> list[dict[str, Any]]:
    """For each cell's model ({"module_path", "model", "task"}: inference or fwd), its
    `B_pytorch` on each config's inputs moved to CUDA, measured as a plain script would:
    the inputs held, one call after a warm-up call, `max_memory_allocated` (bytes), by
    config index. The CUDA libraries are warmed first, as `teardown_levels` warms them,
    so that both sides hold the same library workspaces."""
    _warm_cuda_libraries()
    out = []
    for cell in cells:
        module = _import_plainly(cell["module_path"], cell["model"])
        torch.manual_seed(0)
        fn = getattr(module, f"{cell['model']}_pytorch")
        declared = getattr(module, f"{cell['model']}_diff_args", None)
        peaks = []
        for config in getattr(module, f"{cell['model']}_bench_configs")():
            args = list(config) if isinstance(config, (tuple, list)) else [config]
            args = [a.to("cuda") if isinstance(a, torch.Tensor) else a for a in args]
            if cell["task"] == "fwd":
                diff = declared if declared is not None else [
                    i for i, a in enumerate(args)
                    if isinstance(a, torch.Tensor) and a.is_floating_point()]
                args = [a.detach().requires_grad_(True) if i in diff else a
                        for i, a in enumerate(args)]
            peaks.append(_plain_peak(fn, args, cell["task"]))
            del args
        out.append({**cell, "peak_bytes": peaks})
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kscperf.worker.gpuprobe",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("section", choices=("facts", "agreement", "memory", "plain-peak"))
    parser.add_argument("output")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--scale", default="full", choices=("full", "quick"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", default="[]", help="JSON list of cells")
    parser.add_argument("--threads", type=int, default=0, help="torch's threads (0: its own)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one probe and write its JSON; 0 when it wrote it."""
    args = _parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    doc: Any
    if args.section == "facts":
        doc = device_facts(args.device)
    elif args.section == "agreement":
        doc = [row.to_dict() for row in timers.measure_agreement(args.device, args.scale,
                                                                 args.rounds)]
    elif args.section == "memory":
        doc = teardown_levels(json.loads(args.cells))
    else:
        doc = plain_peaks(json.loads(args.cells))
    write_text_atomic(args.output, json.dumps(doc, indent=1), f"the {args.section} probe")
    return 0


if __name__ == "__main__":
    sys.exit(main())
