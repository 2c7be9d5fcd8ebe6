"""Results as data for people: the build-over-build comparison, with verdicts (the per-build
summary is `results.samples.summarize_build`). Uses `stats.core`; produces no strings for humans
(error messages aside).

A comparison has one row per benchmark and kind:

| kind        | name                                   | values per process          |
| ----------- | -------------------------------------- | --------------------------- |
| `time`      | `model/tool/task/config`               | pyperf values (s per call)  |
| `compile`   | `model/tool/task:compile`              | one (s)                     |
| `prep`      | `model/tool/task/config:prep`          | one (s)                     |
| `peak_rss`  | `model/tool/task/config:peak_rss`      | one (bytes, worker's peak)  |
| `peak_cuda` | `model/tool/task/config:peak_cuda`     | one (bytes)                 |
| `instructions` | `model/tool/task/config:instructions` | one (per call, a counting process) |

For the memory kinds `slower`/`faster` mean more/less memory, for instructions more/less
instructions; instructions have their own minimum effect (`INSTRUCTIONS_MIN_EFFECT`) and
their own test (Student's t on the logs of one count per process, `stats.compare_log_levels`),
and counts of two counters (`instructions_method`) are never compared. When the machine's own speed
changed between the two runs (by their canaries, `kscperf.stats.machine`), a time, compile or prep
row that the change could explain gets `machine-shift` instead of a confident verdict, and
so does one whose verdict does not hold over the processes that ran in the run's usual
machine state. Correctness and failure
verdicts (`incorrect-now`, `fixed`, `failing-now`) and `new`/`missing` are given on `time`
rows, one per config, where the check is made; the other kinds are only compared where both
builds measured them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Iterable

from kscperf.compare import units
from kscperf.compare.compilestats import CompileChange, compare_panels
from kscperf.compare.codediff import CodeDiff, code_diffs
from kscperf.compare.comparable import check_comparable, is_lockstep_pair, \
    is_sequential_pair, refuse_incomparable
from kscperf.compare.countdiff import CountExplanation, explain_counts
from kscperf.compare.explain import Explanation, explain_rows
from kscperf.errors import CellStatus, KscperfError
from kscperf.names import BenchmarkName, Kind, benchmark_name
from kscperf.results.files import LoadedResults
from kscperf.results.samples import BenchmarkSamples, BuildSamples, build_samples
from kscperf.stats import machine, sequential
from kscperf.stats import core as stats
from kscperf.stats.verdicts import (
    REGRESSION_VERDICTS,
    Direction,
    Verdict,
    direction_verdict,
    is_absent,
    is_failing,
    status_verdict,
)

__all__ = [
    "Verdict",
    "REGRESSION_VERDICTS",
    "BuildInfo",
    "MachineCheck",
    "ComparisonRow",
    "GeoMean",
    "Comparison",
    "check_comparable",
    "refuse_incomparable",
    "is_lockstep_pair",
    "is_sequential_pair",
    "compare_builds",
    "process_pairs",
    "check_machines",
    "MACHINE_MISMATCH",
    "machine_could_explain",
]

_ORDER = {v: i for i, v in enumerate(Verdict)}


@dataclass(frozen=True)
class BuildInfo:
    """Which results file a side of a comparison came from."""

    build: str
    path: str
    metadata: dict[str, Any]
    has_kscperf: bool
    complete: bool


# How much more than the canary a benchmark's time may move with the machine, in log terms:
# a serial canary part moves less than a multi-threaded benchmark when another process
# takes a core (docs/method.md, "Machine speed").
MACHINE_MISMATCH = 2.0


@dataclass(frozen=True)
class MachineCheck:
    """What the canaries say about the machines of a comparison: each run's speed (None for
    a file without a canary) and, when both have one and the files are not a lockstep
    pair, NEW's against BASE's."""

    base: machine.MachineSpeed | None
    new: machine.MachineSpeed | None
    shift: machine.MachineShift | None

    @property
    def known(self) -> bool:
        """Whether both files have a canary."""
        return self.base is not None and self.new is not None

    @property
    def shifted(self) -> bool:
        """Whether the machine's speed changed between the runs beyond their noise."""
        return self.shift is not None and self.shift.shifted

    @property
    def could_have_shifted(self) -> bool:
        """Whether the canaries cannot rule out that the machine's speed changed."""
        return self.shift is not None and self.shift.could_have_shifted


