"""truth-check's verdict sections on planted work: false alarms (two runs of one build
compared) with the minimum detectable effects, and power (one benchmark doing 5, 10 and 20 %
more work, caught how often), in separate runs and in lockstep `ab` runs; with the verdict
each trial expects and the lines that report the catches."""

from __future__ import annotations

import os
import statistics
from typing import Any

import kscperf
from kscperf.compare import builds as compare
from kscperf.names import benchmark_name
from validation.common import MODELS, exit_if_interrupted, run_build


def _verdicts(comparison: compare.Comparison) -> list[compare.ComparisonRow]:
    """The run-time rows of `comparison` with a verdict of same, slower or faster."""
    return [r for r in comparison.rows if r.kind == "time"
            and r.verdict.value in ("same", "slower", "faster")]


def false_alarms(tmp: str, tools: str, profile: str) -> None:
    """Two runs of one build (the shipped suite, `tools` at `profile`) compared: prints how
    many benchmarks were called slower or faster, each of them, and the minimum detectable
    effects the comparison reports (median, 90th percentile, the five largest)."""
    paths = []
    for i in range(2):
        paths.append(os.path.join(tmp, f"same-{i}.json"))
        run_build("truth-check", tools=tools, profile=profile, build="same", output=paths[-1])
    comparison = kscperf.compare_builds(*paths)
    rows = _verdicts(comparison)
    alarms = [r for r in rows if r.verdict.value != "same"]
    print(f"\n== false alarms: two runs of one build, tools {tools}, {profile} profile ==")
    print(f"{len(alarms)} of {len(rows)} benchmarks called slower or faster "
          f"({len(alarms) / max(1, len(rows)):.1%}; target <= 1 %)")
    for r in alarms:
        print(f"  {r.name}: {r.verdict.value} ratio {r.ratio:.3f} "
              f"[{r.ratio_low:.3f}, {r.ratio_high:.3f}] p={r.p_value:.2g}")
    mdes = sorted(r.min_detectable_effect for r in rows
                  if r.min_detectable_effect == r.min_detectable_effect)
    if mdes:
        print(f"\n== detectable: minimum detectable effect per benchmark ({len(mdes)}) ==")
        print(f"median {statistics.median(mdes):.1%}, 90th percentile "
              f"{mdes[int(0.9 * (len(mdes) - 1))]:.1%}, largest {mdes[-1]:.1%}")
        worst = sorted(rows, key=lambda r: -r.min_detectable_effect)[:5]
        for r in worst:
            print(f"  {r.name}: {r.min_detectable_effect:.1%}")


# The extra work (percent) of each power trial's NEW build; 0 is the no-change control.
_EXTRA_WORK = (0, 5, 10, 20)


def expected_verdict(extra: int) -> str:
    """The verdict a power trial whose NEW build does `extra` % more work should get: "same"
    for none (the control), "slower" otherwise."""
    return "same" if extra == 0 else "slower"


def print_power(caught: dict[int, int], trials: int, notes: dict[int, str]) -> None:
    """One line per extra work of `caught` (percent: the trials, of `trials`, that got the
    expected verdict), each followed by its note in `notes`, if any."""
    for extra, n in caught.items():
        what = "called same (no change made)" if extra == 0 else "caught as slower"
        print(f"  +{extra:2d} % work: {what} in {n} of {trials} trials{notes.get(extra, '')}")


def power(tmp: str, trials: int, profile: str) -> None:
    """`trials` trials of separate runs: a base run of the work model, then one run for each
    extra work of _EXTRA_WORK, each compared with the base; prints the benchmark's median
    and how often each was called as expected."""
    module = MODELS / "work.py"
    common: dict[str, Any] = dict(tools="pt", tasks="inference", profile=profile)
    print(f"\n== power: one benchmark doing more work, {profile} profile, {trials} trials ==")
    caught = dict.fromkeys(_EXTRA_WORK, 0)
    medians = []
    for trial in range(trials):
        base = os.path.join(tmp, "base.json")
        run_build("truth-check", str(module), build="base", output=base,
                  env={"KSCPERF_TRUTH_REPS": "100"}, **common)
        loaded_base = kscperf.load(base)
        medians.append(statistics.median(loaded_base.benchmarks[
            benchmark_name("work", "pt", "inference", "4096")]))
        for extra in caught:
            new = os.path.join(tmp, f"new-{extra}.json")
            run_build("truth-check", str(module), build="new", output=new,
                      env={"KSCPERF_TRUTH_REPS": str(100 + extra)}, **common)
            rows = _verdicts(kscperf.compare_builds(loaded_base, new))
            caught[extra] += sum(r.verdict.value == expected_verdict(extra) for r in rows)
    print(f"the benchmark's median: {statistics.median(medians) * 1e6:.0f} µs")
    print_power(caught, trials, {})
    print("target: +10 % caught at least 9 times in 10")


def power_ab(tmp: str, trials: int, profile: str) -> None:
    """The same trials as `power`, each build pair run with `run-benchmarks ab`: the two
    builds' workers take turns value by value and `compare` tests the pairs."""
    module = MODELS / "work.py"
    name = benchmark_name("work", "pt", "inference", "4096")
    print(f"\n== power (ab, lockstep): one benchmark doing more work, {profile} profile, "
          f"{trials} trials ==")
    caught = dict.fromkeys(_EXTRA_WORK, 0)
    ratios: dict[int, list[float]] = {extra: [] for extra in caught}
    mdes = []
    for trial in range(trials):
        for extra in caught:
            out = os.path.join(tmp, f"ab-{extra}")
            result = kscperf.run_ab(
                str(module), tools="pt", tasks="inference", profile=profile, output_dir=out,
                replace=True, base=kscperf.Build("base", env=(("KSCPERF_TRUTH_REPS", "100"),)),
                new=kscperf.Build("new", env=(("KSCPERF_TRUTH_REPS", str(100 + extra)),)))
            exit_if_interrupted(result, "truth-check")
            row = kscperf.compare_builds(*result.loaded).row(name)
            assert row is not None
            caught[extra] += row.verdict.value == expected_verdict(extra)
            ratios[extra].append(row.ratio)
            mdes.append(row.min_detectable_effect)
    print_power(caught, trials, {extra: f"; ratios {min(r):.3f}-{max(r):.3f}"
                                  for extra, r in ratios.items()})
    print(f"detectable effect: median {statistics.median(mdes):.1%}, largest {max(mdes):.1%}")
    print("target: +10 % caught at least 9 times in 10")
