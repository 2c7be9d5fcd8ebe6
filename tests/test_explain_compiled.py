"""Tests of `--explain` for compiled tools: the instrumented second compile (its kernels named
in the profile, its compile time apart, its generated code kept compressed, the timed
module's compile panel untouched), the code diff (kscperf.compare.codediff), compare's
kernel count and the report's generated-code section, for real with torch.compile on
tests/fixtures/explain (the fusion-lost case: one fused kernel becomes two)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kscperf.compare.codediff import code_diffs, generated_kernels, kernels_in
from kscperf.compare.compilestats import KERNELS
from kscperf.errors import CellStatus
from kscperf.results.files import load_results
from kscperf.spec import CellResult, ConfigResult, OpProfile, OpRow

from runner_testing import FIXTURES, cli

FIXTURE = str(FIXTURES / "explain" / "explain.py")
NAME = "explain/compiled/inference/256"

_FUSED = """
cpp_fused_mul_sin_tanh_0 = async_compile.cpp_pybinding(['float*'], r'''
    record_graph_1_cpp_fused_mul_sin_tanh_0_("graph_1_cpp_fused_mul_sin_tanh_0", nullptr);
''')
"""
_SPLIT = ("cpp_fused_sin_0 = async_compile.cpp_pybinding(['float*'], r'''\n'''\n",
          "cpp_fused_mul_tanh_0 = async_compile.cpp_pybinding(['float*'], r'''\n'''\n")


def _run(code: tuple[str, ...], configs: int = 1) -> CellResult:
    profile = OpProfile(iterations=20, profiled_s=2e-3, unprofiled_s=1e-3, seconds=0.1,
                        rows=(OpRow("aten::mm", 1.0, 5e-4),), compile_s=1.5, code=code)
    return CellResult(model="explain", tool="compiled", task="inference", process_index=0,
                      status=CellStatus.OK, configs=tuple(
                          ConfigResult(config=f"c{i}", status=CellStatus.OK, values=(1e-3,),
                                       op_profile=profile) for i in range(configs)))


def test_generated_code_is_stored_compressed_and_read_back() -> None:
    c = _run((_FUSED * 50,)).configs[0]
    stored = c.to_dict()
    assert stored["op_profile"]["compile_s"] == 1.5
    assert len(stored["op_profile"]["code"][0]) < len(_FUSED * 50) / 5  # compressed
    assert ConfigResult.from_dict(json.loads(json.dumps(stored))) == c
    plain = _run(()).configs[0].to_dict()["op_profile"]
    assert "code" not in plain and plain["compile_s"] == 1.5


def test_kernels_are_listed_and_diffed_graph_by_graph() -> None:
    assert kernels_in(_FUSED) == ("cpp_fused_mul_sin_tanh",)
    base, new = [_run((_FUSED,), configs=2)], [_run(_SPLIT)]
    assert generated_kernels(base) == {("explain", "compiled", "inference"): 1}
    assert generated_kernels(new) == {("explain", "compiled", "inference"): 2}
    (d,) = code_diffs(base, new)
    assert (d.kernels_base, d.kernels_new, d.changed) == (1, 2, True)
    first, second = d.graphs
    assert first.kernels_new == ("cpp_fused_sin",) and second.kernels_base == ()
    assert "-cpp_fused_mul_sin_tanh_0 = " in first.diff and "+cpp_fused_sin_0 = " in first.diff
    (same,) = code_diffs(base, base)
    assert not same.changed and all(g.diff == "" for g in same.graphs)
    # The graph's number counts what the process compiled before: not a change of code.
    renumbered = _FUSED.replace("graph_1_", "graph_4_")
    assert not code_diffs(base, [_run((renumbered,))])[0].changed
    assert code_diffs(base, [_run(())]) == ()


@pytest.mark.integration
def test_a_lost_fusion_shows_in_kernels_code_and_compare(tmp_path: Path) -> None:
    files = {}
    for case in ("base", "fusion-lost"):
        files[case] = tmp_path / f"{case}.json"
        proc = cli("run", FIXTURE, "--explain", "--tools", "compiled", "--tasks", "inference",
                   "--processes", "1", "--values", "3", "--warmups", "1", "--fast", "-q",
                   "--build", case, "-o", files[case], env={"KSCPERF_EXPLAIN_CASE": case})
        assert proc.returncode == 0, proc.stderr
    for case, graphs in (("base", 1), ("fusion-lost", 2)):
        (run,) = load_results(str(files[case])).runs
        # The instrumented module compiled beside the timed one, outside its panel.
        assert run.compile_panel is not None and run.compile_panel.graphs == graphs
        assert run.compile_panel.kernels == graphs
        profile = run.configs[0].op_profile
        assert profile is not None and profile.compile_s is not None and profile.compile_s > 0
        assert len(profile.code) == graphs
        assert any(r.key.endswith("cpp_fused_sin_0") or "cpp_fused_mul_sin_tanh" in r.key
                   for r in profile.rows)  # the kernels are named in the profile
    proc = cli("compare", files["base"], files["fusion-lost"], "--explain-all",
               "--format", "json")
    out = json.loads(proc.stdout)
    (kernels,) = [c for c in out["compile"] if c["name"] == KERNELS]
    assert (kernels["base"], kernels["new"], kernels["verdict"]) == (1.0, 2.0, "more")
    assert kernels["is_regression"] is False
    (row,) = [b for b in out["benchmarks"] if b["name"] == NAME]
    only = {r["op"]: r["only_in"] for r in row["explain"]}
    assert only["cpp_fused_mul_sin_tanh"] == "base"
    assert only["cpp_fused_sin"] == only["cpp_fused_mul_tanh"] == "new"
    table = cli("compare", files["base"], files["fusion-lost"])
    assert "count kernels" in table.stdout and "not a regression by itself" in table.stdout
    report = tmp_path / "report.html"
    assert cli("report", files["base"], files["fusion-lost"], "-o", report).returncode == 0
    html = report.read_text()
    assert "Generated code (--explain)" in html and "1 → 2 kernels" in html
    assert "+cpp_fused_sin_0 = async_compile" in html
