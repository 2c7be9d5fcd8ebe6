"""`bisect --by instructions`: the search driven by instruction counts, one counting run per
commit. The search is tested with a stand-in counter (the seam `run_bisect` takes), whose
levels are a scenario's counts with a stated process spread, so that every path runs in a
second; the counting run itself (`counts.count_commit`) is Callgrind's, measured for real in
tests/test_instructions.py and over a 64-commit range by `tools/truth-check --sections
instructions`. The command line is run for real where it needs no Valgrind."""

from __future__ import annotations

import dataclasses
import math
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kscperf.bisect import counts
from kscperf.bisect.builds import Environment
from kscperf.bisect.drive import BisectRequest, run_bisect
from kscperf.bisect.pairs import unusable_reason
from kscperf.errors import CellStatus, KscperfError
from kscperf.orchestrator.session import RunConfig
from kscperf.spec import CellResult, ConfigResult
from kscperf.views.bisecttext import format_bisect

_COUNT = 2_000_000.0  # instructions per call at the good end


def _builds_file(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "builds.txt"
    path.write_text("".join(f"b{i:02d} {sys.executable}\n" for i in range(n)))
    return path


def _counter(step_at: dict[int, float], spread: float, calls: list[str], seed: int = 1,
             failing: frozenset[int] = frozenset()) -> counts.Counter:
    """Counts of build `bNN`: the good end's count times every step at or before NN, each
    process off by a normal relative error of `spread`; `calls` records what was counted."""
    rng = random.Random(seed)

    def count(config: RunConfig, env: Environment, out_dir: str, processes: int
              ) -> counts.Counted:
        calls.append(env.label)
        index = int(env.label[1:])
        if index in failing:
            return counts.Counted([], 1.0, "slow/pt/inference crashed: SIGILL")
        level = math.log(_COUNT) + sum(math.log(r) for at, r in step_at.items() if index >= at)
        return counts.Counted([level + rng.gauss(0.0, spread) for _ in range(processes)], 1.0)
    return count


def _bisect(tmp_path: Path, n: int, counter: counts.Counter, resume: bool = False
            ) -> object:
    request = BisectRequest(good="b00", bad=f"b{n - 1:02d}", config=RunConfig(),
                            cache_dir=str(tmp_path / "cache"),
                            builds_file=str(_builds_file(tmp_path, n)), by="instructions",
                            resume=resume)
    return run_bisect(request, counter=counter)


def test_a_two_percent_step_among_64_builds_is_found_counting_each_build_once(
        tmp_path: Path) -> None:
    calls: list[str] = []
    result = _bisect(tmp_path, 64, _counter({40: 1.02}, 0.001, calls))
    assert result.verdict == "culprit"  # type: ignore[attr-defined]
    [culprit] = result.culprits  # type: ignore[attr-defined]
    assert culprit.commits[0].sha == "b40" and culprit.parent.sha == "b39"
    assert culprit.ratio_low > 1.0 and culprit.error < 0.05
    # One counting run a commit: the ends, about log2(64) probes, nothing counted twice.
    assert len(calls) == len(set(calls)) and len(calls) <= 10
    assert result.counting_runs == len(calls)  # type: ignore[attr-defined]
    text = format_bisect(result, "table")  # type: ignore[arg-type]
    assert re.match(r"culprit: b00\.\.b63 \(64 commits\), instruction step 1\.0[12]\d*x "
                    r"\[.*\] over 3 counting processes a commit\n", text), text
    assert re.search(r"\d+ comparisons of \d+ commits' instruction counts \(one counting run "
                     r"a commit\), 0 builds run", text), text


def test_identical_counts_are_not_reproduced_after_counting_the_two_ends(
        tmp_path: Path) -> None:
    calls: list[str] = []
    result = _bisect(tmp_path, 16, _counter({}, 0.001, calls))
    assert result.verdict == "not-reproduced"  # type: ignore[attr-defined]
    assert calls == ["b00", "b15"]
    assert "within ±0.5 % (none)" in format_bisect(result) or \
        "no step of 0.5 % or more" in format_bisect(result)  # type: ignore[arg-type]


def test_a_build_that_cannot_be_counted_is_untestable_and_makes_a_range(
        tmp_path: Path) -> None:
    calls: list[str] = []
    result = _bisect(tmp_path, 16, _counter({9: 1.03}, 0.001, calls,
                                            failing=frozenset({7, 8})))
    assert result.verdict == "range"  # type: ignore[attr-defined]
    [part] = result.culprits  # type: ignore[attr-defined]
    assert [c.sha for c in part.commits] == ["b07", "b08", "b09"]
    assert [(c.sha, why) for c, why in result.untestable] == [  # type: ignore[attr-defined]
        ("b07", "its count failed: slow/pt/inference crashed: SIGILL"),
        ("b08", "its count failed: slow/pt/inference crashed: SIGILL")]


def test_a_resumed_bisect_replays_every_count_and_counts_nothing_again(tmp_path: Path) -> None:
    first = _bisect(tmp_path, 32, _counter({20: 1.05}, 0.001, []))

    def never(*_: object) -> counts.Counted:
        raise AssertionError("a resumed bisect counted a commit again")
    again = _bisect(tmp_path, 32, never, resume=True)
    assert [c.commits for c in again.culprits] == \
        [c.commits for c in first.culprits]  # type: ignore[attr-defined]
    assert all(p.replayed for p in again.probes)  # type: ignore[attr-defined]


def test_a_failing_good_end_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(KscperfError, match=r"^the base b00 of a bisect comparison cannot be "
                       r"counted: its count failed: slow/pt/inference crashed: SIGILL\.$"):
        _bisect(tmp_path, 8, _counter({}, 0.001, [], failing=frozenset({0})))


def test_fewer_than_three_counting_processes_or_an_unknown_kind_are_refused() -> None:
    with pytest.raises(KscperfError, match="--instruction-processes 2 is below the 3"):
        BisectRequest(good="a", bad="b", config=RunConfig(), cache_dir="c", repo=".",
                      by="instructions", instruction_processes=2)
    with pytest.raises(KscperfError, match="--by 'memory': a bisect compares by time or "
                       "instructions"):
        BisectRequest(good="a", bad="b", config=RunConfig(), cache_dir="c", repo=".",
                      by="memory")


def _count_result(process: int, counted: dict[str, float | None],
                  skipped: str = "") -> CellResult:
    configs = tuple(ConfigResult(config=name, status=CellStatus.SKIPPED if value is None
                                 else CellStatus.OK, reason=skipped if value is None else "",
                                 instructions=value) for name, value in counted.items())
    return CellResult(model="slow", tool="pt", task="inference", process_index=process,
                      status=CellStatus.OK, configs=configs)


def test_a_commits_level_is_the_mean_log_count_of_the_configs_every_process_counted() -> None:
    runs = [_count_result(0, {"a": 1e6, "b": 4e6}), _count_result(1, {"a": 2e6, "b": 2e6})]
    levels, failed = counts._levels(runs)
    assert failed == "" and levels == pytest.approx([math.log(2e6), math.log(2e6)])
    none = [_count_result(p, {"a": None}, skipped="valgrind is not installed") for p in (0, 1)]
    assert counts._levels(none) == (
        [], "slow/pt/inference/a skipped: valgrind is not installed")


def test_a_worker_is_unusable_to_a_bisect_unless_each_config_is_ok_or_skipped() -> None:
    assert unusable_reason(_count_result(0, {"a": 1e6, "b": None}, skipped="too big")) == ""
    broken = dataclasses.replace(_count_result(0, {"a": None, "b": 1e6}), configs=(
        ConfigResult(config="a", status=CellStatus.SKIPPED, reason="too big"),
        ConfigResult(config="b", status=CellStatus.FAILED, reason="ValueError: no kernel")))
    assert unusable_reason(broken) == "slow/pt/inference failed: ValueError: no kernel"
    # To a bisect, a tool that cannot run the cell at a commit makes that commit fail.
    unsupported = dataclasses.replace(broken, status=CellStatus.UNSUPPORTED, configs=(),
                                      reason="torch.jit.script cannot compile it")
    assert unusable_reason(unsupported) == (
        "slow/pt/inference unsupported: torch.jit.script cannot compile it")


def test_bisect_by_instructions_without_valgrind_says_so_in_one_sentence(
        tmp_path: Path) -> None:
    builds = _builds_file(tmp_path, 3)
    bench = tmp_path / "slow.py"
    bench.write_text("import torch\n\ndef slow_bench_configs():\n    yield torch.ones(4)\n\n"
                     "def slow_pytorch(x):\n    return x * 2\n")
    proc = subprocess.run([sys.executable, "-m", "kscperf", "bisect", "--builds", str(builds),
                           "--good", "b00", "--bad", "b02", "--by", "instructions",
                           "--tools", "pt", "--tasks", "inference", "--cache",
                           str(tmp_path / "cache"), str(bench)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "PATH": str(tmp_path)})
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "bisect --by instructions cannot count here: valgrind is not installed" in line
