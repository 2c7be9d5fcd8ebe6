"""The validation scripts' logic (`validation/`), in process and without measuring anything:
dashboard-bench's scoring and its synthetic stores (shapes, seeded determinism, planted steps
where the plan says), the likelihood rules, truth-check's verdict scoring and section choice,
the report lines the scripts print on known input, and the conventions of the package."""

from __future__ import annotations

import ast
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from kscperf.errors import CellStatus
from kscperf.stats.changepoints import Change
from validation import dashboard_bench, harness_bench, truth_check
from validation.agreement import print_agreement
from validation.ceiling import likelihood_rule_shares
from validation.common import percent, run_build
from validation.detection import (EDGE_BUILDS, NOISE_MODELS, STEP_SHARE, STEP_SIZES,
                                  NoiseModel, Planted, detect_kscperf, make_store, pooled,
                                  score, score_row)
from validation.harness import print_worker_profile
from validation.links import links_summary
from validation.machine import trial_outcome
from validation.otava import one_value_per_build
from validation.power import expected_verdict, print_power

VALIDATION = Path(__file__).resolve().parent.parent / "validation"

# One series each: a 5 % step found at the build after (+1), a 10 % drop reported the other
# way (missed), a quiet series with one false alarm, a quiet one with none, and a 20 % step
# reported two builds late (missed).
PLAN = [Planted(10, 1.05, 0.05), Planted(20, 0.90, 0.10), None, None,
        Planted(15, 1.20, 0.20)]
REPORTED = [[(11, 1)], [(20, 1)], [(5, -1)], [], [(17, 1)]]


def test_score_counts_found_missed_and_false_alarms() -> None:
    s = score(REPORTED, PLAN)
    assert s["planted"] == {0.03: 0, 0.05: 1, 0.10: 1, 0.20: 1, 0.30: 0}
    assert s["found"] == {0.03: 0, 0.05: 1, 0.10: 0, 0.20: 0, 0.30: 0}
    assert (s["quiet"], s["false"]) == (2, 1)
    assert s["recall_5"] == pytest.approx(1 / 3)
    assert s["recall_10"] == 0.0
    assert s["false_per_1000"] == 500.0


def test_score_without_quiet_series_or_steps_says_nan() -> None:
    s = score([[(10, 1)]], [Planted(10, 1.3, 0.30)])
    assert s["found"][0.30] == 1 and s["recall_10"] == 1.0
    assert math.isnan(s["false_per_1000"])
    assert math.isnan(score([[]], [None])["recall_5"])


def test_pooled_adds_the_counts_and_recomputes_the_shares() -> None:
    one = score(REPORTED, PLAN)
    two = score([[(10, 1)], []], [Planted(10, 1.10, 0.10), None])
    both = pooled([one, two])
    assert both["planted"][0.10] == 2 and both["found"][0.10] == 1
    assert (both["quiet"], both["false"]) == (3, 1)
    assert both["recall_5"] == pytest.approx(2 / 4)
    assert both["recall_10"] == pytest.approx(1 / 3)
    assert both["false_per_1000"] == pytest.approx(1000 / 3)


def test_score_row_prints_the_shares_per_size() -> None:
    assert score_row("kscperf", score(REPORTED, PLAN)) == (
        "| kscperf | 33.3 % | 0.0 % | - | 100.0 % | 0.0 % | 0.0 % | - | 500.0 |")


def test_percent() -> None:
    assert percent(0.1234) == "12.3 %"
    assert percent(1.0) == "100.0 %"
    assert percent(math.nan) == "-"


def _flat(rng: np.random.Generator, levels: np.ndarray) -> np.ndarray:
    return np.stack([levels, levels], axis=1)


