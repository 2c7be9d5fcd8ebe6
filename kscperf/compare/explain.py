"""Why a benchmark changed: the op-by-op diff of two builds' `--explain` profiles
(`explain_rows`), one `Explanation` per run-time row whose two builds both carry profiles.

Each worker process profiled each config once (`kscperf.spec.OpProfile`); an op's value in
a process is its self time per iteration (calls per iteration × self time per call), and 0
in a process that profiled the config without meeting the op. It is scaled by the process's
unprofiled over profiled time per call, so that its ops add up to its timed call: what the
profiler cost, and how fast the machine was while it ran, are taken out, and an op's change
is in the timed values' seconds, as the benchmark's measured change is. Names are normalised first
(`normalised_op`), so that an op matches itself across builds whatever its overload or a
compiler's kernel number. Each op's NEW less BASE is tested across the processes (Welch's t,
`stats.compare_means`) against a change of `NEGLIGIBLE_SHARE` of the base call's time (the
margin: a smaller change is never significant, as `compare` calls no ratio within its
minimum effect a change), and the p-values adjusted over the benchmark's ops that reach the
margin in either build (Benjamini-Hochberg), as the Firefox Profiler's comparison adjusts
over functions. An op is `slower` or `faster` when its q-value is under alpha, `same` when
its interval lies within the margin or it is too small to be tested, and `can't tell`
otherwise. Its `share` is its Δ over the benchmark's measured Δ
(the timed values', not the profile's). Uses `stats.core`; no strings for humans.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Iterable

from kscperf.results.files import LoadedResults
from kscperf.spec import OpProfile
from kscperf.stats import core as stats

__all__ = ["NEGLIGIBLE_SHARE", "OpChange", "Explanation", "normalised_op", "explain_rows"]

# An op whose Δ interval lies within this share of the base call's time changed by nothing
# that matters: "same". Wider and not significant: "can't tell".
NEGLIGIBLE_SHARE = 0.01

_OVERLOAD = re.compile(r"^(\w+::\w+)\.\w+$")
_KERNEL_NUMBER = re.compile(r"_\d+$")
# Inductor's profiled kernels carry their graph's number (`graph_0_cpp_fused_sin_0`), and
# the call of a compiled graph its hash (`## Call CompiledFxGraph f3a... ##`).
_GRAPH_PREFIX = re.compile(r"^graph_\d+_")
_GRAPH_CALL = re.compile(r"^## Call CompiledFxGraph \w+ ##$")
# A compiled region names its frame and that frame's compile (`0/1`): the compile's number
# counts the compiles before it (one per config shape, the timed module's), not the code.
_REGION_COMPILE = re.compile(r"^(Torch-Compiled Region: \d+)/\d+$")


def normalised_op(key: str) -> str:
    """The name an op or kernel is matched by across builds: an ATen op without its overload
    (`aten::add.Tensor` is `aten::add`), a generated kernel without its graph's and its own
    number (`graph_0_cpp_fused_add_mul_0` is `cpp_fused_add_mul`), a compiled graph's call
    without its hash, a compiled region without its compile's number."""
    overload = _OVERLOAD.match(key)
    if overload:
        return overload.group(1)
    if _GRAPH_CALL.match(key):
        return "## Call CompiledFxGraph ##"
    region = _REGION_COMPILE.match(key)
    if region:
        return region.group(1)
    return key if "::" in key else _KERNEL_NUMBER.sub("", _GRAPH_PREFIX.sub("", key))


@dataclass(frozen=True)
class OpChange:
    """One op of one benchmark, BASE against NEW: calls per iteration and self time per call
    (means over the processes; NaN where the build never ran it), `delta_s` the change of
    its self time per iteration with its interval, its `share` of the measured change, the
    test's p- and q-value, `only_in` ("base", "new" or ""), and the `verdict`."""

    op: str
    calls_base: float
    calls_new: float
    self_s_base: float
    self_s_new: float
    delta_s: float
    delta_low: float
    delta_high: float
    share: float
    p_value: float
    q_value: float
    only_in: str
    verdict: str


@dataclass(frozen=True)
class Explanation:
    """The op diff of one run-time benchmark (`name`): the measured change of its time per
    call (`measured_delta_s`, NEW less BASE of the comparison's values), the processes that
    carried profiles, the profiler's overhead in each build (median over processes), the
    share of the measured change that the ops called slower or faster add up to, and the
    ops, largest |Δ| first."""

    name: str
    measured_delta_s: float
    base_s: float
    processes_base: int
    processes_new: int
    overhead_base: float
    overhead_new: float
    explained_share: float
    ops: tuple[OpChange, ...]

    def top(self, n: int) -> tuple[OpChange, ...]:
        """The first `n` ops whose verdict is a change, else the first `n` ops."""
        changed = tuple(o for o in self.ops if o.verdict in ("slower", "faster"))
        return (changed or self.ops)[:n]


