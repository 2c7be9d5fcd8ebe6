"""Tests of kscperf.worker.cell: `run_cell`, the worker's unit, run for real in this process on
the fixture definition modules (tests/fixtures/defs), with real torch on tiny inputs and
the real CPU clock (except where a fake clock is the point)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from kscperf.errors import CellStatus
from kscperf.spec import CellResult, CellSpec
from kscperf.worker import cell as worker
from kscperf.worker.cell import main, run_cell

from runner_testing import DEFS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit.script

TOY = str(DEFS / "toy.py")
EXTRAS = str(DEFS / "extras.py")


def spec(model: str, tool: str, task: str, path: str, **kw: Any) -> CellSpec:
    fields: dict[str, Any] = dict(values=3, warmups=1, min_time=0.001)
    fields.update(kw)
    return CellSpec(model=model, tool=tool, task=task, module_path=path, **fields)


def by_config(result: CellResult) -> dict[str, Any]:
    return {c.config: c for c in result.configs}


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


@pytest.mark.parametrize("tool", ["pt", "ptnice", "ts"])
@pytest.mark.parametrize("task", ["inference", "fwd", "bwd", "jacobian"])
def test_ok_cell_has_everything(tool: str, task: str) -> None:
    result = run_cell(spec("toy", tool, task, TOY))
    assert result.status == CellStatus.OK, result.reason
    assert result.worst_status() == CellStatus.OK
    assert (result.model, result.tool, result.task, result.process_index) == (
        "toy", tool, task, 0)
    if tool == "ts":
        assert result.compile_s is not None and result.compile_s > 0
    else:
        assert result.compile_s is None  # pt and ptnice run the function as it is
    assert result.import_s is not None and result.import_s >= 0
    assert result.wall_s is not None and result.wall_s > 0
    assert result.metadata["torch_version"] == torch.__version__
    assert result.metadata["hostname"]
    assert [c.config for c in result.configs] == ["8", "3x4"]
    assert [c.numel for c in result.configs] == [8, 12]
    for c in result.configs:
        assert c.status == CellStatus.OK and c.reason == ""
        assert len(c.values) == 3 and all(v > 0 for v in c.values)
        assert is_power_of_two(c.loops)
        assert c.values[0] * c.loops >= 0.001 * 0.25  # calibrated to about min_time
        assert len(c.warmups) >= 2  # calibration, then one warmup at the chosen loops
        assert c.warmups[-1][0] == c.loops
        assert c.prep_s is not None and c.prep_s > 0
        assert c.peak_rss_bytes is not None and c.peak_rss_bytes > 50 * 2**20
        assert c.duration_s is not None and c.duration_s > 0
        assert c.check is not None and c.check.passed
        assert c.check.what == {"inference": "output", "fwd": "output", "bwd": "gradient",
                                "jacobian": "jacobian"}[task]
        assert (c.check.rtol, c.check.atol) == (1e-4, 1e-5)  # float32 inputs
        assert c.check.max_abs_err < 1e-5
        assert c.peak_cuda_bytes is None and c.cuda_event_values == ()
    # The machine-speed canary, just before the first config's values and after the last's.
    assert [p.when for p in result.canary] == ["before", "after"]
    for probe in result.canary:
        assert [name for name, _ in probe.seconds] == [
            "python_loop", "transcendental", "matmul", "memory_copy"]
        assert all(0 < s < 0.1 for _, s in probe.seconds)
    assert result.canary[0].at[:19] <= result.configs[0].date <= result.canary[1].at[:19]


def test_result_survives_json() -> None:
    result = run_cell(spec("toy", "pt", "bwd", TOY))
    assert CellResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_config_names_and_extras_from_the_module() -> None:
    result = run_cell(spec("scaled", "pt", "bwd", EXTRAS))
    configs = by_config(result)
    assert list(configs) == ["small", "large"]
    assert [c.numel for c in result.configs] == [12, 80]  # x and w; the float is no tensor
    for c in result.configs:
        assert c.status == CellStatus.OK
        assert (c.check.rtol, c.check.atol) == (1e-3, 1e-4)  # scaled_tolerances


def test_skip_hook_gives_skipped_with_its_reason() -> None:
    result = run_cell(spec("scaled", "pt", "jacobian", EXTRAS))
    configs = by_config(result)
    assert configs["small"].status == CellStatus.OK
    assert configs["large"].status == CellStatus.SKIPPED
    assert configs["large"].reason == "jacobian only on the small config"
    assert configs["large"].values == () and configs["large"].check is None
    # the Jacobian is over x only (scaled_diff_args): a 6 x 6 diagonal
    assert configs["small"].check.passed
    assert result.worst_status() == CellStatus.SKIPPED


def test_jacobian_size_limit_gives_skipped_with_reason() -> None:
    result = run_cell(spec("toy", "pt", "jacobian", TOY, jacobian_max_elements=100))
    configs = by_config(result)
    assert configs["8"].status == CellStatus.OK  # 8 x 8 = 64 entries
    assert configs["3x4"].status == CellStatus.SKIPPED
    assert configs["3x4"].reason == "the Jacobian has 144 entries, over the limit of 100"
    assert configs["3x4"].values == ()


def test_no_nice_version_gives_skipped_for_ptnice() -> None:
    result = run_cell(spec("scaled", "ptnice", "fwd", EXTRAS))
    assert result.status == CellStatus.SKIPPED
    assert result.configs == ()
    assert "defines no scaled_pytorch_nice for tool ptnice" in result.reason
    assert EXTRAS in result.reason


def test_compilers_fall_back_to_the_reference() -> None:
    result = run_cell(spec("scaled", "ts", "bwd", EXTRAS))
    assert result.status == CellStatus.OK, result.reason
    assert all(c.status == CellStatus.OK for c in result.configs)


def test_ts_on_an_unscriptable_source_is_unsupported() -> None:
    result = run_cell(spec("noscript", "ts", "fwd", str(DEFS / "noscript.py")))
    assert result.status == CellStatus.UNSUPPORTED
    assert result.phase == "compile"
    assert "torch.jit.script cannot compile noscript" in result.reason
    assert result.configs == ()
    # the same model is fine on the tools that do not script it
    assert run_cell(spec("noscript", "pt", "fwd", str(DEFS / "noscript.py"))).worst_status() \
        == CellStatus.OK


@pytest.mark.parametrize("task, what", [("inference", "output"), ("bwd", "gradient"),
                                        ("jacobian", "jacobian")])
def test_wrong_values_are_incorrect_with_max_errors(task: str, what: str) -> None:
    result = run_cell(spec("wrong", "ptnice", task, str(DEFS / "wrong.py")))
    (c,) = result.configs
    assert c.status == CellStatus.INCORRECT
    assert result.worst_status() == CellStatus.INCORRECT
    assert c.phase == "check"
    assert c.check is not None and not c.check.passed and c.check.what == what
    assert c.check.max_rel_err == pytest.approx(1e-2, rel=1e-3)  # 3.03 x where 3 x is right
    assert c.check.max_abs_err > 0
    assert c.reason.startswith(f"{what} differs from the float64 reference: tensor 0: ")
    assert "out of tolerance" in c.reason
    assert len(c.values) == 3  # still timed
    right = run_cell(spec("wrong", "pt", task, str(DEFS / "wrong.py")))
    assert right.worst_status() == CellStatus.OK


def test_check_only_gives_no_values() -> None:
    result = run_cell(spec("toy", "pt", "bwd", TOY, check_only=True))
    for c in result.configs:
        assert c.status == CellStatus.OK
        assert c.check is not None and c.check.passed
        assert c.values == () and c.warmups == () and c.loops == 0
        assert c.peak_rss_bytes is not None and c.peak_rss_bytes > 0
        assert c.prep_s is not None
    assert result.canary == ()  # nothing timed, no machine speed to know


def test_check_only_still_reports_incorrect() -> None:
    result = run_cell(spec("wrong", "ptnice", "fwd", str(DEFS / "wrong.py"), check_only=True))
    (c,) = result.configs
    assert c.status == CellStatus.INCORRECT and c.values == ()


def test_given_loops_skip_calibration() -> None:
    result = run_cell(spec("toy", "pt", "fwd", TOY, loops=(("8", 4),), warmups=2))
    configs = by_config(result)
    assert configs["8"].loops == 4
    assert configs["8"].warmups[0][0] == 4 and len(configs["8"].warmups) == 2
    assert len(configs["3x4"].warmups) > 2  # not given: calibrated


@pytest.mark.parametrize("tool", ["pt", "ts"])
def test_named_configs_alone_are_run(tool: str) -> None:
    """`ab --until-resolved` times a cell's open configs alone; a compiler still takes the
    first config as its example."""
    named = spec("toy", tool, "bwd", TOY, configs=("3x4",))
    assert CellSpec.from_dict(json.loads(json.dumps(named.to_dict()))) == named
    result = run_cell(named)
    assert result.status == CellStatus.OK, result.reason
    assert [c.config for c in result.configs] == ["3x4"]
    assert result.configs[0].values and result.configs[0].check.passed


def test_injected_clock_is_used() -> None:
    seen: list[int] = []

    def clock(fn: Callable[[], Any], loops: int) -> tuple[float, float | None]:
        seen.append(loops)
        fn()
        return loops * 0.002, None

    result = run_cell(spec("toy", "pt", "inference", TOY, min_time=0.01, values=2,
                           warmups=0), clock=clock)
    for c in result.configs:
        assert c.loops == 8  # 8 * 2 ms >= 10 ms > 4 * 2 ms
        assert c.values == (pytest.approx(0.002),) * 2
    assert seen == [1, 4, 8, 8, 8, 8] * 2  # calibration (8 confirmed), then 2 values


def test_configs_that_raise_fail_naming_the_function_and_module() -> None:
    path = str(DEFS / "broken.py")
    result = run_cell(spec("brk", "pt", "fwd", path))
    assert result.status == CellStatus.FAILED
    assert result.phase == "configs"
    assert f"brk_bench_configs() in {path} raised ValueError: boom in the configs" \
        in result.reason
    assert "(at broken.py:" in result.reason


def test_where_points_into_a_module_inside_a_folder_named_kscperf(tmp_path: Path) -> None:
    # CI checks the project out into .../kscperf/kscperf: its modules are still the user's
    checkout = tmp_path / "kscperf" / "defs"
    checkout.mkdir(parents=True)
    path = checkout / "broken.py"
    path.write_text((DEFS / "broken.py").read_text())
    result = run_cell(spec("brk", "pt", "fwd", str(path)))
    assert result.reason.endswith("(at broken.py:11 in brk_bench_configs)")


def test_config_names_of_the_wrong_length_fail() -> None:
    result = run_cell(spec("mism", "pt", "fwd", str(DEFS / "broken.py")))
    assert result.status == CellStatus.FAILED
    assert "mism_config_names has 2 names for 1 configs" in result.reason


def test_module_that_fails_to_import(tmp_path: Path) -> None:
    path = tmp_path / "importfail.py"
    path.write_text("import torch\nraise ImportError('needs knossos')\n"
                    "def f_bench_configs(): yield torch.ones(1)\ndef f_pytorch(x): return x\n")
    result = run_cell(spec("f", "pt", "fwd", str(path)))
    assert result.status == CellStatus.FAILED
    assert result.phase == "import"
    assert str(path) in result.reason and "ImportError: needs knossos" in result.reason


def test_reference_returning_a_non_tensor_fails_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "notensor.py"
    path.write_text("import torch\ndef nt_bench_configs(): yield torch.ones(2)\n"
                    "def nt_pytorch(x): return float(x.sum())\n")
    result = run_cell(spec("nt", "pt", "inference", str(path)))
    (c,) = result.configs
    assert c.status == CellStatus.FAILED
    assert "nt_pytorch (the reference) returned float, not a tensor" in c.reason


def test_exception_in_the_tool_is_failed_with_where(tmp_path: Path) -> None:
    path = tmp_path / "raising.py"
    path.write_text("import torch\ndef r_bench_configs(): yield torch.ones(2)\n"
                    "def r_pytorch(x): return x * 2\n"
                    "def r_pytorch_nice(x):\n    raise KeyError('lost')\n")
    result = run_cell(spec("r", "ptnice", "fwd", str(path)))
    (c,) = result.configs
    assert c.status == CellStatus.FAILED and c.phase == "check"
    assert c.reason == "KeyError: 'lost' (at raising.py:5 in r_pytorch_nice)"


def test_unknown_tool_is_failed() -> None:
    result = run_cell(spec("toy", "nope", "fwd", TOY))
    assert result.status == CellStatus.FAILED
    assert result.reason == "unknown tool 'nope'"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_cuda_tool_without_cuda_is_skipped() -> None:
    result = run_cell(spec("toy", "pt_cuda", "fwd", TOY))
    assert result.status == CellStatus.SKIPPED
    assert result.reason == "CUDA is not available to torch on this machine"


def test_inputs_follow_the_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "inputs.log"
    monkeypatch.setenv("KSCPERF_TEST_INPUT_LOG", str(log))
    path = str(DEFS / "seeded.py")
    torch.manual_seed(99)  # whatever the state before, the worker seeds
    run_cell(spec("seeded", "pt", "fwd", path, seed=0, check_only=True))
    run_cell(spec("seeded", "ptnice", "fwd", path, seed=0, check_only=True))
    run_cell(spec("seeded", "pt", "fwd", path, seed=1, check_only=True))
    lines = [line.split() for line in log.read_text().splitlines()]
    sums = [(index, float(s)) for _, index, s in lines]
    assert len(sums) == 6
    assert sums[0:2] == sums[2:4]  # same seed: same inputs, whatever the tool
    assert sums[4] != sums[0] and sums[5] != sums[1]
    assert all(math.isfinite(s) for _, s in sums)


def record_phases(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The phase notes run_cell makes (what the orchestrator reads when a worker dies)."""
    seen: list[tuple[str, str]] = []
    enter = worker._enter

    def spy(phase: str, config: str = "") -> str:
        seen.append((phase, config))
        return enter(phase, config)

    monkeypatch.setattr(worker, "_enter", spy)
    return seen


