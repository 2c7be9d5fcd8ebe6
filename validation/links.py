"""dashboard-bench's links section: change detection on lockstep links (`kscperf.history.links`
with the false discovery control of `changepoints`), with noise resampled from real recorded
`ab` runs: the recorded pair numbers, a link drawn from them, the series with planted steps,
and the summary of what was found at the right build."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import kscperf
from kscperf.errors import CellStatus
from kscperf.history import Series, SeriesKey, SeriesPoint, StoredBuild, changes, links
from kscperf.names import Kind
from kscperf.stats import changepoints, core as stats
from kscperf.stats.changepoints import Change


def _recorded_pair_logs(root: Path, changed: Sequence[str]) -> list[list[float]]:
    """Per recorded run and run-time benchmark, the pair numbers of its process pairs (the
    median over a pair's values of log(NEW value / BASE value)), from every `ab -o` folder
    under `root`, for every benchmark of a cell whose name contains none of `changed` (the
    ones a planted change touched). One list per run and benchmark: what a run shares
    across its pairs (its zygotes' layout, the machine's state that night) stays together."""
    out: list[list[float]] = []
    for folder in sorted({p.parent for p in root.rglob("*.json")}):
        try:
            ab = links.read_ab_folder(str(folder))
        except kscperf.KscperfError:
            continue
        new_changed = any(c in str(folder) for c in changed)
        base_values = {(r.model, r.tool, r.task, c.config, r.process_index): c.values
                       for r in ab.base.runs for c in r.configs}
        by_benchmark: dict[tuple[str, ...], list[float]] = {}
        for run in ab.new.runs:
            if new_changed and run.tool == "ptnice":
                continue
            for c in run.configs:
                base = base_values.get((run.model, run.tool, run.task, c.config,
                                        run.process_index))
                logs = [math.log(n / b) for b, n in zip(base or (), c.values) if b > 0 and n > 0]
                if logs:
                    by_benchmark.setdefault((run.model, run.tool, run.task, c.config), []
                                            ).append(float(np.median(logs)))
        out += [v for v in by_benchmark.values() if len(v) >= 2]
    return out


def _link_of(rng: np.random.Generator, offsets: np.ndarray, residuals: np.ndarray,
             pairs: int, step: float, base_id: int) -> tuple[Any, np.ndarray]:
    """A link of `pairs` pair numbers, times `step`, and those numbers: one recorded run's
    offset (the median of its pair numbers, a run drawn at random) plus pair noise drawn
    with replacement from every recorded run's pairs less their run's median. Resampling a
    run of 8-16 pairs itself would repeat its pairs and make the link look tighter than
    any real night."""
    logs = (offsets[int(rng.integers(len(offsets)))] + rng.choice(residuals, size=pairs)
            + math.log(step))
    # One value per side and pair: the pair's log ratio is then exactly that value, and the
    # estimate is `compare`'s paired test itself.
    est = stats.compare_paired_samples([([1.0], [math.exp(v)]) for v in logs])
    return links.Link(base_id, base_id + 1, est.ratio, est.low, est.high, est.p_value,
                      est.se_log, est.n_base, est.method, ""), logs


class _Ceiling:
    """The history's test told each link's true noise: its statistic (the log ratio over the
    standard error `links.tested_estimate` pools from the link's pairs and its series'
    scatter, here the true one: the null's median absolute deviation) gets its exact p-value
    from its null distribution, `draws` links of no step made from the same recorded noise.
    Under the same false discovery control, no rule on that statistic lists more steps at
    the same false discovery rate."""

    def __init__(self, rng: np.random.Generator, offsets: np.ndarray, residuals: np.ndarray,
                 pairs: int, prior_df: float, draws: int = 1_000_000) -> None:
        logs = offsets[rng.integers(len(offsets), size=draws)][:, None] + rng.choice(
            residuals, size=(draws, pairs))
        means = logs.mean(axis=1)
        self.scatter = float(1.4826 * np.median(np.abs(means - np.median(means))))
        self.pairs = pairs
        self.prior_df = prior_df
        self.null = np.sort(np.abs(means) / self._se(logs))

    def _se(self, logs: np.ndarray) -> np.ndarray:
        own_df = self.pairs - 1
        own = logs.std(axis=-1, ddof=1) / math.sqrt(self.pairs)
        prior = self.prior_df
        return np.sqrt((own_df * own ** 2 + prior * self.scatter ** 2) / (own_df + prior))

    def print_tail(self) -> None:
        """Prints where the statistic's null puts one link in 10,000, beside the t
        distribution the history's rule takes."""
        from scipy.stats import t as student_t

        df = self.pairs - 1 + self.prior_df
        print(f"  the statistic's null: |t| beyond {np.quantile(self.null, 1 - 1e-4):.2f} in "
              f"one of 10,000 links of no step; the t distribution with {df:g} degrees of "
              f"freedom puts {float(student_t.isf(0.5e-4, df)):.2f} (with a year's scatter)")

    def estimate(self, logs: np.ndarray) -> stats.RatioEstimate:
        """The ceiling's estimate of one link of pair log ratios `logs`."""
        se = float(self._se(logs))
        mean = float(np.mean(logs))
        beyond = len(self.null) - np.searchsorted(self.null, abs(mean) / se)
        p = (beyond + 1) / (len(self.null) + 1)
        half = 1.959964 * se
        return stats.RatioEstimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half),
                                   float(p), se, math.inf, "pairs", self.pairs, self.pairs)


