"""Running `ab` until it can answer (`--until-resolved`): after the profile's process pairs
of every cell, one more pair of each cell whose run-time verdict is still open, timing only
its open configs, round after round, until every cell is resolved or the time budget is
spent.

Owns reading the two builds' worker results so far as pair numbers per benchmark, asking
`kscperf.stats.sequential` which benchmarks are resolved, choosing the next round's cells within
the budget, and what a look tells the user (`Look`). Never imports torch, never prints,
launches nothing: `schedule` runs the rounds it returns.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from kscperf.errors import GOOD_STATUSES
from kscperf.names import benchmark_name
from kscperf.plan.cells import PlannedCell
from kscperf.spec import CellResult
from kscperf.stats import core as stats, sequential

__all__ = ["DEFAULT_BUDGET_S", "OpenBenchmark", "Look", "OnLook", "Resolver"]

# `--budget` when none is given: ten minutes of wall time for the whole `ab`.
DEFAULT_BUDGET_S = 600.0

# The cost of a pair before any pair of the cell has reported its wall time.
_UNKNOWN_PAIR_S = 1.0

# A pair's cost is foreseen from the cell's latest pairs: those that timed the configs open
# now, more nearly than the first, which timed every config.
_RECENT_PAIRS = 3


@dataclass(frozen=True)
class OpenBenchmark:
    """One benchmark still open at a look: NEW/BASE, its confidence-sequence interval, the
    pairs so far and the detectable effect they reached."""

    name: str
    ratio: float
    low: float
    high: float
    pairs: int
    detectable: float


@dataclass(frozen=True)
class Look:
    """What one look after a round found: the open benchmarks, how many of all run-time
    benchmarks are resolved, the time spent and left of the budget, and how many pairs the
    next round runs (0: the run ends here)."""

    open: tuple[OpenBenchmark, ...]
    resolved: int
    benchmarks: int
    elapsed_s: float
    budget_s: float
    next_pairs: int

    @property
    def time_left_s(self) -> float:
        """Seconds of the budget not yet spent (0 once it is)."""
        return max(0.0, self.budget_s - self.elapsed_s)


# Told of every look, after the profile's pairs and after each further round.
OnLook = Callable[[Look], None]


@dataclass
class _CellState:
    cell: PlannedCell
    pairs: int
    pair_s: float
    configs: list[str]  # those timed, each with its estimate in `estimates`
    estimates: list[stats.RatioEstimate]
    done: bool  # a build not ok, or nothing to time: no further pair helps

    @property
    def names(self) -> list[str]:
        """The benchmark name of each of `configs`."""
        return [benchmark_name(self.cell.model.name, self.cell.tool, self.cell.task, config)
                for config in self.configs]


class Resolver:
    """The stopping rule of one `ab` run over the results gathered so far (`gathered[0]`
    BASE's, `gathered[1]` NEW's, appended to by the session as workers end). `more` is the
    schedule's source of further rounds."""

    def __init__(self, cells: Sequence[PlannedCell], gathered: Sequence[list[CellResult]], *,
                 min_effect: float, budget_s: float, alpha: float = stats.ALPHA,
                 on_look: OnLook | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._cells = [c for c in cells if not c.skip_reason]
        self._gathered = gathered
        self._min_effect = min_effect
        self._budget_s = budget_s
        self._alpha = alpha
        self._on_look = on_look
        self._clock = clock
        self._t0 = clock()
        # When the last round was asked for, and what its pairs were expected to cost: the
        # rest of its wall time (zygote restarts, launching, reading results) is charged
        # to the next round too.
        self._asked_at = self._t0
        self._expected_s = 0.0

    def more(self) -> list[tuple[int, PlannedCell]]:
        """The next round: (process index, cell) for one more pair of every cell still
        open, in plan order, as far as the budget left allows at each cell's own cost per
        pair so far; empty when every cell is resolved or no pair fits. The cell's
        `configs` name its open configs alone: a resolved one gains nothing from another
        pair, and the budget goes where the answer is still open."""
        states = self._states()
        resolutions = self._resolutions(states)
        now = self._clock()
        elapsed = now - self._t0
        overhead = max(0.0, now - self._asked_at - self._expected_s) if self._expected_s else 0.0
        left = self._budget_s - elapsed - overhead
        todo: list[tuple[int, PlannedCell]] = []
        expected_s = 0.0
        open_benchmarks: list[OpenBenchmark] = []
        for state in states:
            open_here = [(name, e, config) for name, e, config, r in zip(
                state.names, state.estimates, state.configs, resolutions[state.cell.name])
                if r is sequential.Resolution.OPEN]
            if state.done or not open_here:
                continue
            open_benchmarks += [OpenBenchmark(name, e.ratio, e.low, e.high, e.n_base,
                                              sequential.detectable_effect(e))
                                for name, e, _ in open_here]
            if state.pair_s <= left:
                left -= state.pair_s
                expected_s += state.pair_s
                configs = tuple(config for _, _, config in open_here)
                todo.append((state.pairs, dataclasses.replace(state.cell, configs=configs)))
        self._asked_at, self._expected_s = now, expected_s
        total = sum(len(s.configs) for s in states)
        if self._on_look is not None:
            self._on_look(Look(tuple(open_benchmarks), total - len(open_benchmarks), total,
                               elapsed, self._budget_s, len(todo)))
        return todo

    def _states(self) -> list[_CellState]:
        by_key = [{(r.name, r.process_index): r for r in results} for results in self._gathered]
        out = []
        for cell in self._cells:
            pairs = []
            index = 0
            while (cell.name, index) in by_key[0] and (cell.name, index) in by_key[1]:
                pairs.append((by_key[0][cell.name, index], by_key[1][cell.name, index]))
                index += 1
            out.append(_cell_state(cell, pairs, self._alpha))
        return out

    def _resolutions(self, states: list[_CellState]
                     ) -> dict[str, list[sequential.Resolution]]:
        """Each cell's benchmarks' resolutions, the run times of all cells being one
        family for the false-discovery adjustment."""
        flat = [e for s in states for e in s.estimates]
        resolved = sequential.resolve(flat, min_effect=self._min_effect, alpha=self._alpha)
        out: dict[str, list[sequential.Resolution]] = {}
        for s in states:
            out[s.cell.name], resolved = resolved[:len(s.estimates)], resolved[len(s.estimates):]
        return out


def _ok(result: CellResult) -> bool:
    # A config skipped by choice (a Jacobian only on small configs) leaves the cell's other
    # configs worth another pair; only a bad status ends the cell.
    return result.worst_status() in GOOD_STATUSES


def _cell_state(cell: PlannedCell, pairs: list[tuple[CellResult, CellResult]],
                alpha: float) -> _CellState:
    """One cell's pairs so far as benchmarks and estimates, in the order the pairs ran."""
    walls = [max(b.wall_s or 0.0, n.wall_s or 0.0) for b, n in pairs[-_RECENT_PAIRS:]]
    pair_s = statistics.fmean(walls) if walls and max(walls) > 0 else _UNKNOWN_PAIR_S
    if not pairs or not all(_ok(b) and _ok(n) for b, n in pairs):
        # A build that failed or went wrong stays so however many pairs run; compare says it.
        return _CellState(cell, len(pairs), pair_s, [], [], done=bool(pairs))
    configs, estimates = [], []
    for config in pairs[0][0].configs:
        values = []
        for b, n in pairs:
            base = next((c for c in b.configs if c.config == config.config), None)
            new = next((c for c in n.configs if c.config == config.config), None)
            if base is not None and new is not None and base.loops > 0 and new.loops > 0:
                values.append((list(base.values), list(new.values)))
        if values:
            configs.append(config.config)
            estimates.append(sequential.compare_sequential_pairs(values, alpha=alpha))
    return _CellState(cell, len(pairs), pair_s, configs, estimates, done=not configs)