@dataclass(frozen=True)
class ComparisonRow:
    """One benchmark of one kind, BASE against NEW.

    `ratio` is NEW/BASE of medians with its (1 - alpha) interval [`ratio_low`,
    `ratio_high`]; `p_value` is the raw p-value of the benchmark's own test and `q_value`
    the same after Benjamini-Hochberg over all rows of its kind (the verdict uses `q_value`).
    `min_detectable_effect` is the relative change the spreads allowed finding (NaN when
    unknown). `inconclusive` marks a ratio beyond the minimum effect that was not
    significant. A status is None where the build has no such benchmark at all.
    """

    name: str
    kind: Kind
    model: str
    tool: str
    task: str
    config: str
    verdict: Verdict
    base_status: CellStatus | None
    new_status: CellStatus | None
    reason: str
    # The two values shown, whose ratio is `ratio` (`units.shown_values`).
    base_value: float
    new_value: float
    ratio: float
    ratio_low: float
    ratio_high: float
    p_value: float
    q_value: float
    min_detectable_effect: float
    method: str
    n_base: int
    n_new: int
    inconclusive: bool = False
    # For a run-time row of an `ab --until-resolved` pair: the `sequential.Resolution` its
    # interval reached ("changed", "same" or "open"); n_base counts its pairs. "" otherwise.
    resolution: str = ""

    @property
    def unit(self) -> str:
        """pyperf's unit name of the medians (`Kind.unit`)."""
        return self.kind.unit

    @property
    def is_regression(self) -> bool:
        """Whether the verdict is one of `REGRESSION_VERDICTS`."""
        return self.verdict in REGRESSION_VERDICTS


@dataclass(frozen=True)
class GeoMean:
    """The geometric mean of NEW/BASE run-time ratios over the `n` benchmarks of one tool,
    one task or all (`by` is "tool", "task" or "all"), correct in both builds, with a
    (1 - alpha) interval for measurement uncertainty."""

    by: str
    key: str
    ratio: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class Comparison:
    """Everything `compare_builds` found, rows sorted slowest change first."""

    base: BuildInfo
    new: BuildInfo
    min_effect: float
    alpha: float
    rows: tuple[ComparisonRow, ...]
    geomeans: tuple[GeoMean, ...]
    ignored_differences: tuple[str, ...] = ()
    machine: MachineCheck = MachineCheck(None, None, None)
    # The compile panels' phases, counts and tools' figures (kscperf.compare.compilestats).
    compile_changes: tuple[CompileChange, ...] = ()
    # The op diffs of the run-time rows both builds profiled (--explain; compare.explain),
    # and the generated code of the compiled cells both kept (compare.codediff).
    explanations: tuple[Explanation, ...] = ()
    code_diffs: tuple[CodeDiff, ...] = ()
    # The function diffs of the instructions rows both builds kept functions for
    # (run --instructions --explain; compare.countdiff).
    count_explanations: tuple[CountExplanation, ...] = ()
    # The minimum effect of the instructions rows (`INSTRUCTIONS_MIN_EFFECT` by default).
    instructions_min_effect: float = stats.INSTRUCTIONS_MIN_EFFECT

    @property
    def regressions(self) -> tuple[ComparisonRow, ...]:
        """Rows significantly slower beyond the minimum effect, newly incorrect or newly
        failing."""
        return tuple(r for r in self.rows if r.is_regression)

    @property
    def has_regression(self) -> bool:
        """Whether any row is a regression, or any compile change (a new graph break, a
        slower compile phase): what `--fail-on-regression` exits 1 for."""
        return (any(r.is_regression for r in self.rows)
                or any(c.is_regression for c in self.compile_changes))

    def explanation(self, name: str) -> Explanation | None:
        """The op diff of run-time benchmark `name`, or None when a build did not profile it."""
        return next((e for e in self.explanations if e.name == name), None)

    def row(self, name: str) -> ComparisonRow | None:
        """The row of benchmark `name`, or None when nothing was compared under it."""
        for r in self.rows:
            if r.name == name:
                return r
        return None


_Named = dict[str, BenchmarkSamples]


