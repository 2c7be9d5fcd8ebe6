"""Synthetic results files for the compare and report tests: hand-made `CellResult`s whose
values are seeded random draws around known times, never measurements.

Each value is `base_s(model, tool, task, config) * factor(...) * process effect * noise`,
with a lognormal process effect (what makes processes of one build disagree) and lognormal
within-process noise, so tests know exactly which benchmarks changed and by how much.
"""

from __future__ import annotations

import math
import os
import random
from typing import Any, Callable

from kscperf.errors import CellStatus
from kscperf.results.files import write_results
from kscperf.spec import CanaryProbe, CellResult, CheckResult, ConfigResult

MODELS = ("vrelu3", "sqrl")
TOOLS = ("pt", "ptnice", "compiled")
TASKS = ("fwd", "bwd")
CONFIGS = ("1024", "16384", "262144")

Key = tuple[str, str, str, str]

# The canary's parts on a quiet synthetic machine, seconds (about this VM's).
CANARY_S = {"python_loop": 270e-6, "transcendental": 70e-6, "matmul": 10e-6,
            "memory_copy": 75e-6}


def metadata(build: str, **overrides: Any) -> dict[str, Any]:
    """Suite metadata as the runner writes it."""
    md: dict[str, Any] = {
        "build": build, "date": "2024-05-01T12:00:00", "git_commit": "0123abcd",
        "git_dirty": False, "hostname": "perf1", "cpu_model_name": "Synthetic CPU 9000",
        "cpu_count": 16, "platform": "Linux-6.1-x86_64", "python_version": "3.11.7",
        "torch_version": "2.13.0", "cuda_version": "none", "gpu_name": "none",
        "profile": "default", "processes": 3, "values": 10, "warmups": 2, "min_time": 0.02,
        "seed": 0, "torch_num_threads": 1,
    }
    md.update(overrides)
    return md


def _default_base_s(model: str, tool: str, task: str, config: str) -> float:
    tool_scale = {"pt": 1.0, "ptnice": 1.6, "compiled": 0.5}.get(tool, 1.0)
    task_scale = {"fwd": 1.0, "bwd": 2.0}.get(task, 1.5)
    model_scale = 1.0 if model == "vrelu3" else 3.0
    return 2e-7 * int(config) * tool_scale * task_scale * model_scale if config.isdigit() \
        else 1e-3 * tool_scale