def _recorded_noise(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """The recorded runs' offsets (the median of each run's pair numbers) and pair noise
    (every pair less its run's median), from `--ab-noise`, with the section's heading."""
    if not args.ab_noise:
        sys.exit("dashboard-bench: the links section needs --ab-noise DIR")
    runs = [args.link_noise_scale * np.array(r)
            for r in _recorded_pair_logs(Path(args.ab_noise), ("ab-b06",))]
    if not runs:
        sys.exit(f"dashboard-bench: no ab -o folder with two or more pairs under {args.ab_noise}")
    pool = np.concatenate(runs)
    offsets = np.array([np.median(r) for r in runs])
    print(f"\n== links: {args.series} series x {args.link_builds} builds, {args.link_pairs} "
          f"pairs per link: the offset of one of {len(runs)} recorded runs plus pair noise "
          f"from their {len(pool)} pairs less their run's median, x "
          f"{args.link_noise_scale:g} (pairs: sd of log {pool.std():.3f}, "
          f"{np.mean(np.abs(pool) > 0.1):.1%} beyond 10 %; run medians {offsets.min():+.2%} "
          f"to {offsets.max():+.2%}, sd {offsets.std():.2%}); one false discovery family per "
          f"night; the scatter lends at most {args.link_prior_df:g} degrees of freedom ==")
    return offsets, np.concatenate([r - np.median(r) for r in runs])


def section_links(args: argparse.Namespace) -> dict[str, Any]:
    """Detection on links with resampled real noise (see the module docstring), by the
    history's rule (`links.with_links`, then one false discovery family per night,
    `changes.control_families`) and by the ceiling (`_Ceiling`) under the same control."""
    offsets, residuals = _recorded_noise(args)
    rng = np.random.default_rng(args.seed)
    n, builds = args.series, args.link_builds
    stored = [StoredBuild(i, f"b{i}", "", "m", "", False, "", "", {}, None, i)
              for i in range(builds)]
    all_series = [Series(SeriesKey("m", Kind.TIME, f"x/pt/fwd/{i}", "x", "pt", "fwd", str(i)),
                         tuple(SeriesPoint(b, CellStatus.OK, (1.0,), 1.0, 0.0, None)
                               for b in stored)) for i in range(n)]
    ceiling = _Ceiling(rng, offsets, residuals, args.link_pairs, args.link_prior_df)
    ceiling.print_tail()
    truth: dict[int, tuple[int, float] | None] = {}
    found, judged, ceiling_found = {}, {}, {}
    started = time.perf_counter()
    elapsed = 0.0
    for i, series in enumerate(all_series):
        planted = None
        if i % 2:
            planted = (int(rng.integers(1, builds)), float(rng.uniform(1.05, 1.30)))
            if rng.random() < 0.5:
                planted = (planted[0], 1 / planted[1])
        truth[i] = planted
        made = {b: _link_of(rng, offsets, residuals, args.link_pairs,
                            planted[1] if planted and planted[0] == b else 1.0, b - 1)
                for b in range(1, builds)}
        timed = time.perf_counter()
        found[i], judged[i] = links.with_links(series, [], {b: m[0] for b, m in made.items()},
                                               min_effect=stats.DEFAULT_MIN_EFFECT,
                                               prior_df=args.link_prior_df)
        elapsed += time.perf_counter() - timed
        ceiling_found[i] = _ceiling_steps(ceiling, made)
    timed = time.perf_counter()
    kept, _ = changes.control_families(all_series, found, {i: judged[i].keys() for i in judged})
    elapsed += time.perf_counter() - timed
    print(f"  the history's rule (each link tested with its pairs and its series' scatter; "
          f"{time.perf_counter() - started:.0f} s with the links' making):")
    ours = links_summary(truth, kept, n, elapsed)
    ceiling_kept, _ = changes.control_families(
        all_series, ceiling_found, {i: range(1, builds) for i in ceiling_found})
    print("  the ceiling (each link tested against its true noise, the same control):")
    top = links_summary(truth, ceiling_kept, n, 0.0)
    matched = _matched_ceiling(all_series, ceiling_found, truth, ours["false_changes"], builds)
    return {**ours, "ceiling": top, "matched_ceiling": matched}


def _is_planted(change: Change, planted: tuple[int, float] | None) -> bool:
    """Whether `change` is the planted step of its series, at its build and direction."""
    return planted is not None and change.after == planted[0] \
        and (change.kind == "slower") == (planted[1] > 1)


def _matched_ceiling(all_series: list[Series], found: dict[int, list[Change]],
                     truth: dict[int, tuple[int, float] | None], false_allowed: int,
                     builds: int) -> dict[str, Any]:
    """The ceiling held to the history's false steps: its false discovery level lowered,
    along 0.05 x 2^-k, to the first that lists no more false steps than the history's rule
    did; prints and returns its summary there."""
    level = stats.ALPHA
    while True:
        kept, _ = changes.control_families(all_series, found,
                                           {i: range(1, builds) for i in found}, fdr=level)
        false = sum(1 for i, cs in kept.items() for c in cs
                    if c.is_step and not _is_planted(c, truth[i]))
        if false <= false_allowed or level < 1e-6:
            break
        level /= 2
    print(f"  the ceiling held to the history's {false_allowed} false steps (its level "
          f"lowered to q < {level:.2g}, where it lists {false}):")
    return links_summary(truth, kept, len(all_series), 0.0)


def _ceiling_steps(ceiling: _Ceiling, made: dict[int, tuple[Any, np.ndarray]]
                   ) -> list[Change]:
    """The candidate steps of one series by the ceiling's test, by the rule of the
    history's steps (`changepoints.step_direction`)."""
    out = []
    for b, (_, logs) in sorted(made.items()):
        est = ceiling.estimate(logs)
        direction = changepoints.step_direction(est, min_effect=stats.DEFAULT_MIN_EFFECT)
        if direction:
            out.append(Change("slower" if direction > 0 else "faster", b - 1, b, est.ratio,
                              est.low, est.high, est.p_value, links.LINK_DETAIL))
    return out


def links_summary(truth: dict[int, tuple[int, float] | None], kept: dict[int, list[Change]],
                   n: int, elapsed: float) -> dict[str, Any]:
    """Prints, per band of step sizes, how many planted steps (`truth`: per series, the
    build and ratio of its step, or None) were found at their build in their direction
    among the steps `kept`, then all of them, and the false changes of the `n` series per
    1,000 (`elapsed` seconds in all); returns the counts found and false."""
    bands = ((1.05, 1.075), (1.075, 1.10), (1.10, 1.15), (1.15, 1.31))
    hits = {b: [0, 0] for b in bands}
    false = quiet_false = 0
    for i, series_changes in kept.items():
        planted = truth[i]
        steps = [c for c in series_changes if c.is_step]
        right = [c for c in steps if _is_planted(c, planted)]
        false += len(steps) - len(right)
        quiet_false += 0 if planted else len(steps)
        if planted:
            size = max(planted[1], 1 / planted[1])
            band = next(b for b in bands if b[0] <= size < b[1])
            hits[band][0] += bool(right)
            hits[band][1] += 1
    total = [sum(h[0] for h in hits.values()), sum(h[1] for h in hits.values())]
    for (low, high), (hit, count) in hits.items():
        print(f"  steps {100 * (low - 1):.1f}-{100 * (high - 1):.1f} %: found at the right build "
              f"in {hit} of {count} ({hit / max(count, 1):.1%})")
    large = [sum(hits[b][j] for b in bands[2:]) for j in (0, 1)]
    print(f"  steps of 10 % or more: {large[0]} of {large[1]} ({large[0] / max(large[1], 1):.1%})")
    print(f"  all steps of 5 % or more: {total[0]} of {total[1]} ({total[0] / total[1]:.1%})")
    quiet = n - total[1]
    listed = total[0] + false
    print(f"  false changes: {false} in {n} series ({1000 * false / n:.2f} per 1,000), of which "
          f"{quiet_false} in the {quiet} series without a step; false discovery proportion "
          f"{false / max(listed, 1):.1%} of {listed} listed; {1000 * elapsed / n:.2f} ms per "
          "series")
    return {"found": total, "false_changes": false, "series": n,
            "bands": {f"{low:.3f}-{high:.3f}": hits[(low, high)] for low, high in bands}}
