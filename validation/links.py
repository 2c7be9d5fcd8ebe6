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
from kscperf.history import Series, SeriesKey, SeriesPoint, StoredBuild, links
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
             pairs: int, step: float, base_id: int) -> Any:
    """A link of `pairs` pair numbers, times `step`: one recorded run's offset (the median
    of its pair numbers, a run drawn at random) plus pair noise drawn with replacement from
    every recorded run's pairs less their run's median. Resampling a run of 8-16 pairs
    itself would repeat its pairs and make the link look tighter than any real night."""
    logs = (offsets[int(rng.integers(len(offsets)))] + rng.choice(residuals, size=pairs)
            + math.log(step))
    # One value per side and pair: the pair's log ratio is then exactly that value, and the
    # estimate is `compare`'s paired test itself.
    est = stats.compare_paired_samples([([1.0], [math.exp(v)]) for v in logs])
    return links.Link(base_id, base_id + 1, est.ratio, est.low, est.high, est.p_value,
                      est.se_log, est.n_base, est.method, "")


def section_links(args: argparse.Namespace) -> dict[str, Any]:
    """Detection on links with resampled real noise (see the module docstring)."""
    if not args.ab_noise:
        sys.exit("dashboard-bench: the links section needs --ab-noise DIR")
    runs = [args.link_noise_scale * np.array(r)
            for r in _recorded_pair_logs(Path(args.ab_noise), ("ab-b06",))]
    if not runs:
        sys.exit(f"dashboard-bench: no ab -o folder with two or more pairs under {args.ab_noise}")
    pool = np.concatenate(runs)
    offsets = np.array([np.median(r) for r in runs])
    residuals = np.concatenate([r - np.median(r) for r in runs])
    rng = np.random.default_rng(args.seed)
    n, builds = args.series, args.link_builds
    print(f"\n== links: {n} series x {builds} builds, {args.link_pairs} pairs per link: the "
          f"offset of one of {len(runs)} recorded runs plus pair noise from their {len(pool)} "
          f"pairs less their run's median, x {args.link_noise_scale:g} (pairs: sd of log "
          f"{pool.std():.3f}, {np.mean(np.abs(pool) > 0.1):.1%} beyond 10 %; run medians "
          f"{offsets.min():+.2%} to {offsets.max():+.2%}, sd {offsets.std():.2%}) ==")
    key = SeriesKey("m", Kind.TIME, "x/pt/fwd/1", "x", "pt", "fwd", "1")
    stored = [StoredBuild(i, f"b{i}", "", "m", "", False, "", "", {}, None, i)
              for i in range(builds)]
    series = Series(key, tuple(SeriesPoint(b, CellStatus.OK, (1.0,), 1.0, 0.0, None)
                               for b in stored))
    truth: dict[int, tuple[int, float] | None] = {}
    found = {}
    tests: dict[int, int] = {}
    started = time.perf_counter()
    for i in range(n):
        planted = None
        if i % 2:
            planted = (int(rng.integers(1, builds)), float(rng.uniform(1.05, 1.30)))
            if rng.random() < 0.5:
                planted = (planted[0], 1 / planted[1])
        truth[i] = planted
        by_new = {b: _link_of(rng, offsets, residuals, args.link_pairs,
                              planted[1] if planted and planted[0] == b else 1.0, b - 1)
                  for b in range(1, builds)}
        found[i], covered = links.with_links(series, [], by_new,
                                             min_effect=stats.DEFAULT_MIN_EFFECT)
        tests[i] = len(covered) + 1  # as `history.find_changes` counts them
    kept = changepoints.control_fdr(found, tests=tests)
    elapsed = time.perf_counter() - started
    return links_summary(truth, kept, n, elapsed)


def links_summary(truth: dict[int, tuple[int, float] | None], kept: dict[int, list[Change]],
                   n: int, elapsed: float) -> dict[str, Any]:
    """Prints, per band of step sizes, how many planted steps (`truth`: per series, the
    build and ratio of its step, or None) were found at their build in their direction
    among the steps `kept`, then all of them, and the false changes of the `n` series per
    1,000 (`elapsed` seconds in all); returns the counts found and false."""
    bands = ((1.05, 1.075), (1.075, 1.10), (1.10, 1.15), (1.15, 1.31))
    hits = {b: [0, 0] for b in bands}
    false = quiet_false = 0
    for i, changes in kept.items():
        planted = truth[i]
        steps = [c for c in changes if c.is_step]
        right = [c for c in steps if planted and c.after == planted[0]
                 and (c.kind == "slower") == (planted[1] > 1)]
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
    print(f"  all steps of 5 % or more: {total[0]} of {total[1]} ({total[0] / total[1]:.1%}) "
          "(target >= 95 %)")
    quiet = n - total[1]
    print(f"  false changes: {false} in {n} series ({1000 * false / n:.2f} per 1,000; target "
          f"<= 1), of which {quiet_false} in the {quiet} series without a step "
          f"({1000 * quiet_false / max(quiet, 1):.2f} per 1,000); {1000 * elapsed / n:.2f} ms "
          "per series")
    return {"found": total, "false_changes": false, "series": n}
