"""tools/bisect-bench: real bisects of a made git repository (validation/bisect_repo.py),
64 commits, in four scenarios, by three methods: `run-benchmarks bisect`, the `git bisect
run` recipe the history printed before (one separate run a commit, compared with the good
end's stored file by `compare --fail-on-regression`), and one run a commit with no test, as
`asv find` does (descend into the half with the larger jump). Scores each bisect against
the planted truth and prints one table of the methods' rates."""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kscperf import api
from kscperf.orchestrator.session import RunConfig
from validation.bisect_repo import BENCH_PATH, BUILD_CMD, CELL, ENV_ARG, Scenario, make_repo

__all__ = ["main", "Trial", "scenario_for", "score_bisect"]

_BENCHMARK = CELL + "/2048"
SCENARIOS = ("one", "aa", "untestable", "two", "small")
# `instructions` is `bisect --by instructions`; run it on request (each commit's counting
# run takes minutes under Valgrind), so it is not among the default methods.
METHODS = ("kscperf", "git-bisect-run", "one-run", "instructions")
DEFAULT_METHODS = METHODS[:3]
DEFAULT_SCENARIOS = SCENARIOS[:4]
# The timing of each lockstep pair: few values, each one pair number.
_VALUES, _WARMUPS, _MIN_TIME = 6, 1, 0.005


@dataclass(frozen=True)
class Trial:
    """One scenario's planted truth: the repository's scenario, the culprits (commit index:
    relative step), the untestable commits."""

    name: str
    scenario: Scenario
    culprits: dict[int, float]


