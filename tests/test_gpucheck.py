"""The GPU proof kit's behaviour without a GPU: tools/gpu-check's one line and exit status 3,
its CPU run (the timer-agreement harness against torch.utils.benchmark, the reports), and
the judging rules of every check, on rows made to sit on either side of each target."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kscperf.gpukit import gpucheck, gpureport
from kscperf.gpukit.gpucheck import Check, Report, Status
from kscperf.results.envinfo import cuda_driver_present
from kscperf.worker import timers

from runner_testing import BENCH_DEFS, ROOT, explain

GPU_CHECK = ROOT / "tools" / "gpu-check"


def run_gpu_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GPU_CHECK), *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


@pytest.mark.integration
@pytest.mark.skipif(cuda_driver_present(), reason="this machine has an NVIDIA driver")
def test_without_a_cuda_device_it_says_so_in_one_line_and_exits_3(tmp_path: Path) -> None:
    proc = run_gpu_check("--out", str(tmp_path / "out"))
    assert proc.returncode == gpucheck.EXIT_NO_CUDA == 3, explain(proc)
    assert proc.stdout == "no CUDA device: nothing to check\n" and proc.stderr == ""
    assert not (tmp_path / "out" / "gpu-check.json").exists()


@pytest.mark.integration
def test_bad_usage_exits_2() -> None:
    proc = run_gpu_check("--device", "tpu")
    assert proc.returncode == gpucheck.EXIT_USAGE == 2, explain(proc)
    assert "Traceback" not in proc.stderr


@pytest.mark.integration
def test_a_cpu_run_prints_each_check_and_writes_both_reports(tmp_path: Path) -> None:
    proc = run_gpu_check("--device", "cpu", "--out", str(tmp_path))
    assert proc.returncode in (0, 1), explain(proc)
    doc = json.loads((tmp_path / "gpu-check.json").read_text())
    assert doc["exit_status"] == proc.returncode and doc["device"] == "cpu"
    names = [c["name"] for c in doc["checks"]]
    assert names == ["agreement", "suite", "memory-peak", "teardown", "fork-cost", "tests"]
    assert all(c["status"] == "skip" and c["summary"] == "needs a CUDA device"
               for c in doc["checks"][1:])
    rows = {r["workload"]: r for r in doc["tables"]["agreement"]}
    assert set(rows) == {"matmul", "elementwise", "small_op"}
    for row in rows.values():
        assert row["kscperf_wall"] > 0 and row["timer"] > 0 and row["reference"] == "timer"
        assert row["do_bench"] is None and row["kscperf_event"] is None
        assert row["kscperf_wall_ratio"] == pytest.approx(row["kscperf_wall"] / row["timer"])
    assert rows["small_op"]["launch_bound"] and not rows["matmul"]["launch_bound"]
    checks = [Check(c["name"], Status(c["status"]), c["summary"], c["target"])
              for c in doc["checks"]]
    printed = proc.stdout.splitlines()
    markdown = (tmp_path / "gpu-check.md").read_text()
    for check in checks:
        assert gpureport.check_line(check) in printed
        assert gpureport.check_line(check) in markdown.splitlines()
    assert doc["facts_before"]["cuda_available"] is False


@pytest.mark.integration
def test_a_section_past_its_cap_is_stopped_and_is_one_failed_line(tmp_path: Path) -> None:
    kit = gpucheck.Kit("cpu", str(tmp_path))
    kit.guarded("agreement", kit.agreement, 0.5, "quick")
    (check,) = kit.report.checks
    assert check == Check("agreement", Status.FAIL, "the agreement probe ran past its 0.5 s cap")
    assert "agreement" not in kit.report.tables


def test_the_agreement_harness_times_each_workload_with_each_timer_per_round() -> None:
    rows = timers.measure_agreement("cpu", "quick", rounds=2, min_time=0.002)
    assert [(r.workload, r.bound) for r in rows] == [
        ("matmul", "compute"), ("elementwise", "memory"), ("small_op", "launch")]
    for row in rows:
        for name in ("kscperf_wall", "timer"):
            figure = row.figures[name]
            assert len(figure.rounds_s) == 2 and all(v > 0 for v in figure.rounds_s)
            assert figure.median_s == pytest.approx(sum(figure.rounds_s) / 2)
        assert row.figures["kscperf_event"].median_s is None
        assert row.figures["kscperf_event"].unavailable == "CUDA events exist on CUDA only"
        assert row.figures["do_bench"].unavailable == "do_bench times CUDA work only"


def agreement_row(workload: str, bound: str, **medians: float) -> dict[str, Any]:
    return {"workload": workload, "bound": bound, "size": "n", "device": "cuda",
            "figures": {name: {"median_s": medians.get(name)} for name in timers.TIMERS}}


def test_agreement_is_judged_against_do_bench_and_leaves_launch_bound_workloads_out() -> None:
    close = [agreement_row("matmul", "compute", kscperf_wall=1.09e-3, kscperf_event=1.0e-3,
                           timer=2e-3, do_bench=1.0e-3),
             agreement_row("small_op", "launch", kscperf_wall=60e-6, kscperf_event=55e-6,
                           do_bench=20e-6)]
    check, table = gpucheck.judge_agreement(close)
    assert check.status is Status.PASS and "9.0%" in check.summary, check
    assert "launch-bound, reported only: small_op" in check.summary
    assert [t["reference"] for t in table] == ["do_bench", "do_bench"]
    far = [agreement_row("matmul", "compute", kscperf_wall=1.0e-3, kscperf_event=0.89e-3,
                         do_bench=1.0e-3)]
    assert gpucheck.judge_agreement(far)[0].status is Status.FAIL
    # Declared memory-bound, yet do_bench's kernel is under half the event time per call.
    idle = [agreement_row("elementwise", "memory", kscperf_wall=40e-6, kscperf_event=40e-6,
                          do_bench=15e-6),
            agreement_row("matmul", "compute", kscperf_wall=1e-3, kscperf_event=1e-3,
                          do_bench=1e-3)]
    check, table = gpucheck.judge_agreement(idle)
    assert check.status is Status.PASS and table[0]["launch_bound"], check
    cpu = [agreement_row("matmul", "compute", kscperf_wall=1.05e-3, timer=1e-3)]
    check, table = gpucheck.judge_agreement(cpu)
    assert check.status is Status.PASS and table[0]["reference"] == "timer"
    nothing = [agreement_row("matmul", "compute", kscperf_wall=1e-3)]
    assert gpucheck.judge_agreement(nothing)[0].status is Status.FAIL


def memory_cell(task: str, *configs: tuple[int, int], baseline: int = 1000,
                status: str = "ok") -> dict[str, Any]:
    return {"model": "m", "tool": "pt_cuda", "task": task, "status": status, "reason": "",
            "baseline_bytes": baseline,
            "configs": [{"config": str(i), "status": status, "reason": "",
                         "peak_cuda_bytes": peak, "allocated_after_bytes": after}
                        for i, (peak, after) in enumerate(configs)]}


def test_memory_peaks_and_teardown_are_judged_config_by_config() -> None:
    plain = [{"model": "m", "task": "fwd", "peak_bytes": [5000, 9000]}]
    (peak, teardown), table = gpucheck.judge_memory(
        [memory_cell("fwd", (5000, 1000), (9200, 1000)), memory_cell("bwd", (7000, 1000))],
        plain)
    assert peak.status is Status.PASS and teardown.status is Status.PASS, (peak, teardown)
    assert [r["ratio"] for r in table] == [1.0, pytest.approx(9200 / 9000), None]
    (peak, teardown), _ = gpucheck.judge_memory(
        [memory_cell("fwd", (5000, 1000), (10000, 1512))], plain)
    assert peak.status is Status.FAIL and "11.1%" in peak.summary
    assert teardown.status is Status.FAIL and "m/pt_cuda/fwd/1 512 bytes" in teardown.summary
    (peak, teardown), _ = gpucheck.judge_memory(
        [memory_cell("fwd", (5000, 1000), status="oom")], plain)
    assert peak.status is Status.FAIL and teardown.status is Status.FAIL


def suite_cell(tool: str, status: str, reason: str = "", config: str = "8") -> dict[str, Any]:
    return {"model": "m", "tool": tool, "task": "fwd", "config": config, "status": status,
            "reason": reason}


def test_the_suite_passes_when_every_cell_is_ok_or_skipped_with_a_reason() -> None:
    good = [suite_cell("pt_cuda", "ok"),
            suite_cell("onnxrt_cuda", "skipped", "no CUDAExecutionProvider"),
            suite_cell("ts_cuda", "unsupported", "torch.jit.script cannot script m")]
    check, table = gpucheck.judge_suite(good, planned=3, capped=False)
    assert check.status is Status.PASS and check.summary == "1 ok, 1 skipped, 1 unsupported"
    assert [t["cell"] for t in table] == ["m/onnxrt_cuda/fwd/8", "m/ts_cuda/fwd/8"]
    for cells, planned, capped in (
            (good + [suite_cell("compiled_cuda", "failed", "RuntimeError: x")], 4, False),
            (good + [suite_cell("x_cuda", "skipped")], 4, False),
            (good, 3, True),
            (good, 5, False),
            ([], None, False)):
        assert gpucheck.judge_suite(cells, planned, capped)[0].status is Status.FAIL


def test_fork_must_be_five_times_cheaper_than_spawn() -> None:
    assert gpucheck.judge_fork_cost(0.4, 3.8).status is Status.PASS
    assert gpucheck.judge_fork_cost(0.8, 3.8).status is Status.FAIL


@pytest.mark.integration
def test_each_pytest_case_becomes_a_check(tmp_path: Path) -> None:
    (tmp_path / "test_three.py").write_text(
        "import pytest\n"
        "def test_good():\n    assert True\n"
        "def test_bad():\n    assert 1 == 2, 'one is not two'\n"
        "@pytest.mark.skip(reason='needs a thing')\n"
        "def test_later():\n    pass\n")
    junit = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    f"--junitxml={junit}", str(tmp_path / "test_three.py")],
                   capture_output=True, cwd=tmp_path, timeout=120)
    checks = {c.name: c for c in gpucheck.judge_tests(str(junit))}
    assert checks["test test_good"].status is Status.PASS
    assert checks["test test_bad"].status is Status.FAIL
    assert "one is not two" in checks["test test_bad"].summary
    assert checks["test test_later"].status is Status.SKIP
    assert checks["test test_later"].summary == "needs a thing"
    (tmp_path / "empty.xml").write_text('<testsuites><testsuite name="pytest"/></testsuites>')
    (none,) = gpucheck.judge_tests(str(tmp_path / "empty.xml"))
    assert none.status is Status.FAIL


def test_every_cuda_tool_of_the_shipped_suite_is_found() -> None:
    names = gpucheck.cuda_tool_names(str(BENCH_DEFS))
    assert {"pt_cuda", "ptnice_cuda", "ts_cuda", "compiled_cuda", "manual_cuda",
            "manual_cuda_transfer"} <= set(names)
    assert all("cuda" in n for n in names) and len(names) == len(set(names))


def test_the_reports_hold_every_check_and_escape_table_cells(tmp_path: Path) -> None:
    report = Report(device="cuda", started="2026-12-01T10:00:00", budget_s=470.0,
                    facts_before={"gpu_name": "G", "gpu_memory_bytes": 141 * 2**30,
                                  "nvml": {"sm_clock_mhz": 1980, "throttle_reasons": []}},
                    facts_after={"nvml": {"unavailable": "NVML: gone"}},
                    checks=[Check("suite", Status.PASS, "3 ok", "all ok"),
                            Check("agreement", Status.FAIL, "off by 12.0%")],
                    tables={"suite": [{"cell": "a|b", "status": "skipped", "reason": "r"}]})
    md, js = gpureport.write_reports(report, str(tmp_path))
    assert json.loads(Path(js).read_text()) == report.to_dict()
    assert report.to_dict()["exit_status"] == 1
    text = Path(md).read_text()
    assert "FAIL agreement: off by 12.0%" in text.splitlines()
    assert "PASS suite: 3 ok  [target: all ok]" in text.splitlines()
    assert "| a\\|b | skipped | r |" in text.splitlines()
    assert "INFO facts: GPU G; memory 141.0 GiB" in text
    assert "INFO nvml before: SM clock 1980 MHz, throttle reasons: none" in text
    assert "INFO nvml after: NVML: gone" in text
