"""Tools that a model defines for itself (`B_tool_<name>()`, Knossos's `B_embedded_<suffix>()`
and `B_cuda_init()`), end to end through the real `run-benchmarks`, with planted faults
(tests/fixtures/modeltools/):

* a factory that raises            -> failed, in the compile phase, with its message
* a backward that ignores v        -> incorrect for bwd and jacobian
* a tool that declares no bwd      -> unsupported for bwd and jacobian, with its reason
* C++ that does not compile        -> failed, with g++'s first error line (slow: a real build)
* a Knossos module, unmodified     -> embedded_cpp ok on every task (slow: a real g++ build),
                                      manual_cuda and manual_cuda_transfer skipped here
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kscperf.plan.cells import plan_cells, resolve_tools
from kscperf.plan.definitions import ModelTool, model_tools, scan_models

from runner_testing import DEFS, FIXTURES, QUICK, cells_of, cli, explain, load_doc, \
    single_error_line, statuses

MODEL_TOOLS = FIXTURES / "modeltools"
TASKS = ("inference", "fwd", "bwd", "jacobian")

EXPECTED = {
    "good": ("ok", "ok", "ok", "ok"),
    "raises": ("failed",) * 4,
    "cotangent": ("ok", "ok", "incorrect", "incorrect"),
    "nobwd": ("ok", "ok", "unsupported", "unsupported"),
    "notcallable": ("failed",) * 4,
}


@pytest.fixture(scope="module")
def own_tools_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real run of every tool of own_tools.py, next to the toy model and `pt`."""
    out = tmp_path_factory.mktemp("own_tools") / "run.json"
    proc = cli("run", MODEL_TOOLS / "own_tools.py", DEFS / "toy.py", *QUICK,
               "--tools", ",".join(["pt", *EXPECTED]), "-o", out, "-q")
    assert out.exists(), explain(proc)
    return {"proc": proc, "doc": load_doc(out)}


@pytest.mark.integration
def test_every_planted_fault_is_caught(own_tools_run: dict[str, Any]) -> None:
    doc = own_tools_run["doc"]
    got = {tool: tuple(statuses(doc, "cube", tool, task) for task in TASKS) for tool in EXPECTED}
    assert got == {tool: tuple({s} for s in per_task) for tool, per_task in EXPECTED.items()}, \
        explain(own_tools_run["proc"])
    assert own_tools_run["proc"].returncode == 1
    assert "Traceback" not in own_tools_run["proc"].stderr


@pytest.mark.integration
def test_model_tools_run_for_their_own_model_only(own_tools_run: dict[str, Any]) -> None:
    cells = cells_of(own_tools_run["doc"])
    assert {tool for (model, tool, _, _) in cells if model == "toy"} == {"pt"}
    assert statuses(own_tools_run["doc"], "cube", "pt", "bwd") == {"ok"}


@pytest.mark.integration
def test_factory_that_raises_fails_in_compile(own_tools_run: dict[str, Any]) -> None:
    cell = cells_of(own_tools_run["doc"])["cube", "raises", "bwd", None]
    assert cell["phase"] == "compile"
    assert "ValueError: planted: the factory of cube_tool_raises fails" in cell["reason"]
    assert "own_tools.py" in cell["reason"]
    bad = cells_of(own_tools_run["doc"])["cube", "notcallable", "fwd", None]
    assert "cube_tool_notcallable is a int, not a function" in bad["reason"]


@pytest.mark.integration
def test_ignored_cotangent_is_incorrect(own_tools_run: dict[str, Any]) -> None:
    cell = cells_of(own_tools_run["doc"])["cube", "cotangent", "bwd", "8"]
    assert cell["reason"].startswith("gradient differs from the float64 reference")
    assert cell["check"]["passed"] is False


@pytest.mark.integration
def test_undeclared_task_is_unsupported_with_the_reason(own_tools_run: dict[str, Any]) -> None:
    cell = cells_of(own_tools_run["doc"])["cube", "nobwd", "bwd", None]
    assert cell["reason"] == "nobwd does not support bwd: planted: this tool has no backward"
    assert cell["phase"] == "compile"


@pytest.mark.integration
def test_compile_prep_and_teardown_are_timed(own_tools_run: dict[str, Any]) -> None:
    doc = own_tools_run["doc"]
    good = [r for r in doc["kscperf"]["runs"] if (r["tool"], r["task"]) == ("good", "fwd")]
    assert len(good) == 1 and good[0]["compile_s"] > 0
    assert all(c["prep_s"] > 0 and c["teardown_s"] is not None for c in good[0]["configs"])
    assert good[0]["metadata"]["torch_extensions_cache"] == "warm"
    names = {b["metadata"].get("name") for b in doc["benchmarks"]}
    assert "cube/good/fwd:compile" in names
    # The table of compile times at the end of the run: one for every task.
    compile_line = next(ln.split() for ln in own_tools_run["proc"].stdout.splitlines()
                        if ln.split()[:2] == ["cube", "good"])
    assert len(compile_line) == 2 + 4 * 2 and "-" not in compile_line, compile_line