def scenario_for(name: str, rng: random.Random, commits: int = 64) -> Trial:
    """A random trial of scenario `name`: `one` (a 5 % culprit), `aa` (no step),
    `untestable` (a 5 % culprit after four commits that do not build), `two` (4 % and
    6 % culprits), `small` (a 2 % culprit, the step instruction counts are for)."""
    base = 100
    if name == "aa":
        return Trial(name, Scenario(commits), {})
    if name == "two":
        first = rng.randrange(6, commits // 2 - 2)
        second = rng.randrange(commits // 2 + 2, commits - 4)
        sizes = [0.04, 0.06]
        rng.shuffle(sizes)
        r1 = round(base * (1 + sizes[0]))
        r2 = round(r1 * (1 + sizes[1]))
        return Trial(name, Scenario(commits, {first: r1, second: r2}),
                     {first: r1 / base - 1, second: r2 / r1 - 1})
    culprit = rng.randrange(8, commits - 4)
    broken = frozenset(range(culprit - 4, culprit)) if name == "untestable" else frozenset()
    reps = 102 if name == "small" else 105
    return Trial(name, Scenario(commits, {culprit: reps}, broken), {culprit: reps / base - 1})


@dataclass
class Outcome:
    """What one bisect said: the commits it named (largest first), its verdict, the stated
    errors of what it named (NaN where a method states none), its comparisons or runs, its
    seconds and the load average meanwhile, and whether it flagged an unexplained rest."""

    verdict: str
    named: list[int]
    errors: list[float]
    ranges: list[list[int]]
    comparisons: int
    seconds: float
    load: float
    not_all_explained: bool = False
    steps: list[str] = field(default_factory=list)  # each comparison: stage commit verdict pairs ratio


def _answers(out: Outcome) -> list[set[int]]:
    """Each named culprit as the set of its commits: one commit, or a range's."""
    ranges = {r[-1]: set(r) for r in out.ranges}
    return [ranges.get(n, {n}) for n in out.named]


def score_bisect(trial: Trial, out: Outcome) -> dict[str, bool]:
    """The targets of issue 30 for one bisect: `exact` (named what the scenario asks),
    `wrong` (named a commit that is no culprit, a range that holds none, or anything
    outside the untestable range), and `wrong_confident` (such an answer with a stated
    error under 5 %)."""
    truth = set(trial.culprits)
    answers = _answers(out)
    if trial.name == "aa":
        exact = out.verdict == "not-reproduced"
        wrongs = [True] * len(answers)
    elif trial.name == "untestable":
        (culprit,) = truth
        allowed = set(range(culprit - 4, culprit + 1))
        exact = out.verdict == "range" and out.ranges == [sorted(allowed)]
        wrongs = [not a <= allowed or len(a) == 1 for a in answers]
    elif trial.name == "two":
        larger = max(truth, key=lambda i: trial.culprits[i])
        exact = (truth <= set(out.named) and not out.ranges) or (
            out.named[:1] == [larger] and out.not_all_explained)
        wrongs = [not a & truth for a in answers]
    else:
        exact = out.named[:1] == sorted(truth) and out.verdict == "culprit"
        wrongs = [not a & truth for a in answers]
    confident = any(w and math.isfinite(e) and e < 0.05 for w, e in zip(wrongs, out.errors))
    return {"exact": exact, "wrong": any(wrongs), "wrong_confident": confident}


def _load() -> float:
    return os.getloadavg()[0]


def _kscperf(repo: Path, shas: list[str], cache: Path, by: str = "time") -> Outcome:
    index = {s: i for i, s in enumerate(shas)}
    config = RunConfig(paths=(BENCH_PATH,), patterns=(CELL,), values=_VALUES,
                       warmups=_WARMUPS, min_time=_MIN_TIME)
    name, _, value = ENV_ARG.partition("=")
    t0, loads = time.monotonic(), [_load()]
    result = api.bisect_commits(config, good=shas[0], bad=shas[-1], repo=str(repo),
                        cache_dir=str(cache), build_cmd=BUILD_CMD,
                        env=((name, value),), by=by,
                        on_event=lambda e: loads.append(_load()))
    named = [index[c.commits[-1].sha] for c in result.culprits]
    ranges = [[index[x.sha] for x in c.commits] for c in result.culprits if c.is_range]
    steps = [f"{p.stage} {index[p.commit.sha]} {p.verdict} {p.pairs} {p.ratio:.4f}"
             for p in [result.step, *result.probes]]
    # By instructions the cost is the commits counted (one counting run each), not the
    # comparisons, which reuse those counts.
    cost = result.counting_runs if by == "instructions" else len(result.probes) + 1
    return Outcome(result.verdict, named, [c.error for c in result.culprits], ranges,
                   cost, time.monotonic() - t0, statistics.fmean(loads),
                   result.not_all_explained, steps)


def _instructions(repo: Path, shas: list[str], cache: Path) -> Outcome:
    return _kscperf(repo, shas, cache, by="instructions")


def _run_commit(checkout: Path, out: Path, processes: int) -> float | None:
    """One separate run of a checkout's cell: its median time, None if it did not run."""
    if (checkout / "BROKEN").exists():
        return None
    env = dict(os.environ, PYTHONPATH=str(checkout))
    proc = subprocess.run([sys.executable, "-m", "kscperf", "run", "-k", CELL, "--processes",
                           str(processes), "--values", "5", "-o", str(out), "--replace", "-q",
                           str(checkout / BENCH_PATH)], env=env, capture_output=True,
                          cwd=checkout, timeout=600)
    if proc.returncode != 0 or not out.exists():
        return None
    loaded = api.load(str(out))
    values = [v for run in loaded.runs_values.get(_BENCHMARK, []) for v in run]
    return statistics.median(values) if values else None


def _worktree(repo: Path, sha: str, root: Path) -> Path:
    path = root / sha[:12]
    if not path.exists():
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(path),
                        sha], check=True, capture_output=True)
    return path


