"""The compile panel, end to end: real torch.compile on a model whose compiler source has a
data-dependent branch and whose configs differ in shape (tests/fixtures/compilepanel), run
through the real CLI once per build (module-scoped: compiling costs ~20 s cold here), then
compared, reported and loaded as files written before kscperf had panels. And a model tool
that goes wrong after its first calls, checked again after timing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kscperf import api
from kscperf.compare.compilestats import cell_panels, compare_panels
from kscperf.compilepanel import CompilePanel, Figure, figures_from
from kscperf.errors import CellStatus
from kscperf.spec import CellResult

from runner_testing import FIXTURES, cli, explain, load_doc

PANEL = FIXTURES / "compilepanel"
ONE_CELL = ("--tools", "compiled", "--tasks", "fwd", "--fast", "--replace")


def _panel_of(doc: dict[str, Any], cell: str = "branchy/compiled/fwd") -> CompilePanel:
    runs = [CellResult.from_dict(r) for r in doc["kscperf"]["runs"]]
    (panel,) = [r.compile_panel for r in runs if r.name == cell]
    assert panel is not None
    return panel


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of the branchless build and one of the branching build, shared."""
    out = tmp_path_factory.mktemp("builds")
    procs = {}
    for build in ("branchless", "branching"):
        procs[build] = cli(PANEL / build / "branchy.py", *ONE_CELL, "--build", build,
                           "-o", out / f"{build}.json", cwd=out)
    return {"dir": out, "procs": procs,
            "base": out / "branchless.json", "new": out / "branching.json"}


@pytest.mark.slow
def test_the_compiled_cell_records_the_graph_break_and_the_recompile(builds: Any) -> None:
    proc = builds["procs"]["branching"]
    assert proc.returncode == 0, explain(proc)
    panel = _panel_of(load_doc(builds["new"]))
    (reason,) = panel.break_reasons
    assert reason.startswith("Data-dependent branching")
    assert "branchy.py:21" in reason and "if y.sum() > 0" in reason
    assert panel.count("graph_breaks") == 1
    # The second config's other shape recompiled the function and its resumed tail.
    assert panel.recompiles and all("mismatch" in r for r in panel.recompiles)
    assert [config for config, _ in panel.recompile_s] == ["4x3"]
    assert panel.graphs is not None and panel.graphs >= 2
    assert panel.frames is not None and panel.frames >= 3
    assert panel.guards is not None and panel.guards > 0
    assert panel.first_compile_s is not None and panel.first_compile_s > 0
    assert all(panel.phase_s(p) is not None for p in ("dynamo", "aot_autograd", "inductor"))
    cache = dict(panel.cache)
    assert cache["fxgraph_hit"] is not None and cache["fxgraph_miss"] is not None
    assert cache["fxgraph_hit"] + cache["fxgraph_miss"] >= 1
    assert panel.timed_recompiles == ()  # every config was compiled before it was timed
    # The run's own output shows the panel, with the break.
    assert "graph break: Data-dependent branching" in proc.stdout


@pytest.mark.slow
def test_the_branchless_build_has_no_break(builds: Any) -> None:
    assert builds["procs"]["branchless"].returncode == 0, explain(builds["procs"]["branchless"])
    panel = _panel_of(load_doc(builds["base"]))
    assert panel.graph_breaks == ()
    assert panel.count("graph_breaks") == 0


@pytest.mark.slow
def test_compare_fails_on_the_new_break_and_names_it(builds: Any) -> None:
    proc = cli("compare", builds["base"], builds["new"], "--fail-on-regression")
    assert proc.returncode == 1, explain(proc)
    assert "count graph_breaks" in proc.stdout
    assert "new: Data-dependent branching (at branchy.py:21" in proc.stdout
    as_json = cli("compare", builds["base"], builds["new"], "--format", "json")
    rows = json.loads(as_json.stdout)["compile"]
    (breaks,) = [r for r in rows if r["name"] == "graph_breaks"]
    assert breaks["verdict"] == "more" and breaks["is_regression"]
    assert breaks["base"] == 0 and breaks["new"] == 1
    # The other way round the break is gone: fewer is no regression.
    back = api.compare_builds(str(builds["new"]), str(builds["base"]))
    (gone,) = [c for c in back.compile_changes if c.name == "graph_breaks"]
    assert gone.verdict == "fewer" and gone.removed and not gone.is_regression


@pytest.mark.slow
def test_the_report_shows_the_compile_table(builds: Any) -> None:
    out = builds["dir"] / "report.html"
    proc = cli("report", builds["base"], builds["new"], "-o", out)
    assert proc.returncode == 0, explain(proc)
    html = out.read_text(encoding="utf-8")
    assert '<table class="compile">' in html
    assert "graph break: Data-dependent branching (at branchy.py:21 in branchy: if y.sum() &gt; 0:)" in html
    assert '<table class="compile-changes">' in html


