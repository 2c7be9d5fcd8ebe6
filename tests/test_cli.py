"""The `run-benchmarks` command, run for real in subprocesses: list, help, usage errors,
check, run with selections and metadata, refusing to overwrite, exit statuses, both
isolation modes, a definition module from elsewhere, and identical inputs everywhere."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyperf
import pytest

import kscperf
from kscperf.results.envinfo import kscperf_source
from runner_testing import DEFS, QUICK, cells_of, cli, explain, load_doc, single_error_line

pytestmark = pytest.mark.integration

TOY = DEFS / "toy.py"
SEEDED = DEFS / "seeded.py"
WRONG = DEFS / "wrong.py"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com",
                           "-c", "user.name=t", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def input_sums(log: Path) -> dict[str, set[str]]:
    """config index -> the input checksums logged by seeded_bench_configs."""
    sums: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        _, index, value = line.split()
        sums.setdefault(index, set()).add(value)
    return sums


# -- commands that never start a worker ------------------------------------------------------

def test_help() -> None:
    proc = cli("--help")
    assert proc.returncode == 0, explain(proc)
    for command in ("run", "list", "check", "compare", "report", "merge"):
        assert command in proc.stdout
    run_help = cli("run", "--help")
    assert run_help.returncode == 0
    for option in ("--tools", "--tasks", "--tool-plugin", "--isolation", "--build", "--replace",
                   "--fast", "--rigorous", "--values", "--min-time", "--seed", "--shard"):
        assert option in run_help.stdout


def test_list_never_imports_torch() -> None:
    code = textwrap.dedent(f"""
        import sys
        from kscperf.cli import main
        rc = main(["list", {str(TOY)!r}, "--tools", "pt,ts", "--tasks", "bwd,fwd"])
        assert "torch" not in sys.modules, "list imported torch"
        sys.exit(rc)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, explain(proc)
    assert [line.split()[0] for line in proc.stdout.splitlines()] == [
        "toy/pt/fwd", "toy/pt/bwd", "toy/ts/fwd", "toy/ts/bwd"]
    assert f"[{TOY}]" in proc.stdout
    assert "4 cells" in proc.stderr


def test_list_warns_about_a_broken_module_and_lists_the_others(tmp_path: Path) -> None:
    broken = tmp_path / "broken_syntax.py"
    broken.write_text("def b_bench_configs(:\n    pass\n")
    proc = cli("list", TOY, broken, "--tools", "pt", "--tasks", "fwd")
    assert proc.returncode == 1, explain(proc)
    assert proc.stdout.split()[0] == "toy/pt/fwd"
    assert f"warning: {broken}:1: syntax error" in proc.stderr


def no_nvidia_driver() -> bool:
    return not (Path("/proc/driver/nvidia/version").exists() or Path("/dev/nvidiactl").exists())


@pytest.mark.skipif(not no_nvidia_driver(), reason="an NVIDIA driver is present")
def test_shards_add_up_to_the_whole_and_merge(tmp_path: Path) -> None:
    """Without a driver CUDA cells are planned as skipped and start no worker: a cheap
    way to run the real sharding and merging end to end."""
    common = [TOY, SEEDED, "--tools", "pt_cuda,ptnice_cuda,ts_cuda", *QUICK, "--build", "b1",
              "-q"]
    whole = cli("run", *common, "-o", tmp_path / "whole.json", cwd=tmp_path)
    assert whole.returncode == 0, explain(whole)
    shards = []
    for i in (1, 2, 3):
        out = tmp_path / f"shard{i}.json"
        proc = cli("run", *common, "--shard", f"{i}/3", "-o", out, cwd=tmp_path)
        assert proc.returncode == 0, explain(proc)
        shards.append(set(cells_of(load_doc(out))))
    all_cells = set(cells_of(load_doc(tmp_path / "whole.json")))
    assert len(all_cells) == 24
    assert set().union(*shards) == all_cells
    assert sum(len(s) for s in shards) == 24  # disjoint
    assert all(shards)
    merged = cli("merge", *(tmp_path / f"shard{i}.json" for i in (1, 2, 3)),
                 "-o", tmp_path / "merged.json")
    assert merged.returncode == 0, explain(merged)
    assert set(cells_of(load_doc(tmp_path / "merged.json"))) == all_cells


@pytest.mark.parametrize("args, culprit", [
    (["--tools", "pt,nope"], "unknown tool 'nope' in --tools"),
    (["--tasks", "fwd,grad"], "unknown task 'grad' in --tasks"),
    (["--shard", "4/3"], "--shard '4/3'"),
])
def test_unknown_names_are_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                               culprit: str) -> None:
    proc = cli("run", TOY, *args, cwd=tmp_path)
    assert culprit in single_error_line(proc)
    assert list(tmp_path.iterdir()) == []  # nothing written, not even results/


def test_missing_definition_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = cli("run", tmp_path / "nowhere.py", cwd=tmp_path)
    assert "nowhere.py: no such file or folder" in single_error_line(proc)