def _fate_entry(build: BuildSamples, cell: tuple[str, str, str],
                like: BenchmarkSamples | None = None) -> BenchmarkSamples | None:
    """The stand-in for a benchmark (`like`) of a cell that never reached its configs in
    `build`; without `like`, the cell's own row (config "*")."""
    fate = build.fates.get(cell)
    if fate is None:
        return None
    if like is not None:
        return BenchmarkSamples(like.name, like.parts, fate.status, fate.reason)
    return BenchmarkSamples(benchmark_name(*cell, "*"), BenchmarkName(*cell, "*"), fate.status,
                            fate.reason)


def _stand_in(entry: BenchmarkSamples, other: BuildSamples) -> BenchmarkSamples | None:
    """The other build's counterpart of `entry`: its own benchmark of that name, or, for a
    cell that never reached that config there, one with that cell's status."""
    found = other.benchmarks.get(entry.name)
    if found is not None:
        return found
    return _fate_entry(other, entry.cell, entry)


def _status(entry: BenchmarkSamples | None) -> CellStatus | None:
    return entry.status if entry is not None else None


def _has_values(entry: BenchmarkSamples | None) -> bool:
    return entry is not None and entry.has_values


def _both_absent(b: BenchmarkSamples | None, n: BenchmarkSamples | None) -> bool:
    return is_absent(_status(b)) and is_absent(_status(n))


def _pair_rows(base: BuildSamples, new: BuildSamples
               ) -> list[tuple[BenchmarkSamples | None, BenchmarkSamples | None]]:
    pairs: list[tuple[BenchmarkSamples | None, BenchmarkSamples | None]] = []
    for name in dict.fromkeys([*base.benchmarks, *new.benchmarks]):
        b = base.benchmarks.get(name)
        n = new.benchmarks.get(name)
        if b is None and n is not None:
            b = _stand_in(n, base)
        if n is None and b is not None:
            n = _stand_in(b, new)
        present = b if b is not None else n
        if present is None:
            continue
        if present.kind is Kind.TIME:
            if _both_absent(b, n):
                continue
        elif not (_has_values(b) and _has_values(n)):
            # Compile, prep and memory are compared only where both builds measured them.
            # Where a cell came, went or failed, its run-time rows already say so; and a
            # compile time is only recorded when the first call was measurably slower than
            # a steady one, which for an eager tool comes and goes from run to run.
            continue
        pairs.append((b, n))
    # Cells that never reached a config in either build: one row per cell.
    with_configs = {e.cell for e in base.benchmarks.values()}
    with_configs.update(e.cell for e in new.benchmarks.values())
    for key in dict.fromkeys([*base.fates, *new.fates]):
        if key in with_configs:
            continue
        fb, fn = _fate_entry(base, key), _fate_entry(new, key)
        if not _both_absent(fb, fn):
            pairs.append((fb, fn))
    return pairs


def process_pairs(base: BenchmarkSamples | None, new: BenchmarkSamples | None
                  ) -> list[tuple[tuple[float, ...], tuple[float, ...]]]:
    """(BASE values, NEW values) of each process index both builds ran, in process order:
    the pairs a lockstep comparison tests. Empty when either side has no values."""
    if base is None or new is None or not base.by_process or not new.by_process:
        return []
    return [(values, new.by_process[i]) for i, values in sorted(base.by_process.items())
            if i in new.by_process]


@dataclass(frozen=True)
class _Compared:
    """One benchmark's two sides and their test, before the q-values and the verdict."""

    base: BenchmarkSamples | None
    new: BenchmarkSamples | None
    present: BenchmarkSamples  # whichever side exists, for the name and parts
    status_verdict: Verdict | None
    estimate: stats.RatioEstimate
    min_detectable_effect: float
    # The estimate over the processes that ran in their run's usual machine state, where
    # either side had one in another state; None otherwise.
    usual_estimate: stats.RatioEstimate | None = None
    # The values the estimate tested, one inner sequence per unit (process or zygote), for
    # the values shown (`units.shown_values`).
    base_tested: tuple[tuple[float, ...], ...] = ()
    new_tested: tuple[tuple[float, ...], ...] = ()


def _usual_estimate(base: BenchmarkSamples | None, new: BenchmarkSamples | None,
                    alpha: float) -> stats.RatioEstimate | None:
    """The estimate without the processes timed in another machine state, when either side
    had one; method "none" when a side has no other process."""
    if base is None or new is None or not base.by_process or not new.by_process:
        return None
    usual_base, usual_new = base.usual_runs(), new.usual_runs()
    if len(usual_base) == len(base.by_process) and len(usual_new) == len(new.by_process):
        return None
    return stats.compare_samples(usual_base, usual_new, alpha=alpha)