def test_a_planted_step_is_where_the_plan_says() -> None:
    # A noise-free model: the values are the levels themselves, two processes a build.
    store, plan = make_store(NoiseModel("flat", _flat), np.random.default_rng(3), 50, 30)
    stepped = [(series, p) for series, p in zip(store, plan) if p is not None]
    assert len(stepped) == round(STEP_SHARE * 50)
    assert sorted({p.size for _, p in stepped}) == list(STEP_SIZES)
    for series, p in stepped:
        assert EDGE_BUILDS <= p.build <= 30 - EDGE_BUILDS
        assert p.ratio == pytest.approx(1 + p.size) or p.ratio == pytest.approx(1 - p.size)
        assert all(v == (100.0, 100.0) for v in series[:p.build])
        assert all(v == pytest.approx((100.0 * p.ratio,) * 2) for v in series[p.build:])
    assert all(v == (100.0, 100.0) for series, p in zip(store, plan) if p is None
               for v in series)


@pytest.mark.parametrize("name, processes", [("gaussian", 3), ("sharedvm", 3), ("otava2", 1),
                                             ("otava5", 1), ("outlier", 1), ("banding", 1)])
def test_the_noise_models_give_builds_by_processes(name: str, processes: int) -> None:
    store, plan = make_store(NOISE_MODELS[name], np.random.default_rng(7), 40, 25)
    assert len(store) == len(plan) == 40
    assert all(len(series) == 25 for series in store)
    assert {len(row) for series in store for row in series} == {processes}
    assert all(isinstance(v, float) for series in store for row in series for v in row)
    assert (sum(p is not None for p in plan) == 4) == NOISE_MODELS[name].steps


def test_the_stores_are_seeded() -> None:
    model = NOISE_MODELS["sharedvm"]
    first = make_store(model, np.random.default_rng(11), 30, 20)
    assert make_store(model, np.random.default_rng(11), 30, 20) == first
    assert make_store(model, np.random.default_rng(12), 30, 20)[0] != first[0]


def test_the_otava_outlier_has_one_point_at_150() -> None:
    store, plan = make_store(NOISE_MODELS["outlier"], np.random.default_rng(5), 10, 20)
    assert plan == [None] * 10
    for series in store:
        assert sum(row == (150.0,) for row in series) == 1
        assert series[0] != (150.0,) and series[-1] != (150.0,)


def test_a_large_step_moves_the_level_of_a_noisy_model() -> None:
    store, plan = make_store(NOISE_MODELS["otava2"], np.random.default_rng(2), 50, 40)
    for series, p in zip(store, plan):
        if p is not None and p.size == 0.30:
            before = np.mean([v[0] for v in series[:p.build]])
            after = np.mean([v[0] for v in series[p.build:]])
            assert after / before == pytest.approx(p.ratio, rel=0.03)


def test_kscperf_finds_clear_steps_of_its_minimum_effect_and_no_false_alarm() -> None:
    quiet = NoiseModel("quiet", lambda rng, levels: (
        levels[:, None] * np.exp(rng.normal(0.0, 0.002, (levels.size, 3)))))
    store, plan = make_store(quiet, np.random.default_rng(1), 50, 30)
    steps, detectable, seconds = detect_kscperf(store)
    s = score(steps, plan)
    # Every step of 5 % (the minimum effect) or more; the 3 % one is under it.
    assert s["recall_5"] == 1.0 and s["planted"][0.03] == 1 and s["found"][0.03] == 0
    assert s["false"] == 0
    assert len(detectable) == 50 and seconds >= 0


def test_one_value_per_build_is_the_mean_of_the_processes() -> None:
    assert one_value_per_build([[(1.0, 2.0, 3.0), (4.0, 6.0, 8.0)]]) == [[2.0, 6.0]]


def test_the_likelihood_rules_find_large_steps_and_the_ceiling_leads() -> None:
    ceiling = likelihood_rule_shares(2.0, np.random.default_rng(0), series=2000)
    alone = likelihood_rule_shares(2.0, np.random.default_rng(0), told_sizes=False,
                                   series=2000)
    assert list(ceiling) == list(alone) == [z for z in STEP_SIZES if z >= 0.05]
    assert ceiling[0.20] > 0.99 and ceiling[0.30] > 0.99
    assert ceiling[0.05] < ceiling[0.10] <= ceiling[0.20]
    assert sum(ceiling.values()) >= sum(alone.values())
    assert likelihood_rule_shares(2.0, np.random.default_rng(0), series=2000) == ceiling