@pytest.mark.slow
def test_files_without_panels_still_load_compare_and_report(builds: Any) -> None:
    old = builds["dir"] / "old.json"
    doc = load_doc(builds["new"])
    assert any(run.get("compile_panel") for run in doc["kscperf"]["runs"])
    for run in doc["kscperf"]["runs"]:
        # Files of the kscperf before the panel have neither key (nor do today's, where
        # there is no panel or nothing to warn of).
        run.pop("compile_panel", None)
        for config in run["configs"]:
            config.pop("clock_warning", None)
    old.write_text(json.dumps(doc), encoding="utf-8")
    loaded = api.load(str(old))
    assert all(r.compile_panel is None for r in loaded.runs)
    proc = cli("compare", old, builds["new"], "--fail-on-regression")
    assert proc.returncode == 0, explain(proc)  # nothing to compare the new panel with
    proc = cli("report", old, "-o", builds["dir"] / "old.html")
    assert proc.returncode == 0, explain(proc)
    assert '<table class="compile">' not in (builds["dir"] / "old.html").read_text()


@pytest.mark.slow
def test_a_recompile_inside_the_timed_loop_is_refused_and_its_reason_read() -> None:
    import torch

    from kscperf.worker.compilepanel import no_recompiles, refused_recompile

    f = torch.compile(lambda x: x * 2)
    f(torch.ones(3))
    with no_recompiles(), pytest.raises(RuntimeError) as caught:
        f(torch.ones(2, 2))
    reason = refused_recompile(caught.value)
    assert reason is not None and "rank mismatch" in reason and "line" in reason
    assert refused_recompile(RuntimeError("something else")) is None


def test_a_tool_that_goes_wrong_after_its_first_calls_is_incorrect_everywhere(
        tmp_path: Path) -> None:
    out = tmp_path / "drift.json"
    proc = cli(PANEL / "drifting.py", "--tools", "drift", "--tasks", "inference,fwd", "--fast",
               "-o", out, cwd=tmp_path)
    assert proc.returncode == 1, explain(proc)
    runs = [CellResult.from_dict(r) for r in load_doc(out)["kscperf"]["runs"]]
    configs = [c for r in runs for c in r.configs]
    assert configs and all(c.status is CellStatus.INCORRECT for c in configs)
    # The first cell's first config passed its check before timing: the recheck found it.
    first = [r for r in runs if r.task == "inference"][0].configs[0]
    assert first.phase == "recheck"
    assert "went wrong during timing" in first.reason and "differs" in first.reason
    # The tool's own figures are in its panel, with their units.
    panel = runs[0].compile_panel
    assert panel is not None
    assert Figure("build_s", 0.25, "s") in panel.figures
    assert panel.graph_breaks is None  # not torch.compile: unknown, not zero


def _result(tool: str, panel: CompilePanel, process: int = 0) -> CellResult:
    return CellResult(model="m", tool=tool, task="fwd", process_index=process,
                      status=CellStatus.OK, compile_panel=panel)


def test_counts_are_exact_and_figures_compared_by_statistics() -> None:
    base = [_result("c", CompilePanel(graphs=1, graph_breaks=(), recompiles=(),
                                      figures=(Figure("build_s", 1.0 + i / 100, "s"),)), i)
            for i in range(3)]
    new = [_result("c", CompilePanel(graphs=1, graph_breaks=(("a break (at f.py:3)", 1),),
                                     recompiles=(), figures=(Figure("build_s", 2.0 + i / 100, "s"),)),
                   i) for i in range(3)]
    changes = {(c.what, c.name): c for c in compare_panels(base, new)}
    assert changes["count", "graph_breaks"].verdict == "more"
    assert changes["count", "graph_breaks"].added == ("a break (at f.py:3)",)
    assert changes["count", "graphs"].verdict == "same"
    assert changes["figure", "build_s"].verdict == "slower"
    assert changes["figure", "build_s"].unit == "s"
    same = {(c.what, c.name): c for c in compare_panels(base, base)}
    assert not any(c.is_regression for c in same.values())
    (summary,) = cell_panels(new)
    assert summary.processes == 3 and summary.count("graph_breaks") == 1


