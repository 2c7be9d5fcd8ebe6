"""The detection section of dashboard-bench: kscperf (and Apache Otava, unless told not to)
on one synthetic store per noise model and seed, the markdown table of their scores, the
timings and detectable steps per model, and the likelihood rules' shares for the
step_function models."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from kscperf.stats import core as stats
from validation.ceiling import CEILING_ALARMS, likelihood_rule_shares
from validation.common import percent
from validation.detection import (NOISE_MODELS, STEP_FUNCTION_SIGMAS, STEP_SHARE, STEP_SIZES,
                                  detect_kscperf, detect_with_slack, make_store, pooled, score,
                                  score_row)
from validation.otava import OTAVA_VERSION, detect_otava, one_value_per_build, otava_python


def section_detection(args: argparse.Namespace) -> dict[str, Any]:
    """Both detectors on one synthetic store per noise model and seed (`--seeds`, pooled
    when several); prints a markdown table, and for the step_function models the oracle
    ceiling."""
    names = [n.strip() for n in args.noise.split(",") if n.strip()]
    seeds = [int(v) for v in args.seeds.split(",")] if args.seeds else [args.seed]
    slacks = [float(v) for v in args.slack.split(",")] if args.slack else []
    python = None if args.no_otava else otava_python(Path(args.otava_venv))
    print(f"\n## detection: {args.series} series x {args.detect_builds} builds per noise "
          f"model and seed, steps in {STEP_SHARE:.0%} of them (seeds {seeds})\n")
    print("| noise | tool | steps >= 5 % | steps >= 10 % | "
          + " | ".join(f"{100 * s:.0f} %" for s in STEP_SIZES) + " | false per 1,000 |")
    print("| --- " * (5 + len(STEP_SIZES)) + "|")
    results: dict[str, Any] = {}
    for name in names:
        results[name] = _detect_model(name, args.series, args.detect_builds, seeds, slacks,
                                      python)
    print()
    _print_model_timings(names, results, args.series * len(seeds), len(seeds) > 1)
    if not args.no_ceiling:
        _print_likelihood_rules(names, results, args.seed)
    return results


def _detect_model(name: str, series: int, builds: int, seeds: list[int], slacks: list[float],
                  python: Path | None) -> dict[str, Any]:
    """One noise model's stores, one per seed, through both detectors (and kscperf at each
    slack): its rows of the table printed, its scores pooled over the seeds returned."""
    model = NOISE_MODELS[name]
    ours_scores, theirs_scores, seconds, otava_s, detectable = [], [], 0.0, 0.0, []
    by_slack: dict[float, list[dict[str, Any]]] = {v: [] for v in slacks}
    for seed in seeds:
        # Each model's own seed, whichever models run: the same store every time.
        store, plan = make_store(model, np.random.default_rng(
            seed + list(NOISE_MODELS).index(name)), series, builds)
        ours, found_detectable, took = detect_kscperf(store)
        ours_scores.append(score(ours, plan))
        detectable += found_detectable
        seconds += took
        for slack in slacks:
            by_slack[slack].append(score(detect_with_slack(store, slack), plan))
        if python is not None:
            theirs, took = detect_otava(python, one_value_per_build(store))
            theirs_scores.append(score(theirs, plan))
            otava_s += took
    total = series * len(seeds)
    result: dict[str, Any] = {
        "kscperf": pooled(ours_scores), "ms_per_series": 1e3 * seconds / total,
        "too_noisy": sum(1 for d in detectable if not d <= stats.DEFAULT_MIN_EFFECT),
        "median_detectable": float(np.nanmedian(detectable)),
        "recall_5_by_seed": [s["recall_5"] for s in ours_scores]}
    print(f"| {model.text} | {score_row('kscperf', result['kscperf'])[2:]}")
    for slack, scores in by_slack.items():
        print(f"| | {score_row(f'kscperf, slack {slack:g} se', pooled(scores))[2:]}")
    if python is not None:
        result["otava"] = pooled(theirs_scores)
        result["otava_ms_per_series"] = 1e3 * otava_s / total
        print(f"| | {score_row('Otava ' + OTAVA_VERSION + ', 5 %', result['otava'])[2:]}")
    return result


def _print_model_timings(names: list[str], results: dict[str, Any], total: int,
                         by_seed: bool) -> None:
    """Per model of `names`: the milliseconds a series took, the median smallest detectable
    step, the series too noisy to see 5 % (of `total`) and, `by_seed`, the share found per
    seed."""
    for name in names:
        r = results[name]
        otava = (f"; Otava {r['otava_ms_per_series']:.2f} ms a series" if "otava" in r else "")
        seeds = ("; steps >= 5 % found per seed: "
                 + ", ".join(percent(v) for v in r["recall_5_by_seed"])
                 if by_seed else "")
        print(f"{name}: kscperf {r['ms_per_series']:.2f} ms a series{otava}; smallest "
              f"detectable step, median {percent(r['median_detectable'])}; "
              f"{r['too_noisy']} of {total} series too noisy to see 5 %"
              f"{seeds}")


def _print_likelihood_rules(names: list[str], results: dict[str, Any], seed: int) -> None:
    """The likelihood rules' shares for each step_function model of `names`, added to
    its entry under "ceiling" and "told sigma alone"."""
    print(f"\nlikelihood rules that alarm on at most {CEILING_ALARMS:.0%} of step-free "
          "series (20,000 series a size; the otava-test-data step_function models): "
          "share at the right build (+-1). Ceiling: told the generator's baseline, sigma "
          "and sizes, no detector does better; told sigma alone: flat priors on the levels")
    for name in names:
        sigma = STEP_FUNCTION_SIGMAS.get(name)
        if sigma is None:
            continue
        for told_sizes, label in ((True, "ceiling"), (False, "told sigma alone")):
            shares = likelihood_rule_shares(sigma, np.random.default_rng(seed),
                                            told_sizes=told_sizes)
            results[name][label] = shares
            print(f"{name}, {label}: " + ", ".join(f"{100 * z:.0f} % {percent(v)}"
                                                   for z, v in shares.items())
                  + f"; steps >= 5 % {percent(float(np.mean(list(shares.values()))))}")
