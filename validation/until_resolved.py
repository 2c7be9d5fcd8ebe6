"""truth-check's `ab --until-resolved` sections: real trials (a 5 % slowdown of one tool
beside an untouched one, then A/A runs), the recording of real A/A pair numbers
(`tools/data/ab-aa-pairs.json`), and the simulation of the stopping rule on those pair
numbers resampled, with the repeated-looks check of why it is a confidence sequence."""

from __future__ import annotations

import json
import math
import os
import random
import statistics
from typing import Any

import kscperf
from kscperf.compare import builds as compare
from kscperf.names import benchmark_name
from kscperf.stats import core as stats, sequential
from validation.common import ROOT, WORK_FIXTURE, exit_if_interrupted

# The recorded pair numbers of real A/A `ab` runs on this VM that the simulation resamples.
RECORDED_PAIRS = ROOT / "tools" / "data" / "ab-aa-pairs.json"
# The planted slowdown of the real trials and the changes of the simulation.
_UNTIL_SLOWDOWN = 0.05
_SIM_CHANGES = (0.0, 0.02, 0.05, 0.10)


def _until_trial(tmp: str, nice_work: float, min_effect: float, budget_s: float
                 ) -> tuple[dict[str, compare.ComparisonRow], dict[str, float], float]:
    """One real `ab --until-resolved` of the work fixture (pt untouched, ptnice doing
    `nice_work` times the work in NEW): its run-time rows by tool, the seconds into the run
    at which each benchmark was resolved, and the run's wall time."""
    looks: list[tuple[float, set[str]]] = []

    def on_look(look: Any) -> None:
        looks.append((look.elapsed_s, {b.name for b in look.open}))

    result = kscperf.run_ab(
        str(WORK_FIXTURE), tools="pt,ptnice", tasks="inference",
        output_dir=os.path.join(tmp, "until"),
        replace=True, until_resolved=True, min_effect=min_effect, budget_s=budget_s,
        new=kscperf.Build("new", env=(("KSCPERF_TEST_NICE_WORK", str(nice_work)),)),
        on_look=on_look)
    exit_if_interrupted(result, "truth-check")
    comparison = kscperf.compare_builds(*result.loaded, min_effect=min_effect)
    rows = {r.tool: r for r in comparison.rows if r.kind == "time"}
    # A benchmark's verdict came at the first look that no longer found it open.
    resolved_at = {r.name: next(t for t, still in looks if r.name not in still)
                   for r in rows.values() if r.resolution not in ("", "open")}
    return rows, resolved_at, result.wall_s


