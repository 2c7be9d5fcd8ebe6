"""What only a CUDA device can show: the CUDA clock, peak CUDA memory and teardown, out of
memory then the next config, fork workers on CUDA, model-defined CUDA tools. Every test is
marked `needs_cuda` (skipped with the reason elsewhere, conftest.py); tools/gpu-check runs
them on a GPU machine, after the shipped suite, whose `compiled_cuda` cells show that
torch.compile works in a forked CUDA worker."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest
import torch

from kscperf.gpukit import gpucheck
from kscperf.orchestrator.launch import ForkLauncher
from kscperf.spec import CellResult, CellSpec
from kscperf.worker import gpuprobe, measure

from runner_testing import BENCH_DEFS, FIXTURES, QUICK, cli, explain, load_doc, statuses

pytestmark = pytest.mark.needs_cuda

RELU3 = str(BENCH_DEFS / "relu3.py")
GMM = str(BENCH_DEFS / "gmm.py")


def test_cuda_clock_times_device_work_and_waits_for_it() -> None:
    a = torch.randn(2048, 2048, device="cuda")
    wall, device = measure.cuda_clock()(lambda: a @ a, 20)
    # The loop is over only when the device is done: nothing is left queued.
    assert torch.cuda.current_stream().query()
    assert device is not None and 0 < device <= wall * 1.01, (wall, device)
    m = measure.measure_values(lambda: a @ a, measure.cuda_clock(), values=3, warmups=1,
                               min_time=0.005)
    assert len(m.device_values) == len(m.values) == 3
    assert all(0 < d <= v * 1.01 for d, v in zip(m.device_values, m.values))


def _cells(path: str, model: str, tasks: tuple[str, ...]) -> list[dict[str, str]]:
    return [{"module_path": path, "model": model, "tool": "pt_cuda", "task": task}
            for task in tasks]


def test_peak_cuda_memory_is_the_timed_calls_as_a_plain_script_measures_them() -> None:
    cells = _cells(RELU3, "vrelu3", ("inference", "fwd")) + _cells(GMM, "gmm", ("fwd",))
    levels = gpuprobe.teardown_levels(cells)
    plain = gpuprobe.plain_peaks(cells)
    (peak, _), table = gpucheck.judge_memory(levels, plain)
    assert peak.status is gpucheck.Status.PASS, (peak, table)
    for row in table:
        assert row["kscperf_peak_bytes"] > 0


def test_teardown_returns_cuda_memory_over_several_configs() -> None:
    levels = gpuprobe.teardown_levels(_cells(GMM, "gmm", ("inference", "fwd", "bwd")))
    for cell in levels:
        assert len(cell["configs"]) == 4 and cell["status"] == "ok", cell
        for c in cell["configs"]:
            assert c["allocated_after_bytes"] == cell["baseline_bytes"], (cell["task"], c)


@pytest.mark.integration
def test_out_of_memory_is_oom_and_the_next_config_runs(tmp_path: Path) -> None:
    out = tmp_path / "oom.json"
    proc = cli(FIXTURES / "cuda" / "oomprobe.py", "--tools", "pt_cuda", "--tasks",
               "inference", *QUICK, "-o", out)
    assert proc.returncode == 1, explain(proc)  # an oom cell is a bad exit
    cells = {c["config"]: c for c in load_doc(out)["kscperf"]["cells"]}
    assert cells["fits"]["status"] == "ok"
    assert cells["too_big"]["status"] == "oom", cells["too_big"]
    assert cells["fits_after"]["status"] == "ok", cells["fits_after"]


@pytest.mark.integration
def test_fork_server_never_initialises_cuda_and_its_child_computes_on_cuda(
        tmp_path: Path) -> None:
    spec_path, result_path = tmp_path / "spec.json", tmp_path / "result.json"
    spec = CellSpec(model="vrelu3", tool="pt_cuda", task="fwd", module_path=RELU3, values=2,
                    warmups=0, min_time=0.001)
    spec_path.write_text(json.dumps(spec.to_dict()))
    launcher = ForkLauncher()  # torch.compile's modules preloaded, as for the suite
    try:
        outcome = launcher.launch(str(spec_path), str(result_path), str(tmp_path / "log"),
                                  timeout_s=120)
        (zygote,) = [p for p in psutil.Process().children()
                     if "--serve" in p.cmdline()]
        handles = gpucheck.cuda_handles(zygote.pid)
    finally:
        launcher.close()
    assert outcome.exit_code == 0, (tmp_path / "log").read_text()
    result = CellResult.from_dict(json.loads(result_path.read_text()))
    assert result.status.value == "ok", result.reason
    assert all(c.check is not None and c.check.passed for c in result.configs)
    assert result.metadata.get("gpu_name"), result.metadata
    assert handles == [], f"the fork server holds {handles}"
    # The probe sees a process that did initialise CUDA: this one.
    torch.cuda.init()
    assert gpucheck.cuda_handles(os.getpid())


@pytest.mark.integration
def test_model_defined_cuda_tools_build_and_run(tmp_path: Path) -> None:
    out = tmp_path / "manual.json"
    proc = cli(RELU3, "--tools", "manual_cuda,manual_cuda_transfer", "--tasks", "fwd,bwd",
               *QUICK, "-o", out, timeout=600)
    assert proc.returncode == 0, explain(proc)
    doc = load_doc(out)
    for tool in ("manual_cuda", "manual_cuda_transfer"):
        for task in ("fwd", "bwd"):
            assert statuses(doc, "vrelu3", tool, task) == {"ok"}, (tool, task)

