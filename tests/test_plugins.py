"""Third-party tool plug-ins, end to end: registered with `--tool-plugin NAME=module:object`
and through the `kscperf.tools` entry point group, run by the real `run-benchmarks` in real
worker processes, with planted faults (tests/fixtures/plugins.py) that the checks must catch:

* backward ignores the cotangent -> incorrect for bwd and jacobian, ok for inference and fwd
* backward off by a factor       -> incorrect for bwd and jacobian, ok for inference and fwd
* forward off by 1e-3 relative   -> incorrect for inference and fwd, ok for bwd and jacobian
* forward NaN at one element     -> incorrect for inference and fwd, ok for bwd and jacobian
* compile raises NotImplementedError -> unsupported, with its message
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kscperf.plan import plugins
from kscperf.worker import tools

from runner_testing import DEFS, FIXTURES, QUICK, cells_of, cli, explain, load_doc, statuses

TASKS = ("inference", "fwd", "bwd", "jacobian")

# tool name -> expected status per task (inference, fwd, bwd, jacobian)
EXPECTED = {
    "correct": ("ok", "ok", "ok", "ok"),
    "cotangent": ("ok", "ok", "incorrect", "incorrect"),
    "bwd_scaled": ("ok", "ok", "incorrect", "incorrect"),
    "fwd_off": ("incorrect", "incorrect", "ok", "ok"),
    "fwd_nan": ("incorrect", "incorrect", "ok", "ok"),
    "Unsupporting": ("unsupported",) * 4,
    # registered through the entry point group
    "ep_correct": ("ok", "ok", "ok", "ok"),
    "ep_cotangent": ("ok", "ok", "incorrect", "incorrect"),
}

OPTION_PLUGINS = ["correct=plugins:correct", "cotangent=plugins:ignores_cotangent",
                  "bwd_scaled=plugins:backward_scaled", "fwd_off=plugins:forward_off",
                  "fwd_nan=plugins:forward_nan",
                  "plugins:Unsupporting"]  # NAME defaults to the object's name


def make_entry_point_dist(site: Path) -> Path:
    """A minimal installed distribution (just its .dist-info) that declares two tools in
    the `kscperf.tools` entry point group; no pip needed, only `site` on sys.path."""
    info = site / "kscperf_test_tools-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kscperf-test-tools\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[kscperf.tools]\nep_correct = plugins:correct\nep_cotangent = plugins:ignores_cotangent\n")
    return site


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real run of every planted tool on every task of the toy model (x * x)."""
    tmp = tmp_path_factory.mktemp("plugins")
    site = make_entry_point_dist(tmp / "site")
    out = tmp / "planted.json"
    args: list[str] = ["run", str(DEFS / "toy.py"), *QUICK, "--tools", ",".join(EXPECTED),
                       "-o", str(out), "--build", "planted", "-q"]
    for option in OPTION_PLUGINS:
        args += ["--tool-plugin", option]
    proc = cli(*args, cwd=tmp, pythonpath=[FIXTURES, site])
    assert out.exists(), explain(proc)
    return {"proc": proc, "doc": load_doc(out), "out": out}


@pytest.mark.integration
def test_every_planted_fault_is_caught_task_by_task(planted: dict[str, Any]) -> None:
    doc = planted["doc"]
    # every config of a cell has the one expected status
    got = {tool: tuple(statuses(doc, "toy", tool, task) for task in TASKS) for tool in EXPECTED}
    expected = {tool: tuple({status} for status in per_task)
                for tool, per_task in EXPECTED.items()}
    assert got == expected, explain(planted["proc"])


@pytest.mark.integration
def test_incorrect_exits_1(planted: dict[str, Any]) -> None:
    assert planted["proc"].returncode == 1, explain(planted["proc"])
    assert "Traceback" not in planted["proc"].stderr


@pytest.mark.integration
def test_ignored_cotangent_is_reported_with_its_errors(planted: dict[str, Any]) -> None:
    cells = cells_of(planted["doc"])
    for tool in ("cotangent", "ep_cotangent"):
        bwd = cells["toy", tool, "bwd", "8"]
        assert bwd["reason"].startswith("gradient differs from the float64 reference")
        assert bwd["check"]["passed"] is False and bwd["check"]["what"] == "gradient"
        assert bwd["check"]["max_abs_err"] > 1e-3
        jac = cells["toy", tool, "jacobian", "3x4"]
        assert jac["check"]["what"] == "jacobian" and jac["check"]["passed"] is False
        assert jac["reason"].startswith("jacobian differs from the float64 reference")
        # forward values are untouched by a backward fault
        assert cells["toy", tool, "fwd", "8"]["check"]["max_abs_err"] < 1e-5