def test_cuda_cells_and_broken_modules_without_workers(tmp_path: Path) -> None:
    """No GPU driver here: CUDA cells are skipped with the reason, no worker is started; a
    broken module next to them is reported, recorded and makes the exit status 1."""
    if not no_nvidia_driver():
        pytest.skip("an NVIDIA driver is present")
    broken = tmp_path / "nobody.py"
    broken.write_text("def lost_pytorch(x):\n    return x\n")
    out = tmp_path / "cuda.json"
    proc = cli("run", TOY, broken, "--tools", "pt_cuda,ts_cuda", "--tasks", "bwd", *QUICK,
               "-o", out, "-q", cwd=tmp_path)
    assert proc.returncode == 1, explain(proc)
    assert f"error: {broken} defines lost_pytorch but no lost_bench_configs()" in proc.stderr
    doc = load_doc(out)
    cells = cells_of(doc)
    assert set(cells) == {("toy", "pt_cuda", "bwd", None), ("toy", "ts_cuda", "bwd", None)}
    for cell in cells.values():
        assert cell["status"] == "skipped"
        assert cell["reason"] == "no NVIDIA GPU driver found on this machine"
    assert doc["kscperf"]["metadata"]["definition_problems"] == [
        f"{broken} defines lost_pytorch but no lost_bench_configs(); add one that yields "
        "sample inputs."]