def make_runs(*, seed: int, models: tuple[str, ...] = MODELS, tools: tuple[str, ...] = TOOLS,
              tasks: tuple[str, ...] = TASKS, configs: tuple[str, ...] = CONFIGS,
              processes: int = 3, values: int = 10, process_sd: float = 0.01,
              value_sd: float = 0.005,
              factor: Callable[[str, str, str, str], float] = lambda *k: 1.0,
              base_s: Callable[[str, str, str, str], float] = _default_base_s,
              status: Callable[[str, str, str, str], CellStatus] = lambda *k: CellStatus.OK,
              cell_status: Callable[[str, str, str], CellStatus | None] = lambda *k: None,
              compile_s: float | None = 2.0, rss_bytes: int = 400 * 2**20,
              numel: bool = True,
              machine: Callable[[str, str, str, int], float] = lambda *k: 1.0,
              canary: bool = True,
              prep_s: Callable[[str, str, str, int], float] = lambda *k: 1e-3,
              zygote: Callable[[str, str, str, int], str | None] = lambda *k: None
              ) -> list[CellResult]:
    """One `CellResult` per model x tool x task x process, seeded by `seed`.

    `machine(model, tool, task, process)` is how much slower the machine was while that
    process ran: it scales the process's values and its canary alike. `canary` False
    writes runs without a canary, as kscperf did before results format 2.

    `status(model, tool, task, config)` gives a config's outcome (an incorrect config keeps
    its values, a failed one has none); `cell_status(model, tool, task)`, when not None,
    makes the whole cell end before its configs with that status. `prep_s(model, tool,
    task, process)` is a process's prep time before its noise (2 %); `zygote(...)`, when not
    None, names the zygote the process was forked from, as workers record it.
    """
    rng = random.Random(seed)
    runs: list[CellResult] = []
    for model in models:
        for tool in tools:
            for task in tasks:
                whole = cell_status(model, tool, task)
                for process in range(processes):
                    if whole is not None:
                        runs.append(CellResult(model, tool, task, process, whole,
                                               reason=f"{whole.value} before configs",
                                               phase="import"))
                        continue
                    slowness = machine(model, tool, task, process)
                    effect = math.exp(rng.gauss(0.0, process_sd)) * slowness
                    configs_out = []
                    for config in configs:
                        key = (model, tool, task, config)
                        st = status(*key)
                        center = base_s(*key) * factor(*key) * effect
                        check = CheckResult(passed=st != CellStatus.INCORRECT, what="output",
                                            max_abs_err=1e-9 if st != CellStatus.INCORRECT
                                            else 0.5, max_rel_err=1e-9, rtol=1e-5, atol=1e-8)
                        timed = st in (CellStatus.OK, CellStatus.INCORRECT)
                        vals = tuple(center * math.exp(rng.gauss(0.0, value_sd))
                                     for _ in range(values)) if timed else ()
                        configs_out.append(ConfigResult(
                            config=config, status=st,
                            reason="" if st == CellStatus.OK else f"{st.value} on purpose",
                            phase="" if st == CellStatus.OK else "check",
                            values=vals, loops=16 if timed else 0,
                            prep_s=prep_s(model, tool, task, process)
                            * math.exp(rng.gauss(0.0, 0.02)),
                            check=check if timed else None,
                            peak_rss_bytes=rss_bytes + int(config) * 8 if config.isdigit()
                            else rss_bytes,
                            date="2024-05-01T12:00:00", duration_s=0.5,
                            numel=int(config) if numel and config.isdigit() else None))
                    probes = tuple(_canary_probe(rng, when, slowness)
                                   for when in ("before", "after")) if canary else ()
                    # A cell that ran its configs has its own fate ok, whatever theirs.
                    runs.append(CellResult(
                        model, tool, task, process, CellStatus.OK,
                        compile_s=(compile_s * math.exp(rng.gauss(0.0, 0.02))
                                   if tool == "compiled" and compile_s else None),
                        configs=tuple(configs_out),
                        metadata={"hostname": "perf1", "cpu_model_name": "Synthetic CPU 9000",
                                  "cpu_count": 16, "platform": "Linux-6.1-x86_64",
                                  "python_version": "3.11.7",
                                  **({"zygote": zygote(model, tool, task, process)}
                                     if zygote(model, tool, task, process) else {})},
                        canary=probes))
    return runs


def _canary_probe(rng: random.Random, when: str, slowness: float) -> CanaryProbe:
    return CanaryProbe(when, "2024-05-01T12:00:00.000", tuple(
        (part, seconds * slowness * math.exp(rng.gauss(0.0, 0.02)))
        for part, seconds in CANARY_S.items()))


def write_build(path: str, build: str, *, seed: int,
                metadata_overrides: dict[str, Any] | None = None, **kwargs: Any) -> str:
    """Write a synthetic build's results file to `path` and return `path`; `kwargs` go to
    `make_runs`."""
    write_results(path, make_runs(seed=seed, **kwargs),
                  metadata(build, **(metadata_overrides or {})))
    return path


def write_ab_folder(folder: str, base: str, new: str, *, seed: int,
                    base_metadata: dict[str, Any] | None = None,
                    new_metadata: dict[str, Any] | None = None,
                    new_factor: Callable[[str, str, str, str], float] = lambda *k: 1.0,
                    **kwargs: Any) -> str:
    """Write the folder `run-benchmarks ab -o FOLDER` would write for builds `base` and
    `new` (labels): `FOLDER/<label>.json` each, with one lockstep id and their roles. Pass
    the same `machine` (in `kwargs`) for both sides, as lockstep turns make it; `new_factor`
    scales the new build's values. Returns `folder`."""
    os.makedirs(folder)
    shared = {"lockstep_id": f"lockstep-{base}-{new}-{seed}"}
    write_build(os.path.join(folder, f"{base}.json"), base, seed=seed + 1,
                metadata_overrides={**(base_metadata or {}), **shared, "lockstep_role": "base"},
                **kwargs)
    write_build(os.path.join(folder, f"{new}.json"), new, seed=seed + 2,
                metadata_overrides={**(new_metadata or {}), **shared, "lockstep_role": "new"},
                factor=new_factor, **kwargs)
    return folder
