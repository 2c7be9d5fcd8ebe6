"""truth-check's explain section (`--sections explain`): whether `--explain` names the op that
changed, calls nothing changed when nothing did, and leaves the timing alone.

  extra op      `ab --explain` of tests/fixtures/explain (pt inference), NEW adding one exp
                (about 10 % of the call). Target: aten::exp first, only in NEW, explaining
                70-130 % of the measured change, in at least 9 of 10 runs.
  bigger op     NEW's matmul doing 1.5 times the work (a larger intermediate). Target:
                aten::mm first in at least 9 of 10.
  A/A           the same build on both sides. Target: no op with q < 0.05 in at least 19 of 20.
  untouched     an A/A `ab` of the shipped suite's eager tools in which NEW alone profiles,
                with --untouched-budget run until resolved at ±2 %. Target: every run-time
                interval within ±2 %.
  overhead      runs of the shipped suite's eager tools (the default profile's values, one
                process a cell) with and without --explain, alternating, and the passes'
                own seconds. Target: --explain adds at most 15 % wall time.
  fusion        `ab --explain` of the fixture's compiled cell, NEW with a graph break that
                splits Inductor's one fused kernel into two. Target: the kernel diff and the
                code diff show it, and `compare` names the kernel count; the instrumented
                compile stated apart.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

import kscperf
from kscperf.compare.explain import Explanation
from kscperf.names import benchmark_name
from validation.common import ROOT, exit_if_interrupted, run_build

FIXTURE = ROOT / "tests" / "fixtures" / "explain" / "explain.py"
BENCHMARK = benchmark_name("explain", "pt", "inference", "256")
EAGER = dict(tools="pt,ptnice", paths=(str(ROOT / "bench_defs"),))
# The one-sided A/A's target: every run-time interval within this band around 1.
UNTOUCHED_BAND = 0.02


def _case(label: str, case: str) -> kscperf.Build:
    return kscperf.Build(label, env=(("KSCPERF_EXPLAIN_CASE", case),))


def _ab(tmp: str, base_case: str, new_case: str, profile: str, tool: str = "pt") -> Any:
    result = kscperf.run_ab(str(FIXTURE), tools=tool, tasks="inference", profile=profile,
                            explain=True, output_dir=os.path.join(tmp, "explain-ab"),
                            replace=True, base=_case("base", base_case),
                            new=_case("new", new_case))
    exit_if_interrupted(result, "truth-check")
    return result


def explain_ab(tmp: str, base_case: str, new_case: str, profile: str) -> Explanation | None:
    """One `ab --explain` of the fixture, BASE in `base_case` and NEW in `new_case`: the op
    diff of its one benchmark (None when a side did not profile it)."""
    result = _ab(tmp, base_case, new_case, profile)
    return kscperf.compare_builds(*result.loaded).explanation(BENCHMARK)


def fusion(tmp: str, profile: str) -> None:
    """`ab --explain` of the compiled cell, NEW losing a fusion: each graph's kernels in both
    builds, the lines of the code diff, compare's kernel count, the instrumented compiles."""
    result = _ab(tmp, "base", "fusion-lost", profile, tool="compiled")
    comparison = kscperf.compare_builds(*result.loaded)
    print(f"\n== explain: a fusion lost, compiled inference, {profile} profile ==")
    for d in comparison.code_diffs:
        for g in d.graphs:
            added = sum(1 for line in g.diff.splitlines() if line.startswith("+") and
                        not line.startswith("+++"))
            removed = sum(1 for line in g.diff.splitlines() if line.startswith("-") and
                          not line.startswith("---"))
            print(f"  {d.cell} graph {g.graph}: base {', '.join(g.kernels_base) or '-'}; "
                  f"new {', '.join(g.kernels_new) or '-'}; diff +{added} -{removed} lines")
    for c in comparison.compile_changes:
        if c.what == "count" and c.verdict != "same":
            print(f"  compare: {c.cell} {c.name} {c.base:g} -> {c.new:g} ({c.verdict}"
                  f"{', a regression' if c.is_regression else ', not a regression'})")
    for side, loaded in zip(("base", "new"), result.loaded):
        seconds = [c.op_profile.compile_s for r in loaded.runs for c in r.configs
                   if c.op_profile and c.op_profile.compile_s is not None]
        print(f"  {side}: instrumented compile {statistics.median(seconds):.2f} s (median of "
              f"{len(seconds)} processes), apart from the timed compile")
    kernels = [c for c in comparison.compile_changes if c.name == "kernels"]
    met = bool(kernels) and kernels[0].new > kernels[0].base and any(
        d.changed for d in comparison.code_diffs)
    print(f"  target (kernel count named, code diff shows the split): {'met' if met else 'NOT met'}")


def _first(e: Explanation | None) -> str:
    return e.ops[0].op if e and e.ops else "-"


def _line(e: Explanation | None) -> str:
    if e is None or not e.ops:
        return "no profile"
    top = e.ops[0]
    return (f"{top.op} first ({top.verdict}{', only in ' + top.only_in if top.only_in else ''}, "
            f"share {top.share:.0%}, q {top.q_value:.2g}); measured "
            f"{e.measured_delta_s * 1e6:+.1f} us a call")


def _extra_op_met(e: Explanation | None) -> bool:
    if e is None or not e.ops:
        return False
    top = e.ops[0]
    return top.op == "aten::exp" and top.only_in == "new" and 0.7 <= top.share <= 1.3


def _false_rows(e: Explanation | None) -> list[str]:
    return [o.op for o in (e.ops if e else ()) if o.q_value < 0.05]