def until_resolved(tmp: str, trials: int, min_effect: float, budget_s: float) -> None:
    """Real trials of `ab --until-resolved`: a 5 % slowdown of one tool beside an untouched
    one, then A/A runs."""
    print(f"\n== until resolved (real ab runs): work fixture, ptnice +{_UNTIL_SLOWDOWN:.0%} work, "
          f"pt untouched, --min-effect {min_effect:g} --budget {budget_s:g}, {trials} trials "
          "each ==")
    counts: dict[str, dict[str, int]] = {"slowdown ptnice": {}, "slowdown pt": {}, "A/A": {}}
    times: list[float] = []
    walls: list[float] = []
    for what, work in (("slowdown", 1 + _UNTIL_SLOWDOWN), ("A/A", 1.0)):
        for trial in range(trials):
            rows, resolved_at, wall_s = _until_trial(tmp, work, min_effect, budget_s)
            walls.append(wall_s)
            times += resolved_at.values()
            notes = [f"{tool} {r.verdict.value} {r.ratio:.3f}x [{r.ratio_low:.3f}, "
                     f"{r.ratio_high:.3f}] {r.resolution} after {r.n_base} pairs"
                     for tool, r in sorted(rows.items())]
            print(f"  {what} trial {trial + 1}: {'; '.join(notes)}; {wall_s:.0f} s")
            if what == "A/A":
                changed = any(r.verdict.value in ("slower", "faster") for r in rows.values())
                key = "changed" if changed else "nothing changed"
                counts["A/A"][key] = counts["A/A"].get(key, 0) + 1
            else:
                for tool in ("ptnice", "pt"):
                    verdict = rows[tool].verdict.value
                    counts[f"slowdown {tool}"][verdict] = (
                        counts[f"slowdown {tool}"].get(verdict, 0) + 1)
    for what, c in counts.items():
        print(f"{what}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    if times:
        print(f"time to a verdict (resolved benchmarks, {len(times)}): median "
              f"{statistics.median(times):.0f} s, longest {max(times):.0f} s; run wall time "
              f"median {statistics.median(walls):.0f} s, longest {max(walls):.0f} s")
    print("targets: ptnice slower in >= 9 of 10; pt never changed; A/A nothing changed in 10 "
          "of 10")


def record_pairs(tmp: str, processes: int) -> None:
    """A real A/A `ab --until-resolved` run of the work fixture whose profile is
    `processes` pairs per cell (fresh zygotes every round, as until-resolved runs them; the
    budget of 1 s ends it after them): its pair numbers, written to RECORDED_PAIRS for the
    simulation."""
    out = os.path.join(tmp, "record")
    result = kscperf.run_ab(str(WORK_FIXTURE), tools="pt,ptnice", tasks="inference",
                            output_dir=out, replace=True, processes=processes,
                            until_resolved=True, budget_s=1.0)
    exit_if_interrupted(result, "truth-check")
    base, new = result.runs
    by_key = {(r.name, r.process_index): r for r in new}
    numbers: dict[str, list[float]] = {}
    pair_s = []
    for b in base:
        n = by_key.get((b.name, b.process_index))
        if n is None or not b.configs or not n.configs:
            continue
        logs = stats.paired_log_ratios([(b.configs[0].values, n.configs[0].values)])
        numbers.setdefault(benchmark_name(b.model, b.tool, b.task, b.configs[0].config), []
                           ).extend(logs)
        pair_s.append(max(b.wall_s or 0.0, n.wall_s or 0.0))
    doc = {"what": "pair numbers (median log NEW/BASE value of one lockstep process pair) "
                   "of an A/A `ab --until-resolved` run, in the order they ran",
           "command": f"tools/truth-check --sections record-pairs --record-processes {processes}",
           "date": result.loaded[0].metadata.get("date"),
           "cpu_model_name": result.loaded[0].metadata.get("cpu_model_name"),
           "pair_s_median": statistics.median(pair_s), "benchmarks": numbers}
    RECORDED_PAIRS.parent.mkdir(exist_ok=True)
    RECORDED_PAIRS.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    for name, logs in numbers.items():
        print(f"  {name}: {len(logs)} pairs, median {statistics.median(logs):+.2%}, "
              f"quartiles {statistics.quantiles(logs, n=4)[0]:+.2%} "
              f"{statistics.quantiles(logs, n=4)[2]:+.2%}")
    print(f"wrote {RECORDED_PAIRS.relative_to(ROOT)}")


def simulate_until_resolved(sequences: int, seed: int) -> None:
    """The stopping rule on resampled real noise: A/A sequences and planted changes, per
    minimum effect and budget in pairs."""
    doc = json.loads(RECORDED_PAIRS.read_text(encoding="utf-8"))
    noise = [v for logs in doc["benchmarks"].values() for v in logs]
    print(f"\n== until resolved (simulation): {sequences} sequences per row, pair numbers "
          f"resampled with replacement from {len(noise)} recorded A/A pairs "
          f"({RECORDED_PAIRS.relative_to(ROOT)}, {doc['date']}), seed {seed} ==")
    rng = random.Random(seed)
    print(f"{'change':>6} {'min effect':>10} {'budget':>12} {'slower':>7} {'faster':>7} "
          f"{'same':>6} {'open':>6} {'pairs: median':>14} {'90th pct':>8}")
    for min_effect in (0.05, 0.02):
        for max_pairs in (30, 300):
            for change in _SIM_CHANGES:
                # A/A resamples the pair numbers as recorded, whatever bias they carry; a
                # planted change is added to them centred on their median, so it is exact.
                shift = math.log1p(change) - (statistics.median(noise) if change else 0.0)
                walks = [sequential.walk_sequence(
                    [rng.choice(noise) + shift for _ in range(max_pairs)],
                    min_effect=min_effect) for _ in range(sequences)]
                verdicts = [w.direction for w in walks]
                pairs = sorted(w.pairs for w in walks)
                open_ = sum(w.resolution is sequential.Resolution.OPEN for w in walks)
                print(f"{change:>6.0%} {min_effect:>10.0%} {max_pairs:>6} pairs "
                      f"{verdicts.count(1) / sequences:>7.1%} {verdicts.count(-1) / sequences:>7.1%} "
                      f"{verdicts.count(0) / sequences:>6.1%} {open_ / sequences:>6.1%} "
                      f"{statistics.median(pairs):>14.0f} {pairs[int(0.9 * (len(pairs) - 1))]:>8}")
    print("target: A/A (change 0 %) called slower or faster in at most 1 % at the default "
          "settings (min effect 5 %)")
    _repeated_looks(noise, sequences, rng)


def _repeated_looks(noise: list[float], sequences: int, rng: Any) -> None:
    """Why a confidence sequence: how often an A/A interval ever excludes no change when it
    is looked at after every pair, the fixed paired t interval against the sequence."""
    from scipy import stats as sps

    centre = statistics.median(noise)
    limit = math.log(1 / 0.05)
    for max_pairs in (30, 300):
        critical = [0.0, 0.0, 0.0] + [float(sps.t.ppf(0.975, n - 1))
                                      for n in range(3, max_pairs + 1)]
        fixed = sequenced = 0
        for _ in range(sequences):
            # Centred on the recorded median, so that "no change" is the truth.
            logs = [rng.choice(noise) - centre for _ in range(max_pairs)]
            total = total_sq = 0.0
            at_or_under = 0
            t_hit = cs_hit = False
            for n, d in enumerate(logs, start=1):
                total, total_sq, at_or_under = total + d, total_sq + d * d, at_or_under + (d <= 0)
                if n < 3:
                    continue
                variance = (total_sq - total * total / n) / (n - 1)
                if variance > 0 and abs(total / n) / math.sqrt(variance / n) > critical[n]:
                    t_hit = True
                if sequential.log_e_value(n, at_or_under) >= limit:
                    cs_hit = True
            fixed += t_hit
            sequenced += cs_hit
        print(f"repeated looks, A/A centred, after every pair from 3 to {max_pairs}: the "
              f"fixed paired t interval ever excluded no change in {fixed / sequences:.1%}, "
              f"the confidence sequence in {sequenced / sequences:.1%} (promised: at most 5 %)")