def _git_bisect_run(repo: Path, shas: list[str], work: Path) -> Outcome:
    """The recipe `history changes` printed until 2026-12-02, with the install step replaced
    by the checkout on PYTHONPATH (the package is pure Python)."""
    t0, load = time.monotonic(), _load()
    good = work / "good.json"
    _run_commit(_worktree(repo, shas[0], work), good, 3)
    out = work / "probe.json"
    test = (f"[ -e BROKEN ] && exit 125; rm -f {out}; PYTHONPATH=$PWD {shlex.quote(sys.executable)}"
            f" -m kscperf run -k {CELL} --processes 3 --values 5 -o {out} -q {BENCH_PATH}; "
            f"[ -s {out} ] || exit 125; {shlex.quote(sys.executable)} -m kscperf compare {good} "
            f"{out} --force --fail-on-regression >/dev/null || {{ rc=$?; [ $rc = 1 ] && exit 1"
            " || exit 125; }")
    subprocess.run(["git", "-C", str(repo), "bisect", "start", shas[-1], shas[0]],
                   check=True, capture_output=True)
    proc = subprocess.run(["git", "-C", str(repo), "bisect", "run", "sh", "-c", test],
                          capture_output=True, text=True, cwd=repo, timeout=3600)
    subprocess.run(["git", "-C", str(repo), "bisect", "reset"], capture_output=True)
    runs = proc.stdout.count("running")
    said = proc.stdout.split("could be any of:", 1)
    if len(said) == 2:  # only skipped commits left: git names them all, and their child
        ranges = [[i for i, s in enumerate(shas) if s in said[1]]]
        named, verdict = ranges[0][-1:], "range"
    else:
        ranges = []
        named = [i for i, s in enumerate(shas) if f"{s} is the first bad commit" in proc.stdout]
        verdict = "culprit" if named else "not-reproduced"
    return Outcome(verdict, named, [math.nan] * len(named), ranges, runs + 1,
                   time.monotonic() - t0, (load + _load()) / 2)


def _one_run(repo: Path, shas: list[str], work: Path) -> Outcome:
    """One run a commit, no test: `asv find`'s descent into the half with the larger jump,
    always ending at a commit; an untestable midpoint is replaced by its next neighbour."""
    t0, load = time.monotonic(), _load()
    runs = 0

    def time_of(i: int) -> float | None:
        nonlocal runs
        runs += 1
        return _run_commit(_worktree(repo, shas[i], work), work / f"r{i}.json", 1)

    lo, hi = 0, len(shas) - 1
    t_lo, t_hi = time_of(lo), time_of(hi)
    assert t_lo is not None and t_hi is not None
    while hi - lo > 1:
        mid, t_mid = (lo + hi) // 2, None
        for candidate in sorted(range(lo + 1, hi), key=lambda i: abs(i - (lo + hi) / 2)):
            mid, t_mid = candidate, time_of(candidate)
            if t_mid is not None:
                break
        if t_mid is None:
            break
        if abs(math.log(t_mid / t_lo)) > abs(math.log(t_hi / t_mid)):
            hi, t_hi = mid, t_mid
        else:
            lo, t_lo = mid, t_mid
    return Outcome("culprit", [hi], [math.nan], [], runs, time.monotonic() - t0,
                   (load + _load()) / 2)


_METHODS: dict[str, Callable[[Path, list[str], Path], Outcome]] = {
    "kscperf": _kscperf, "git-bisect-run": _git_bisect_run, "one-run": _one_run,
    "instructions": _instructions}


def null_calibration(comparisons: int, pairs: int, ratios: tuple[float, ...] = (0.0, 1.0)
                     ) -> None:
    """Lockstep comparisons of two checkouts of identical code (commit 0 of an A/A
    repository against commit k, k = 1..`comparisons`), `pairs` pairs each, once per zygote
    restart ratio: whether the pairs' t-test holds its error rate there. Prints one line
    per comparison and a summary per ratio: how many were significant at 5 %, and the
    spread of the comparisons' means over their typical standard error (about 1 when the
    pairs are independent)."""
    from kscperf.bisect.builds import BuildCache, BuildRecipe, range_commits
    from kscperf.bisect.pairs import run_comparison
    from kscperf.stats import bisection

    with tempfile.TemporaryDirectory(prefix="kscperf-bisect-null-") as tmp:
        repo = Path(tmp) / "repo"
        shas = make_repo(repo, Scenario(comparisons + 1))
        name, _, value = ENV_ARG.partition("=")
        cache = BuildCache(str(Path(tmp) / "cache"), str(repo),
                           BuildRecipe(BUILD_CMD, None, ((name, value),)))
        commits = range_commits(str(repo), shas[0], shas[-1])
        envs = [cache.prepare(c) for c in commits]
        config = RunConfig(paths=(BENCH_PATH,), patterns=(CELL,), values=_VALUES,
                           warmups=_WARMUPS, min_time=_MIN_TIME)
        for ratio in ratios:
            means, ses, significant = [], [], 0
            for k in range(1, comparisons + 1):
                base, new = envs[0], envs[k]
                assert not isinstance(base, str) and not isinstance(new, str)
                t0, load = time.monotonic(), _load()
                got = run_comparison(config, base, new, base.checkout,
                                     str(Path(tmp) / f"out-{ratio}-{k}"), first_pairs=pairs,
                                     max_pairs=pairs, more_after=lambda n: 0,
                                     restart_ratio=ratio)
                e = bisection.pairs_estimate(got.numbers)
                means.append(math.log(e.ratio))
                ses.append(e.se_log)
                significant += e.p_value < 0.05
                print(f"null restart-ratio {ratio:g} #{k}: {e.ratio:.4f}x "
                      f"[{e.low:.4f}x, {e.high:.4f}x] p {e.p_value:.3f}, "
                      f"{len(got.numbers)} pairs, {time.monotonic() - t0:.0f} s, "
                      f"load {(load + _load()) / 2:.2f}", flush=True)
            spread = statistics.stdev(means) / statistics.median(ses)
            print(f"  restart ratio {ratio:g}: significant at 5 % in {significant} of "
                  f"{comparisons}; spread of means / median standard error {spread:.2f}",
                  flush=True)


