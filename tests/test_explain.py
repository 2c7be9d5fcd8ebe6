"""Tests of `--explain`: the worker's profiling pass (kscperf.worker.opprofile, real torch in
this process), the op diff (kscperf.compare.explain) on profiles built here, its test
(stats.compare_means), and the CLI for real: run --explain twice, compare --explain, and
ab --explain, on tests/fixtures/explain."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from kscperf.compare.explain import explain_rows, normalised_op
from kscperf.errors import CellStatus
from kscperf.results.files import LoadedResults
from kscperf.spec import CellResult, CellSpec, ConfigResult, OpProfile, OpRow
from kscperf.stats.core import compare_means
from kscperf.worker.cell import run_cell

from runner_testing import FIXTURES, cli, load_doc

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit.script

FIXTURE = str(FIXTURES / "explain" / "explain.py")
NAME = "explain/pt/inference/256"


# -- the test -------------------------------------------------------------------------------

def test_a_difference_within_the_margin_is_never_significant() -> None:
    base, new = [10.0, 10.1, 9.9], [10.5, 10.6, 10.4]
    plain = compare_means(base, new)
    assert plain.delta == pytest.approx(0.5) and plain.p_value < 0.01
    assert plain.low < 0.5 < plain.high
    within = compare_means(base, new, margin=0.6)
    assert within.p_value > 0.5 and (within.low, within.high) == (plain.low, plain.high)
    assert compare_means(base, new, margin=0.1).p_value < 0.05


def test_a_side_of_zeros_and_too_few_values() -> None:
    only_new = compare_means([0.0, 0.0, 0.0], [5.0, 5.2, 4.8])
    assert only_new.delta == pytest.approx(5.0) and only_new.p_value < 0.01
    one = compare_means([1.0], [2.0, 2.1])
    assert math.isnan(one.p_value) and math.isinf(one.high)
    assert math.isnan(compare_means([], [1.0]).delta)


# -- the diff -------------------------------------------------------------------------------

def test_names_lose_their_overload_and_kernel_number() -> None:
    assert normalised_op("aten::add.Tensor") == "aten::add"
    assert normalised_op("aten::add") == "aten::add"
    assert normalised_op("cpp_fused_add_mul_0") == "cpp_fused_add_mul"
    assert normalised_op("triton_poi_fused_12") == "triton_poi_fused"
    assert normalised_op("MulBackward0") == "MulBackward0"
    assert normalised_op("graph_3_cpp_fused_exp_sin_1") == "cpp_fused_exp_sin"
    assert normalised_op("## Call CompiledFxGraph fltgjalvtb4ibm ##") == \
        normalised_op("## Call CompiledFxGraph a7x2 ##")
    assert normalised_op("Torch-Compiled Region: 1/3") == "Torch-Compiled Region: 1"


def _profile(ops: dict[str, float], scale: float, inflation: float = 1.1) -> OpProfile:
    """A process's profile of `ops` (seconds per call) on a machine `scale` times slower,
    the profiler making each call `inflation` times longer."""
    rows = tuple(OpRow(key=k, calls=1.0, self_s=v * scale * inflation) for k, v in ops.items())
    total = sum(ops.values()) * scale
    return OpProfile(iterations=20, profiled_s=total * inflation, unprofiled_s=total,
                     seconds=0.1, rows=rows)


def _results(ops: dict[str, float], scales: list[float], profiled: bool = True,
             inflation: float = 1.1) -> LoadedResults:
    runs = [CellResult(model="m", tool="pt", task="fwd", process_index=i, status=CellStatus.OK,
                       configs=(ConfigResult(config="8", status=CellStatus.OK, values=(1e-3,),
                                             op_profile=_profile(ops, s, inflation)
                                             if profiled else None),))
            for i, s in enumerate(scales)]
    return LoadedResults(path="x.json", metadata={}, benchmarks={}, runs_values={}, runs=runs)


BASE_OPS = {"aten::mm": 500e-6, "aten::sin": 150e-6, "aten::mul": 25e-6, "aten::view": 1e-6}
KEY = ("m", "pt", "fwd", "8")


def _explain(base: LoadedResults, new: LoadedResults, base_s: float, new_s: float) -> Any:
    found = explain_rows(base, new, [("m/pt/fwd/8", KEY, base_s, new_s)])
    return found[0] if found else None


def test_an_extra_op_is_named_first_only_in_new_with_its_share() -> None:
    base = _results(BASE_OPS, [1.0, 1.03, 0.98])
    new = _results({**BASE_OPS, "aten::exp.default": 90e-6}, [1.01, 0.99, 1.02])
    e = _explain(base, new, 676e-6, 766e-6)
    top = e.ops[0]
    assert (top.op, top.only_in, top.verdict) == ("aten::exp", "new", "slower")
    assert math.isnan(top.calls_base) and top.calls_new == 1.0
    assert 0.9 < top.share < 1.2 and top.q_value < 0.05
    assert [o.verdict for o in e.ops[1:]].count("slower") == 0
    assert e.processes_base == e.processes_new == 3
    assert e.overhead_base == pytest.approx(0.1)
    assert abs(e.ops[1].delta_s) >= abs(e.ops[2].delta_s)  # sorted by |delta|


def test_an_op_that_does_more_work_is_named_first() -> None:
    base = _results(BASE_OPS, [1.0, 1.02, 0.99])
    new = _results({**BASE_OPS, "aten::mm": 750e-6}, [1.01, 0.98, 1.0])
    e = _explain(base, new, 676e-6, 926e-6)
    assert (e.ops[0].op, e.ops[0].verdict, e.ops[0].only_in) == ("aten::mm", "slower", "")
    assert e.ops[0].self_s_new == pytest.approx(750e-6, rel=0.05)


def test_identical_builds_call_no_op_changed_and_small_ops_are_not_tested() -> None:
    base = _results(BASE_OPS, [1.0, 1.04, 0.97])
    new = _results(BASE_OPS, [1.02, 0.99, 1.01])
    e = _explain(base, new, 676e-6, 680e-6)
    assert all(o.verdict in ("same", "can't tell") for o in e.ops)
    view = next(o for o in e.ops if o.op == "aten::view")
    assert math.isnan(view.q_value) and view.verdict == "same"


def test_noise_too_large_is_cant_tell() -> None:
    base = _results(BASE_OPS, [0.5, 1.5, 1.0])
    new = _results(BASE_OPS, [1.6, 0.6, 1.1])
    e = _explain(base, new, 676e-6, 680e-6)
    assert next(o for o in e.ops if o.op == "aten::mm").verdict == "can't tell"


def test_the_profilers_cost_is_taken_out_of_the_ops() -> None:
    # NEW's profiler cost half a call more (and its machine ran 20 % slower while it
    # profiled): the ops are the same, and none is called changed.
    base = _results(BASE_OPS, [1.0, 1.01, 0.99], inflation=1.05)
    new = _results(BASE_OPS, [1.0, 1.02, 0.99], inflation=1.5 * 1.2)
    e = _explain(base, new, 676e-6, 676e-6)
    assert all(o.verdict in ("same", "can't tell") for o in e.ops)
    mm = next(o for o in e.ops if o.op == "aten::mm")
    assert mm.self_s_new == pytest.approx(500e-6, rel=0.03)
    assert e.overhead_new == pytest.approx(0.8)


def test_a_build_without_profiles_gets_no_explanation() -> None:
    base = _results(BASE_OPS, [1.0, 1.0], profiled=False)
    new = _results(BASE_OPS, [1.0, 1.0])
    assert _explain(base, new, 1e-3, 1e-3) is None


def test_a_config_keeps_its_profile_through_json_and_omits_none() -> None:
    profile = _profile(BASE_OPS, 1.0)
    c = ConfigResult(config="8", status=CellStatus.OK, values=(1e-3,), op_profile=profile)
    again = ConfigResult.from_dict(json.loads(json.dumps(c.to_dict())))
    assert again == c and again.op_profile is not None
    assert again.op_profile.overhead == pytest.approx(0.1)
    assert "op_profile" not in ConfigResult(config="8", status=CellStatus.OK).to_dict()


# -- the worker's pass, real torch ------------------------------------------------------------

def test_the_worker_profiles_each_config_after_its_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KSCPERF_EXPLAIN_CASE", "extra-op")
    spec = CellSpec(model="explain", tool="pt", task="inference", module_path=FIXTURE,
                    values=3, warmups=1, min_time=0.001, explain=True)
    result = run_cell(spec)
    (config,) = result.configs
    assert config.status == CellStatus.OK and len(config.values) == 3
    profile = config.op_profile
    assert profile is not None and profile.iterations >= 20
    assert profile.profiled_s > 0 and profile.unprofiled_s == pytest.approx(
        sorted(config.values)[1])
    ops = {normalised_op(r.key): r for r in profile.rows}
    assert {"aten::mm", "aten::sin", "aten::tanh", "aten::exp"} <= set(ops)
    assert ops["aten::mm"].calls == 1.0 and ops["aten::mm"].self_s > 0
    plain = run_cell(CellSpec(model="explain", tool="pt", task="inference",
                              module_path=FIXTURE, values=3, warmups=1, min_time=0.001))
    assert plain.configs[0].op_profile is None


# -- the command line -------------------------------------------------------------------------

QUICKER = ["--fast", "--processes", "3", "--values", "3", "--warmups", "1", "-q",
           "--tools", "pt", "--tasks", "inference"]


@pytest.mark.integration
def test_run_and_compare_explain_name_the_extra_op(tmp_path: Path) -> None:
    files = {}
    for case in ("base", "extra-op"):
        files[case] = tmp_path / f"{case}.json"
        proc = cli("run", FIXTURE, "--explain", *QUICKER, "--build", case, "-o", files[case],
                   env={"KSCPERF_EXPLAIN_CASE": case})
        assert proc.returncode == 0, proc.stderr
    doc = load_doc(files["extra-op"])
    assert all(c.get("op_profile") for r in doc["kscperf"]["runs"] for c in r["configs"])
    proc = cli("compare", files["base"], files["extra-op"], "--explain-all", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (row,) = [b for b in out["benchmarks"] if b["name"] == NAME]
    # Separate runs on a shared machine can move the matmul by more than the exp costs, so
    # which op comes first is truth-check's to measure in lockstep; here, what each row says.
    exp = next(r for r in row["explain"] if r["op"] == "aten::exp")
    assert (exp["only_in"], exp["calls_base"], exp["calls_new"]) == ("new", None, 1.0)
    assert exp["delta_s"] > 0 and exp["self_s_new"] > 0
    assert set(exp) >= {"op", "calls_base", "calls_new", "self_s_base", "self_s_new",
                        "delta_s", "share", "q_value", "only_in"}
    deltas = [abs(r["delta_s"]) for r in row["explain"]]
    assert deltas == sorted(deltas, reverse=True)
    assert out["explain_missing"] == []
    table = cli("compare", files["base"], files["extra-op"], "--explain-all")
    assert f"Ops of {NAME}" in table.stdout and "only in NEW" in table.stdout
    plain = cli("compare", files["base"], files["extra-op"])
    assert "Ops of" not in plain.stdout


@pytest.mark.integration
def test_files_without_profiles_compare_as_before_and_say_so(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    proc = cli("run", FIXTURE, *QUICKER, "-o", path)
    assert proc.returncode == 0, proc.stderr
    out = cli("compare", path, path, "--explain-all")
    assert out.returncode == 0, out.stderr
    assert "No op profiles in both builds for 1 of the benchmarks asked to explain" in out.stdout
    doc = json.loads(cli("compare", path, path, "--format", "json").stdout)
    assert "explain_missing" not in doc and "explain" not in doc["benchmarks"][0]


@pytest.mark.integration
def test_ab_explain_profiles_both_builds_and_prints_the_diff(tmp_path: Path) -> None:
    proc = cli("ab", FIXTURE, *QUICKER, "--explain-all", "--new-env",
               "KSCPERF_EXPLAIN_CASE=extra-op", "-o", tmp_path / "ab", "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    assert f"**Ops of {NAME}" in proc.stdout and "| aten::exp |" in proc.stdout
    for side in ("base", "new"):
        doc = load_doc(tmp_path / "ab" / f"{side}.json")
        assert all(c.get("op_profile") for r in doc["kscperf"]["runs"] for c in r["configs"])


# -- the report -------------------------------------------------------------------------------

def _with_profiles(runs: list[CellResult], extra_s: float) -> list[CellResult]:
    """Every config of `runs` given a profile: BASE_OPS, and an exp of `extra_s` if any."""
    ops = {**BASE_OPS, **({"aten::exp": extra_s} if extra_s else {})}
    out = []
    for r in runs:
        scale = 1.0 + 0.01 * r.process_index
        configs = tuple(dataclasses.replace(c, op_profile=_profile(ops, scale))
                        for c in r.configs)
        out.append(dataclasses.replace(r, configs=configs))
    return out


def test_the_report_opens_each_explained_regression_with_its_ops(tmp_path: Path) -> None:
    import synthetic
    from kscperf.results.files import load_results, write_results
    from kscperf.views.report import render_report

    kw: dict[str, Any] = dict(models=("vrelu3",), tools=("pt",), tasks=("fwd",),
                              configs=("1024",))
    paths = []
    for i, (factor, extra) in enumerate(((1.0, 0.0), (1.25, 170e-6))):
        runs = synthetic.make_runs(seed=i, factor=lambda *k, f=factor: f, **kw)
        paths.append(str(tmp_path / f"b{i}.json"))
        write_results(paths[-1], _with_profiles(runs, extra), synthetic.metadata(f"build-{i}"))
    html = render_report([load_results(p) for p in paths])
    regressions = html[html.index("<h3>Regressions"):html.index("Every benchmark")]
    assert 'class="op-diff"' in regressions and "aten::exp" in regressions
    assert "slower, only in NEW" in regressions and "Ops of vrelu3/pt/fwd/1024" in regressions


def test_history_check_and_the_dashboard_name_the_top_op_of_an_opened_regression(tmp_path: Path) -> None:
    import synthetic
    from kscperf import api, history
    from kscperf.results.files import write_results
    from kscperf.views import confirm
    from kscperf.views.historytext import format_history_check

    kw: dict[str, Any] = dict(models=("vrelu3",), tools=("pt",), tasks=("fwd",),
                              configs=("1024",), processes=5)
    files = []
    for i in range(8):
        slower = i == 7
        runs = synthetic.make_runs(seed=100 + i, factor=lambda *k, s=slower: 1.3 if s else 1.0,
                                   **kw)
        md = synthetic.metadata(f"b{i}", date=f"2024-05-{i + 1:02d}T12:00:00",
                                git_commit=f"{i:04d}" + "c" * 36)
        files.append(str(tmp_path / f"b{i}.json"))
        write_results(files[-1], _with_profiles(runs, 200e-6 if slower else 0.0), md)
    store = str(tmp_path / "store")
    api.history_add(files, store)
    check = api.history_check(store)
    assert check.failed
    text = format_history_check(check, confirm.confirm_commands, history.change_explanation)
    assert "top op: `aten::exp` +" in text and "only in NEW" in text
    assert "top op" not in format_history_check(check, confirm.confirm_commands)
    index = Path(api.build_dashboard(store, str(tmp_path / "site"))).read_text(encoding="utf-8")
    assert 'class="op-diff"' in index and "aten::exp" in index
    assert " --explain</code>" in index


def test_the_rows_agree_with_torchs_own_key_averages() -> None:
    import torch
    from torch.autograd.profiler import profile

    from kscperf.worker import opprofile

    x = torch.randn(64, 64, requires_grad=True)

    def call() -> Any:
        y = (torch.sin(x) @ x).tanh().sum() + x.sum(0).sum()
        return torch.autograd.grad(y, x)

    with profile(use_cpu=True, use_kineto=True) as prof:
        for _ in range(5):
            call()
    mine = {r.key: r for r in opprofile._rows(prof, 5)}
    theirs = prof.key_averages()
    assert set(mine) == {e.key for e in theirs}
    for e in theirs:
        assert mine[e.key].calls == pytest.approx(e.count / 5)
        assert mine[e.key].self_s == pytest.approx(e.self_cpu_time_total * 1e-6 / e.count,
                                                   abs=1e-9)