def _kind(base: BenchmarkSamples | None, new: BenchmarkSamples | None) -> Kind:
    present = base if base is not None else new
    assert present is not None
    return present.kind


def _compare_pair(base: BenchmarkSamples | None, new: BenchmarkSamples | None, alpha: float,
                  lockstep: bool, until_resolved: bool = False) -> _Compared:
    present = base if base is not None else new
    assert present is not None
    by_status = status_verdict(_status(base), _status(new)) \
        if present.kind is Kind.TIME else None
    paired = process_pairs(base, new) if lockstep else []
    usual = None
    base_units, new_units = units.zygote_units(base), units.zygote_units(new)
    tested = (base.runs if base else (), new.runs if new else ())
    if present.kind is Kind.INSTRUCTIONS and base is not None and new is not None:
        # One count per process, as steady as the code: Student's t on their logs holds at
        # two processes a side, where the pooled rank test could never reach p < 1/3.
        estimate = stats.compare_log_levels([math.log(v) for v in base.values if v > 0],
                                            [math.log(v) for v in new.values if v > 0],
                                            alpha=alpha)
    elif base_units is not None and new_units is not None:
        # Fewer than MIN_PROCESSES zygotes a side fall to the pooled test of one value per
        # zygote, which one zygote against one cannot pass: no verdict from one run each.
        tested = (base_units, new_units)
        estimate = stats.compare_samples(base_units, new_units, alpha=alpha)
    elif paired and until_resolved:
        # The run looked after every pair: only the confidence sequence keeps its promise.
        estimate = sequential.compare_sequential_pairs(paired, alpha=alpha)
    elif len(paired) >= 2:
        estimate = stats.compare_paired_samples(paired, alpha=alpha)
    else:
        estimate = stats.compare_samples(*tested, alpha=alpha)
        usual = _usual_estimate(base, new, alpha)
    mde = (sequential.detectable_effect(estimate) if estimate.method == sequential.METHOD
           else stats.min_detectable_effect(estimate.se_log, estimate.df, alpha=alpha))
    return _Compared(base, new, present, by_status, estimate, mde, usual, *tested)


def _q_values(compared: list[_Compared]) -> list[float]:
    """Each benchmark's p-value adjusted (Benjamini-Hochberg) over the benchmarks of its
    kind."""
    q_values = [math.nan] * len(compared)
    for kind in Kind:
        indices = [i for i, c in enumerate(compared) if c.present.kind == kind]
        adjusted = stats.adjust_p_values([compared[i].estimate.p_value for i in indices])
        for i, q in zip(indices, adjusted):
            q_values[i] = q
    return q_values


def _band(low: float, high: float, min_effect: float) -> Direction:
    """+1 when the whole interval [low, high] is a slowdown of at least `min_effect`, -1
    when it is a speedup of at least that much, else 0 (NaN gives 0)."""
    if not (low > 0 and high > 0):
        return Direction.SAME
    if stats.effect_direction(low, min_effect) == 1:
        return Direction.SLOWER
    if stats.effect_direction(high, min_effect) == -1:
        return Direction.FASTER
    return Direction.SAME


def machine_could_explain(low: float, high: float, direction: int,
                          shift: machine.MachineShift, min_effect: float) -> bool:
    """Whether a change of the machine's speed within `shift`'s interval could explain this
    row's verdict (`direction` +1 slower, -1 faster, 0 same). A slower verdict is explained
    when the machine may have got slower (the interval reaches above 1) and the verdict
    does not stand after dividing out the interval's high end raised to
    `MACHINE_MISMATCH` (in log terms: the benchmark may move more than the canary); a
    faster one likewise with the low end. A `same` hides a change when, divided by any
    value in the interval, it would be one. `low` and `high` are the row's interval. When
    the shift's interval is unknown (a side with one canary), any slower or faster verdict
    could be the machine's."""
    if not (math.isfinite(shift.low) and math.isfinite(shift.high)):
        return direction != 0
    if direction == 0:
        return _band(low / shift.high, high / shift.low, min_effect) != 0
    far = shift.high if direction > 0 else shift.low
    if far <= 1 if direction > 0 else far >= 1:
        return False
    scale = far ** MACHINE_MISMATCH
    return _band(low / scale, high / scale, min_effect) != direction


