"""truth-check's huge-pages section: how far the pair numbers of lockstep A/A runs scatter
with torch's CPU allocator on transparent huge pages (what kscperf's workers get) and
without them (THP_MEM_ALLOC_ENABLE=0 on both sides), runs of the two alternating."""

from __future__ import annotations

import os
import statistics
from collections import defaultdict

import kscperf
from kscperf.compare.builds import process_pairs
from kscperf.names import Kind
from kscperf.results.samples import build_samples
from kscperf.stats.core import median_abs_dev, paired_log_ratios
from validation.common import ROOT, exit_if_interrupted

# The shipped suite's memory-bound cells that kept an A/A interval open longest at ±2 %.
HUGE_PAGES_CELLS = ("vrelu3/pt/inference", "vgelu/pt/bwd")
_SETTINGS = (("without", (("THP_MEM_ALLOC_ENABLE", "0"),)), ("with", ()))


def _pair_numbers(result: kscperf.SessionResult) -> dict[str, list[float]]:
    """Per run-time benchmark of an `ab` session, its pair numbers
    (`stats.paired_log_ratios`) over the process pairs `compare` pairs, in process order."""
    base, new = (build_samples(loaded).benchmarks for loaded in result.loaded)
    return {name: paired_log_ratios(pairs) for name, b in base.items()
            if b.kind is Kind.TIME and (pairs := process_pairs(b, new.get(name)))}


def huge_pages(tmp: str, cells: list[str], processes: int, repeats: int) -> None:
    """`repeats` times, an A/A `ab` of the shipped suite's `cells` (model/tool/task patterns)
    with `processes` pairs without huge pages, then one with them: per benchmark, the
    spread of its pair numbers (log ratios, in %) in each setting, pooled over the runs (in
    an A/A run they scatter around 0): their median absolute deviation, which the intervals
    of `--until-resolved` (order statistics) follow, beside their standard deviation, which
    one outlying pair inflates; and how many times wider the former is without."""
    numbers: dict[str, dict[str, list[float]]] = {s: defaultdict(list) for s, _ in _SETTINGS}
    for k in range(repeats):
        for setting, env in _SETTINGS:
            result = kscperf.run_ab(str(ROOT / "bench_defs"), patterns=cells,
                                    processes=processes, replace=True,
                                    output_dir=os.path.join(tmp, f"huge-pages-{setting}-{k}"),
                                    base=kscperf.Build("base", env=env),
                                    new=kscperf.Build("new", env=env))
            exit_if_interrupted(result, "truth-check")
            for name, found in _pair_numbers(result).items():
                numbers[setting][name] += found
    print(f"\n== huge pages: spread of lockstep A/A pair numbers, {repeats} x {processes} pairs "
          f"a setting, runs alternating; median absolute deviation (standard deviation) ==")
    print(f"{'benchmark':34} {'without':>16} {'with':>16} {'wider':>6}")
    for name in sorted(numbers["with"]):
        without, with_ = (numbers[s][name] for s in ("without", "with"))
        if len(without) < 2 or len(with_) < 2:
            continue
        mads = [100 * median_abs_dev(v) for v in (without, with_)]
        sds = [100 * statistics.stdev(v) for v in (without, with_)]
        print(f"{name:34} {mads[0]:6.1f}% ({sds[0]:5.1f}%) {mads[1]:6.1f}% ({sds[1]:5.1f}%) "
              f"{mads[0] / mads[1]:5.1f}x")
