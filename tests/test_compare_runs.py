"""`compare` on real runs of a small model at the default profile.

* The same build run twice, as two separate runs, is compared in full. That it is no
  regression is an expected failure here: where the canary sees the machine's speed move,
  it makes those rows `machine-shift` (docs/method.md, "Machine speed"), but this VM also
  switches speed between processes in ways the canaries' medians do not show.
* A build in which one tool does 20 % more work, run against the base build with
  `run-benchmarks ab` (the two builds' workers take turns value by value), is called slower
  for exactly that tool's benchmarks, and --fail-on-regression exits 1. Separate runs cannot
  show this on a shared VM whose CPUs switch speed by 1.5x for seconds at a time (docs/method.md,
  "Two builds in lockstep"); the lockstep pairs cancel that.
* The same build against itself in lockstep is called the same everywhere.

What this 2-core VM cannot promise is kept apart, in `test_verdicts_the_machine_can_flip`: a
prep time here is one ~30 µs call, timed once per process, whose lockstep pairs are not
symmetric (the side that starts prepares first, the other after a wait), and prep rows are
tested unpaired, on one value per zygote. Those verdicts flipped in 5 of 8 A/A trials on
2026-11-30, before `ab` gave each process pair fresh zygotes; since then about 1 prep row in 25
of identical builds is still called changed (a 5 % test), which made a clean CI run fail in
December. So that test is an expected failure, the strict tests check only how prep rows are
tested, and every other claim here is strict.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runner_testing import cli

pytestmark = pytest.mark.integration

WORK = Path(__file__).parent / "fixtures" / "work" / "work.py"
SELECTION = [str(WORK), "--tools", "pt,ptnice", "--tasks", "inference", "-q"]


def _run(out: Path, build: str) -> None:
    proc = cli(*SELECTION, "--build", build, "-o", out, timeout=600)
    assert proc.returncode == 0, proc.stderr


def _compare(base: Path, new: Path) -> tuple[int, list[dict]]:
    proc = cli("compare", base, new, "--format", "json", "--fail-on-regression", timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)["benchmarks"]


def _ab(out: Path, nice_work: str) -> tuple[int, list[dict]]:
    proc = cli("ab", *SELECTION, "--new-env", f"KSCPERF_TEST_NICE_WORK={nice_work}", "-o", out,
               "--format", "json", "--fail-on-regression", timeout=600)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)["benchmarks"]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("compare-runs")


_REGRESSIONS = ("slower", "incorrect-now", "failing-now")


def _exit_matches(status: int, rows: list[dict]) -> bool:
    """--fail-on-regression's exit status says whether any row is a regression."""
    return status == (1 if any(r["verdict"] in _REGRESSIONS for r in rows) else 0)


@pytest.fixture(scope="module")
def twice(tmp: Path) -> tuple[int, list[dict]]:
    _run(tmp / "base.json", "base")
    _run(tmp / "again.json", "base")
    return _compare(tmp / "base.json", tmp / "again.json")


def test_same_build_twice_is_compared_in_full(twice: tuple[int, list[dict]]) -> None:
    status, rows = twice
    assert {r["kind"] for r in rows} >= {"time", "prep", "peak_rss"}
    assert _exit_matches(status, rows), rows
    for r in rows:
        if r["kind"] == "prep":
            # One zygote a side: prep is tested one value per zygote, which one run against
            # one cannot resolve (docs/method.md, "Single-shot kinds").
            assert (r["method"], r["verdict"], r["p_value"]) == ("values", "same", 1.0), r
            assert r["ratio"] == pytest.approx(r["new_value"] / r["base_value"]), r
            continue
        assert r["method"] == "processes" and r["ratio_low"] <= r["ratio"] <= r["ratio_high"], r
        assert r["ratio"] == pytest.approx(r["new_value"] / r["base_value"]), r
        if r["kind"] == "peak_rss":
            assert r["verdict"] == "same", r