def test_phases_are_noted_as_each_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = record_phases(monkeypatch)
    run_cell(spec("toy", "pt", "bwd", TOY))
    assert seen == [("import", ""), ("configs", ""), ("compile", ""),
                    ("prep", "8"), ("check", "8"), ("run", "8"), ("recheck", "8"),
                    ("prep", "3x4"), ("check", "3x4"), ("run", "3x4"), ("recheck", "3x4")]
    seen.clear()
    run_cell(spec("toy", "pt", "fwd", TOY, check_only=True))
    assert [p for p, _ in seen] == ["import", "configs", "compile", "prep", "check",
                                    "prep", "check"]
    seen.clear()
    run_cell(spec("scaled", "pt", "jacobian", EXTRAS))  # its skip hook skips "large"
    assert seen[3:] == [("prep", "small"), ("check", "small"), ("run", "small"),
                        ("recheck", "small")]


def test_worker_main_reads_a_spec_and_writes_a_result(tmp_path: Path) -> None:
    spec_path, result_path = tmp_path / "spec.json", tmp_path / "result.json"
    s = spec("toy", "pt", "inference", TOY, process_index=2)
    spec_path.write_text(json.dumps(s.to_dict()))
    assert main(str(spec_path), str(result_path)) == 0
    result = CellResult.from_dict(json.loads(result_path.read_text()))
    assert result.name == "toy/pt/inference" and result.process_index == 2
    assert result.worst_status() == CellStatus.OK


def test_a_timed_configs_peak_is_its_timed_calls_not_its_check() -> None:
    path = str(DEFS / "bigref.py")
    (timed,) = run_cell(spec("bigref", "pt", "inference", path, values=1)).configs
    (checked,) = run_cell(spec("bigref", "pt", "inference", path, check_only=True)).configs
    assert timed.status == checked.status == CellStatus.OK
    assert timed.peak_rss_bytes is not None and checked.peak_rss_bytes is not None
    # The check's float64 copies (some 300 MiB) are in the check-only peak, not the timed one.
    assert timed.peak_rss_bytes < checked.peak_rss_bytes - 128 * 2**20