def planted(tmp: str, trials: int, aa_runs: int, profile: str) -> None:
    """The extra-op, bigger-op and A/A trials, each run printed and then scored."""
    print(f"\n== explain: which op changed, {profile} profile ==")
    scores = []
    for name, new_case, runs, met in (
            ("extra op", "extra-op", trials, _extra_op_met),
            ("bigger op", "bigger-op", trials, lambda e: _first(e) == "aten::mm"),
            ("A/A", "base", aa_runs, lambda e: e is not None and not _false_rows(e))):
        hits = 0
        for k in range(runs):
            e = explain_ab(tmp, "base", new_case, profile)
            hits += met(e)
            extra = f"; q < 0.05: {', '.join(_false_rows(e))}" if _false_rows(e) else ""
            print(f"  {name} #{k + 1}: {_line(e)}{extra}")
        scores.append(f"{name}: met in {hits} of {runs}")
    print("  " + "; ".join(scores))
    print("  targets: extra op (first, only in NEW, share 70-130 %) and bigger op (first) in "
          "at least 9 of 10; A/A no q < 0.05 in at least 19 of 20")


def untouched(tmp: str, profile: str, processes: int | None = None,
              budget_s: float | None = None, patterns: list[str] | None = None) -> None:
    """An A/A `ab` of the shipped suite's eager cells (those matching one of `patterns`, if
    given) in which NEW alone profiles, with `processes` pairs a cell (default: the
    profile's), and with `budget_s` pairs added until each run-time interval (a confidence
    sequence, then) is resolved at ±2 % or the budget is spent: every run-time interval
    outside ±2 %, and the widest."""
    settings: dict[str, Any] = {} if processes is None else {"processes": processes}
    if patterns:
        settings["patterns"] = patterns
    if budget_s is not None:
        settings.update(until_resolved=True, min_effect=UNTOUCHED_BAND, budget_s=budget_s)
    result = kscperf.run_ab(*EAGER["paths"], tools=EAGER["tools"], profile=profile,
                            output_dir=os.path.join(tmp, "explain-untouched"), replace=True,
                            base=kscperf.Build("base"), new=kscperf.Build("new", explain=True),
                            **settings)
    exit_if_interrupted(result, "truth-check")
    comparison = kscperf.compare_builds(*result.loaded, min_effect=UNTOUCHED_BAND)
    rows = [r for r in comparison.rows if r.kind == "time" and r.ratio == r.ratio]
    outside = [r for r in rows if r.ratio_low < 1 - UNTOUCHED_BAND
               or r.ratio_high > 1 + UNTOUCHED_BAND]
    pairs = f"{processes} process pairs a cell" if processes else f"{profile} profile"
    if budget_s is not None:
        pairs += f", until resolved at ±2 % (budget {budget_s:g} s)"
    print(f"\n== explain: timing untouched, A/A ab of {EAGER['tools']} with NEW alone profiling, "
          f"{pairs} ==")
    for r in outside:
        print(f"  outside ±2 %: {r.name} {r.ratio:.3f} [{r.ratio_low:.3f}, {r.ratio_high:.3f}] "
              f"after {r.n_base} pairs {r.resolution}".rstrip())
    widest = max((max(1 - r.ratio_low, r.ratio_high - 1) for r in rows), default=float("nan"))
    centre = statistics.median(r.ratio for r in rows) if rows else float("nan")
    called = [r.name for r in rows if r.verdict.value in ("slower", "faster")]
    print(f"  {len(rows) - len(outside)} of {len(rows)} run-time intervals within ±2 %; "
          f"median ratio {centre:.4f}, widest reach {widest:.1%}; called changed at ±2 %: "
          f"{len(called)}; pairs a cell {min((r.n_base for r in rows), default=0)}-"
          f"{max((r.n_base for r in rows), default=0)}; {result.wall_s:.0f} s; target: all")


def _pass_seconds(path: str) -> tuple[float, float]:
    """The profiling passes' seconds and the workers' wall seconds of a results file."""
    runs = kscperf.load(path).runs
    passes = sum(c.op_profile.seconds for r in runs for c in r.configs if c.op_profile)
    return passes, sum(r.wall_s or 0.0 for r in runs)


def overhead(tmp: str, repeats: int) -> None:
    """Runs of the shipped suite's eager cells at the default profile's values, warmups and
    minimum time, one process a cell, without and with --explain, alternating: their wall
    times, the median ratio, and what the profiling passes took of the workers' time."""
    walls: dict[bool, list[float]] = {False: [], True: []}
    shares = []
    for k in range(repeats):
        for explain in (False, True):
            output = os.path.join(tmp, f"overhead-{explain}.json")
            settings: dict[str, Any] = dict(tools=EAGER["tools"], explain=explain, processes=1,
                                            output=output)
            walls[explain].append(run_build("truth-check", *EAGER["paths"], **settings))
            if explain:
                passes, worker_s = _pass_seconds(output)
                shares.append(passes / (worker_s - passes))
    ratio = statistics.median(w / p for w, p in zip(walls[True], walls[False]))
    print(f"\n== explain: overhead, {EAGER['tools']} of the shipped suite, default profile's "
          f"values, one process a cell, {repeats} alternating pairs ==")
    print(f"  without --explain {', '.join(f'{w:.0f} s' for w in walls[False])}; with "
          f"{', '.join(f'{w:.0f} s' for w in walls[True])}; median ratio {ratio:.3f} "
          f"(+{ratio - 1:.1%}); the passes took +{statistics.median(shares):.1%} of the rest "
          "of the workers' time; target at most +15 %")