def _assert_tested_per_zygote(row: dict) -> None:
    """`ab` restarts both zygotes before each process pair, so a prep row is tested on one
    value per zygote, a process each: Welch's t on their logs, an interval around the
    ratio. Its verdict is a test at 5 % (after Benjamini-Hochberg) of single ~30 us calls,
    wrong about 1 time in 25 on identical builds here (docs/validation.md, "One verdict per
    night"), so no strict test asserts it."""
    assert row["method"] == "processes", row
    assert row["ratio_low"] <= row["ratio"] <= row["ratio_high"], row
    assert row["ratio"] == pytest.approx(row["new_value"] / row["base_value"]), row


@pytest.fixture(scope="module")
def heavier(tmp: Path) -> tuple[int, list[dict], Path]:
    status, rows = _ab(tmp / "heavier", "1.2")
    return status, rows, tmp / "heavier"


def test_twenty_percent_more_work_is_slower_for_that_tool_only(
        heavier: tuple[int, list[dict], Path]) -> None:
    status, rows, _ = heavier
    by_name = {r["name"]: r for r in rows}
    nice = by_name["work/ptnice/inference/4096"]
    assert nice["method"] == "pairs" and nice["verdict"] == "slower", nice
    assert 1.1 < nice["ratio"] < 1.3 and nice["ratio_low"] > 1.05, nice
    for r in rows:
        if r["kind"] == "prep":  # a test at 5 % of one value per zygote: verdict not asserted
            _assert_tested_per_zygote(r)
            continue
        if r["tool"] == "pt":
            assert r["verdict"] == "same", r
        else:
            assert r["verdict"] in ("same", "slower"), r
    assert status == 1


@pytest.fixture(scope="module")
def same_in_lockstep(tmp: Path) -> tuple[int, list[dict]]:
    return _ab(tmp / "same", "1")


def test_same_build_in_lockstep_is_the_same(same_in_lockstep: tuple[int, list[dict]]) -> None:
    status, rows = same_in_lockstep
    assert _exit_matches(status, rows), rows
    for r in rows:
        if r["kind"] == "prep":  # its verdicts: test_verdicts_the_machine_can_flip
            _assert_tested_per_zygote(r)
            continue
        assert r["verdict"] == "same", r
        if r["kind"] == "time":
            assert r["method"] == "pairs" and 0.93 < r["ratio"] < 1.07, r


@pytest.mark.xfail(strict=False, reason="the machine's speed switches between processes "
                   "on a scale the canaries' run medians do not show: a clean CI run on "
                   "2026-11-30 found a regression in an A/A pair (prep and run time rows)")
def test_separate_runs_of_one_build_are_no_regression(twice: tuple[int, list[dict]]) -> None:
    """Two separate runs meet different machine speeds; the canary keeps compare from
    calling what the machine did faster or slower where it sees the machine change."""
    status, rows = twice
    assert status == 0, [r for r in rows if r["verdict"] != "same"]
    assert [r for r in rows if r["verdict"] in ("slower", "faster")] == []


@pytest.mark.xfail(strict=False, reason="one-shot prep times are tested unpaired even in "
                   "lockstep, and flip with the machine's state between the two builds' "
                   "preps")
def test_verdicts_the_machine_can_flip(same_in_lockstep: tuple[int, list[dict]],
                                       heavier: tuple[int, list[dict], Path]) -> None:
    status, rows = same_in_lockstep
    assert status == 0 and [r for r in rows if r["verdict"] != "same"] == []
    _, rows, _ = heavier
    assert [r for r in rows if r["kind"] == "prep" and r["tool"] == "pt"
            and r["verdict"] != "same"] == []


def test_compare_of_the_lockstep_files_pairs_them_and_pyperf_reads_them(
        heavier: tuple[int, list[dict], Path]) -> None:
    _, rows, out = heavier
    status, again = _compare(out / "base.json", out / "new.json")
    assert status == 1 and again == rows
    proc = subprocess.run([sys.executable, "-m", "pyperf", "compare_to", str(out / "base.json"),
                           str(out / "new.json")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "work/ptnice/inference/4096" in proc.stdout


def test_report_of_the_two_builds(heavier: tuple[int, list[dict], Path], tmp_path: Path) -> None:
    _, _, out = heavier
    html_path = tmp_path / "report.html"
    proc = cli("report", out / "base.json", out / "new.json", "-o", html_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    html = html_path.read_text()
    assert "work/ptnice/inference/4096" in html and "slower" in html
    assert "<svg" in html and "http://" not in html.replace("http://www.w3.org", "")
