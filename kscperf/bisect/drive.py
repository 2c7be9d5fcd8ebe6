"""Driving a bisect: the lockstep comparisons of a range's commits, one orchestrator
session each, from confirmation through probes to verification, with the state that a
bisect resumes from.

Every comparison pairs two environments value by value, as `ab` does, and reads one number
per process pair: the mean over the selected benchmarks of their pair numbers
(`stats.paired_log_ratios`), so a cell with several configs is bisected on the geometric
mean of their ratios. Pairs are added round by round until the comparison's own rule
decides or its cap is reached. Each finished comparison's numbers go to the state file at
once; a resumed bisect replays them instead of running them again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from kscperf.bisect import builds as _builds
from kscperf.bisect import counts as _counts
from kscperf.bisect.builds import Commit, Environment
from kscperf.bisect.pairs import Compared, run_comparison
from kscperf.bisect.records import (EXPLAINED_AT_LEAST, BisectEvent, BisectInterrupted,
                                    BisectResult, Culprit, OnEvent, ProbeRecord)
from kscperf.bisect.search import Found, search_range
from kscperf.errors import KscperfError
from kscperf.orchestrator.session import RunConfig
from kscperf.results.fileio import write_text_atomic
from kscperf.stats import bisection
from kscperf.stats.core import INSTRUCTIONS_MIN_EFFECT, compare_log_levels

__all__ = ["BisectRequest", "BisectEvent", "ProbeRecord", "Culprit", "BisectResult",
           "BisectInterrupted", "run_bisect", "CONFIRM_LOOKS", "VERIFY_LOOKS",
           "EXPLAINED_AT_LEAST", "MIN_PART_OF_STEP"]

# The confirmation's looks (pairs so far), tested at 0.01 shared among them.
CONFIRM_LOOKS = (4, 8, 16, 32)
# Fewest pairs a confirmation shows a step on: its estimate is the bad end's level that the
# first probes test against (a step ruled out may stop at the first look).
CONFIRM_SHOWN_FROM = 8
_CONFIRM_ALPHA = 0.01
# A culprit's verification against its parent: its looks, sharing half the error.
VERIFY_LOOKS = (8, 16, 32)
# A part holds only if its verified log step is at least this share of the confirmed one:
# the probes tell parts apart at a quarter of a range's step, and a smaller one is below
# what the search can place (a systematic difference of two checkouts, a drift).
MIN_PART_OF_STEP = 0.25

# What a bisect compares commits by: lockstep time, or instruction counts (one counting run
# per commit, `kscperf.bisect.counts`).
BY = ("time", "instructions")

_STATE_VERSION = 1


@dataclass(frozen=True)
class BisectRequest:
    """One bisect: the range (`repo` with `good` and `bad` commits, or a builds file's
    labels), the benchmarks (`config`: paths, patterns, tools, tasks, timing), the cache
    folder and build recipe, the error allowed, the pairs cap, whether to resume, and what
    commits are compared by (`by`: time, or instructions counted in
    `instruction_processes` processes per commit)."""

    good: str
    bad: str
    config: RunConfig
    cache_dir: str
    repo: str | None = None
    builds_file: str | None = None
    recipe: _builds.BuildRecipe = _builds.BuildRecipe()
    error: float = bisection.DEFAULT_ERROR
    max_pairs: int = bisection.DEFAULT_MAX_PAIRS
    resume: bool = False
    by: str = "time"
    instruction_processes: int = _counts.DEFAULT_PROCESSES

    def __post_init__(self) -> None:
        if self.by not in BY:
            raise KscperfError(f"--by {self.by!r}: a bisect compares by "
                               f"{' or '.join(BY)}.")
        if self.instruction_processes < bisection.MIN_PROBE_PAIRS:
            raise KscperfError(f"--instruction-processes {self.instruction_processes} is "
                               f"below the {bisection.MIN_PROBE_PAIRS} a probe decides on.")
        if (self.repo is None) == (self.builds_file is None):
            raise KscperfError("bisect takes --repo DIR or --builds FILE, one of the two.")
        if not 0.0 < self.error < 1.0:
            raise KscperfError(f"--error {self.error!r} must lie between 0 and 1.")
        if self.max_pairs < bisection.MIN_PROBE_PAIRS:
            raise KscperfError(f"--max-pairs {self.max_pairs} is below the "
                               f"{bisection.MIN_PROBE_PAIRS} pairs a probe needs.")




def _state_key(request: BisectRequest, commits: Sequence[Commit]) -> str:
    config = dataclasses.asdict(request.config)
    text = json.dumps([request.repo and os.path.abspath(request.repo), request.builds_file,
                       commits[0].sha, commits[-1].sha, config, dataclasses.asdict(request.recipe),
                       request.error, request.max_pairs]
                      + ([request.by, request.instruction_processes]
                         if request.by != "time" else []), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class _Bisect:
    """The comparisons of one bisect, their state, and the search over them."""

    def __init__(self, request: BisectRequest, on_event: OnEvent | None,
                 counter: _counts.Counter = _counts.count_commit) -> None:
        self.request = request
        self.counter = counter
        self.on_event = on_event
        self.t0 = time.monotonic()
        self.cache: _builds.BuildCache | None = None
        if request.repo is not None:
            self.cache = _builds.BuildCache(request.cache_dir, request.repo, request.recipe)
            self.commits = _builds.range_commits(request.repo, request.good, request.bad)
            self.ready: dict[int, Environment | str] = {}
        else:
            assert request.builds_file is not None
            entries = _builds.builds_file_range(_builds.read_builds_file(request.builds_file),
                                                request.good, request.bad, request.builds_file)
            self.commits = [c for c, _ in entries]
            self.ready = {i: env for i, (_, env) in enumerate(entries)}
        self.state_path = os.path.join(request.cache_dir, "state",
                                       _state_key(request, self.commits) + ".json")
        self.records: dict[str, dict[str, Any]] = self._load_state()
        self.replayable = frozenset(self.records)  # what the state file held at the start
        self.probes: list[ProbeRecord] = []
        self.groups: list[list[float]] = []
        self.untestable: dict[int, str] = {}
        self.steps = 0
        self.plan_root = ""
        self.initial_step = math.nan  # the confirmed step's log ratio
        self.at_bad_level: list[list[float]] = []
        self.between: dict[str, tuple[bisection.StepCheck | None, list[float], float, bool]] = {}
        self.verified: list[Culprit] = []
        self.by_counts = request.by == "instructions"
        self.counted: set[int] = set()  # by instructions: the commits counted or replayed

    def _load_state(self) -> dict[str, dict[str, Any]]:
        if not self.request.resume:
            return {}
        try:
            with open(self.state_path, encoding="utf-8") as fp:
                state = json.load(fp)
        except OSError:
            raise KscperfError(f"--resume: no bisect of this range and these options was "
                               f"interrupted (no {self.state_path}); run it without --resume."
                               ) from None
        except ValueError:
            raise KscperfError(f"--resume: {self.state_path} is not a bisect state file; "
                               "remove it and run without --resume.") from None
        if state.get("version") != _STATE_VERSION:
            raise KscperfError(f"--resume: {self.state_path} was written by another version "
                               "of bisect; run without --resume.")
        return dict(state["records"])

    def _save_state(self) -> None:
        text = json.dumps({"version": _STATE_VERSION, "good": self.commits[0].sha,
                           "bad": self.commits[-1].sha, "records": self.records})
        write_text_atomic(self.state_path, text, "the bisect state")

    def environment(self, index: int) -> Environment | str:
        """Commit `index` ready to run, or why it is untestable."""
        if index not in self.ready:
            assert self.cache is not None
            built, t0 = self.cache.built, time.monotonic()
            try:
                self.ready[index] = self.cache.prepare(self.commits[index])
            except KscperfError as exc:
                self.ready[index] = str(exc).rstrip(".")
            ready = self.ready[index]
            said = (f"untestable: {ready}" if isinstance(ready, str) else
                    "built" if self.cache.built > built else "reused")
            self._tell("build", index, 0, math.nan, said, time.monotonic() - t0)
        return self.ready[index]

    def _tell(self, stage: str, index: int, pairs: int, ratio: float, verdict: str,
              seconds: float) -> None:
        if self.on_event is not None:
            self.on_event(BisectEvent(stage, self.commits[index], index, len(self.commits),
                                      pairs, ratio, verdict, seconds,
                                      time.monotonic() - self.t0, self.steps))

    # -- comparisons ---------------------------------------------------------------------

    def _ready(self, index: int, what: str) -> Environment:
        env = self.environment(index)
        if isinstance(env, str):
            raise KscperfError(f"the {what} {self.commits[index].short} cannot be tested: {env}.")
        return env

    def compare(self, key: str, stage: str, base: int, new: int, first_pairs: int,
                max_pairs: int, more_after: Callable[[list[float]], int]) -> Compared | None:
        """The comparison `key` of commit `new` against commit `base`, replayed from the
        state file or run now; None when `new` is untestable. By instructions, the two
        commits' counts instead, each counted once a bisect (`_compare_counts`)."""
        if self.by_counts:
            return self._compare_counts(base, new)
        record = self.records.get(key)
        replayed = record is not None
        if record is None:
            target = self.environment(new)
            if isinstance(target, str):
                self.untestable[new] = target
                return None
            base_env = self._ready(base, "base")
            self.steps += 1

            def told(numbers: list[float]) -> int:
                ratio = math.exp(statistics.fmean(numbers)) if numbers else math.nan
                self._tell(stage, new, len(numbers), ratio, "", time.monotonic() - started)
                return more_after(numbers)

            started = time.monotonic()
            out_dir = os.path.join(self.request.cache_dir, "runs",
                                   hashlib.sha256(key.encode()).hexdigest()[:16])
            compared = run_comparison(self.request.config, base_env, target, self.plan_root,
                                      out_dir, first_pairs=first_pairs, max_pairs=max_pairs,
                                      more_after=told)
            if compared.interrupted:
                raise BisectInterrupted(self.state_path, len(self.records))
            record = {"numbers": compared.numbers, "seconds": compared.seconds,
                      "failed": compared.failed, "failed_side": compared.failed_side}
            self.records[key] = record
            self._save_state()
        compared = Compared(list(record["numbers"]), float(record["seconds"]),
                            str(record["failed"]), record["failed_side"], replayed=replayed)
        if compared.failed:
            if compared.failed_side == 1:
                self.untestable[new] = f"its run failed: {compared.failed}"
                return None
            raise KscperfError(f"the base {self.commits[base].short} of a bisect comparison "
                               f"failed: {compared.failed}.")
        self.groups.append(compared.numbers)
        return compared

    def _counts_of(self, index: int) -> tuple[list[float], float, bool] | str:
        """Commit `index`'s level per counting process, the seconds its counting took now
        (0 when it was counted before), and whether it was replayed from the state file;
        or why it cannot be counted."""
        key = f"count {self.commits[index].sha}"
        record = self.records.get(key)
        replayed, seconds = key in self.replayable, 0.0
        if record is None:
            env = self.environment(index)
            if isinstance(env, str):
                return env
            self.steps += 1
            out_dir = os.path.join(self.request.cache_dir, "runs",
                                   hashlib.sha256(key.encode()).hexdigest()[:16])
            counted = self.counter(self.request.config, env, out_dir,
                                   self.request.instruction_processes)
            if counted.interrupted:
                raise BisectInterrupted(self.state_path, len(self.records))
            record = {"levels": counted.levels, "seconds": counted.seconds,
                      "failed": counted.failed}
            self.records[key] = record
            self._save_state()
            seconds = counted.seconds
            self._tell("count", index, len(counted.levels), math.nan,
                       "failed" if counted.failed else "counted", seconds)
        self.counted.add(index)
        if record["failed"]:
            return f"its count failed: {record['failed']}"
        return list(record["levels"]), seconds, replayed

    def _compare_counts(self, base: int, new: int) -> Compared | None:
        """Commit `new` against commit `base` by their counting processes' levels, paired
        in order (`counts.level_differences`); None when `new` cannot be counted."""
        base_counts = self._counts_of(base)
        if isinstance(base_counts, str):
            raise KscperfError(f"the base {self.commits[base].short} of a bisect comparison "
                               f"cannot be counted: {base_counts}.")
        new_counts = self._counts_of(new)
        if isinstance(new_counts, str):
            self.untestable[new] = new_counts
            return None
        numbers = _counts.level_differences(base_counts[0], new_counts[0])
        self.groups.append(numbers)
        return Compared(numbers, base_counts[1] + new_counts[1],
                        replayed=base_counts[2] and new_counts[2],
                        levels=(base_counts[0], new_counts[0]))

    def _check(self, compared: Compared, alpha: float) -> bisection.StepCheck:
        """Whether `compared` shows a step (`bisection.check_step`): its pair numbers at
        lockstep time's bands; by instructions, the two commits' levels as two samples
        (Student's t, `stats.compare_log_levels`) at the counts' minimum effect, for a step
        shown and one ruled out alike."""
        if compared.levels is None:
            return bisection.check_step(compared.numbers, alpha)
        base, new = compared.levels
        return bisection.check_estimate(compare_log_levels(base, new, alpha=alpha),
                                        no_step_within=INSTRUCTIONS_MIN_EFFECT,
                                        ruled_out_within=INSTRUCTIONS_MIN_EFFECT)

    def confirm(self) -> tuple[bisection.StepCheck, ProbeRecord]:
        """The good and bad ends in lockstep until the step is shown or ruled out (by
        instructions: their counts, at one look)."""
        alpha = _CONFIRM_ALPHA / (1 if self.by_counts else len(CONFIRM_LOOKS))
        compared = self.compare("confirm", "confirm", 0, len(self.commits) - 1,
                                CONFIRM_LOOKS[0], CONFIRM_LOOKS[-1],
                                lambda numbers: _at_looks(numbers, CONFIRM_LOOKS, alpha,
                                                          CONFIRM_SHOWN_FROM))
        if compared is None:
            raise KscperfError(f"the bad end {self.commits[-1].short} cannot be tested: "
                               f"{self.untestable[len(self.commits) - 1]}.")
        check = self._check(compared, alpha)
        e = check.estimate
        verdict = {True: "shown", False: "ruled-out", None: "can't-tell"}[check.shown]
        record = ProbeRecord("confirm", self.commits[-1], verdict, e.ratio, e.low, e.high,
                             len(compared.numbers), compared.seconds, check.p_value,
                             compared.replayed)
        self._tell("confirm", len(self.commits) - 1, record.pairs, e.ratio, verdict,
                   record.seconds)
        return check, record

    def probe(self, index: int, low_level: float, high_level: float
              ) -> bisection.ProbeDecision | None:
        """Commit `index` against the good end, deciding between the two levels. The bad
        end's level is the mean of every pair number measured at it so far (the
        confirmation's and those of like-bad probes of ranges that end there), not the
        confirmation's alone: an upper level misestimated by a noisy confirmation would put
        a like-bad commit near the midway level, where no test decides."""
        at_bad_end = high_level == self.initial_step
        high_level = self._upper_level(high_level)
        sd = bisection.pooled_sd(self.groups)
        alpha = self.request.error / 4.0

        def decide(numbers: Sequence[float]) -> bisection.ProbeDecision:
            return bisection.probe_decision(numbers, low_level, high_level, sd, alpha,
                                            final=self.by_counts or
                                            len(numbers) >= self.request.max_pairs)

        key = f"probe {self.commits[index].sha} {low_level!r} {high_level!r}"
        compared = self.compare(key, "probe", 0, index, bisection.MIN_PROBE_PAIRS,
                                self.request.max_pairs,
                                lambda numbers: int(decide(numbers).verdict is
                                                    bisection.ProbeVerdict.CANT_TELL))
        if compared is None:
            self._tell("probe", index, 0, math.nan, "untestable", 0.0)
            return None
        d = decide(compared.numbers)
        if at_bad_end and d.verdict is bisection.ProbeVerdict.LIKE_BAD:
            self.at_bad_level.append(compared.numbers)
        self.probes.append(ProbeRecord("probe", self.commits[index], d.verdict.value, d.ratio,
                                       d.ratio_low, d.ratio_high, d.pairs, compared.seconds,
                                       d.error, compared.replayed))
        self._tell("probe", index, d.pairs, d.ratio, d.verdict.value, compared.seconds)
        return d

    def _upper_level(self, high_level: float) -> float:
        """The level a probe tests a range's upper end at: the bad end's pooled level
        (see `probe`) for a range that ends there, else the range's own."""
        if high_level != self.initial_step:
            return high_level
        return statistics.fmean(x for g in self.at_bad_level for x in g)

    def too_small(self, low_level: float, high_level: float) -> bool:
        """Whether a range's step, at the levels a probe would test it at, is under
        `MIN_PART_OF_STEP` of the confirmed one: too small to hold at verification, so
        one can't-tell inside it ends its search (`search.search_range`)."""
        width = self._upper_level(high_level) - low_level
        return width / self.initial_step < MIN_PART_OF_STEP

    def _between(self, parent: int, last: int, stage: str
                 ) -> tuple[bisection.StepCheck | None, list[float], float, bool]:
        """Commit `last` against commit `parent` in lockstep at the verification's looks,
        run once a bisect (a split check and a verification of the same two commits share
        it): the step check (None when `last` is untestable), the pair numbers, the p-value
        against the ±1 % band times the looks taken, and whether the step holds (shown, and
        at least `MIN_PART_OF_STEP` of the confirmed one in its direction)."""
        key = f"verify {self.commits[parent].sha} {self.commits[last].sha}"
        if key in self.between:
            return self.between[key]
        alpha = self.request.error / 2.0 / (1 if self.by_counts else len(VERIFY_LOOKS))
        compared = self.compare(key, stage, parent, last, VERIFY_LOOKS[0], VERIFY_LOOKS[-1],
                                lambda numbers: _at_looks(numbers, VERIFY_LOOKS, alpha))
        if compared is None:
            self.between[key] = (None, [], 1.0, False)
            return self.between[key]
        check = self._check(compared, alpha)
        e = check.estimate
        looks = sum(1 for n in VERIFY_LOOKS if n <= len(compared.numbers)) or 1
        p = min(1.0, check.p_value * looks) if math.isfinite(check.p_value) else 1.0
        big_enough = math.log(e.ratio) / self.initial_step >= MIN_PART_OF_STEP
        holds = bool(check.shown) and big_enough
        said = "holds" if holds else "does-not-hold"
        self.probes.append(ProbeRecord(stage, self.commits[last], said, e.ratio, e.low, e.high,
                                       len(compared.numbers), compared.seconds, p,
                                       compared.replayed))
        self._tell(stage, last, len(compared.numbers), e.ratio, said.replace("-", " "),
                   compared.seconds)
        self.between[key] = (check, compared.numbers, p, holds)
        return self.between[key]

    def split_check(self, middle: int, upper: int, decision: bisection.ProbeDecision
                    ) -> bisection.ProbeDecision:
        """A partial verdict at `middle` whose upper part would be searched first, checked
        by running the range's upper end against it: the verdict stands when that step
        holds, as a verification's would; else the commit is like-bad, with the one-sided
        p-value of a part of `MIN_PART_OF_STEP` of the step above it as its error. A
        commit at the upper end's level can look partial when that level, or the commit's
        own, is off by a checkout's offset; the part it splits off would hold nothing and
        cost a probe a commit (docs/method.md, "The search")."""
        check, numbers, _, holds = self._between(middle, upper, "split")
        if holds or check is None:
            return decision
        error = bisection.part_short_p(numbers, MIN_PART_OF_STEP * self.initial_step)
        revised = dataclasses.replace(decision, verdict=bisection.ProbeVerdict.LIKE_BAD,
                                      error=error)
        # The probe's own record, appended just before the split check ran, says so too.
        at = next(i for i in range(len(self.probes) - 1, -1, -1)
                  if self.probes[i].stage == "probe")
        assert self.probes[at].commit == self.commits[middle]
        self.probes[at] = dataclasses.replace(self.probes[at], verdict="like-bad", error=error)
        return revised

    def verify(self, found: Found) -> Culprit:
        """The part `found`'s last commit against its parent, with more pairs."""
        check, _, p, holds = self._between(found.parent, found.last, "verify")
        commits = tuple(self.commits[i] for i in found.commits)
        parent = self.commits[found.parent]
        if check is None:
            nan = math.nan
            return Culprit(commits, parent, nan, nan, nan, nan, 1.0, False)
        e = check.estimate
        return Culprit(commits, parent, e.ratio, e.low, e.high, p,
                       bisection.culprit_error(found.errors, p), holds)

    def found(self, part: Found) -> bool:
        """Verify a part as soon as the search finds it; whether the parts that hold now
        explain at least `EXPLAINED_AT_LEAST` of the confirmed step, so that the search
        may stop: what is left could not hold a part of `MIN_PART_OF_STEP` of it."""
        self.verified.append(self.verify(part))
        return self._explained(c for c in self.verified if c.holds) >= EXPLAINED_AT_LEAST

    def _explained(self, culprits: Iterable[Culprit]) -> float:
        """The share of the confirmed log step that `culprits` explain."""
        return sum(math.log(c.ratio) for c in culprits) / self.initial_step

    # -- the bisect ----------------------------------------------------------------------

    def run(self) -> BisectResult:
        """Confirm, search, verify; the result."""
        last = len(self.commits) - 1
        self.plan_root = self._ready(last, "bad end").checkout
        self._ready(0, "good end")
        check, step = self.confirm()
        self.initial_step = math.log(step.ratio)
        result = BisectResult("not-reproduced", self.commits[0], self.commits[-1],
                              len(self.commits), step, probes=self.probes,
                              state_path=self.state_path)
        if check.shown:
            self.at_bad_level.append(self.groups[-1])
            searched = search_range(len(self.commits), self.initial_step, self.probe,
                                    too_small=self.too_small, split_check=self.split_check,
                                    on_found=self.found)
            verified = self.verified
            result.culprits = sorted((c for c in verified if c.holds),
                                     key=lambda c: -abs(math.log(c.ratio)))
            result.rejected = [c for c in verified if not c.holds]
            result.capped = searched.capped
            result.left_unsearched = searched.left_unsearched
            result.verdict = ("culprit" if result.culprits and
                              not any(c.is_range for c in result.culprits) else "range")
            result.explained = self._explained(result.culprits)
        result.untestable = [(self.commits[i], why) for i, why in sorted(self.untestable.items())]
        result.seconds = time.monotonic() - self.t0
        result.builds_run = self.cache.built if self.cache is not None else 0
        result.by, result.counting_runs = self.request.by, len(self.counted)
        return result


