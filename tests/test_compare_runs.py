"""`compare` on real runs of a small model at the default profile: the same build twice is
called the same everywhere, and a build in which one tool does 20 % more work is called slower
for exactly that tool's benchmarks, with --fail-on-regression's exit status to match."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORK = Path(__file__).parent / "fixtures" / "work" / "work.py"


def _run(out: Path, build: str, nice_work: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kscperf", str(WORK), "--tools", "pt,ptnice", "--tasks",
         "inference", "--build", build, "-q", "-o", str(out)],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, KSCPERF_TEST_NICE_WORK=nice_work))
    assert proc.returncode == 0, proc.stderr


def _compare(base: Path, new: Path) -> tuple[int, list[dict]]:
    proc = subprocess.run([sys.executable, "-m", "kscperf", "compare", str(base), str(new),
                           "--format", "json", "--fail-on-regression"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    return proc.returncode, doc["benchmarks"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("compare-runs")
    paths = {name: tmp / f"{name}.json" for name in ("base", "again", "heavier")}
    _run(paths["base"], "base", "1")
    _run(paths["again"], "base", "1")
    _run(paths["heavier"], "heavier", "1.2")
    return paths


def _time_rows(rows: list[dict]) -> dict[str, dict]:
    return {r["name"]: r for r in rows if r.get("kind", "time") == "time"}


def test_same_build_twice_is_the_same(runs: dict[str, Path]) -> None:
    status, rows = _compare(runs["base"], runs["again"])
    assert status == 0, [r for r in rows if r["verdict"] != "same"]
    assert {r["verdict"] for r in _time_rows(rows).values()} == {"same"}
    for r in rows:
        assert r["verdict"] == "same", r


def test_twenty_percent_more_work_is_slower_for_that_tool_only(runs: dict[str, Path]) -> None:
    status, rows = _compare(runs["base"], runs["heavier"])
    time_rows = _time_rows(rows)
    nice = time_rows["work/ptnice/inference/4096"]
    assert nice["verdict"] != "faster" and time_rows["work/pt/inference/4096"]["verdict"] \
        != "slower"
    worst_mde = max(r["min_detectable_effect"] for r in time_rows.values())
    if worst_mde >= 0.15:
        # A shared VM whose speed drifts from one process to the next cannot resolve 20 %
        # with 3 processes; compare says so itself. tools/truth-check measures that noise.
        pytest.skip(f"this machine's process-to-process noise leaves a minimum detectable "
                    f"effect of {worst_mde:.0%}, too coarse to resolve a 20 % change")
    assert nice["verdict"] == "slower", nice
    assert 1.1 < nice["ratio"] < 1.35 and nice["ratio_low"] > 1.0
    assert time_rows["work/pt/inference/4096"]["verdict"] == "same"
    assert status == 1


def test_report_of_the_two_builds(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "kscperf", "report", str(runs["base"]),
                           str(runs["heavier"]), "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert "work/ptnice/inference/4096" in html and "slower" in html
    assert "<svg" in html and "http://" not in html.replace("http://www.w3.org", "")