def _machine_verdict(c: _Compared, direction: int, shift: machine.MachineShift | None,
                     min_effect: float, alpha: float) -> bool:
    """Whether the machine's state, between or within the runs, leaves this time row
    without a confident verdict."""
    if not c.present.kind.is_timed:
        return False
    if c.usual_estimate is not None:
        usual = c.usual_estimate
        if stats.classify_change(usual.ratio, usual.p_value, min_effect=min_effect,
                                 alpha=alpha) != direction:
            return True
    if shift is None or not shift.could_have_shifted:
        return False
    return machine_could_explain(c.estimate.low, c.estimate.high, direction, shift, min_effect)


def _row(c: _Compared, q: float, min_effect: float, alpha: float,
         shift: machine.MachineShift | None, instructions_min_effect: float) -> ComparisonRow:
    est = c.estimate
    if c.present.kind is Kind.INSTRUCTIONS:
        min_effect = instructions_min_effect
    inconclusive = False
    if c.status_verdict is not None:
        verdict = c.status_verdict
    else:
        direction = stats.classify_change(est.ratio, q, min_effect=min_effect, alpha=alpha)
        verdict = direction_verdict(direction)
        if _machine_verdict(c, direction, shift, min_effect, alpha):
            verdict = Verdict.MACHINE_SHIFT
        inconclusive = direction == 0 and stats.effect_direction(est.ratio, min_effect) != 0
    resolution = ""
    if est.method == sequential.METHOD:
        resolution = sequential.resolve([dataclasses.replace(est, p_value=q)],
                                        min_effect=min_effect, alpha=alpha)[0].value
    failing = is_failing(_status(c.new))
    reason_side = c.new if failing else c.base
    shown = units.shown_values(c.estimate, c.base, c.new, c.base_tested, c.new_tested)
    parts = c.present.parts
    return ComparisonRow(
        name=c.present.name, kind=parts.kind, model=parts.model, tool=parts.tool,
        task=parts.task, config=parts.config or "", verdict=verdict,
        base_status=c.base.status if c.base is not None else None,
        new_status=c.new.status if c.new is not None else None,
        reason=reason_side.reason if reason_side is not None else "",
        base_value=shown[0], new_value=shown[1],
        ratio=est.ratio, ratio_low=est.low, ratio_high=est.high, p_value=est.p_value,
        q_value=q, min_detectable_effect=c.min_detectable_effect, method=est.method,
        n_base=est.n_base, n_new=est.n_new, inconclusive=inconclusive, resolution=resolution)


def _slowest_first(r: ComparisonRow) -> tuple[int, int, float, str]:
    finite = math.isfinite(r.ratio) and r.ratio > 0
    return (_ORDER[r.verdict], 0 if finite else 1, -math.log(r.ratio) if finite else 0.0,
            r.name)


def _geomeans(rows: Iterable[ComparisonRow], estimates: dict[str, stats.RatioEstimate],
              alpha: float) -> tuple[GeoMean, ...]:
    groups: dict[tuple[str, str], list[ComparisonRow]] = {}
    for r in rows:
        # A machine-shift row's ratio may be the machine's: no confident summary holds it.
        if (r.kind is not Kind.TIME or r.base_status is not CellStatus.OK
                or r.new_status is not CellStatus.OK or not math.isfinite(r.ratio)
                or r.verdict is Verdict.MACHINE_SHIFT):
            continue
        groups.setdefault(("all", ""), []).append(r)
        if r.tool:
            groups.setdefault(("tool", r.tool), []).append(r)
        if r.task:
            groups.setdefault(("task", r.task), []).append(r)
    out = []
    for (by, key), members in groups.items():
        gm, low, high = stats.geometric_mean_interval(
            [m.ratio for m in members], [estimates[m.name].se_log for m in members],
            [estimates[m.name].df for m in members], alpha=alpha)
        out.append(GeoMean(by, key, gm, low, high, len(members)))
    order = {"tool": 0, "task": 1, "all": 2}
    out.sort(key=lambda g: (order[g.by], g.key))
    return tuple(out)


def _build_info(results: LoadedResults) -> BuildInfo:
    return BuildInfo(results.build, results.path, dict(results.metadata), results.has_kscperf,
                     results.complete)