# -- real runs -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fork_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run with selections, two processes per cell and a build label, from inside a git
    work tree, logging the inputs that every worker generated."""
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q")
    (repo / "compiler.txt").write_text("the code under test\n")
    git(repo, "add", "compiler.txt")
    git(repo, "commit", "-q", "-m", "build 1")
    log = repo.parent / "fork-inputs.log"
    out = repo / "out.json"
    args = ["run", TOY, SEEDED, "-k", "toy/pt/", "-k", "seeded/", "--tools", "pt,ptnice",
            "--tasks", "inference,fwd", "--build", "mybuild", "-o", out, "--fast",
            "--processes", "2", "--values", "2", "--warmups", "0", "--min-time", "0.001"]
    proc = cli(*args, cwd=repo, env={"KSCPERF_TEST_INPUT_LOG": str(log)})
    assert out.exists(), explain(proc)
    return {"proc": proc, "doc": load_doc(out), "out": out, "repo": repo, "log": log,
            "args": args, "head": git(repo, "rev-parse", "HEAD")}


def test_run_selects_exactly_the_asked_cells(fork_run: dict[str, Any]) -> None:
    proc = fork_run["proc"]
    assert proc.returncode == 0, explain(proc)
    cells = cells_of(fork_run["doc"])
    expected = {("toy", "pt", task, config) for task in ("inference", "fwd")
                for config in ("8", "3x4")}
    expected |= {("seeded", tool, task, config) for tool in ("pt", "ptnice")
                 for task in ("inference", "fwd") for config in ("4", "6")}
    assert set(cells) == expected
    for cell in cells.values():
        assert cell["status"] == "ok", cell
        assert cell["processes"] == 2 and cell["values"] == 4
        assert cell["check"]["passed"] is True
    assert f"wrote {fork_run['out']}" in proc.stdout


def test_run_writes_suite_metadata(fork_run: dict[str, Any]) -> None:
    md = fork_run["doc"]["kscperf"]["metadata"]
    assert md["build"] == "mybuild"
    assert md["git_commit"] == fork_run["head"]
    assert md["git_dirty"] is False
    assert md["torch_version"] == importlib.metadata.version("torch")
    assert md["pyperf_version"] == importlib.metadata.version("pyperf")
    assert (md["profile"], md["seed"], md["processes"], md["values"], md["warmups"],
            md["min_time"], md["isolation"]) == ("fast", 0, 2, 2, 0, 0.001, "fork")
    assert md["hostname"] and md["date"] and md["cpu_model_name"]
    # kscperf itself: its version, and the digest of the code that ran (the version alone
    # is the same for every commit)
    assert md["kscperf_version"] == kscperf.__version__
    assert md["kscperf_source"] == kscperf_source()
    # the pyperf side carries the build metadata too
    suite = pyperf.BenchmarkSuite.load(str(fork_run["out"]))
    bench_md = suite.get_benchmark("toy/pt/fwd/8").get_metadata()
    assert bench_md["build"] == "mybuild" and bench_md["git_commit"] == fork_run["head"]
    assert bench_md["loops"] >= 1 and bench_md["config"] == "8"


def test_every_benchmark_has_the_same_number_of_values(fork_run: dict[str, Any]) -> None:
    suite = pyperf.BenchmarkSuite.load(str(fork_run["out"]))
    names = suite.get_benchmark_names()
    timed = [n for n in names if not n.endswith((":compile", ":prep"))]
    assert len(timed) == 12
    for name in timed:
        runs = suite.get_benchmark(name).get_runs()
        assert [len(r.values) for r in runs] == [2, 2]
    assert "seeded/ptnice/inference/6:prep" in names
    assert not any(n.endswith(":compile") for n in names)  # pt and ptnice compile nothing


def test_inputs_are_identical_across_tools_and_processes(fork_run: dict[str, Any]) -> None:
    lines = fork_run["log"].read_text().splitlines()
    assert len(lines) == 2 * 8  # two configs, in each of 4 cells x 2 processes
    assert len({line.split()[0] for line in lines}) == 8  # eight distinct worker processes
    sums = input_sums(fork_run["log"])
    assert {k: len(v) for k, v in sums.items()} == {"0": 1, "1": 1}


def test_existing_output_is_refused_and_untouched(fork_run: dict[str, Any]) -> None:
    out: Path = fork_run["out"]
    before = out.read_bytes()
    proc = cli(*fork_run["args"], cwd=fork_run["repo"])
    line = single_error_line(proc)
    assert str(out) in line and "already exists" in line and "--replace" in line
    assert out.read_bytes() == before


def test_spawn_isolation_outside_git_with_an_incorrect_cell(tmp_path: Path,
                                                            fork_run: dict[str, Any]) -> None:
    """Spawned workers get the very inputs that forked ones got; an incorrect cell makes the
    exit status 1; outside a git work tree the build label is a timestamp."""
    log = tmp_path / "spawn-inputs.log"
    out = tmp_path / "spawn.json"
    proc = cli("run", SEEDED, WRONG, "-k", "seeded/pt/", "-k", "wrong/ptnice/", "--tasks",
               "fwd", *QUICK, "--isolation", "spawn", "-o", out, cwd=tmp_path,
               env={"KSCPERF_TEST_INPUT_LOG": str(log)})
    assert proc.returncode == 1, explain(proc)
    cells = cells_of(load_doc(out))
    assert set(cells) == {("seeded", "pt", "fwd", "4"), ("seeded", "pt", "fwd", "6"),
                          ("wrong", "ptnice", "fwd", "10")}
    assert cells["seeded", "pt", "fwd", "4"]["status"] == "ok"
    wrong = cells["wrong", "ptnice", "fwd", "10"]
    assert wrong["status"] == "incorrect"
    assert wrong["check"]["max_rel_err"] == pytest.approx(1e-2, rel=1e-3)
    assert input_sums(log) == input_sums(fork_run["log"])
    md = load_doc(out)["kscperf"]["metadata"]
    assert md["isolation"] == "spawn"
    assert "git_commit" not in md
    assert re.fullmatch(r"\d{8}-\d{6}", md["build"])
    assert "incorrect" in proc.stdout


def test_check_prints_the_check_table(tmp_path: Path) -> None:
    proc = cli("check", TOY, "--tools", "pt,ts", "-q", cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert {"model", "tool", "task", "config", "status"} <= set(rows[0])  # the header
    body = [set(r) for r in rows[1:] if r and r[0] == "toy"]
    assert len(body) == 2 * 4 * 2  # tools x tasks x configs, one row each
    for tool in ("pt", "ts"):
        for task, checked in (("inference", "output"), ("fwd", "output"),
                              ("bwd", "gradient"), ("jacobian", "jacobian")):
            for config in ("8", "3x4"):
                assert any({tool, task, config, "ok", checked} <= r for r in body), (
                    tool, task, config, proc.stdout)
    assert "16 results (16 ok)" in proc.stdout
    assert list(tmp_path.rglob("*.json")) == []  # check writes no results file


KNOSSOS_MODULE = '''\
"""Someone else's benchmark, in the Knossos convention: it knows nothing of kscperf."""
import torch

from bar_helpers import softplus


def bar_bench_configs():
    for n in (3, 5):
        yield torch.randn(n, n)


def bar_pytorch(x):
    return torch.nn.functional.softplus(x) @ x


def bar_pytorch_nice(x):
    return softplus(x) @ x


def bar(x):
    return torch.log1p(torch.exp(x)) @ x
'''


def test_a_module_from_elsewhere_runs_unmodified(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b" / "d"
    folder.mkdir(parents=True)
    (folder / "bar.py").write_text(KNOSSOS_MODULE)
    (folder / "bar_helpers.py").write_text(
        "import torch\n\n\ndef softplus(x):\n    return torch.log(1 + torch.exp(x))\n")
    proc = cli("run", "a/b/d/bar.py", "--tools", "pt,ptnice,ts", *QUICK, "--build", "knossos",
               "-q", cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    out = tmp_path / "results" / "knossos.json"  # the default -o: results/<build>.json
    cells = cells_of(load_doc(out))
    assert set(cells) == {("bar", tool, task, config) for tool in ("pt", "ptnice", "ts")
                          for task in ("inference", "fwd", "bwd", "jacobian")
                          for config in ("3x3", "5x5")}
    assert {c["status"] for c in cells.values()} == {"ok"}
    assert not (folder / "__init__.py").exists()
