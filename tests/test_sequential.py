"""The sequential design of `ab --until-resolved` (kscperf.stats.sequential) on synthetic sequences of
pair numbers, and the stopping rule over a run's cells (kscperf.orchestrator.resolve) on worker results
built in memory with a fake clock: it stops on a clear change, stops on a clear "same", and
runs to the budget on a change at the threshold; its interval stays valid over every look."""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import pytest

from kscperf.errors import CellStatus
from kscperf.orchestrator.resolve import Look, Resolver
from kscperf.orchestrator.session import RunConfig, select_cells
from kscperf.spec import CellResult, ConfigResult
from kscperf.stats import core as stats, sequential
from kscperf.stats.sequential import Resolution

WORK = Path(__file__).parent / "fixtures" / "work" / "work.py"
MIN_EFFECT = 0.02


def _normal(seed: int, n: int, ratio: float, sd: float) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(math.log(ratio), sd) for _ in range(n)]


def test_stops_on_a_clear_change_as_soon_as_the_interval_is_bounded() -> None:
    walk = sequential.walk_sequence(_normal(1, 60, 1.10, 0.005), min_effect=MIN_EFFECT)
    assert walk.resolution is Resolution.CHANGED
    assert walk.pairs == sequential.FIRST_BOUNDED_PAIRS
    assert walk.direction == 1 and walk.estimate.low > 1 + MIN_EFFECT


def test_stops_on_a_clear_speedup() -> None:
    walk = sequential.walk_sequence(_normal(2, 60, 1 / 1.08, 0.005), min_effect=MIN_EFFECT)
    assert walk.resolution is Resolution.CHANGED and walk.direction == -1


def test_stops_on_a_clear_same() -> None:
    walk = sequential.walk_sequence(_normal(3, 60, 1.0, 0.003), min_effect=MIN_EFFECT)
    assert walk.resolution is Resolution.SAME and walk.direction == 0
    assert walk.pairs < 60
    assert 1 / (1 + MIN_EFFECT) < walk.estimate.low <= walk.estimate.high < 1 + MIN_EFFECT


def test_runs_to_the_budget_on_a_change_at_the_threshold() -> None:
    logs = _normal(4, 200, 1 + MIN_EFFECT, 0.003)
    walk = sequential.walk_sequence(logs, min_effect=MIN_EFFECT)
    assert walk.resolution is Resolution.OPEN and walk.pairs == len(logs)
    # It got close: the interval straddles the threshold and is narrow.
    assert walk.estimate.low < 1 + MIN_EFFECT < walk.estimate.high
    assert sequential.detectable_effect(walk.estimate) < MIN_EFFECT / 2


def test_outlier_pairs_move_an_order_statistic_not_the_interval() -> None:
    logs = _normal(5, 30, 1.05, 0.003)
    with_outliers = list(logs)
    with_outliers[3], with_outliers[11] = math.log(0.7), math.log(1.6)
    clean = sequential.estimate_sequence(logs)
    dirty = sequential.estimate_sequence(with_outliers)
    assert sequential.interval_resolution(dirty.low, dirty.high, MIN_EFFECT) is \
        Resolution.CHANGED
    assert abs(math.log(dirty.ratio / clean.ratio)) < 0.003


def test_the_interval_holds_over_every_look_when_nothing_changed() -> None:
    """Time-uniform coverage: over 400 seeded A/A sequences of 150 pairs with heavy tails
    (Student t, 2 degrees of freedom), the share whose interval ever excluded no change,
    looking after every pair, stays under alpha (for one fixed test per look it would
    not)."""
    rng = random.Random(6)
    ever = 0
    for _ in range(400):
        logs = [0.01 * rng.gauss(0, 1) / math.sqrt((rng.gauss(0, 1) ** 2 + rng.gauss(0, 1) ** 2)
                                                     / 2) for _ in range(150)]
        ever += any(sequential.estimate_sequence(logs[:n]).p_value <= stats.ALPHA
                    for n in range(1, len(logs) + 1))
    assert ever / 400 <= stats.ALPHA


def test_estimate_promises() -> None:
    for n in (1, 5, sequential.FIRST_BOUNDED_PAIRS - 1):
        e = sequential.estimate_sequence(_normal(7, n, 1.2, 0.001))
        assert e.low == 0.0 and e.high == math.inf and e.p_value > stats.ALPHA
        assert sequential.detectable_effect(e) == math.inf
    for seed, ratio in ((8, 1.0), (9, 1.01), (10, 1.3)):
        e = sequential.estimate_sequence(_normal(seed, 25, ratio, 0.01))
        assert e.method == sequential.METHOD and e.n_base == e.n_new == 25
        assert e.low <= e.ratio <= e.high
        assert (e.p_value <= stats.ALPHA) == (not e.low <= 1.0 <= e.high)
    assert math.isnan(sequential.estimate_sequence([]).ratio)
    with pytest.raises(ValueError):
        sequential.walk_sequence([], min_effect=MIN_EFFECT)