def test_panels_round_trip_and_unknown_stays_unknown() -> None:
    panel = CompilePanel(phases_s=(("dynamo", 0.5), ("triton", None)), first_compile_s=1.0,
                         recompile_s=(("4x3", 0.25),), graphs=2, graph_breaks=(("b", 2),),
                         recompiles=("r",), kernels=None, cache=(("fxgraph_hit", 1),),
                         figures=(Figure("build_s", 1.5, "s"),))
    again = CompilePanel.from_dict(json.loads(json.dumps(panel.to_dict())))
    assert again == panel
    assert again.phase_s("triton") is None and again.kernels is None
    assert CompilePanel().count("graph_breaks") is None


def test_tool_figures_are_checked() -> None:
    class Tool:
        compile_figures = {"build_s": (1, "s")}

    assert figures_from(Tool(), "t") == (Figure("build_s", 1.0, "s"),)
    Tool.compile_figures = {"build_s": 1.0}  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"t: compile_figures\['build_s'\] must be \(value, unit\)"):
        figures_from(Tool(), "t")


def test_device_time_over_wall_time_is_flagged() -> None:
    from kscperf.worker.measure import device_over_wall

    assert device_over_wall([1e-3, 1e-3], [0.9e-3, 1.0e-3]) == ""
    flag = device_over_wall([1e-3, 1e-3], [0.9e-3, 1.5e-3])
    assert "1 of 2 values" in flag and "1.5e+03 us" in flag



def test_the_skip_hook_may_name_the_tool() -> None:
    from kscperf.spec import CellSpec
    from kscperf.worker.cell import run_cell

    def statuses(tool: str) -> dict[str, tuple[CellStatus, str]]:
        result = run_cell(CellSpec(model="skipper", tool=tool, task="inference",
                                   module_path=str(PANEL / "skiptool.py"), values=2,
                                   warmups=0, min_time=0.0001))
        return {c.config: (c.status, c.reason) for c in result.configs}

    assert statuses("pt") == {"4": (CellStatus.OK, ""), "64": (CellStatus.OK, "")}
    nice = statuses("ptnice")
    assert nice["4"] == (CellStatus.OK, "")
    assert nice["64"] == (CellStatus.SKIPPED, "ptnice costs too much on config 64")


def test_progress_beats_with_the_workers_phase_while_it_runs(tmp_path: Path) -> None:
    import time

    from kscperf.orchestrator.heartbeat import eta_while_running, watching
    from kscperf.spec import phase_path

    result_path = str(tmp_path / "cell.result.json")
    beats: list[tuple[str, str, str, float]] = []
    with watching(result_path, lambda *b: beats.append(b), every_s=0.05):
        time.sleep(0.2)
        Path(phase_path(result_path)).write_text("prep\n4x3\n2 of 2")
        time.sleep(0.3)
    assert beats and beats[0][:3] == ("", "", "")  # nothing noted yet
    assert beats[-1][:3] == ("prep", "4x3", "2 of 2")
    assert all(b[3] > 0 for b in beats)
    # Three workers took 30 s; the fourth of ten has run 90 s: the mean it makes counts.
    assert eta_while_running(30.0, 3, 10, 90.0) == pytest.approx(30.0 * 6)
    assert eta_while_running(30.0, 3, 10, 0.0) == pytest.approx(7.5 * 6)


@pytest.mark.slow
def test_history_check_fails_on_the_new_break_and_the_dashboard_shows_phases(
        builds: Any) -> None:
    store, site = builds["dir"] / "store", builds["dir"] / "site"
    for build in ("base", "new"):
        proc = cli("history", "add", builds[build], "--store", store)
        assert proc.returncode == 0, explain(proc)
    check = cli("history", "check", "--store", store)
    assert check.returncode == 1, explain(check)
    assert "compile regression(s) opened by the newest build" in check.stdout
    assert "graph\\_breaks 0 → 1; new: Data-dependent branching" in check.stdout
    proc = cli("dashboard", "--store", store, "-o", site)
    assert proc.returncode == 0, explain(proc)
    (page,) = (site / "benchmarks").glob("branchy_compiled_fwd_8-*.html")
    html = page.read_text(encoding="utf-8")
    assert "Compile of the cell on" in html
    for column in ("first compile", "recompile time", "dynamo", "aot autograd", "graph breaks"):
        assert f"<th>{column}</th>" in html


def test_a_compilers_message_keeps_the_users_file_and_line() -> None:
    from kscperf.errors import describe_exception

    scripted = RuntimeError(
        "Python builtin <built-in function open> is currently not supported in Torchscript:\n"
        '  File "/somewhere/models/bar.py", line 7\n    return open(x)\n')
    assert describe_exception(scripted) == (
        "RuntimeError: Python builtin <built-in function open> is currently not supported in "
        "Torchscript: (at bar.py:7)")
    assert describe_exception(ValueError("one line")) == "ValueError: one line"