_CellConfig = tuple[str, str, str, str]


def _profiles(results: LoadedResults) -> dict[_CellConfig, list[OpProfile]]:
    """Every process's profile of each model/tool/task/config, in run order."""
    found: dict[_CellConfig, list[OpProfile]] = {}
    for run in results.runs:
        for c in run.configs:
            if c.op_profile is not None:
                found.setdefault((run.model, run.tool, run.task, c.config), []).append(
                    c.op_profile)
    return found


def _per_iteration(profile: OpProfile) -> dict[str, tuple[float, float]]:
    """op -> (calls per iteration, self seconds per iteration) of one process, in the timed
    call's seconds: scaled by the unprofiled over the profiled time per call."""
    scale = (profile.unprofiled_s / profile.profiled_s
             if profile.unprofiled_s > 0 and profile.profiled_s > 0 else 1.0)
    out: dict[str, tuple[float, float]] = {}
    for row in profile.rows:
        op = normalised_op(row.key)
        calls, seconds = out.get(op, (0.0, 0.0))
        out[op] = (calls + row.calls, seconds + row.calls * row.self_s * scale)
    return out


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.fmean(values) if values else math.nan


def _side(tables: list[dict[str, tuple[float, float]]], op: str) -> tuple[list[float], float,
                                                                          float]:
    """One build's per-process self seconds per iteration of `op`, its mean calls per
    iteration and self time per call (NaN where it never ran)."""
    seconds = [t.get(op, (0.0, 0.0))[1] for t in tables]
    calls = _mean(t.get(op, (0.0, 0.0))[0] for t in tables)
    per_call = _mean(seconds) / calls if calls > 0 else math.nan
    return seconds, (calls if calls > 0 else math.nan), per_call


def _verdict(diff: stats.Difference, q: float, alpha: float, negligible: float) -> str:
    if q < alpha:
        return "slower" if diff.delta > 0 else "faster"
    if math.isnan(q) or -negligible <= diff.low and diff.high <= negligible:
        return "same"
    return "can't tell"


def _explanation(name: str, base: list[OpProfile], new: list[OpProfile], base_s: float,
                 new_s: float, alpha: float) -> Explanation:
    base_tables = [_per_iteration(p) for p in base]
    new_tables = [_per_iteration(p) for p in new]
    ops = sorted({op for t in base_tables + new_tables for op in t})
    measured = new_s - base_s
    sides = [(_side(base_tables, op), _side(new_tables, op)) for op in ops]
    negligible = NEGLIGIBLE_SHARE * base_s
    diffs = [stats.compare_means(b[0], n[0], margin=negligible, alpha=alpha) for b, n in sides]
    # Independent filtering: an op under the margin in both builds cannot change by more
    # than it, so it is not tested, and the adjustment counts only the ops that could.
    tested = [max(_mean(b[0]), _mean(n[0])) >= negligible for b, n in sides]
    q_values = stats.adjust_p_values([d.p_value if t else math.nan
                                      for d, t in zip(diffs, tested)])
    changes = []
    for op, (b, n), diff, q in zip(ops, sides, diffs, q_values):
        only_in = ("new" if not any(op in t for t in base_tables)
                   else "base" if not any(op in t for t in new_tables) else "")
        changes.append(OpChange(
            op=op, calls_base=b[1], calls_new=n[1], self_s_base=b[2], self_s_new=n[2],
            delta_s=diff.delta, delta_low=diff.low, delta_high=diff.high,
            share=diff.delta / measured if measured else math.nan, p_value=diff.p_value,
            q_value=q, only_in=only_in, verdict=_verdict(diff, q, alpha, negligible)))
    changes.sort(key=lambda o: (math.isnan(o.delta_s), -abs(o.delta_s), o.op))
    total = sum(o.delta_s for o in changes if o.verdict in ("slower", "faster"))
    return Explanation(
        name=name, measured_delta_s=measured, base_s=base_s, processes_base=len(base),
        processes_new=len(new), overhead_base=statistics.median(p.overhead for p in base),
        overhead_new=statistics.median(p.overhead for p in new),
        explained_share=total / measured if measured else math.nan, ops=tuple(changes))


def explain_rows(base: LoadedResults, new: LoadedResults,
                 rows: Iterable[tuple[str, _CellConfig, float, float]], *,
                 alpha: float = stats.ALPHA) -> tuple[Explanation, ...]:
    """The op diff of each given run-time row, (benchmark name, (model, tool, task, config),
    BASE's and NEW's time per call), that both builds profiled; rows without profiles on
    either side are left out."""
    base_profiles, new_profiles = _profiles(base), _profiles(new)
    out = []
    for name, key, base_s, new_s in rows:
        if key in base_profiles and key in new_profiles:
            out.append(_explanation(name, base_profiles[key], new_profiles[key], base_s,
                                    new_s, alpha))
    return tuple(out)