def compare_builds(base: LoadedResults, new: LoadedResults, *,
                   min_effect: float = stats.DEFAULT_MIN_EFFECT, force: bool = False,
                   alpha: float = stats.ALPHA, fixed_sample: bool = False,
                   instructions_min_effect: float = stats.INSTRUCTIONS_MIN_EFFECT
                   ) -> Comparison:
    """NEW against BASE, benchmark by benchmark, for every `Kind`.

    Promises: each row has a ratio NEW/BASE of medians with its interval, a p-value and a
    verdict; no ratio within `min_effect` of 1 is called a change, however significant; a
    change needs a q-value (Benjamini-Hochberg over the rows of its kind) under `alpha`;
    rows come sorted slowest change first (regressions, then missing, same, new, fixed,
    faster; by ratio within each). Geometric means per tool, per task and over all cover
    run-time rows correct (status ok) in both builds and not `machine-shift`.

    Instruction rows take `instructions_min_effect` in place of `min_effect`, and are left
    out where the two files counted by different methods.

    Raises KscperfError naming the difference when the files come from different machines,
    CPUs, GPUs, torch versions, profiles or instruction counters, unless `force` (the
    differences are then kept in `ignored_differences`). A plain pyperf file compares by its run-time values. With
    `fixed_sample`, the pairs of an `ab --until-resolved` run are tested as a fixed sample
    (the paired t-test of a plain `ab`) instead of by the confidence sequence its stopping
    rule used: the history's question of one night's pairs (`history.links`).
    """
    for given in (min_effect, instructions_min_effect):
        if not given >= 0:
            raise KscperfError(f"the minimum effect must be 0 or more, not {given!r}.")
    differences = refuse_incomparable(base, new, force=force)
    base_samples, new_samples = build_samples(base), build_samples(new)
    lockstep = is_lockstep_pair(base, new)
    check = _machine_check(base, new, base_samples, new_samples, alpha)
    until_resolved = is_sequential_pair(base, new) and not fixed_sample
    one_counter = base.metadata.get("instructions_method") == new.metadata.get(
        "instructions_method")
    compared = [_compare_pair(b, n, alpha, lockstep, until_resolved)
                for b, n in _pair_rows(base_samples, new_samples)
                if one_counter or _kind(b, n) is not Kind.INSTRUCTIONS]
    rows = [_row(c, q, min_effect, alpha, check.shift, instructions_min_effect)
            for c, q in zip(compared, _q_values(compared))]
    estimates = {c.present.name: c.estimate for c in compared}
    rows.sort(key=_slowest_first)
    explanations = explain_rows(base, new, ((r.name, (r.model, r.tool, r.task, r.config),
                                             r.base_value, r.new_value)
                                            for r in rows if r.kind == Kind.TIME), alpha=alpha)
    count_explanations = explain_counts(base, new, (
        (r.name, (r.model, r.tool, r.task, r.config), r.base_value, r.new_value)
        for r in rows if r.kind == Kind.INSTRUCTIONS))
    return Comparison(base=_build_info(base), new=_build_info(new), min_effect=min_effect,
                      alpha=alpha, rows=tuple(rows), geomeans=_geomeans(rows, estimates, alpha),
                      ignored_differences=tuple(differences) if force else (),
                      machine=check, compile_changes=compare_panels(
                          base.runs, new.runs, min_effect=min_effect, alpha=alpha),
                      explanations=explanations, code_diffs=code_diffs(base.runs, new.runs),
                      count_explanations=count_explanations,
                      instructions_min_effect=instructions_min_effect)


def _machine_check(base: LoadedResults, new: LoadedResults, base_samples: BuildSamples,
                   new_samples: BuildSamples, alpha: float) -> MachineCheck:
    base_speed, new_speed = base_samples.machine, new_samples.machine
    shift = None
    if base_speed is not None and new_speed is not None and not is_lockstep_pair(base, new):
        shift = machine.compare_machine_speeds(base_speed, new_speed, alpha=alpha)
    return MachineCheck(base_speed, new_speed, shift)


def check_machines(base: LoadedResults, new: LoadedResults, *,
                   alpha: float = stats.ALPHA) -> MachineCheck:
    """Each file's machine speed from its canaries, and NEW's against BASE's unless the
    files are the two builds of one lockstep run (whose pairs share the machine's state,
    and whose torch may differ, which the canary's threaded part would see)."""
    return _machine_check(base, new, build_samples(base), build_samples(new), alpha)