def _at_looks(numbers: Sequence[float], looks: Sequence[int], alpha: float,
              shown_from: int = 0) -> int:
    """Pairs to add before the next look: 0 once a look rules out the step, or shows it
    with at least `shown_from` pairs, or past the last look."""
    n = len(numbers)
    shown = bisection.check_step(numbers, alpha).shown if n in looks else None
    if shown is False or (shown and n >= shown_from):
        return 0
    return next((look - n for look in looks if look > n), 0)


def run_bisect(request: BisectRequest, on_event: OnEvent | None = None, *,
               counter: _counts.Counter = _counts.count_commit) -> BisectResult:
    """Bisect `request`'s range (docs/method.md, "Bisecting a step"): confirm the step
    between its ends in lockstep, probe commits between them until each part of the step
    lies at one commit or a stretch that cannot be split, and verify each against its
    parent. By instructions (`request.by`), each commit is counted once by `counter`
    (`counts.count_commit`) and every comparison reads those counts. Raises KscperfError
    for what the user can fix (a bad range, an end that cannot be built, run or counted,
    nothing selected) and BisectInterrupted on Ctrl-C, the finished comparisons kept in
    the state file that `resume=True` goes on from."""
    bisect = _Bisect(request, on_event, counter)
    try:
        return bisect.run()
    except KeyboardInterrupt:
        # Between two comparisons (a build, a replay): what finished is in the state file.
        raise BisectInterrupted(bisect.state_path, len(bisect.records)) from None
