"""kscperf.compare.builds and the comparison's text forms (kscperf.views.formatting), on synthetic
results files whose changes are known: verdicts, regressions, geometric means, refusals,
plain pyperf files, escaping, and `pyperf compare_to` still reading the files."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import synthetic
from kscperf.views import formatting
from kscperf.compare.builds import (
    REGRESSION_VERDICTS,
    Comparison,
    GeoMean,
    Verdict,
    check_comparable,
    compare_builds,
)
from kscperf.errors import RECORDED_STATUSES, CellStatus, KscperfError
from kscperf.results.files import LoadedResults, load_results, write_results
from kscperf.results.samples import benchmark_parts
from kscperf.spec import CellResult


def _compiled_20_percent(model: str, tool: str, task: str, config: str) -> float:
    return 1.2 if tool == "compiled" else 1.0


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("compare")
    out = {
        "base": synthetic.write_build(str(d / "base.json"), "base", seed=1),
        "same": synthetic.write_build(str(d / "same.json"), "same", seed=2),
        "slow": synthetic.write_build(str(d / "slow.json"), "slow", seed=3,
                                      factor=_compiled_20_percent),
        "broken": synthetic.write_build(
            str(d / "broken.json"), "broken", seed=4,
            status=lambda m, t, k, c: (CellStatus.INCORRECT if (m, t, k, c) == (
                "vrelu3", "ptnice", "fwd", "1024") else CellStatus.OK),
            cell_status=lambda m, t, k: (CellStatus.CRASHED if (m, t, k) == (
                "sqrl", "pt", "bwd") else None)),
    }
    return {k: Path(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def loaded(files: dict[str, Path]) -> dict[str, LoadedResults]:
    return {k: load_results(str(v)) for k, v in files.items()}


def _verdicts(comparison: Comparison, *verdicts: Verdict) -> list[str]:
    return sorted(r.name for r in comparison.rows if r.verdict in verdicts)


def test_two_runs_of_one_build_call_nothing_faster_or_slower(
        loaded: dict[str, LoadedResults]) -> None:
    comparison = compare_builds(loaded["base"], loaded["same"])
    assert {r.verdict for r in comparison.rows} == {Verdict.SAME}
    assert not comparison.has_regression
    assert {r.kind for r in comparison.rows} == {"time", "compile", "prep", "peak_rss"}
    time_rows = [r for r in comparison.rows if r.kind == "time"]
    assert len(time_rows) == 2 * 3 * 2 * 3
    assert all(r.method == "processes" for r in time_rows)
    assert all(r.ratio_low <= r.ratio <= r.ratio_high for r in time_rows)
    detectable = sorted(r.min_detectable_effect for r in time_rows)
    assert detectable[0] > 0 and detectable[len(detectable) // 2] < 0.05


def test_twenty_percent_more_work_in_one_tool_is_slower_for_exactly_its_benchmarks(
        loaded: dict[str, LoadedResults]) -> None:
    comparison = compare_builds(loaded["base"], loaded["slow"])
    slower = _verdicts(comparison, Verdict.SLOWER)
    expected = sorted(f"{m}/compiled/{k}/{c}" for m in synthetic.MODELS
                      for k in synthetic.TASKS for c in synthetic.CONFIGS)
    assert slower == expected
    assert _verdicts(comparison, Verdict.FASTER) == []
    assert comparison.has_regression
    assert {r.name for r in comparison.regressions} == set(expected)
    for row in comparison.rows:
        if row.verdict == Verdict.SLOWER:
            assert row.ratio == pytest.approx(1.2, rel=0.04)
            assert row.ratio_low > 1.0 and row.q_value < comparison.alpha
    geo = {(g.by, g.key): g for g in comparison.geomeans}
    assert geo[("tool", "compiled")].ratio == pytest.approx(1.2, rel=0.02)
    assert geo[("tool", "compiled")].low > 1.15
    assert geo[("tool", "pt")].ratio == pytest.approx(1.0, abs=0.02)
    assert geo[("tool", "compiled")].n == 12
    assert {("task", "fwd"), ("task", "bwd"), ("all", "")} <= set(geo)


def test_rows_come_slowest_change_first(loaded: dict[str, LoadedResults]) -> None:
    comparison = compare_builds(loaded["base"], loaded["slow"])
    order = list(Verdict)
    positions = [order.index(r.verdict) for r in comparison.rows]
    assert positions == sorted(positions)
    slower = [r.ratio for r in comparison.rows if r.verdict == Verdict.SLOWER]
    assert slower == sorted(slower, reverse=True)


def test_correctness_and_failures(loaded: dict[str, LoadedResults]) -> None:
    comparison = compare_builds(loaded["base"], loaded["broken"])
    assert _verdicts(comparison, Verdict.INCORRECT_NOW) == ["vrelu3/ptnice/fwd/1024"]
    assert _verdicts(comparison, Verdict.FAILING_NOW) == [
        f"sqrl/pt/bwd/{c}" for c in sorted(synthetic.CONFIGS)]
    assert comparison.has_regression
    incorrect = comparison.row("vrelu3/ptnice/fwd/1024")
    assert incorrect is not None
    assert (incorrect.base_status, incorrect.new_status) == ("ok", "incorrect")
    # An incorrect cell is still timed, so it still has a ratio.
    assert math.isfinite(incorrect.ratio)
    failing = comparison.row("sqrl/pt/bwd/1024")
    assert failing is not None and failing.new_status == "crashed"
    assert "crashed" in failing.reason
    # The crashed cell's prep and memory are not listed as missing: the failure says it.
    assert comparison.row("sqrl/pt/bwd/1024:prep") is None
    # Geometric means leave out what is wrong in either build.
    all_geo = next(g for g in comparison.geomeans if g.by == "all")
    assert all_geo.n == 36 - 1 - 3

    back = compare_builds(loaded["broken"], loaded["base"])
    assert _verdicts(back, Verdict.FIXED) == sorted(
        ["vrelu3/ptnice/fwd/1024"] + [f"sqrl/pt/bwd/{c}" for c in synthetic.CONFIGS])
    assert not back.has_regression


def test_every_status_against_ok(tmp_path: Path) -> None:
    every = tuple(s.value for s in CellStatus if s in RECORDED_STATUSES)
    kwargs: dict[str, Any] = dict(models=("m",), tools=("pt",), tasks=("fwd",), configs=every)
    base = synthetic.write_build(str(tmp_path / "a.json"), "a", seed=1, **kwargs)
    new = synthetic.write_build(str(tmp_path / "b.json"), "b", seed=2,
                                status=lambda m, t, k, c: CellStatus(c), **kwargs)
    comparison = compare_builds(load_results(base), load_results(new))
    rows = {r.config: r for r in comparison.rows if r.kind == "time"}
    assert {c: r.verdict.value for c, r in rows.items()} == {
        "ok": "same", "incorrect": "incorrect-now", "skipped": "missing",
        "unsupported": "missing", "failed": "failing-now", "timeout": "failing-now",
        "crashed": "failing-now", "oom": "failing-now"}
    assert all(r.base_status is CellStatus.OK and r.new_status is CellStatus(c)
               for c, r in rows.items())
    doc = json.loads(formatting.format_comparison(comparison, "json"))
    assert {o["config"]: o["new_status"] for o in doc["benchmarks"] if o["kind"] == "time"} == {
        c: c for c in every}
    back = compare_builds(load_results(new), load_results(base))
    assert {r.config: r.verdict.value for r in back.rows if r.kind == "time"} == {
        "ok": "same", "incorrect": "fixed", "skipped": "new", "unsupported": "new",
        "failed": "fixed", "timeout": "fixed", "crashed": "fixed", "oom": "fixed"}


def test_a_cell_that_dies_part_way_fails_the_configs_it_never_reached(
        tmp_path: Path) -> None:
    base = synthetic.write_build(str(tmp_path / "a.json"), "a", seed=1, models=("vrelu3",),
                                 tools=("pt",), tasks=("fwd",))
    runs = synthetic.make_runs(seed=2, models=("vrelu3",), tools=("pt",), tasks=("fwd",))
    # Each process finished only the first config, then crashed.
    cut = [CellResult(r.model, r.tool, r.task, r.process_index, CellStatus.CRASHED,
                      reason="killed by signal 9", phase="run", configs=r.configs[:1],
                      metadata=r.metadata) for r in runs]
    new = str(tmp_path / "b.json")
    write_results(new, cut, synthetic.metadata("b"))
    comparison = compare_builds(load_results(base), load_results(new))
    assert comparison.row("vrelu3/pt/fwd/1024").verdict == Verdict.SAME  # type: ignore[union-attr]
    assert _verdicts(comparison, Verdict.FAILING_NOW) == [
        "vrelu3/pt/fwd/16384", "vrelu3/pt/fwd/262144"]


def test_new_and_missing_benchmarks(tmp_path: Path) -> None:
    a = synthetic.write_build(str(tmp_path / "a.json"), "a", seed=1, models=("vrelu3",))
    b = synthetic.write_build(str(tmp_path / "b.json"), "b", seed=2, models=("sqrl",))
    comparison = compare_builds(load_results(a), load_results(b))
    new = {r.name for r in comparison.rows if r.verdict == Verdict.NEW}
    missing = {r.name for r in comparison.rows if r.verdict == Verdict.MISSING}
    assert "sqrl/pt/fwd/1024" in new and "vrelu3/pt/fwd/1024" in missing
    # Compile, prep and memory rows belong to cells both builds ran; the run-time rows
    # already say that a whole model came or went.
    assert {r.kind for r in comparison.rows} == {"time"}
    assert not comparison.has_regression
    assert comparison.geomeans == ()


def test_a_measurement_only_one_build_made_is_not_compared(tmp_path: Path) -> None:
    # An eager tool's compile time is recorded only when its first call happened to be
    # slower than a steady one: it comes and goes between runs of one build.
    a = synthetic.write_build(str(tmp_path / "a.json"), "a", seed=1, compile_s=None)
    b = synthetic.write_build(str(tmp_path / "b.json"), "b", seed=2)
    for comparison in (compare_builds(load_results(a), load_results(b)),
                       compare_builds(load_results(b), load_results(a))):
        assert comparison.row("vrelu3/compiled/fwd:compile") is None
        assert {r.verdict for r in comparison.rows} == {Verdict.SAME}


def test_a_cell_failing_in_both_builds_is_the_same(tmp_path: Path) -> None:
    def crash(m: str, t: str, k: str) -> CellStatus | None:
        return CellStatus.TIMEOUT if t == "ptnice" else None

    kwargs: dict[str, Any] = dict(models=("vrelu3",), tasks=("fwd",), cell_status=crash)
    a = synthetic.write_build(str(tmp_path / "a.json"), "a", seed=1, **kwargs)
    b = synthetic.write_build(str(tmp_path / "b.json"), "b", seed=2, **kwargs)
    comparison = compare_builds(load_results(a), load_results(b))
    row = comparison.row("vrelu3/ptnice/fwd/*")
    assert row is not None and row.verdict == Verdict.SAME
    assert (row.base_status, row.new_status) == ("timeout", "timeout")
    assert not comparison.has_regression


def test_nothing_under_the_minimum_effect_is_a_change(tmp_path: Path) -> None:
    quiet: dict[str, Any] = dict(models=("vrelu3",), tools=("pt",), tasks=("fwd",),
                                 process_sd=0.001, value_sd=0.001)
    a = synthetic.write_build(str(tmp_path / "a.json"), "a", seed=1, **quiet)
    b = synthetic.write_build(str(tmp_path / "b.json"), "b", seed=2,
                              factor=lambda *k: 1.03, **quiet)
    base, new = load_results(a), load_results(b)
    default = compare_builds(base, new)
    rows = [r for r in default.rows if r.kind == "time"]
    assert all(r.verdict == Verdict.SAME and r.q_value < 0.001 for r in rows)
    assert all(not r.inconclusive for r in rows)
    strict = compare_builds(base, new, min_effect=0.01)
    assert {r.verdict for r in strict.rows if r.kind == "time"} == {Verdict.SLOWER}
    with pytest.raises(KscperfError):
        compare_builds(base, new, min_effect=-0.1)


def test_a_big_change_drowned_in_noise_is_same_but_inconclusive(tmp_path: Path) -> None:
    noisy: dict[str, Any] = dict(models=("vrelu3",), tools=("pt",), tasks=("fwd",),
                                 configs=("1024",), process_sd=0.3)
    a = synthetic.write_build(str(tmp_path / "a.json"), "a", seed=11, **noisy)
    b = synthetic.write_build(str(tmp_path / "b.json"), "b", seed=12,
                              factor=lambda *k: 1.3, **noisy)
    row = compare_builds(load_results(a), load_results(b)).row("vrelu3/pt/fwd/1024")
    assert row is not None
    assert row.verdict == Verdict.SAME
    assert row.inconclusive
    assert row.min_detectable_effect > 0.3
    assert formatting.verdict_text(row) == "same~"


@pytest.mark.parametrize(("key", "value", "words"), [
    ("hostname", "perf2", "different machines"),
    ("cpu_model_name", "Other CPU", "different CPUs"),
    ("torch_version", "2.12.0", "different torch versions"),
    ("profile", "fast", "different profiles"),
])
def test_incomparable_files_are_refused_unless_forced(tmp_path: Path, loaded: dict[
        str, LoadedResults], key: str, value: str, words: str) -> None:
    other = synthetic.write_build(str(tmp_path / "other.json"), "other", seed=5,
                                  metadata_overrides={key: value})
    new = load_results(other)
    with pytest.raises(KscperfError) as info:
        compare_builds(loaded["base"], new)
    message = str(info.value)
    assert words in message and repr(value) in message
    assert repr(loaded["base"].metadata[key]) in message
    assert "--force" in message and "\n" not in message
    forced = compare_builds(loaded["base"], new, force=True)
    assert len(forced.ignored_differences) == 1 and words in forced.ignored_differences[0]
    assert "warning: compared anyway" in formatting.format_comparison(forced, "table")


def test_check_comparable_ignores_metadata_a_file_does_not_have(
        loaded: dict[str, LoadedResults]) -> None:
    bare = LoadedResults(path="plain.json", metadata={"hostname": "perf1"}, benchmarks={},
                         runs_values={}, has_kscperf=False)
    assert check_comparable(loaded["base"], bare) == []


def _write_plain_pyperf(path: Path, scale: float, seed: int) -> None:
    import random

    import pyperf

    rng = random.Random(seed)
    benches = []
    for name in ("startup", "json_dumps"):
        runs = [pyperf.Run([scale * 1e-3 * (1 + rng.gauss(0, 0.002)) for _ in range(5)],
                           metadata={"name": name, "loops": 8, "hostname": "perf1"},
                           collect_metadata=False) for _ in range(4)]
        benches.append(pyperf.Benchmark(runs))
    pyperf.BenchmarkSuite(benches).dump(str(path))


def test_plain_pyperf_files_compare_by_run_time(tmp_path: Path,
                                                loaded: dict[str, LoadedResults]) -> None:
    _write_plain_pyperf(tmp_path / "a.json", 1.0, 1)
    _write_plain_pyperf(tmp_path / "b.json", 1.5, 2)
    base, new = load_results(str(tmp_path / "a.json")), load_results(str(tmp_path / "b.json"))
    assert not base.has_kscperf
    comparison = compare_builds(base, new)
    assert {r.name: r.verdict for r in comparison.rows} == {
        "startup": Verdict.SLOWER, "json_dumps": Verdict.SLOWER}
    assert all(r.kind == "time" and r.method == "processes" for r in comparison.rows)
    geo = {(g.by, g.key): g.ratio for g in comparison.geomeans}
    assert geo[("all", "")] == pytest.approx(1.5, rel=0.01)
    # A plain file against a kscperf file: nothing in common, nothing refused.
    mixed = compare_builds(base, loaded["base"])
    assert {r.verdict for r in mixed.rows} == {Verdict.NEW, Verdict.MISSING}
    assert {r.kind for r in mixed.rows} == {"time"}


def test_benchmark_parts() -> None:
    def parts(name: str) -> tuple[str, str, str, str, str | None]:
        p = benchmark_parts(name)
        return p.kind, p.model, p.tool, p.task, p.config

    assert parts("m/t/k/16x16") == ("time", "m", "t", "k", "16x16")
    assert parts("m/t/k/a/b") == ("time", "m", "t", "k", "a/b")
    assert parts("m/t/k:compile") == ("compile", "m", "t", "k", None)
    assert parts("m/t/k/c:prep") == ("prep", "m", "t", "k", "c")
    assert parts("m/t/k/c:peak_rss") == ("peak_rss", "m", "t", "k", "c")
    # Any other name (a plain pyperf file's) is a run time without parts.
    for plain in ("startup", "x:compile", "q:prep", "a//b/c"):
        assert parts(plain) == ("time", "", "", "", ""), plain


def test_regression_verdicts() -> None:
    assert REGRESSION_VERDICTS == {Verdict.SLOWER, Verdict.INCORRECT_NOW, Verdict.FAILING_NOW}


# ------------------------------------------------------------------------------ text forms

def test_table_format(loaded: dict[str, LoadedResults]) -> None:
    text = formatting.format_comparison(compare_builds(loaded["base"], loaded["slow"]), "table")
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("benchmark"))
    first = lines[header + 2]
    assert first.startswith("vrelu3/compiled/") or first.startswith("sqrl/compiled/")
    assert "slower" in first and "1.2" in first
    assert "detectable" in lines[header]
    assert "Geometric mean" in text and "tool compiled" in text
    assert text.rstrip().endswith("regression: yes")
    changed = formatting.format_comparison(compare_builds(loaded["base"], loaded["slow"]),
                                           "table", only_changed=True)
    assert " same " not in changed


def test_status_and_geomean_text() -> None:
    ok, crashed = CellStatus.OK, CellStatus.CRASHED
    assert formatting.status_text(ok, ok, "ignored") == ""
    assert formatting.status_text(crashed, crashed) == "crashed"
    assert formatting.status_text(ok, crashed, "signal 9") == "ok -> crashed: signal 9"
    assert formatting.status_text(None, ok, arrow="→") == "absent → ok"
    assert formatting.status_text(ok, None) == "ok -> absent"
    geo = GeoMean("tool", "compiled", 1.2, 1.1, 1.3, 4)
    assert formatting.geomean_label(geo) == "tool compiled"
    assert formatting.geomean_label(GeoMean("all", "", 1.2, 1.1, 1.3, 4)) == "all"
    assert formatting.format_confidence(0.05) == "95%"


def test_json_format(loaded: dict[str, LoadedResults]) -> None:
    comparison = compare_builds(loaded["base"], loaded["broken"])
    doc = json.loads(formatting.format_comparison(comparison, "json"))
    assert doc["has_regression"] is True
    assert len(doc["benchmarks"]) == len(comparison.rows)
    for obj in doc["benchmarks"]:
        for key in ("name", "verdict", "ratio", "ratio_low", "ratio_high", "p_value",
                    "min_detectable_effect", "kind", "q_value"):
            assert key in obj
    failing = next(o for o in doc["benchmarks"] if o["name"] == "sqrl/pt/bwd/1024")
    assert failing["verdict"] == "failing-now" and failing["ratio"] is None
    assert {g["by"] for g in doc["geomeans"]} == {"tool", "task", "all"}
    assert doc["base"]["metadata"]["hostname"] == "perf1"


def test_markdown_format(loaded: dict[str, LoadedResults]) -> None:
    text = formatting.format_comparison(compare_builds(loaded["base"], loaded["slow"]),
                                        "markdown")
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert table[0].startswith("| verdict | benchmark |")
    assert table[1].startswith("|---|")
    widths = {line.count(" | ") for line in table[2:-8]}
    assert len(widths) == 1
    assert "| slower | vrelu3/compiled/" in text or "| slower | sqrl/compiled/" in text
    with pytest.raises(ValueError):
        formatting.format_comparison(compare_builds(loaded["base"], loaded["slow"]), "html")


def test_names_from_files_are_escaped(tmp_path: Path) -> None:
    evil = "\x1b[31mred|<b>`x`"
    kwargs: dict[str, Any] = dict(models=(evil,), tools=("pt",), tasks=("fwd",), configs=("1024",))
    a = synthetic.write_build(str(tmp_path / "a.json"), "\x1b]0;title\x07", seed=1, **kwargs)
    b = synthetic.write_build(str(tmp_path / "b.json"), "b", seed=2, factor=lambda *k: 1.5,
                              **kwargs)
    comparison = compare_builds(load_results(a), load_results(b))
    assert comparison.row(f"{evil}/pt/fwd/1024").verdict == Verdict.SLOWER  # type: ignore[union-attr]
    table = formatting.format_comparison(comparison, "table")
    assert "\x1b" not in table and "\x07" not in table
    assert "\\x1b[31mred" in table
    markdown = formatting.format_comparison(comparison, "markdown")
    assert "\x1b" not in markdown
    assert "red\\|&lt;b&gt;\\`x\\`" in markdown
    assert "<b>" not in markdown
    as_json = formatting.format_comparison(comparison, "json")
    assert "\x1b" not in as_json
    assert json.loads(as_json)["benchmarks"][0]["model"] == evil


@pytest.mark.integration
def test_pyperf_compare_to_still_reads_the_files(files: dict[str, Path]) -> None:
    done = subprocess.run([sys.executable, "-m", "pyperf", "compare_to", str(files["base"]),
                           str(files["slow"])], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "vrelu3/compiled/fwd/1024" in done.stdout
    assert "slower" in done.stdout


def test_lockstep_files_are_compared_pair_by_pair(tmp_path: Path) -> None:
    # The same seed gives both builds the same process effects (a machine state shared by
    # each pair, 30 % from process to process), only NEW's compiled tool does 20 % more work.
    noisy = dict(seed=11, process_sd=0.3, models=("vrelu3",), tasks=("fwd",))
    lockstep = {"lockstep_id": "abc123"}
    paths = {}
    for name, md, factor in (
            ("base", dict(lockstep, lockstep_role="base"), lambda *k: 1.0),
            ("new", dict(lockstep, lockstep_role="new", torch_version="2.14.0"),
             _compiled_20_percent)):
        paths[name] = synthetic.write_build(str(tmp_path / f"{name}.json"), name,
                                            metadata_overrides=md, factor=factor, **noisy)
    base, new = load_results(paths["base"]), load_results(paths["new"])
    comparison = compare_builds(base, new)  # a torch upgrade is what an ab run may compare
    for r in comparison.rows:
        if r.kind != "time":
            continue
        assert r.method == "pairs", r
        if r.tool == "compiled":
            assert r.verdict == Verdict.SLOWER and r.ratio == pytest.approx(1.2)
        else:
            assert r.verdict == Verdict.SAME and r.ratio == pytest.approx(1.0)

    # The same files without their lockstep: unpaired, the 30 % process noise hides it all.
    for loaded_file in (base, new):
        del loaded_file.metadata["lockstep_id"]
    with pytest.raises(KscperfError, match="torch versions"):
        compare_builds(base, new)
    unpaired = compare_builds(base, new, force=True)
    assert {r.method for r in unpaired.rows if r.kind == "time"} == {"processes"}
    assert not _verdicts(unpaired, Verdict.SLOWER, Verdict.FASTER)


def _prep_rows(tmp_path: Path, zygote: Any) -> list[Any]:
    """The prep rows of two builds whose prep is 1.3x slower in NEW, tight within each run
    (2 % process noise), with `zygote(side)(model, tool, task, process)` naming each
    process's zygote."""
    small: dict[str, Any] = dict(models=("vrelu3",), tools=("pt",), tasks=("fwd",),
                                 configs=("1024",), processes=4)
    base = synthetic.write_build(str(tmp_path / "base.json"), "base", seed=1,
                                 zygote=zygote("base"), **small)
    new = synthetic.write_build(str(tmp_path / "new.json"), "new", seed=2,
                                prep_s=lambda *k: 1.3e-3, zygote=zygote("new"), **small)
    comparison = compare_builds(load_results(base), load_results(new))
    return [r for r in comparison.rows if r.kind == "prep"]


def test_a_single_shot_kind_takes_the_zygote_as_its_unit(tmp_path: Path) -> None:
    # One zygote a side: every process shares its offset, so one run against one cannot
    # tell a changed build from a zygote's layout; the row says same, inconclusive.
    (row,) = _prep_rows(tmp_path, lambda side: lambda m, t, k, p: f"{side}-zygote")
    assert (row.verdict, row.method, row.n_base, row.n_new) == (Verdict.SAME, "values", 1, 1)
    assert row.inconclusive and row.p_value == 1.0
    assert math.isclose(row.new_value / row.base_value, row.ratio, rel_tol=1e-12)
    # A zygote per process (spawned workers, fresh zygotes every round): four units a side.
    (row,) = _prep_rows(tmp_path, lambda side: lambda m, t, k, p: f"{side}-{p}")
    assert (row.verdict, row.method, row.n_base) == (Verdict.SLOWER, "processes", 4)
    assert math.isclose(row.new_value / row.base_value, row.ratio, rel_tol=1e-12)
    # A file that does not say (before 2026-12-02): its processes, as before.
    (row,) = _prep_rows(tmp_path, lambda side: lambda *k: None)
    assert (row.verdict, row.method) == (Verdict.SLOWER, "processes")
