"""Fault injection: every planted fault gets the right status, phase and reason, in one run
next to a healthy model whose results stay complete; the run as a whole survives Ctrl-C and
SIGTERM, resumes, never overwrites silently, and refuses bad paths and bad files with one line.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner_testing import cli, default_sigint

pytestmark = pytest.mark.integration

FAULTS = Path(__file__).parent / "fixtures" / "faults"
QUICK = ["--fast", "--values", "2", "--warmups", "0", "--min-time", "0.001"]


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["kscperf"]["cells"]


def _cell(cells: list[dict], model: str, tool: str, task: str, config: str | None) -> dict:
    found = [c for c in cells if (c["model"], c["tool"], c["task"], c["config"])
             == (model, tool, task, config)]
    assert len(found) == 1, f"{model}/{tool}/{task}/{config}: {found}"
    return found[0]


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("faults") / "faults.json"
    proc = cli(str(FAULTS), "--tools", "pt,ptnice", "--tasks", "inference,bwd", *QUICK,
                "--timeout", "60", "--max-rss", str(1_500_000_000), "-o", str(out))
    return proc, out


def test_run_survives_and_exits_1(fault_run: tuple[subprocess.CompletedProcess, Path]) -> None:
    proc, out = fault_run
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads(out.read_text())
    assert doc["kscperf"]["complete"] is True


def test_healthy_model_complete(fault_run: tuple[subprocess.CompletedProcess, Path]) -> None:
    _, out = fault_run
    cells = _cells(out)
    doc = json.loads(out.read_text())
    names = {b["metadata"]["name"] for b in doc["benchmarks"] if "name" in b.get("metadata", {})}
    for tool in ("pt", "ptnice"):
        for task in ("inference", "bwd"):
            for config in ("8", "4x4"):
                cell = _cell(cells, "healthy", tool, task, config)
                assert cell["status"] == "ok"
                assert cell["values"] == 2
                assert cell["check"]["passed"] is True
                assert f"healthy/{tool}/{task}/{config}" in names or any(
                    b["runs"] for b in doc["benchmarks"])
    # The duplicate definition of `healthy` (3 elements) was not run.
    assert not [c for c in cells if c["model"] == "healthy" and c["config"] == "3"]


@pytest.mark.parametrize("model,status,phase,words", [
    ("raiser", "failed", "check", ["ValueError: planted failure in raiser_pytorch_nice",
                                   "cell_faults.py", "planted stderr line"]),
    ("memerr", "oom", "check", ["MemoryError"]),
    ("nan", "incorrect", "check", ["NaN or Inf"]),
    ("inf", "incorrect", "check", ["NaN or Inf"]),
])
def test_in_process_faults(fault_run: tuple[subprocess.CompletedProcess, Path], model: str,
                           status: str, phase: str, words: list[str]) -> None:
    _, out = fault_run
    cells = _cells(out)
    cell = _cell(cells, model, "ptnice", "inference", "8")
    assert cell["status"] == status
    assert cell["phase"] == phase
    for word in words:
        assert word in cell["reason"]
    # The fast version of the same model is unharmed.
    assert _cell(cells, model, "pt", "inference", "8")["status"] == "ok"


@pytest.mark.parametrize("model,status,words", [
    ("segv", "crashed", ["SIGSEGV", "check phase of config 8"]),
    ("exiter", "crashed", ["exited with code 3", "check phase of config 8"]),
    ("hang", "timeout", ["after 3 s", "check phase of config 8"]),
    ("hog", "oom", ["over --max-rss 1500000000", "check phase of config 8"]),
])
def test_process_faults(fault_run: tuple[subprocess.CompletedProcess, Path], model: str,
                        status: str, words: list[str]) -> None:
    _, out = fault_run
    cells = _cells(out)
    cell = _cell(cells, model, "ptnice", "inference", None)
    assert cell["status"] == status
    assert cell["phase"] == "check"
    for word in words:
        assert word in cell["reason"], cell["reason"]
    assert _cell(cells, model, "pt", "inference", "8")["status"] == "ok"


def test_crash_keeps_finished_configs(fault_run: tuple[subprocess.CompletedProcess, Path]) -> None:
    _, out = fault_run
    cells = _cells(out)
    first = _cell(cells, "midcrash", "ptnice", "inference", "8")
    assert first["status"] == "ok" and first["values"] == 2
    dead = _cell(cells, "midcrash", "ptnice", "inference", None)
    assert dead["status"] == "crashed"
    assert "SIGABRT" in dead["reason"] and "config 16" in dead["reason"]
    names = {b["metadata"].get("name") for b in json.loads(out.read_text())["benchmarks"]}
    assert "midcrash/ptnice/inference/8" in names


def test_stdout_and_stdin_do_not_corrupt(fault_run: tuple[subprocess.CompletedProcess, Path]) -> None:
    _, out = fault_run
    cell = _cell(_cells(out), "noisy", "ptnice", "inference", "8")
    assert cell["status"] == "ok" and cell["values"] == 2


@pytest.mark.parametrize("model,words", [
    ("badconfigs", ["badconfigs_bench_configs()", "definition_faults.py",
                    "planted: the second config cannot be built"]),
    ("noconfigs", ["noconfigs_bench_configs()", "yielded no configs"]),
    ("brokenimport", ["import_error.py", "kscperf_no_such_module_anywhere"]),
])
def test_definition_faults_in_worker(fault_run: tuple[subprocess.CompletedProcess, Path],
                                     model: str, words: list[str]) -> None:
    _, out = fault_run
    cell = _cell(_cells(out), model, "pt", "inference", None)
    assert cell["status"] == "failed"
    for word in words:
        assert word in cell["reason"]


def test_reference_returning_non_tensor(fault_run: tuple[subprocess.CompletedProcess, Path]) -> None:
    _, out = fault_run
    cell = _cell(_cells(out), "scalarref", "pt", "inference", "4")
    assert cell["status"] == "failed"
    assert "scalarref_pytorch (the reference) returned float" in cell["reason"]


@pytest.mark.parametrize("words", [
    ["syntax_error.py:2", "syntax error"],
    ["no_reference.py", "lonely_bench_configs", "no reference lonely_pytorch"],
    ["no_configs.py", "orphan_pytorch", "orphan_bench_configs"],
    ["model healthy is defined in both", "healthy.py", "zz_duplicate.py"],
])
def test_static_definition_problems(fault_run: tuple[subprocess.CompletedProcess, Path],
                                    words: list[str]) -> None:
    proc, out = fault_run
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert any(all(w in ln for w in words) for ln in lines), proc.stderr
    problems = json.loads(out.read_text())["kscperf"]["metadata"]["definition_problems"]
    assert any(all(w in p for w in words) for p in problems)


def test_pyperf_reads_the_fault_run(fault_run: tuple[subprocess.CompletedProcess, Path]) -> None:
    _, out = fault_run
    check = subprocess.run([sys.executable, "-m", "pyperf", "stats", str(out)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_writes_partial_then_resume_finishes(tmp_path: Path, sig: int) -> None:
    # Four processes per cell, 32 workers: after the third has ended there are enough left
    # that the signal lands mid-run even when this test reads the progress late.
    quick = [*QUICK, "--processes", "4"]
    out = tmp_path / "run.json"
    cmd = [sys.executable, "-m", "kscperf", str(FAULTS / "healthy.py"), "--tools",
           "pt,ptnice", *quick, "-o", str(out)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    seen = []
    assert proc.stderr is not None
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("[3/"):
            proc.send_signal(sig)
            break
    rest_out, rest_err = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen) + rest_err
    assert "Traceback" not in rest_err
    assert f"--resume {out}" in rest_err
    # What it measured is shown before the hint: the run table on stdout.
    assert rest_out.startswith("model") and "healthy" in rest_out, rest_out
    partial = json.loads(out.read_text())
    assert partial["kscperf"]["complete"] is False
    done_before = {(r["model"], r["tool"], r["task"], r["process_index"])
                   for r in partial["kscperf"]["runs"]}
    assert 3 <= len(done_before) < 32

    resumed = cli("--resume", str(out), "--tools", "pt,ptnice", *quick,
                   str(FAULTS / "healthy.py"))
    assert resumed.returncode == 0, resumed.stderr
    final = json.loads(out.read_text())
    assert final["kscperf"]["complete"] is True
    runs = [(r["model"], r["tool"], r["task"], r["process_index"])
            for r in final["kscperf"]["runs"]]
    assert len(runs) == len(set(runs)) == 32
    # Nothing measured before the interruption was run again.
    # One line per worker that ended (the lines of a worker still running say "running").
    ended = [line for line in resumed.stderr.splitlines()
             if "] healthy/" in line and " running " not in line]
    assert len(ended) == 32 - len(done_before)


def test_existing_output_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "keep.json"
    out.write_text("precious")
    proc = cli(str(FAULTS / "healthy.py"), "--tools", "pt", "--tasks", "inference", *QUICK,
                "-o", str(out))
    assert proc.returncode == 2
    assert out.read_text() == "precious"
    assert proc.stderr.count("\n") == 1 and "--replace" in proc.stderr


def test_unwritable_output_refused_before_running(tmp_path: Path) -> None:
    t0 = time.monotonic()
    proc = cli(str(FAULTS / "healthy.py"), "-o", "/proc/kscperf/results.json")
    assert proc.returncode == 2
    assert proc.stderr.startswith("run-benchmarks: error: cannot write results to "
                                  "/proc/kscperf/results.json")
    assert proc.stderr.count("\n") == 1
    assert time.monotonic() - t0 < 30
    assert "[1/" not in proc.stderr


@pytest.mark.parametrize("name,unknown", [("--tools", "pt,nosuchtool"), ("--tasks", "hessian")])
def test_unknown_names_one_line(name: str, unknown: str) -> None:
    proc = cli(str(FAULTS / "healthy.py"), name, unknown)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert unknown.split(",")[-1] in proc.stderr and "Traceback" not in proc.stderr


def _plain_pyperf_file(path: Path) -> None:
    import pyperf

    run = pyperf.Run([0.001, 0.0011], metadata={"name": "x", "loops": 1, "unit": "second"},
                     collect_metadata=False)
    pyperf.BenchmarkSuite([pyperf.Benchmark([run])]).dump(str(path))


BAD_FILES = {
    "empty.json": ("", "is empty"),
    "notjson.json": ("this is not json", "not valid JSON"),
    "truncated.json": ('{"version": "1.0", "benchmarks": [{"runs": [', "truncated"),
    "notpyperf.json": ('{"hello": 1}', "not a pyperf or kscperf results file"),
    "newer.json": ('{"version": "1.0", "benchmarks": [], "kscperf": {"format_version": 99}}',
                   "newer kscperf"),
    "binary.json": (b"\xff\xfe\x00garbage", "not valid JSON"),
}


@pytest.mark.parametrize("command", ["compare", "report"])
@pytest.mark.parametrize("bad", sorted(BAD_FILES))
def test_bad_results_files(tmp_path: Path, command: str, bad: str) -> None:
    content, words = BAD_FILES[bad]
    path = tmp_path / bad
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    good = tmp_path / "good.json"
    _plain_pyperf_file(good)
    args = ([command, str(good), str(path)] if command == "compare"
            else [command, str(path), "-o", str(tmp_path / "r.html")])
    proc = cli(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert words in proc.stderr and bad in proc.stderr


def test_missing_results_file(tmp_path: Path) -> None:
    proc = cli("compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert proc.returncode == 2
    assert "no such results file" in proc.stderr and proc.stderr.count("\n") == 1