def _trial(method: str, trial: Trial, tmp: Path) -> Outcome:
    repo = tmp / "repo"
    shas = make_repo(repo, trial.scenario)
    return _METHODS[method](repo, shas, tmp / "work")


def _summary(method: str, name: str, scored: list[tuple[Outcome, dict[str, bool]]]) -> str:
    n = len(scored)
    exact = sum(s["exact"] for _, s in scored)
    wrong = sum(s["wrong"] for _, s in scored)
    confident = sum(s["wrong_confident"] for _, s in scored)
    seconds = statistics.median(o.seconds for o, _ in scored)
    comparisons = statistics.median(o.comparisons for o, _ in scored)
    load = statistics.fmean(o.load for o, _ in scored)
    return (f"  {method:15s} {name:11s} exact {exact}/{n}  wrong {wrong}/{n}  wrong with a "
            f"stated error under 5 % {confident}/{n}  median {comparisons:g} comparisons or "
            f"runs, {seconds:.0f} s (load {load:.2f})")


def main(doc: str) -> None:
    """Parse the options and run the trials, printing each bisect and then the table."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--scenarios", default=",".join(DEFAULT_SCENARIOS))
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS))
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--json", metavar="FILE", help="also write every outcome here")
    parser.add_argument("--null", type=int, metavar="N", default=0,
                        help="instead, N lockstep comparisons of identical code per zygote "
                             "restart ratio (the pairs' calibration)")
    parser.add_argument("--null-pairs", type=int, default=16)
    parser.add_argument("--null-ratios", default="0,1",
                        help="the zygote restart ratios of --null (0: every pair)")
    args = parser.parse_args()
    if args.null:
        null_calibration(args.null, args.null_pairs,
                         tuple(float(r) for r in args.null_ratios.split(",")))
        return
    print(f"bisect-bench on {os.cpu_count()} CPUs, python {sys.version.split()[0]}, "
          f"seed {args.seed}, {args.trials} trials a scenario and method", flush=True)
    table: list[str] = []
    dump: list[dict[str, Any]] = []
    for method in args.methods.split(","):
        for name in args.scenarios.split(","):
            rng = random.Random(f"{args.seed}-{name}")
            scored = []
            for k in range(args.trials):
                trial = scenario_for(name, rng)
                with tempfile.TemporaryDirectory(prefix="kscperf-bisect-bench-") as tmp:
                    out = _trial(method, trial, Path(tmp))
                s = score_bisect(trial, out)
                scored.append((out, s))
                dump.append({"method": method, "scenario": name, "truth": trial.culprits,
                             "outcome": out.__dict__, "score": s})
                print(f"{method} {name} #{k + 1}: truth {sorted(trial.culprits)} -> "
                      f"{out.verdict} {out.named} ranges {out.ranges} errors "
                      f"{[round(e, 4) for e in out.errors]} in {out.comparisons} comparisons, "
                      f"{out.seconds:.0f} s, load {out.load:.2f}: {s}", flush=True)
            table.append(_summary(method, name, scored))
    print("\n".join(["", "summary:", *table]))
    if args.json:
        Path(args.json).write_text(json.dumps(dump, indent=1, default=str))
