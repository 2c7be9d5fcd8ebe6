"""The machine-speed canary in comparisons: synthetic files whose machine shift is known (none,
the whole run, or some processes inside one run), and files from before the canary."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pyperf
import pytest

from kscperf.compare import builds as compare
from kscperf.compare.builds import Verdict
from kscperf.results.files import load_results
from kscperf.spec import CanaryProbe, CellResult
from kscperf.stats import machine
from kscperf.views import formatting
from synthetic import write_build

SMALL = dict(models=("vrelu3",), tools=("pt", "ptnice"), tasks=("fwd",),
             configs=("1024", "16384"))


def _compare(tmp_path: Path, base_kw: dict, new_kw: dict) -> compare.Comparison:
    base = write_build(str(tmp_path / "base.json"), "base", seed=1, **SMALL, **base_kw)
    new = write_build(str(tmp_path / "new.json"), "new", seed=2, **SMALL, **new_kw)
    return compare.compare_builds(load_results(base), load_results(new))


def _time_verdicts(c: compare.Comparison) -> dict[str, Verdict]:
    return {r.name: r.verdict for r in c.rows if r.kind == "time"}


def test_the_same_machine_is_unchanged_and_verdicts_stand(tmp_path: Path) -> None:
    c = _compare(tmp_path, {}, {"factor": lambda m, t, k, cfg: 1.3 if t == "pt" else 1.0})
    assert c.machine.known and not c.machine.shifted
    assert c.machine.shift is not None and 0.97 < c.machine.shift.ratio < 1.03
    verdicts = _time_verdicts(c)
    assert verdicts == {"vrelu3/pt/fwd/1024": Verdict.SLOWER, "vrelu3/pt/fwd/16384": Verdict.SLOWER,
                        "vrelu3/ptnice/fwd/1024": Verdict.SAME,
                        "vrelu3/ptnice/fwd/16384": Verdict.SAME}
    assert c.has_regression
    assert formatting.machine_lines(c.machine)[0].startswith("machine speed: unchanged")


def test_a_slower_machine_is_found_and_blames_no_build(tmp_path: Path) -> None:
    c = _compare(tmp_path, {}, {"machine": lambda *k: 1.5})
    assert c.machine.shifted
    shift = c.machine.shift
    assert shift is not None and shift.low < 1.5 < shift.high and shift.p_value < 0.001
    assert set(_time_verdicts(c).values()) == {Verdict.MACHINE_SHIFT}
    assert not c.has_regression
    # Compile and prep are times as well; memory is not moved by the machine's speed.
    by_kind = {r.kind: r.verdict for r in c.rows}
    assert by_kind["prep"] is not Verdict.SLOWER
    line = formatting.machine_lines(c.machine)[0]
    assert line.startswith("machine changed: NEW's machine ran 1.5")
    assert "slower than BASE's" in line
    table = formatting.format_comparison(c)
    assert table.splitlines()[2] == line
    assert re.search(r"^regression: no \(\d+ machine-shift rows are not counted as "
                     r"regressions\)$", table, re.M)
    doc = json.loads(formatting.format_comparison(c, "json"))
    assert doc["machine"]["shift"]["shifted"] is True
    assert doc["benchmarks"][0]["verdict"] == "machine-shift"


def test_a_faster_machine_does_not_turn_a_slowdown_into_a_speedup(tmp_path: Path) -> None:
    # NEW's pt does 20 % more work, on a machine 1.7x faster: raw, pt looks 0.7x (faster).
    c = _compare(tmp_path, {}, {"machine": lambda *k: 1 / 1.7,
                                "factor": lambda m, t, k, cfg: 1.2 if t == "pt" else 1.0})
    assert c.machine.shifted and c.machine.shift is not None and c.machine.shift.ratio < 0.7
    verdicts = _time_verdicts(c)
    assert Verdict.FASTER not in verdicts.values() and Verdict.SLOWER not in verdicts.values()
    assert verdicts["vrelu3/pt/fwd/1024"] is Verdict.MACHINE_SHIFT


def test_a_slowdown_against_the_machine_stands(tmp_path: Path) -> None:
    # The machine got 1.3x faster, yet pt got 2x slower: the machine cannot explain that.
    c = _compare(tmp_path, {}, {"machine": lambda *k: 1 / 1.3,
                                "factor": lambda m, t, k, cfg: 2.0 if t == "pt" else 1.0})
    assert c.machine.shifted
    verdicts = _time_verdicts(c)
    assert verdicts["vrelu3/pt/fwd/1024"] is Verdict.SLOWER
    assert verdicts["vrelu3/ptnice/fwd/1024"] is Verdict.MACHINE_SHIFT
    assert c.has_regression


def test_a_same_that_a_shift_could_hide_is_not_called_same(tmp_path: Path) -> None:
    # pt 1.5x slower, machine 1.5x faster: the raw ratio is 1.
    c = _compare(tmp_path, {}, {"machine": lambda *k: 1 / 1.5,
                                "factor": lambda m, t, k, cfg: 1.5 if t == "pt" else 1.0})
    assert _time_verdicts(c)["vrelu3/pt/fwd/1024"] is Verdict.MACHINE_SHIFT


def _slow_state(model: str, tool: str, task: str, process: int) -> float:
    return 1.5 if tool == "pt" and process >= 3 else 1.0


def test_processes_in_another_state_inside_one_run_are_identified(tmp_path: Path) -> None:
    c = _compare(tmp_path, {"processes": 6}, {"processes": 6, "machine": _slow_state})
    assert c.machine.base is not None and c.machine.base.odd == ()
    new = c.machine.new
    assert new is not None
    assert sorted((p.cell, p.process_index) for p in new.odd) == [
        ("vrelu3/pt/fwd", 3), ("vrelu3/pt/fwd", 4), ("vrelu3/pt/fwd", 5)]
    verdicts = _time_verdicts(c)
    assert verdicts["vrelu3/pt/fwd/1024"] is not Verdict.SLOWER
    assert verdicts["vrelu3/ptnice/fwd/1024"] is Verdict.SAME
    assert not c.has_regression
    assert any(line.startswith("machine states: 3 of 12 NEW processes")
               for line in formatting.machine_lines(c.machine))


def test_a_cell_timed_while_the_machine_was_slow_is_not_called_slower(tmp_path: Path) -> None:
    # Every process of NEW's pt ran in a slow spell; the other cells, and the run's median,
    # did not.
    three_tools = dict(tools=("pt", "ptnice", "compiled"))
    base = write_build(str(tmp_path / "base.json"), "base", seed=1, **{**SMALL, **three_tools})
    new = write_build(str(tmp_path / "new.json"), "new", seed=2, **{**SMALL, **three_tools},
                      machine=lambda m, t, k, p: 1.5 if t == "pt" else 1.0)
    c = compare.compare_builds(load_results(base), load_results(new))
    assert not c.machine.shifted
    assert c.machine.new is not None and len(c.machine.new.odd) == 3
    verdicts = _time_verdicts(c)
    assert verdicts["vrelu3/pt/fwd/1024"] is Verdict.MACHINE_SHIFT
    assert verdicts["vrelu3/ptnice/fwd/1024"] is Verdict.SAME
    assert not c.has_regression


def test_a_real_change_survives_a_few_odd_processes(tmp_path: Path) -> None:
    def one_slow(model: str, tool: str, task: str, process: int) -> float:
        return 1.5 if tool == "pt" and process == 5 else 1.0

    c = _compare(tmp_path, {"processes": 6},
                 {"processes": 6, "machine": one_slow,
                  "factor": lambda m, t, k, cfg: 1.3 if t == "pt" else 1.0})
    assert c.machine.new is not None and len(c.machine.new.odd) == 1
    assert _time_verdicts(c)["vrelu3/pt/fwd/1024"] is Verdict.SLOWER


def test_a_state_change_during_a_process_marks_it_odd() -> None:
    def probe(when: str, scale: float) -> CanaryProbe:
        return CanaryProbe(when, "2024-05-01T12:00:00.000",
                           (("python_loop", 2.7e-4 * scale), ("matmul", 1e-5 * scale)))

    runs = [CellResult("m", "pt", "fwd", i, compare.CellStatus.OK,
                       canary=(probe("before", 1.0), probe("after", 1.6 if i == 2 else 1.0)))
            for i in range(5)]
    speed = machine.machine_speed(runs)
    assert speed is not None
    assert [p.process_index for p in speed.odd] == [2]
    assert math.isclose(speed.canary_s, math.sqrt(2.7e-4 * 1e-5))
    assert speed.to_dict()["processes"] == 5 and speed.to_dict()["odd_processes"] == 1


def test_files_without_a_canary_still_compare_with_a_note(tmp_path: Path) -> None:
    c = _compare(tmp_path, {"canary": False},
                 {"factor": lambda m, t, k, cfg: 1.3 if t == "pt" else 1.0})
    assert not c.machine.known and c.machine.shift is None
    assert _time_verdicts(c)["vrelu3/pt/fwd/1024"] is Verdict.SLOWER
    assert formatting.machine_lines(c.machine)[0].startswith(
        "machine speed: unknown (BASE has no canary")


def test_a_format_1_file_loads_and_compares(tmp_path: Path) -> None:
    path = write_build(str(tmp_path / "old.json"), "old", seed=1, canary=False, **SMALL)
    doc = json.loads(Path(path).read_text())
    doc["kscperf"]["format_version"] = 1
    del doc["kscperf"]["machine_speed"]
    for run in doc["kscperf"]["runs"]:
        del run["canary"]
    Path(path).write_text(json.dumps(doc))
    old = load_results(path)
    assert all(r.canary == () for r in old.runs)
    new = load_results(write_build(str(tmp_path / "new.json"), "new", seed=2, **SMALL))
    c = compare.compare_builds(old, new)
    assert not c.machine.known
    assert set(_time_verdicts(c).values()) == {Verdict.SAME}


def test_the_file_records_the_figure_and_stays_pyperf(tmp_path: Path) -> None:
    path = write_build(str(tmp_path / "b.json"), "b", seed=1, **SMALL)
    doc = json.loads(Path(path).read_text())
    figure = doc["kscperf"]["machine_speed"]
    assert figure["processes"] == 6 and figure["odd_processes"] == 0
    assert figure["low_s"] <= figure["canary_s"] <= figure["high_s"]
    assert [p["when"] for p in doc["kscperf"]["runs"][0]["canary"]] == ["before", "after"]
    suite = pyperf.BenchmarkSuite.load(path)
    assert "vrelu3/pt/fwd/1024" in suite.get_benchmark_names()


@pytest.mark.parametrize("bad", [{"when": "before", "at": "x", "seconds": [1, 2]},
                                 {"when": "before", "at": "x"}])
def test_a_malformed_canary_is_refused_with_one_line(tmp_path: Path, bad: dict) -> None:
    path = write_build(str(tmp_path / "b.json"), "b", seed=1, **SMALL)
    doc = json.loads(Path(path).read_text())
    doc["kscperf"]["runs"][0]["canary"] = [bad]
    Path(path).write_text(json.dumps(doc))
    with pytest.raises(compare.KscperfError, match="malformed 'kscperf' section"):
        load_results(path)


def test_canaries_too_noisy_to_tell_leave_the_machine_unresolved(tmp_path: Path) -> None:
    # NEW's processes met the machine in states 0.9x-1.15x: its canary median moved, but
    # not significantly. pt also got 1.15x slower, which such a machine could explain.
    states = {("pt", 0): 1.0, ("pt", 1): 1.15, ("pt", 2): 0.9,
              ("ptnice", 0): 1.1, ("ptnice", 1): 0.95, ("ptnice", 2): 1.12}
    c = _compare(tmp_path, {}, {"machine": lambda m, t, k, p: states[t, p],
                                "factor": lambda m, t, k, cfg: 1.15 if t == "pt" else 1.0})
    shift = c.machine.shift
    assert shift is not None and shift.state is machine.ShiftState.UNRESOLVED
    assert not c.machine.shifted and c.machine.could_have_shifted
    assert shift.low < 1 < shift.high
    verdicts = _time_verdicts(c)
    assert Verdict.SLOWER not in verdicts.values() and Verdict.FASTER not in verdicts.values()
    assert not c.has_regression
    assert formatting.machine_lines(c.machine)[0].startswith("machine speed: unresolved")


def test_one_canary_a_side_leaves_no_confident_time_verdict(tmp_path: Path) -> None:
    # One cell, one process each: the canary ratio has no interval. The machine was 1.3x
    # slower and the code did not change: that must not be a regression.
    one = dict(models=("vrelu3",), tools=("pt",), tasks=("fwd",), configs=("1024",),
               processes=1)
    base = write_build(str(tmp_path / "a.json"), "a", seed=1, **one)
    new = write_build(str(tmp_path / "b.json"), "b", seed=2, machine=lambda *k: 1.3, **one)
    c = compare.compare_builds(load_results(base), load_results(new))
    assert c.machine.shift is not None and c.machine.shift.state is machine.ShiftState.UNRESOLVED
    assert _time_verdicts(c) == {"vrelu3/pt/fwd/1024": Verdict.MACHINE_SHIFT}
    assert not c.has_regression


def test_geometric_means_leave_out_machine_shift_rows(tmp_path: Path) -> None:
    c = _compare(tmp_path, {}, {"machine": lambda *k: 1.3})
    assert set(_time_verdicts(c).values()) == {Verdict.MACHINE_SHIFT}
    assert c.geomeans == ()