def test_the_links_summary_scores_steps_by_band(capsys: pytest.CaptureFixture[str]) -> None:
    truth: dict[int, tuple[int, float] | None] = {0: None, 1: (5, 1.06), 2: None,
                                                  3: (10, 1 / 1.2)}
    kept = {0: [], 1: [Change("slower", 4, 5, 1.06, 1.03, 1.09, 0.001, "")],
            2: [Change("faster", 7, 8, 0.9, 0.85, 0.95, 0.001, "")],
            3: [Change("slower", 9, 10, 1.2, 1.1, 1.3, 0.001, "")]}
    summary = links_summary(truth, kept, 4, 0.02)
    assert (summary["found"], summary["false_changes"], summary["series"]) == ([1, 2], 2, 4)
    assert summary["bands"]["1.050-1.075"] == [1, 1]
    assert summary["bands"]["1.150-1.310"] == [0, 1]
    assert capsys.readouterr().out.splitlines() == [
        "  steps 5.0-7.5 %: found at the right build in 1 of 1 (100.0%)",
        "  steps 7.5-10.0 %: found at the right build in 0 of 0 (0.0%)",
        "  steps 10.0-15.0 %: found at the right build in 0 of 0 (0.0%)",
        "  steps 15.0-31.0 %: found at the right build in 0 of 1 (0.0%)",
        "  steps of 10 % or more: 0 of 1 (0.0%)",
        "  all steps of 5 % or more: 1 of 2 (50.0%)",
        "  false changes: 2 in 4 series (500.00 per 1,000), of which 1 in the 2 series "
        "without a step; false discovery proportion 66.7% of 3 listed; 5.00 ms per series"]


def _row(tool: str, verdict: str, ratio: float, status: CellStatus = CellStatus.OK) -> Any:
    return SimpleNamespace(tool=tool, name=f"work/{tool}/inference/4096", kind="time",
                           verdict=SimpleNamespace(value=verdict), ratio=ratio,
                           min_detectable_effect=0.04, base_status=CellStatus.OK,
                           new_status=status)


def _comparison(*rows: Any, shifted: bool = False, could: bool = False,
                shift: Any = None) -> Any:
    regressions = [r for r in rows if r.verdict.value == "slower"]
    return SimpleNamespace(rows=list(rows), regressions=regressions,
                           has_regression=bool(regressions),
                           machine=SimpleNamespace(shift=shift, shifted=shifted,
                                                   could_have_shifted=could))


def test_trial_outcome_catches_the_slower_tool() -> None:
    outcome, details = trial_outcome(_comparison(_row("pt", "same", 1.01),
                                                 _row("ptnice", "slower", 1.2)), "ptnice")
    assert outcome == "caught"
    assert details == ("pt same 1.01x (detectable 4%); ptnice slower 1.20x (detectable 4%)")


def test_trial_outcome_is_wrong_when_the_untouched_tool_moves() -> None:
    outcome, details = trial_outcome(_comparison(_row("pt", "slower", 1.1),
                                                 _row("ptnice", "slower", 1.2)), "ptnice")
    assert outcome == "wrong"
    assert details.endswith("; REGRESSION work/pt/inference/4096 time slower 1.10x")
    assert trial_outcome(_comparison(_row("pt", "same", 1.0), _row("ptnice", "faster", 0.8)),
                         "ptnice")[0] == "wrong"


def test_trial_outcome_without_a_change() -> None:
    assert trial_outcome(_comparison(_row("pt", "same", 1.0), _row("ptnice", "same", 1.0)),
                         None)[0] == "right"
    assert trial_outcome(_comparison(_row("pt", "same", 1.0), _row("ptnice", "slower", 1.1)),
                         None)[0] == "wrong"


