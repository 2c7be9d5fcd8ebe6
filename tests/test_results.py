"""Tests of kscperf.results.files: writing and loading results files, their pyperf validity
(checked with pyperf's own command line), names, cell summaries, refusing bad paths and
reading bad files with one-line errors. Worker results are built by hand: no torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kscperf import names
from kscperf.errors import CellStatus, KscperfError
from kscperf.results import files as results
from kscperf.results.fileio import check_writable
from kscperf.results.files import CellSummary, load_results, write_results
from kscperf.results.merge import merge_results
from kscperf.spec import CellResult, CheckResult, ConfigResult

HOST = {"hostname": "perf1", "cpu_model_name": "Test CPU", "cpu_count": 2,
        "platform": "Linux-test", "python_version": "3.12.0", "torch_version": "2.13.0"}
BUILD_MD = {"build": "abc123", "date": "2024-05-01T10:00:00", "profile": "fast", "seed": 0,
            "git_commit": "abc123def", "git_dirty": False, "torch_version": "2.13.0"}


def check(passed: bool = True, what: str = "gradient", err: float = 1e-8) -> CheckResult:
    return CheckResult(passed, what, err, err * 10, 1e-4, 1e-5,
                       "" if passed else "tensor 0: 3 of 8 elements out of tolerance")


def config(name: str, status: CellStatus = CellStatus.OK, base: float = 1e-4,
           n: int = 3, **kw: Any) -> ConfigResult:
    fields: dict[str, Any] = dict(
        config=name, status=status, values=tuple(base * (1 + 0.01 * i) for i in range(n)),
        warmups=((1, base * 3), (256, base * 1.1)), loops=256, prep_s=2e-4,
        check=check(status != CellStatus.INCORRECT), peak_rss_bytes=300_000_000,
        date="2024-05-01T10:00:01", duration_s=0.1, numel=8)
    fields.update(kw)
    return ConfigResult(**fields)


def cell(model: str, tool: str, task: str, configs: tuple[ConfigResult, ...],
         process_index: int = 0, status: CellStatus = CellStatus.OK, reason: str = "",
         phase: str = "", compile_s: float | None = 0.5) -> CellResult:
    return CellResult(model=model, tool=tool, task=task, process_index=process_index,
                      status=status, reason=reason, phase=phase, compile_s=compile_s,
                      import_s=0.01, configs=configs, metadata=dict(HOST), wall_s=1.0)


def sample_runs(scale: float = 1.0) -> list[CellResult]:
    """Two processes of m/pt/bwd (two configs), one incorrect cell, one unsupported cell,
    one skipped config."""
    return [
        cell("m", "pt", "bwd", (config("8", base=1e-4 * scale), config("3x4", base=2e-4 * scale)),
             process_index=0),
        cell("m", "compiled", "bwd",
             (config("8", CellStatus.INCORRECT, base=5e-5 * scale,
                     reason="gradient differs from the float64 reference: tensor 0"),
              config("3x4", CellStatus.SKIPPED, values=(), warmups=(), loops=0, prep_s=None,
                     check=None, reason="jacobian too big")),
             compile_s=12.5),
        cell("m", "ts", "bwd", (), status=CellStatus.UNSUPPORTED,
             reason="torch.jit.script cannot compile m", phase="compile", compile_s=None),
        cell("m", "pt", "bwd", (config("8", base=1.1e-4 * scale),
                                config("3x4", base=2.1e-4 * scale)), process_index=1),
    ]


@pytest.fixture
def written(tmp_path: Path) -> Path:
    path = tmp_path / "build.json"
    write_results(str(path), sample_runs(), BUILD_MD)
    return path


def pyperf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pyperf", *args], capture_output=True,
                          text=True, timeout=120)


# -- round trip and names ------------------------------------------------------------------

def test_round_trip(written: Path) -> None:
    loaded = load_results(str(written))
    assert loaded.has_kscperf and loaded.complete
    assert loaded.runs == sample_runs()
    assert loaded.metadata["build"] == "abc123" and loaded.build == "abc123"
    assert loaded.metadata["git_commit"] == "abc123def"
    assert loaded.path == str(written)


def test_benchmark_names_and_values(written: Path) -> None:
    loaded = load_results(str(written))
    assert sorted(loaded.benchmarks) == sorted([
        "m/pt/bwd/8", "m/pt/bwd/3x4", "m/pt/bwd:compile", "m/pt/bwd/8:prep",
        "m/pt/bwd/3x4:prep", "m/compiled/bwd/8", "m/compiled/bwd:compile",
        "m/compiled/bwd/8:prep"])
    # all processes pooled in run order, and per process
    runs = sample_runs()
    assert loaded.benchmarks["m/pt/bwd/8"] == pytest.approx(
        list(runs[0].configs[0].values) + list(runs[3].configs[0].values))
    assert loaded.runs_values["m/pt/bwd/8"] == [pytest.approx(list(runs[0].configs[0].values)),
                                                pytest.approx(list(runs[3].configs[0].values))]
    assert loaded.benchmarks["m/compiled/bwd:compile"] == [12.5]
    assert loaded.benchmarks["m/pt/bwd:compile"] == [0.5, 0.5]  # one value per process
    assert loaded.benchmarks["m/pt/bwd/3x4:prep"] == [2e-4, 2e-4]
    # an incorrect cell is still timed
    assert len(loaded.benchmarks["m/compiled/bwd/8"]) == 3


def test_names_in_the_file_are_those_of_kscperf_names(written: Path) -> None:
    assert names.benchmark_name("vrelu3", "compiled", "bwd", "1024") == "vrelu3/compiled/bwd/1024"
    assert names.compile_name("vrelu3", "compiled", "bwd") == "vrelu3/compiled/bwd:compile"
    assert names.prep_name("vrelu3", "pt", "fwd", "16") == "vrelu3/pt/fwd/16:prep"
    for name in load_results(str(written)).benchmarks:
        parsed = names.parse_benchmark_name(name)
        assert parsed is not None and parsed.model == "m" and parsed.kind in ("time", "compile",
                                                                              "prep"), name


def test_cells_carry_every_outcome_field(written: Path) -> None:
    doc = json.loads(written.read_text())
    cells = {(c["model"], c["tool"], c["task"], c["config"]): c
             for c in doc["kscperf"]["cells"]}
    assert sorted(cells, key=str) == sorted([
        ("m", "pt", "bwd", "8"), ("m", "pt", "bwd", "3x4"), ("m", "compiled", "bwd", "8"),
        ("m", "compiled", "bwd", "3x4"), ("m", "ts", "bwd", None)], key=str)
    for c in cells.values():
        assert {"model", "tool", "task", "config", "status", "reason", "check", "compile_s",
                "prep_s", "peak_rss_bytes"} <= set(c)
    ok = cells["m", "pt", "bwd", "8"]
    assert (ok["status"], ok["reason"], ok["processes"], ok["values"]) == ("ok", "", 2, 6)
    assert ok["check"]["passed"] is True and ok["check"]["what"] == "gradient"
    assert ok["compile_s"] == [0.5, 0.5] and ok["prep_s"] == [2e-4, 2e-4]
    assert ok["peak_rss_bytes"] == 300_000_000 and ok["numel"] == 8
    bad = cells["m", "compiled", "bwd", "8"]
    assert bad["status"] == "incorrect"
    assert bad["reason"].startswith("gradient differs")
    assert bad["check"]["passed"] is False and bad["compile_s"] == [12.5]
    skipped = cells["m", "compiled", "bwd", "3x4"]
    assert (skipped["status"], skipped["reason"], skipped["check"]) == (
        "skipped", "jacobian too big", None)
    unsupported = cells["m", "ts", "bwd", None]
    assert unsupported["status"] == "unsupported"
    assert unsupported["reason"] == "torch.jit.script cannot compile m"
    assert unsupported["phase"] == "compile"
    assert doc["kscperf"]["format_version"] == results.FORMAT_VERSION
    assert doc["kscperf"]["metadata"] == BUILD_MD


def test_worst_process_decides_the_cell() -> None:
    runs = [cell("m", "pt", "fwd", (config("8"),), process_index=0),
            cell("m", "pt", "fwd", (), process_index=1, status=CellStatus.CRASHED,
                 reason="the worker was killed by SIGSEGV", phase="worker"),
            cell("m", "pt", "fwd", (config("8", CellStatus.INCORRECT),), process_index=2)]
    summary = results.summarize_cells(runs)
    by_config = {c.config: c for c in summary}
    assert by_config["8"].status is CellStatus.INCORRECT and by_config["8"].processes == 2
    assert by_config["8"].check is not None and by_config["8"].check.passed is False
    assert by_config[None].status is CellStatus.CRASHED
    assert by_config[None].reason == "the worker was killed by SIGSEGV"


def test_loaded_cells_are_the_typed_summaries(written: Path) -> None:
    loaded = load_results(str(written))
    assert loaded.cells == results.summarize_cells(sample_runs())
    doc = json.loads(written.read_text())
    assert [c.to_dict() for c in loaded.cells] == doc["kscperf"]["cells"]
    assert [CellSummary.from_dict(c) for c in doc["kscperf"]["cells"]] == loaded.cells
    ok = loaded.cell("m", "pt", "bwd", "8")
    assert ok is not None and ok.status is CellStatus.OK and ok.compile_s == (0.5, 0.5)
    assert ok.check == check() and ok.numel == 8 and ok.values == 6
    unsupported = loaded.cell("m", "ts", "bwd", None)
    assert unsupported is not None and unsupported.status is CellStatus.UNSUPPORTED
    assert unsupported.check is None and unsupported.phase == "compile"
    assert loaded.cell("m", "pt", "bwd", "9") is None


def test_pyperf_run_metadata(written: Path) -> None:
    assert json.loads(written.read_text())["version"] == "1.0"
    import pyperf

    suite = pyperf.BenchmarkSuite.load(str(written))
    bench = suite.get_benchmark("m/compiled/bwd/8")
    md = bench.get_metadata()
    assert md["kscperf_status"] == "incorrect"  # the mark travels with the pyperf data
    assert md["tool"] == "compiled" and md["task"] == "bwd" and md["config"] == "8"
    assert md["loops"] == 256 and md["unit"] == "second"
    assert md["hostname"] == "perf1"
    assert bench.get_nrun() == 1
    assert suite.get_benchmark("m/pt/bwd/8").get_nrun() == 2


# -- the file is valid pyperf --------------------------------------------------------------

@pytest.mark.integration
def test_pyperf_stats_and_check_accept_the_file(written: Path) -> None:
    stats = pyperf("stats", str(written))
    assert stats.returncode == 0, stats.stderr
    assert "m/pt/bwd/8" in stats.stdout
    checked = pyperf("check", str(written))
    assert checked.returncode == 0, checked.stderr
    assert "m/compiled/bwd/8" in checked.stdout
    dumped = pyperf("dump", str(written))
    assert dumped.returncode == 0, dumped.stderr


@pytest.mark.integration
def test_pyperf_compare_to_compares_two_builds(tmp_path: Path, written: Path) -> None:
    faster = tmp_path / "faster.json"
    write_results(str(faster), sample_runs(scale=0.5), dict(BUILD_MD, build="def456"))
    compared = pyperf("compare_to", str(written), str(faster))
    assert compared.returncode == 0, compared.stderr
    assert "m/pt/bwd/8" in compared.stdout
    assert "faster" in compared.stdout


def test_a_file_with_no_values_is_still_valid(tmp_path: Path) -> None:
    path = tmp_path / "nothing.json"
    write_results(str(path), [cell("m", "ts", "bwd", (), status=CellStatus.UNSUPPORTED,
                                   reason="no", compile_s=None)], BUILD_MD)
    loaded = load_results(str(path))
    assert loaded.benchmarks == {}
    assert [c.status for c in loaded.cells] == [CellStatus.UNSUPPORTED]


def test_incomplete_flag_and_atomic_replace(tmp_path: Path) -> None:
    path = tmp_path / "partial.json"
    write_results(str(path), sample_runs()[:1], BUILD_MD, complete=False)
    assert load_results(str(path)).complete is False
    write_results(str(path), sample_runs(), BUILD_MD)
    loaded = load_results(str(path))
    assert loaded.complete is True and len(loaded.runs) == 4
    assert sorted(os.listdir(tmp_path)) == ["partial.json"]  # no temporary file left behind


@pytest.mark.integration
def test_non_pyperf_metadata_values_stay_out_of_pyperf(tmp_path: Path) -> None:
    path = tmp_path / "md.json"
    md = dict(BUILD_MD, definition_problems=["a.py: broken"], note="two\nlines", empty="",
              ratio=float("nan"))
    write_results(str(path), sample_runs()[:1], md)
    assert pyperf("stats", str(path)).returncode == 0
    loaded = load_results(str(path))
    assert loaded.metadata["definition_problems"] == ["a.py: broken"]
    assert loaded.metadata["note"] == "two\nlines"


# -- merge ---------------------------------------------------------------------------------

@pytest.mark.integration
def test_merge_shards_of_one_build(tmp_path: Path) -> None:
    runs = sample_runs()
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "all.json"
    write_results(str(a), runs[:2], BUILD_MD)
    write_results(str(b), runs[2:], BUILD_MD, complete=False)
    merge_results([str(a), str(b)], str(out))
    merged = load_results(str(out))
    assert merged.runs == runs
    assert merged.complete is False
    assert merged.benchmarks["m/pt/bwd/8"] == load_results(str(tmp_path / "a.json")).benchmarks[
        "m/pt/bwd/8"] + load_results(str(b)).benchmarks["m/pt/bwd/8"]
    assert pyperf("check", str(out)).returncode == 0


def test_merge_refuses_two_builds(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_results(str(a), sample_runs()[:1], BUILD_MD)
    write_results(str(b), sample_runs()[1:2], dict(BUILD_MD, build="other"))
    with pytest.raises(KscperfError, match="only shards of one build"):
        merge_results([str(a), str(b)], str(tmp_path / "out.json"))
    assert not (tmp_path / "out.json").exists()


# -- check_writable ------------------------------------------------------------------------

def test_existing_file_is_refused_without_replace(written: Path) -> None:
    before = written.read_bytes()
    with pytest.raises(KscperfError) as info:
        check_writable(str(written), replace=False)
    assert "already exists" in str(info.value) and "--replace" in str(info.value)
    check_writable(str(written), replace=True)
    assert written.read_bytes() == before


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KscperfError, match="is a directory"):
        check_writable(str(tmp_path), replace=True)


@pytest.mark.parametrize("where", ["under_a_file", "proc"])
def test_unwritable_place_is_refused(tmp_path: Path, where: str) -> None:
    # chmod does not stop root; a path below a regular file or in /proc stops everyone
    if where == "under_a_file":
        (tmp_path / "plain").write_text("x")
        path = tmp_path / "plain" / "sub" / "out.json"
    else:
        path = Path("/proc/kscperf-no-such-dir/out.json")
    with pytest.raises(KscperfError, match="cannot write results to"):
        check_writable(str(path), replace=False)


def test_writable_place_is_accepted_and_left_clean(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "out.json"
    check_writable(str(path), replace=False)
    assert not path.exists()
    assert os.listdir(tmp_path / "new" / "dir") == []


def test_write_to_an_unwritable_place_is_a_kscperf_error(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    with pytest.raises(KscperfError, match="cannot write results to"):
        write_results(str(tmp_path / "plain" / "out.json"), sample_runs(), BUILD_MD)


# -- load_results errors -------------------------------------------------------------------

def one_line_error(path: Path) -> str:
    with pytest.raises(KscperfError) as info:
        load_results(str(path))
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return message


def test_missing_file(tmp_path: Path) -> None:
    assert "no such results file" in one_line_error(tmp_path / "absent.json")


def test_directory_as_results_file(tmp_path: Path) -> None:
    assert "is a directory" in one_line_error(tmp_path)


@pytest.mark.parametrize("content", [b"", b"  \n\n"])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.json"
    path.write_bytes(content)
    assert "is empty" in one_line_error(path)


@pytest.mark.parametrize("content", [b"hello", b"{'single': 'quotes'}", b"\xff\xfe\x00"])
def test_not_json(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "junk.json"
    path.write_bytes(content)
    message = one_line_error(path)
    assert "not valid JSON" in message or "not UTF-8 JSON" in message


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5, 0.77, 0.9, 0.999])
def test_truncated_file(tmp_path: Path, written: Path, fraction: float) -> None:
    path = tmp_path / "cut.json"
    data = written.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])
    message = one_line_error(path)
    assert "not valid JSON (the file looks truncated)" in message


@pytest.mark.parametrize("doc", [[1, 2], {"benchmarks": []}, {"version": "1.0"}, "text", 42])
def test_json_but_not_pyperf(tmp_path: Path, doc: Any) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps(doc))
    assert "not a pyperf or kscperf results file" in one_line_error(path)


def test_pyperf_shaped_but_invalid(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"version": "1.0", "benchmarks": [{"runs": "nope"}]}))
    assert "not a valid pyperf results file" in one_line_error(path)


def test_newer_format_version(tmp_path: Path, written: Path) -> None:
    doc = json.loads(written.read_text())
    doc["kscperf"]["format_version"] = results.FORMAT_VERSION + 1
    path = tmp_path / "future.json"
    path.write_text(json.dumps(doc))
    message = one_line_error(path)
    assert "newer kscperf" in message and "upgrade" in message


@pytest.mark.parametrize("section", [
    [], {"format_version": "1"}, {"format_version": 1, "cells": [{"status": "great"}]},
    {"format_version": 1, "cells": ["ok"]},
    {"format_version": 1, "cells": [{"status": "ok", "model": "m", "tool": "pt", "task": "fwd"}]},
    {"format_version": 1, "cells": [{"status": "ok", "model": 1, "tool": "pt", "task": "fwd",
                                     "config": None}]},
    {"format_version": 1, "cells": [{"status": "ok", "model": "m", "tool": "pt", "task": "fwd",
                                     "config": "8", "check": {"passed": True}}]},
    {"format_version": 1, "cells": [{"status": "ok", "model": "m", "tool": "pt", "task": "fwd",
                                     "config": "8", "check": dict(check().to_dict(),
                                                                  rtol="big")}]},
])
def test_malformed_kscperf_section(tmp_path: Path, written: Path, section: Any) -> None:
    doc = json.loads(written.read_text())
    doc["kscperf"] = section
    path = tmp_path / "malformed.json"
    path.write_text(json.dumps(doc))
    assert "malformed 'kscperf' section" in one_line_error(path)


def test_plain_pyperf_file_loads_without_kscperf(tmp_path: Path) -> None:
    import pyperf

    path = tmp_path / "plain.json"
    run = pyperf.Run([0.25, 0.5], metadata={"name": "bench_a", "loops": 4},
                     collect_metadata=False)
    pyperf.BenchmarkSuite([pyperf.Benchmark([run])]).dump(str(path))
    loaded = load_results(str(path))
    assert loaded.has_kscperf is False
    assert loaded.benchmarks == {"bench_a": [0.25, 0.5]}
    assert loaded.cells == [] and loaded.runs == []
    with pytest.raises(KscperfError, match="not written by kscperf"):
        results.load_cell_runs_for_resume(str(path))