def test_the_counts_kept_narrow_towards_the_middle() -> None:
    assert sequential.admissible_counts(sequential.FIRST_BOUNDED_PAIRS - 1) == (0, 7)
    assert sequential.admissible_counts(sequential.FIRST_BOUNDED_PAIRS) == (1, 7)
    low, high = sequential.admissible_counts(100)
    assert 30 < low < 50 < high < 70 and low + high == 100


def _est(low: float, high: float, p: float) -> stats.RatioEstimate:
    return stats.RatioEstimate((low * high) ** 0.5, low, high, p, 0.01, 9.0,
                               sequential.METHOD, 10, 10)


def test_a_change_stops_only_when_it_survives_the_false_discovery_adjustment() -> None:
    changed = _est(1.05, 1.10, 0.01)
    assert sequential.resolve([changed], min_effect=MIN_EFFECT) == [Resolution.CHANGED]
    family = [changed] + [_est(0.99, 1.01, 1.0)] * 9
    assert sequential.resolve(family, min_effect=MIN_EFFECT) == [Resolution.OPEN] + \
        [Resolution.SAME] * 9
    assert sequential.interval_resolution(0.0, math.inf, MIN_EFFECT) is Resolution.OPEN
    assert sequential.interval_resolution(0.99, 1.03, MIN_EFFECT) is Resolution.OPEN
    assert sequential.interval_resolution(0.90, 0.97, MIN_EFFECT) is Resolution.CHANGED


# --- the stopping rule over a run's cells ---------------------------------------------------

class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _result(cell_name: str, index: int, value_s: float, status: CellStatus = CellStatus.OK
            ) -> CellResult:
    model, tool, task = cell_name.split("/")
    config = ConfigResult("4096", status, values=(value_s,) * 10, loops=1)
    return CellResult(model, tool, task, index, status, configs=(config,), wall_s=2.0)


def _add_pair(gathered: list[list[CellResult]], cell_name: str, index: int, ratio: float,
              rng: random.Random) -> None:
    noise = math.exp(rng.gauss(0, 0.002))
    gathered[0].append(_result(cell_name, index, 1e-4))
    gathered[1].append(_result(cell_name, index, 1e-4 * ratio * noise))


def _cells() -> list:
    cells = select_cells(RunConfig(paths=(str(WORK),), tools="pt,ptnice",
                                   tasks="inference")).cells
    assert [c.name for c in cells] == ["work/pt/inference", "work/ptnice/inference"]
    return cells


def test_resolver_adds_pairs_only_to_open_cells_and_stops_when_all_are_resolved() -> None:
    cells, clock, looks = _cells(), _Clock(), []
    gathered: list[list[CellResult]] = [[], []]
    rng = random.Random(11)
    resolver = Resolver(cells, gathered, min_effect=MIN_EFFECT, budget_s=600, clock=clock,
                        on_look=looks.append)
    ratios = {"work/pt/inference": 1.0, "work/ptnice/inference": 1.10}
    for index in range(3):
        for name, ratio in ratios.items():
            _add_pair(gathered, name, index, ratio, rng)
    rounds = 0
    while True:
        todo = resolver.more()
        if not todo:
            break
        rounds += 1
        for index, cell in todo:
            _add_pair(gathered, cell.name, index, ratios[cell.name], rng)
    last: Look = looks[-1]
    assert last.open == () and last.resolved == last.benchmarks == 2 and last.next_pairs == 0
    # The change stops once all its pairs on one side survive Benjamini-Hochberg over the
    # two benchmarks: 2 (n + 1) / 2**n < alpha from n = 9 pairs on, 3 of them the profile's.
    assert rounds == min(n for n in range(1, 20) if 2 * (n + 1) / 2 ** n < stats.ALPHA) - 3
    # The untouched cell is resolved "same" as soon as its interval is bounded, and gets no
    # further pair; the changed one runs one pair more.
    pairs = {name: sum(r.name == name for r in gathered[0]) for name in ratios}
    assert pairs == {"work/pt/inference": sequential.FIRST_BOUNDED_PAIRS,
                     "work/ptnice/inference": rounds + 3}
    assert [len(look.open) for look in looks] == [2] * (rounds - 1) + [1, 0]


def test_resolver_runs_a_cell_at_the_threshold_to_the_budget() -> None:
    cells, clock, looks = _cells(), _Clock(), []
    gathered: list[list[CellResult]] = [[], []]
    rng = random.Random(12)
    resolver = Resolver(cells, gathered, min_effect=MIN_EFFECT, budget_s=60, clock=clock,
                        on_look=looks.append)
    ratios = {"work/pt/inference": 1.0, "work/ptnice/inference": 1 + MIN_EFFECT}
    for index in range(3):
        for name, ratio in ratios.items():
            _add_pair(gathered, name, index, ratio, rng)
            clock.now += 2.0
    while todo := resolver.more():
        for index, cell in todo:
            _add_pair(gathered, cell.name, index, ratios[cell.name], rng)
            clock.now += 2.0
    assert clock.now <= 60
    last: Look = looks[-1]
    assert [b.name for b in last.open] == ["work/ptnice/inference/4096"]
    assert last.time_left_s < 2.0 and last.next_pairs == 0
    # The untouched cell stopped early, so the budget went to the open one.
    pairs = {name: sum(r.name == name for r in gathered[0]) for name in ratios}
    assert pairs["work/pt/inference"] < pairs["work/ptnice/inference"]