def test_trial_outcome_names_the_machine_and_failed_runs() -> None:
    same = (_row("pt", "same", 1.0), _row("ptnice", "same", 1.1))
    shift = SimpleNamespace(ratio=1.1, low=1.05, high=1.15, state=SimpleNamespace(value="shifted"))
    outcome, details = trial_outcome(_comparison(*same, shifted=True, shift=shift), "ptnice")
    assert outcome == "machine changed"
    assert details.endswith("; machine 1.10x [1.05, 1.15] shifted")
    assert trial_outcome(_comparison(*same, could=True), "ptnice")[0] == "machine unresolved"
    assert trial_outcome(_comparison(*same), "ptnice")[0] == "unresolved"
    failed = _row("ptnice", "slower", 1.2, status=CellStatus.INCORRECT)
    assert trial_outcome(_comparison(_row("pt", "same", 1.0), failed),
                         "ptnice")[0] == "run failed"


def test_the_power_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert [expected_verdict(e) for e in (0, 5, 20)] == ["same", "slower", "slower"]
    print_power({0: 10, 5: 3, 10: 9}, 10, {5: "; ratios 1.010-1.080"})
    assert capsys.readouterr().out.splitlines() == [
        "  + 0 % work: called same (no change made) in 10 of 10 trials",
        "  + 5 % work: caught as slower in 3 of 10 trials; ratios 1.010-1.080",
        "  +10 % work: caught as slower in 9 of 10 trials"]


def test_the_agreement_report(capsys: pytest.CaptureFixture[str]) -> None:
    print_agreement({"a/pt/inference/1": [(22e-6, 20e-6)],
                     "b/pt/inference/2": [(5e-6, 4e-6), (6e-6, 4e-6)]}, 0.031)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"{'a/pt/inference/1':42}      22.0µs      20.0µs   1.100",
        f"{'b/pt/inference/2':42}       5.5µs       4.0µs   1.375  (under 10 µs: not counted)"
        "  (rounds: 1.250, 1.500)",
        "largest disagreement for cells >= 10 µs: 10.0% (target <= 10 %); CPU time stolen by "
        "the hypervisor meanwhile: 3.1%"]


def test_the_worker_profile_report(capsys: pytest.CaptureFixture[str]) -> None:
    profiles = [{"worker": 0.030, "import": 0.002, "canary": 0.015, "timed": 0.001},
                {"worker": 0.034, "import": 0.004, "canary": 0.017, "timed": 0.003},
                {"worker": 0.050, "import": 0.003, "canary": 0.016, "timed": 0.002}]
    print_worker_profile(profiles, 0.2)
    assert capsys.readouterr().out == (
        "  per worker (median): its own wall time 34.0 ms = import 3.0 + canary 16.0 + timed "
        "loops 2.0 + the rest 13.0 (configs, check, metadata); outside it 166.0 ms (start, "
        "spec and result files, exit, the orchestrator)\n")


def test_truth_check_runs_the_sections_asked_for() -> None:
    everything = set(truth_check.SECTIONS)
    assert truth_check.sections_to_skip("", "") == {"record-pairs", "explain", "instructions"}
    assert truth_check.sections_to_skip("noise,power", "") == {
        "record-pairs", "explain", "instructions", "noise", "power"}
    assert truth_check.sections_to_skip("", "explain") == everything - {"explain"}
    assert truth_check.sections_to_skip("noise", "record-pairs,machine") == (
        everything - {"record-pairs", "machine"})


def test_the_parsers_keep_their_options_and_defaults() -> None:
    dash = dashboard_bench.build_parser("First line.\n\nMore.")
    assert dash.description == "First line."
    args = dash.parse_args([])
    assert (args.sections, args.seed, args.series, args.detect_builds, args.builds) == (
        "detection,tigerbeetle,scale", 20261201, 500, 60, 365)
    assert args.noise == ",".join(NOISE_MODELS) and not args.no_otava
    truth = truth_check.build_parser("Truth.").parse_args([])
    assert (truth.trials, truth.profile, truth.sim_sequences, truth.lockstep_values,
            truth.lockstep_min_time) == (10, "default", 2000, 12, 0.02)
    assert (truth.huge_pages_cells, truth.huge_pages_processes, truth.huge_pages_repeats) == (
        "vrelu3/pt/inference,vgelu/pt/bwd", 12, 2)
    harness = harness_bench.build_parser("Harness.").parse_args(["--cells", "2"])
    assert (harness.cells, harness.repeats, harness.isolation) == (2, 3, "fork,spawn")


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