@pytest.mark.integration
def test_list_shows_model_tools_and_tools_filter(tmp_path: Path) -> None:
    proc = cli("list", MODEL_TOOLS / "own_tools.py", DEFS / "toy.py", "--tools", "good,pt",
               "--tasks", "bwd")
    assert proc.returncode == 0, explain(proc)
    assert [ln.split()[0] for ln in proc.stdout.splitlines()] == [
        "cube/good/bwd", "cube/pt/bwd", "toy/pt/bwd"]
    line = single_error_line(cli("list", DEFS / "toy.py", "--tools", "good"))
    assert "unknown tool 'good'" in line


def test_names_of_model_tools_are_found_statically() -> None:
    tools, problems = model_tools("B", ["B_tool_fast", "B_embedded_cpp", "B_cuda_init",
                                        "B_tool_mine_cuda", "B_tool_pt", "B_tool_x_pytorch",
                                        "B_pytorch", "B_tolerances"], "m.py")
    assert tools == [
        ModelTool("embedded_cpp", "B_embedded_cpp"),
        ModelTool("fast", "B_tool_fast"),
        ModelTool("manual_cuda", "B_cuda_init", cuda=True),
        ModelTool("manual_cuda_transfer", "B_cuda_init", cuda=True, transfer=True),
        ModelTool("mine_cuda", "B_tool_mine_cuda", cuda=True),
        ModelTool("mine_cuda_transfer", "B_tool_mine_cuda", cuda=True, transfer=True)]
    assert problems == ["m.py: B_tool_pt() would define tool pt, which is a built-in tool; "
                        "rename it (that tool was not run)."]


def test_plan_gives_cuda_model_tools_a_skip_without_a_driver() -> None:
    models, problems = scan_models([str(MODEL_TOOLS / "knossos_style.py")])
    assert not problems and models[0].tool_names == (
        "embedded_broken", "embedded_cpp", "manual_cuda", "manual_cuda_transfer")
    tools = resolve_tools(None, [], list(models[0].tool_names))
    cells = plan_cells(models, tools, ["fwd"], cuda_present=False)
    skipped = {c.tool for c in cells if c.skip_reason}
    assert {"manual_cuda", "manual_cuda_transfer", "pt_cuda"} <= skipped
    assert "embedded_cpp" not in skipped


# -- real g++ builds: one warm extensions folder shared by the module ----------------------

@pytest.fixture(scope="module")
def knossos_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The Knossos-style module, unmodified: its embedded C++ on every task, its broken C++
    on one task, its CUDA tools (skipped here)."""
    tmp = tmp_path_factory.mktemp("knossos")
    out = tmp / "run.json"
    proc = cli("run", MODEL_TOOLS / "knossos_style.py", *QUICK, "-o", out, "-q",
               "--tools", "embedded_cpp,embedded_broken,manual_cuda,manual_cuda_transfer",
               "-k", "kcube/embedded_cpp/", "-k", "kcube/embedded_broken/inference",
               "-k", "kcube/manual_cuda", env={"TORCH_EXTENSIONS_DIR": str(tmp / "ext")},
               timeout=900)
    assert out.exists(), explain(proc)
    return {"proc": proc, "doc": load_doc(out), "ext": tmp / "ext"}


@pytest.mark.slow
def test_knossos_embedded_cpp_is_ok_on_every_task(knossos_run: dict[str, Any]) -> None:
    doc = knossos_run["doc"]
    for task in TASKS:
        assert statuses(doc, "kcube", "embedded_cpp", task) == {"ok"}, explain(knossos_run["proc"])
    runs = [r for r in doc["kscperf"]["runs"] if r["tool"] == "embedded_cpp"]
    assert all(r["compile_s"] > 0 for r in runs)
    assert runs[0]["metadata"]["torch_extensions_dir"] == str(knossos_run["ext"])
    assert os.path.isdir(knossos_run["ext"] / "kscperf_test_kcube")


@pytest.mark.slow
def test_cpp_that_does_not_compile_fails_with_the_first_error_line(
        knossos_run: dict[str, Any]) -> None:
    cell = cells_of(knossos_run["doc"])["kcube", "embedded_broken", "inference", None]
    assert cell["status"] == "failed" and cell["phase"] == "compile"
    assert "building kcube_embedded_broken() failed: main.cpp:" in cell["reason"]
    assert "error: 'planted_undeclared_name' was not declared" in cell["reason"].replace(
        "\u2018", "'").replace("\u2019", "'")
    assert "\n" not in cell["reason"]


@pytest.mark.slow
def test_knossos_cuda_tools_are_skipped_without_a_gpu(knossos_run: dict[str, Any]) -> None:
    cells = cells_of(knossos_run["doc"])
    for tool in ("manual_cuda", "manual_cuda_transfer"):
        for task in TASKS:
            cell = cells["kcube", tool, task, None]
            assert cell["status"] == "skipped"
            assert "GPU" in cell["reason"] or "CUDA" in cell["reason"]


@pytest.mark.integration
def test_plugin_with_a_missing_dependency_is_skipped(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    proc = cli("run", DEFS / "toy.py", *QUICK, "--tools", "missing", "--tasks", "inference",
               "--tool-plugin", "missing=plugin_missing_dependency:NeedsMissing", "-o", out,
               "-q", pythonpath=[FIXTURES])
    assert proc.returncode == 0, explain(proc)
    cell = cells_of(load_doc(out))["toy", "missing", "inference", None]
    assert cell["status"] == "skipped"
    assert cell["reason"] == ("tool missing is not available here: No module named "
                              "'kscperf_test_no_such_dependency'")