def test_resolver_spends_nothing_on_a_cell_that_failed() -> None:
    cells, looks = _cells(), []
    gathered: list[list[CellResult]] = [[], []]
    for index in range(3):
        for name in ("work/pt/inference", "work/ptnice/inference"):
            gathered[0].append(_result(name, index, 1e-4))
            status = CellStatus.FAILED if name.endswith("ptnice/inference") else CellStatus.OK
            gathered[1].append(_result(name, index, 1e-4, status))
    resolver = Resolver(cells, gathered, min_effect=MIN_EFFECT, budget_s=600,
                        clock=_Clock(), on_look=looks.append)
    assert [cell.name for _, cell in resolver.more()] == ["work/pt/inference"]
    assert [b.name for b in looks[-1].open] == ["work/pt/inference/4096"]


def test_resolver_adds_pairs_to_a_cell_whose_other_configs_are_skipped() -> None:
    """A Jacobian cell times its small configs and skips the rest by choice: the configs it
    times stay open for more pairs (on 2026-12-06 such cells ended after the profile's 3
    pairs with an unbounded interval, while the rest of the run went on for 50 minutes)."""
    cells, looks = _cells(), []
    gathered: list[list[CellResult]] = [[], []]
    skipped = ConfigResult("1048576", CellStatus.SKIPPED, reason="over the size limit")
    for index in range(3):
        for side in gathered:
            timed = _result("work/pt/inference", index, 1e-4)
            side.append(dataclasses.replace(timed, configs=timed.configs + (skipped,)))
            side.append(_result("work/ptnice/inference", index, 1e-4, CellStatus.FAILED))
    resolver = Resolver(cells, gathered, min_effect=MIN_EFFECT, budget_s=600,
                        clock=_Clock(), on_look=looks.append)
    assert [(index, cell.name) for index, cell in resolver.more()] == [(3, "work/pt/inference")]
    assert [b.name for b in looks[-1].open] == ["work/pt/inference/4096"]


def test_resolver_charges_what_a_round_cost_beyond_its_pairs_to_the_next() -> None:
    """Zygote restarts and launching cost wall time the pairs' own times do not show: a run
    whose every round costs 5 s more than its pairs still ends within the budget."""
    cells, clock = _cells(), _Clock()
    gathered: list[list[CellResult]] = [[], []]
    rng = random.Random(13)
    resolver = Resolver(cells, gathered, min_effect=MIN_EFFECT, budget_s=60, clock=clock)
    ratios = {"work/pt/inference": 1 + MIN_EFFECT, "work/ptnice/inference": 1 + MIN_EFFECT}
    for index in range(3):
        for name, ratio in ratios.items():
            _add_pair(gathered, name, index, ratio, rng)
            clock.now += 2.0
    while todo := resolver.more():
        clock.now += 5.0
        for index, cell in todo:
            _add_pair(gathered, cell.name, index, ratios[cell.name], rng)
            clock.now += 2.0
    assert 50 < clock.now <= 60


def test_resolver_times_only_the_open_configs_of_a_cell() -> None:
    """A cell whose small config is resolved and whose large one is still open gets its
    further pairs for the large one alone: the budget goes where the answer is open (on
    2026-12-07 a memory-bound config was still open after 298 pairs while the cell's two
    small ones, resolved early, took over half of each pair's time)."""
    cells, clock, looks = _cells()[:1], _Clock(), []
    gathered: list[list[CellResult]] = [[], []]
    rng = random.Random(14)

    def add_pair(index: int, configs: tuple[str, ...]) -> None:
        # "4096" is steady and untouched; "big" sits at the threshold and stays open.
        ratios = {"4096": (1.0, 0.002), "big": (1 + MIN_EFFECT, 0.002)}
        for side, scale in enumerate((1.0, None)):
            timed = tuple(ConfigResult(name, CellStatus.OK, loops=1, values=(1e-4 * (
                scale or ratios[name][0] * math.exp(rng.gauss(0, ratios[name][1]))),) * 10)
                for name in configs)
            gathered[side].append(CellResult("work", "pt", "inference", index, CellStatus.OK,
                                             configs=timed, wall_s=2.0))

    resolver = Resolver(cells, gathered, min_effect=MIN_EFFECT, budget_s=600, clock=clock,
                        on_look=looks.append)
    for index in range(sequential.FIRST_BOUNDED_PAIRS):
        add_pair(index, ("4096", "big"))
    asked = []
    for _ in range(5):
        todo = resolver.more()
        asked += [cell.configs for _, cell in todo]
        for index, cell in todo:
            add_pair(index, cell.configs)
    assert asked == [("big",)] * 5
    assert [b.name for b in looks[-1].open] == ["work/pt/inference/big"]
    assert looks[-1].open[0].pairs == sequential.FIRST_BOUNDED_PAIRS + 4
    # The resolved config keeps its answer from the pairs that timed it.
    assert looks[-1].resolved == 1 and looks[-1].benchmarks == 2