@pytest.mark.integration
def test_scaled_backward_error_is_half_the_gradient(planted: dict[str, Any]) -> None:
    check = cells_of(planted["doc"])["toy", "bwd_scaled", "bwd", "8"]["check"]
    assert check["max_rel_err"] == pytest.approx(0.5, rel=1e-4)


@pytest.mark.integration
def test_forward_faults_are_reported_with_their_errors(planted: dict[str, Any]) -> None:
    cells = cells_of(planted["doc"])
    for task in ("inference", "fwd"):
        off = cells["toy", "fwd_off", task, "8"]
        assert off["check"]["max_rel_err"] == pytest.approx(1e-3, rel=1e-2)
        assert off["reason"].startswith("output differs from the float64 reference")
        nan = cells["toy", "fwd_nan", task, "3x4"]
        assert nan["reason"] == ("output differs from the float64 reference: "
                                 "1 NaN or Inf value(s) where the reference is finite")


@pytest.mark.integration
def test_unsupported_plugin_carries_its_message(planted: dict[str, Any]) -> None:
    cells = cells_of(planted["doc"])
    for task in TASKS:
        cell = cells["toy", "Unsupporting", task, None]
        assert cell["status"] == "unsupported"
        assert "planted: Unsupporting compiles no model" in cell["reason"]
        assert cell["phase"] == "compile"


@pytest.mark.integration
def test_incorrect_cells_are_still_timed(planted: dict[str, Any]) -> None:
    import pyperf

    names = set(pyperf.BenchmarkSuite.load(str(planted["out"])).get_benchmark_names())
    for name in ("toy/cotangent/bwd/8", "toy/fwd_nan/inference/3x4", "toy/correct/jacobian/8",
                 "toy/ep_cotangent/jacobian/3x4"):
        assert name in names
    assert not any(n.startswith("toy/Unsupporting/") for n in names)
    assert "toy/correct/bwd:compile" in names  # a plug-in's compile time is recorded


@pytest.mark.integration
def test_plugin_names_are_found_without_importing_them(tmp_path: Path) -> None:
    import subprocess
    import sys

    site = make_entry_point_dist(tmp_path / "site")
    code = ("import sys; from kscperf.plan import plugins; "
            "names = plugins.plugin_tool_names(('mine=plugins:correct',)); "
            "assert names['ep_cotangent'] == 'plugins:ignores_cotangent', names; "
            "assert names['mine'] == 'plugins:correct'; "
            "assert 'plugins' not in sys.modules and 'torch' not in sys.modules")
    env = {"PYTHONPATH": f"{FIXTURES}:{site}", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.mark.integration
def test_list_shows_entry_point_and_option_tools(tmp_path: Path) -> None:
    site = make_entry_point_dist(tmp_path / "site")
    proc = cli("list", DEFS / "toy.py", "--tools", "ep_correct,mine_cuda", "--tasks", "bwd",
               "--tool-plugin", "mine=plugins:correct", pythonpath=[FIXTURES, site])
    assert proc.returncode == 0, explain(proc)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("toy/ep_correct/bwd ")
    assert lines[1].startswith("toy/mine_cuda/bwd ")


@pytest.mark.integration
@pytest.mark.parametrize("option, message", [
    ("plugins", "is not of the form [NAME=]module:object"),
    ("my-tool=plugins:correct", "is not an identifier"),
])
def test_bad_plugin_option_is_a_usage_error(option: str, message: str) -> None:
    proc = cli("list", DEFS / "toy.py", "--tool-plugin", option)
    assert proc.returncode == 2, explain(proc)
    assert proc.stderr.count("\n") == 1 and message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_parse_plugin_option() -> None:
    assert plugins.parse_plugin_option("k=pkg.mod:obj.attr") == ("k", "pkg.mod:obj.attr")
    assert plugins.parse_plugin_option("pkg.mod:Compiler") == ("Compiler", "pkg.mod:Compiler")
    assert plugins.parse_plugin_option("pkg:a.b") == ("b", "pkg:a.b")


def test_load_tool_wraps_not_implemented_as_unsupported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FIXTURES))
    impl, device = tools.load_tool("u_cuda", ("u=plugins:Unsupporting",))
    assert device == "cuda" and impl.name == "u" and impl.source == "source"
    assert impl.lazy is False
    with pytest.raises(tools.Unsupported, match="planted: Unsupporting compiles no model"):
        impl.compile(lambda x: x, (), "cpu")
    good, _ = tools.load_tool("g", ("g=plugins:correct",))
    assert good.source == "pytorch"
    with pytest.raises(KeyError):
        tools.load_tool("absent", ())


def test_plugin_without_compile_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FIXTURES))
    with pytest.raises(TypeError, match="has no compile"):
        tools.load_tool("bad", ("bad=plugins:not_a_tool",))