@pytest.mark.parametrize("path", sorted(VALIDATION.glob("*.py")), ids=lambda p: p.name)
def test_validation_modules_are_documented_and_annotated(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"{path.name} has no docstring"
    for fn in _functions(tree):
        a = fn.args
        params = a.posonlyargs + a.args + a.kwonlyargs + [p for p in (a.vararg, a.kwarg) if p]
        params = [p for p in params if p.arg not in ("self", "cls")]  # as mypy reads them
        assert fn.returns is not None and all(p.annotation is not None for p in params), \
            f"{path.name}:{fn.lineno} {fn.name} is not annotated"
    for fn in (n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        assert fn.name.startswith("_") or ast.get_docstring(fn), \
            f"{path.name}:{fn.lineno} {fn.name} is public and has no docstring"


def test_the_concurrency_summary_counts_landed_failed_and_unlisted() -> None:
    from validation.concurrency import TrialOutcome, summarize_trials
    outcomes = [TrialOutcome(9, 9, (), ()),
                TrialOutcome(9, 7, ("run-benchmarks: disk I/O error",) * 2, ("b3-x.json",))]
    assert summarize_trials(outcomes, 3.0).splitlines() == [
        "builds landed: 16 of 18; failed adds: 2; files the index does not list: 1; "
        "1.50 s a trial",
        "  2x run-benchmarks: disk I/O error"]


@pytest.mark.integration
def test_a_concurrency_trial_lands_every_build_in_a_new_store(tmp_path: Path) -> None:
    from validation.concurrency import store_trial, write_builds
    files = write_builds(tmp_path, 3)
    outcome = store_trial(files, str(tmp_path / "store"))
    assert (outcome.given, outcome.landed, outcome.failures, outcome.unlisted) == (3, 3, (), ())
    again = store_trial(files, str(tmp_path / "store"))  # all three refused: already there
    assert again.landed == 3 and len(again.failures) == 3
    assert all("already in the store" in line for line in again.failures), again.failures


def test_a_run_whose_cells_fail_stops_the_script_naming_the_first(tmp_path: Path) -> None:
    """harness-bench once printed a suite's wall time for 80 cells that had all failed (run
    by a Python without torch): a timing of failures is refused, naming the first."""
    module = tmp_path / "broken.py"
    module.write_text("import torch\n\n\ndef broken_bench_configs():\n    yield torch.ones(4)"
                      "\n\n\ndef broken_pytorch(x):\n    raise ValueError('no kernel today')\n")
    with pytest.raises(SystemExit) as stopped:
        run_build("harness-bench", str(module), tools="pt", tasks="inference", values=1,
                  warmups=0, min_time=1e-6, output=str(tmp_path / "out.json"))
    message = str(stopped.value.code)
    assert message.startswith("harness-bench: ") and "broken/pt/inference" in message
    assert "failed" in message and "no kernel today" in message, message


@pytest.mark.integration
def test_the_huge_pages_pair_numbers_are_those_compare_tests(tmp_path: Path) -> None:
    import kscperf
    from validation.huge_pages import _pair_numbers
    work = Path(__file__).parent / "fixtures" / "work" / "work.py"
    result = kscperf.run_ab(str(work), tools="pt", tasks="inference", processes=3, values=4,
                            output_dir=str(tmp_path / "ab"))
    numbers = _pair_numbers(result)
    rows = {r.name: r for r in kscperf.compare_builds(*result.loaded).rows
            if r.kind == "time"}
    assert set(numbers) == set(rows) and numbers
    for name, found in numbers.items():
        assert len(found) == 3
        assert math.exp(sum(found) / len(found)) == pytest.approx(rows[name].ratio, rel=1e-9)
