"""The change policy over a store: change points per series (`kscperf.stats.changepoints`), the
false discovery rate (across all series for the levels, across each night's links for the
lockstep links), what each night's `ab` said where the history differs, environment and
machine-speed events, and `history check`. A change of environment splits a series and is
an event of its own; a change of the machine's speed is an event and withholds only the
steps it could explain.
Nothing here prints or renders.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from kscperf.errors import CellStatus
from kscperf.results import metadata
from kscperf.stats import core as stats, machine
import kscperf.history.links as links
from kscperf.history.series import Series, SeriesKey, StoredBuild
from kscperf.history.store import HistoryStore
from kscperf.names import Kind
from kscperf.stats.verdicts import REGRESSION_VERDICTS, Direction, status_verdict

__all__ = ["MACHINE_SPEED_DETAIL", "ChangeKind", "HistoryChange", "build_points",
           "find_changes", "control_families", "detectable_steps", "too_noisy", "HistoryCheck",
           "check_newest"]


class ChangeKind(enum.StrEnum):
    """What kind of change a history change is."""

    SLOWER = "slower"
    FASTER = "faster"
    ENVIRONMENT = "environment"
    STATUS = "status"
    # The series cannot see a step of the minimum effect (`find_changes(include_blind=True)`).
    TOO_NOISY = "too-noisy"
    # The newest build's processes disagree far more than usual: it opens no step until the
    # next build (`changepoints.detect_series`).
    UNSETTLED = "unsettled"
    # A change that the night's `ab` called and the history does not list; `detail` says why.
    AB_ONLY = "ab-only"

# The detail of the environment event between consecutive builds whose canaries say the
# machine changed speed (`machine.ShiftState` CHANGED, as `compare` decides it), or of a
# step such a change could explain. The machine's speed never splits a series.
MACHINE_SPEED_DETAIL = "machine speed"


@dataclass(frozen=True)
class HistoryChange:
    """A change found in one series: `change` is the `kscperf.stats.changepoints.Change`, whose
    `before`/`after` index the series' points; `before` and `after` are those builds, with
    the series' status in each. `detail` says what changed for an environment event (the
    metadata that differ between the two builds, or "machine speed")."""

    key: SeriesKey
    change: Any
    before: StoredBuild
    after: StoredBuild
    before_status: CellStatus
    after_status: CellStatus
    detail: str = ""
    # The smallest step the series could find now (`changepoints.detectable_step`).
    detectable_step: float | None = None
    # Where a lockstep link decided the pair: what that night's `ab` said of it (its
    # verdict, q-value and minimum effect), and why the history's verdict differs ("" when
    # it does not).
    ab_verdict: str = ""
    ab_q: float | None = None
    ab_min_effect: float | None = None
    differs: str = ""

    @property
    def kind(self) -> ChangeKind:
        """`slower`, `faster`, `environment`, `status`, `unsettled` (the newest build's
        processes disagree, so it opens no step until the next build), `ab-only` (the
        night's `ab` called a change the history does not list, `differs` says why), or
        `too-noisy` (the series cannot see a step of the minimum effect; only with
        `find_changes(include_blind=True)`)."""
        return ChangeKind(self.change.kind)

    @property
    def is_regression(self) -> bool:
        """Slower, or a status change that `compare` would call a regression
        (`verdicts.status_verdict`: failing now, incorrect now)."""
        if self.kind is ChangeKind.SLOWER:
            return True
        return self.kind is ChangeKind.STATUS and status_verdict(
            self.before_status, self.after_status) in REGRESSION_VERDICTS


def _speed_shifts(builds: Sequence[StoredBuild]) -> set[tuple[int, int]]:
    """(before id, after id) of every pair of consecutive builds of one class, both with
    canary scores, whose machines differ as `compare` would say "machine changed"."""
    shifts: set[tuple[int, int]] = set()
    for before, after in zip(builds, builds[1:]):
        if before.machine_scores and after.machine_scores and machine.compare_canary_scores(
                before.machine_scores, after.machine_scores).shifted:
            shifts.add((before.id, after.id))
    return shifts


# Environment marks: per (whether the series counts instructions, build id), the
# environment's fingerprint and its text.
Marks = dict[tuple[bool, int], tuple[str, str]]


def _sees_counter(key: SeriesKey) -> bool:
    """Whether a series sees the instruction counter among its environment: only counts do."""
    return key.kind is Kind.INSTRUCTIONS


def _seen(b: StoredBuild, counted: bool) -> dict[str, str]:
    """A build's environment as one of its series sees it: the instruction counter only
    where the series is of counts."""
    if counted:
        return b.environment
    return {k: v for k, v in b.environment.items() if k not in metadata.COUNTER_KEYS}


def _environment_marks(builds: Sequence[StoredBuild]) -> Marks:
    """Per series sort (of counts or not) and build id of one class: (environment
    fingerprint; the environment as text, only the keys that vary in the class). The
    machine's speed is not part of it: a slower or faster machine must not split a series,
    or a regression that came with it would be hidden (see `_machine_explained`)."""
    marks: Marks = {}
    for counted in (False, True):
        seen = {b.id: _seen(b, counted) for b in builds}
        keys = {k for e in seen.values() for k in e}
        varying = sorted(k for k in keys if len({e.get(k) for e in seen.values()}) > 1)
        for b in builds:
            fingerprint = json.dumps(seen[b.id], sort_keys=True)
            text = ", ".join(f"{k} {seen[b.id].get(k, '-')}" for k in varying)
            marks[counted, b.id] = (hashlib.sha1(fingerprint.encode()).hexdigest()[:12], text)
    return marks


def _environment_difference(before: StoredBuild, after: StoredBuild, counted: bool) -> str:
    """What differs between the environments of two builds, as a series of counts
    (`counted`) or of anything else sees them, for people."""
    b, a = _seen(before, counted), _seen(after, counted)
    changed = [f"{k} {b.get(k, '-')} -> {a.get(k, '-')}"
               for k in sorted(set(b) | set(a)) if b.get(k) != a.get(k)]
    return "; ".join(changed)


def build_points(series: Series, marks: Marks) -> list[Any]:
    """The `changepoints.BuildPoint`s of one series, with environment marks."""
    from kscperf.stats.changepoints import BuildPoint

    counted = _sees_counter(series.key)
    return [BuildPoint(samples=p.samples, status=p.status,
                       environment=marks[counted, p.build.id][0],
                       environment_detail=marks[counted, p.build.id][1],
                       min_detectable=p.min_detectable)
            for p in series.points]


def _class_marks(store: HistoryStore, all_series: Sequence[Series]
                 ) -> tuple[Marks, dict[str, set[tuple[int, int]]]]:
    """The environment marks of every build of the classes of `all_series`, and each
    class's machine-speed shifts."""
    marks: Marks = {}
    shifts: dict[str, set[tuple[int, int]]] = {}
    for cls in {s.key.machine_class for s in all_series}:
        class_builds = store.builds(cls)
        marks.update(_environment_marks(class_builds))
        shifts[cls] = _speed_shifts(class_builds)
    return marks, shifts


def too_noisy(detectable_step: float | None, min_effect: float) -> bool:
    """Whether a series whose smallest findable step is `detectable_step` is too noisy to
    see a step of `min_effect` (unknown is not too noisy: it is unknown)."""
    return detectable_step is not None and math.isfinite(detectable_step) and \
        detectable_step > min_effect


def detectable_steps(store: HistoryStore, series: Sequence[Series]) -> dict[SeriesKey, float]:
    """Each series' smallest step it could find now (`_sight`: from its lockstep links
    where it has them, else `changepoints.detectable_step`; NaN when its noise is not
    known yet)."""
    marks, _ = _class_marks(store, series)
    by_class = {cls: store.links(cls) for cls in {s.key.machine_class for s in series}}
    return {s.key: _sight(s, build_points(s, marks), by_class[s.key.machine_class])
            for s in series}


def _sight(s: Series, points: Sequence[Any],
           class_links: dict[tuple[str, str], dict[int, links.Link]]) -> float:
    """What one series can see now: what its links show where it has them (it is judged on
    them), else what its levels show (`changepoints.detectable_step`)."""
    from kscperf.stats import changepoints

    linked = class_links.get((str(s.key.kind), s.key.benchmark))
    if linked:
        return links.link_detectable(list(linked.values()), single_shot=s.key.single_shot)
    return changepoints.detectable_step(points)


def _blind_entry(s: Series, detectable: float, min_effect: float) -> HistoryChange:
    from kscperf.stats import changepoints

    last = len(s.points) - 1
    event = changepoints.Change(ChangeKind.TOO_NOISY.value, last, last, None, None, None,
                                None, f"smallest step it could find now {detectable:.1%}, "
                                f"above the minimum effect {min_effect:.0%}")
    newest = s.points[last]
    return HistoryChange(s.key, event, newest.build, newest.build, newest.status,
                         newest.status, event.detail, detectable)


def _series_min_effect(s: Series, min_effect: float) -> float:
    """The minimum effect of series `s`: instruction counts have their own
    (`stats.INSTRUCTIONS_MIN_EFFECT`), every other kind `min_effect`."""
    return stats.INSTRUCTIONS_MIN_EFFECT if s.key.kind is Kind.INSTRUCTIONS else min_effect


def find_changes(store: HistoryStore, *, min_effect: float = stats.DEFAULT_MIN_EFFECT,
                 series: Sequence[Series] | None = None,
                 per_series_environment: bool = False,
                 include_blind: bool = False) -> list[HistoryChange]:
    """Every change of every series of the store (or of `series`), with the false discovery
    rate controlled (`control_families`); in order: machine class, then the build where it
    happened (newest first), regressions first. Lockstep links decide the pairs of builds
    they join; where the night's `ab` called a change the history does not list, an
    `ab-only` entry says why, so that no change `ab` reported disappears silently. An
    environment change is one entry per machine class and pair of builds (kind "*") unless
    `per_series_environment`. Each entry carries its series'
    `detectable_step`; `include_blind` adds a `too-noisy` entry per series that cannot see
    `min_effect`. Instruction series take `stats.INSTRUCTIONS_MIN_EFFECT` instead. The rules (machine speed, links, levels, blind series) are in
    docs/changepoints.md."""
    from kscperf.stats import changepoints

    all_series = list(series) if series is not None else list(store.series())
    marks, shifts = _class_marks(store, all_series)
    class_links: dict[str, dict[tuple[str, str], dict[int, links.Link]]] = {}
    for cls in {s.key.machine_class for s in all_series}:
        class_links[cls] = store.links(cls)
        # Two builds measured in lockstep shared the machine's state: its speed between
        # their separate runs is no event of theirs.
        shifts[cls] -= {(link.base_id, link.new_id) for by_build in class_links[cls].values()
                        for link in by_build.values()}
    points = [build_points(s, marks) for s in all_series]
    found: dict[int, list[Any]] = {}
    judged: dict[int, dict[int, links.LinkTest]] = {}
    for i, s in enumerate(all_series):
        effect = _series_min_effect(s, min_effect)
        found[i], judged[i] = links.with_links(
            s, changepoints.detect_series(points[i], min_effect=effect),
            class_links[s.key.machine_class].get((str(s.key.kind), s.key.benchmark), {}),
            min_effect=effect)
    kept, families = control_families(all_series, found,
                                      {i: judged[i].keys() for i in judged})
    out: list[HistoryChange] = []
    for i, changes in kept.items():
        s = all_series[i]
        effect = _series_min_effect(s, min_effect)
        sight = _sight(s, points[i], class_links[s.key.machine_class])
        listed = _series_changes(s, changes, shifts[s.key.machine_class], effect)
        listed = _with_ab_said(s, listed, judged[i], families, effect)
        out.extend(dataclasses.replace(c, detectable_step=sight) for c in listed)
        if include_blind and s.points and too_noisy(sight, effect):
            out.append(_blind_entry(s, sight, effect))
    if not per_series_environment:
        out = _one_environment_entry(out)
    out.sort(key=lambda c: (c.key.machine_class, -c.after.position, not c.is_regression,
                            c.kind, c.key.benchmark, c.key.kind))
    return out



# The family of the levels' steps in `control_families`: every series of the store.
_LEVELS_FAMILY = ("levels",)


def _night(s: Series, position: int) -> tuple[str, int]:
    """The family of the link into `position` of `s`: its night (machine class, new build)."""
    return (s.key.machine_class, s.points[position].build.id)


def _is_link_step(c: Any) -> bool:
    return bool(c.is_step and c.detail == links.LINK_DETAIL)


def control_families(all_series: Sequence[Series], found: dict[int, list[Any]],
                     linked: dict[int, Iterable[int]], *, fdr: float = stats.ALPHA
                     ) -> tuple[dict[int, list[Any]], dict[tuple[Any, ...], int]]:
    """The changes of every series (`found[i]` of `all_series[i]`, whose positions
    `linked[i]` a lockstep link decided) with the steps that survive the false discovery
    control (`changepoints.control_fdr` at `fdr`), and the number of tests of each family.

    Two kinds of family, so that the multiplicity a night's step pays does not grow with
    the history: the levels' steps (separate runs, `changepoints.detect_series`) are one
    family across every series of the store, each series one test, as before links; the
    steps of lockstep links are one family per night (machine class and new build), each
    link of that night one test, as the night's `ab` treats its benchmarks.
    docs/changepoints.md, "One family per night", says why."""
    # Each key of a family (a series' levels, or one link) is one test: `control_fdr`'s
    # count when it is given none.
    families: dict[tuple[Any, ...], dict[tuple[int, int], list[Any]]] = {}
    for i, changes in found.items():
        families.setdefault(_LEVELS_FAMILY, {})[(i, -1)] = [
            c for c in changes if not _is_link_step(c)]
        for position in linked[i]:
            families.setdefault(_night(all_series[i], position), {})[(i, position)] = [
                c for c in changes if _is_link_step(c) and c.after == position]
    from kscperf.stats import changepoints

    kept: dict[int, list[Any]] = {i: [] for i in found}
    for per_key in families.values():
        for (i, _), changes in changepoints.control_fdr(per_key, fdr=fdr).items():
            kept[i].extend(changes)
    for i in kept:
        kept[i].sort(key=lambda c: (c.after, c.kind))
    return kept, {family: len(per_key) for family, per_key in families.items()}


def _with_ab_said(s: Series, listed: list[HistoryChange], judged: dict[int, links.LinkTest],
                  families: dict[tuple[Any, ...], int], min_effect: float
                  ) -> list[HistoryChange]:
    """`listed` (one series' entries) with what each night's `ab` said of its links: every
    entry at a linked pair carries the night's verdict, and says why where the history
    differs; a change `ab` called that no entry lists becomes an `ab-only` entry."""
    from kscperf.stats import changepoints

    out = []
    for entry in listed:
        test = judged.get(entry.change.after) if entry.change.before == entry.change.after - 1 \
            else None
        if test is None or entry.kind not in (ChangeKind.SLOWER, ChangeKind.FASTER):
            out.append(entry)
            continue
        link = test.link
        differs = ""
        if link.ab_verdict != entry.kind.value:
            differs = (f"ab said {link.ab_verdict or 'nothing'} (q {link.ab_q:.3g}); the "
                       f"history's test: p {test.estimate.p_value:.3g}"
                       f"{_effect_note(link, min_effect)}")
        out.append(dataclasses.replace(entry, ab_verdict=link.ab_verdict, ab_q=link.ab_q,
                                       ab_min_effect=link.ab_min_effect, differs=differs))
    shown = {(e.change.after, e.kind.value) for e in out}
    for position, test in sorted(judged.items()):
        link = test.link
        if link.ab_verdict not in (ChangeKind.SLOWER.value, ChangeKind.FASTER.value) or \
                (position, link.ab_verdict) in shown:
            continue
        reason = _why_not_listed(s, test, families[_night(s, position)], min_effect)
        event = changepoints.Change(ChangeKind.AB_ONLY.value, position - 1, position,
                                    link.ratio, link.low, link.high, link.p_value, reason,
                                    q_value=link.ab_q, min_effect=link.ab_min_effect)
        before, after = s.points[position - 1], s.points[position]
        out.append(HistoryChange(s.key, event, before.build, after.build, before.status,
                                 after.status, reason, None, link.ab_verdict, link.ab_q,
                                 link.ab_min_effect, reason))
    return out


def _effect_note(link: links.Link, min_effect: float) -> str:
    """Beside a verdict of the night's `ab`: the minimum effect it ran at, where the
    history's is another."""
    if math.isclose(link.ab_min_effect, min_effect, rel_tol=1e-9, abs_tol=1e-12):
        return ""
    return (f"; ab ran at a minimum effect of {link.ab_min_effect:.3g}, the history at "
            f"{min_effect:.3g}")


def _why_not_listed(s: Series, test: links.LinkTest, night_tests: int,
                    min_effect: float) -> str:
    """Why the history lists no step where the night's `ab` called one, in one sentence."""
    link, est = test.link, test.estimate
    said = f"ab said {link.ab_verdict} (q {link.ab_q:.3g})"
    note = _effect_note(link, min_effect)
    if link.environment:
        return (f"{said}; the link crosses an environment change ({link.environment}), "
                f"which the history marks as an environment event, never a step{note}")
    before, after = s.points[test.position - 1].status, s.points[test.position].status
    if before != CellStatus.OK or after != CellStatus.OK:
        return f"{said}; the status changed ({before} -> {after}), a status event{note}"
    single_shot = s.key.single_shot
    scatter = f"its series' scatter of links ({test.scatter:.2%} from {test.scatter_links} links)"
    held = (f"tested on its {link.n_pairs} pairs, " if not math.isfinite(test.scatter) else
            f"held to the larger of its {link.n_pairs} pairs' spread and {scatter}, "
            if single_shot else f"held to {scatter} as well as its {link.n_pairs} pairs, ")
    if test.persisted is False:
        return (f"{said}; {held}the history's test gives p {est.p_value:.3g}, but the levels "
                f"of the builds from it on did not follow it, as a {s.key.kind} step must "
                f"(a single-shot kind's one-night offset){note}")
    if test.persisted is None:
        return (f"{said}; {held}the history's test gives p {est.p_value:.3g}; a {s.key.kind} "
                f"step must persist in the levels of the builds from it on, and "
                f"{links.PERSIST_BUILDS} are needed: the next builds will say{note}")
    if test.direction == 0:
        if est.p_value < stats.ALPHA:
            return (f"{said}; {held}the history's test gives {est.ratio:.3f}x "
                    f"[{est.low:.3f}x, {est.high:.3f}x], short of the minimum effect "
                    f"{min_effect:.3g}{note}")
        return (f"{said}; {held}the history's test gives p {est.p_value:.3g}, not "
                f"significant{note}")
    return (f"{said}; {held}the history's test gives p {est.p_value:.3g}, which the false "
            f"discovery control over the {night_tests} links of its night does not pass{note}")


def _series_changes(s: Series, changes: Sequence[Any], shifts: set[tuple[int, int]],
                    min_effect: float) -> list[HistoryChange]:
    """The `HistoryChange`s of one series from its kept `changepoints.Change`s and the
    machine-speed shifts of its class (pairs of build ids)."""
    from kscperf.stats import changepoints

    speed_pairs = {(i - 1, i) for i in range(1, len(s.points))
                   if (s.points[i - 1].build.id, s.points[i].build.id) in shifts}
    bounds = sorted({c.after for c in changes if c.is_step or c.kind == "environment"}
                    | {0, len(s.points)})
    out: list[HistoryChange] = []
    for ch in changes:
        # A single-shot kind (compile, prep, memory: one value a process) needs its level to
        # persist: one build of it is too often far off (prep links of identical builds
        # ranged 0.87-1.37x), and the run-time series reports the night's regression.
        if ch.is_step and not ch.confirmed and s.key.kind is not Kind.TIME:
            continue
        if _machine_explained(s, ch, min_effect, bounds):
            speed_pairs.add((ch.before, ch.after))
            continue
        # A compile, prep or memory value comes and goes with the run (an eager tool's
        # compile time is only recorded when its first call was measurably slow): its gaps
        # are not status changes; the run-time series of the config reports what happened.
        if ch.kind == ChangeKind.STATUS and s.key.kind is not Kind.TIME and CellStatus.NOT_RUN in (
                s.points[ch.before].status, s.points[ch.after].status):
            continue
        speed = ch.kind == "environment" and (ch.before, ch.after) in speed_pairs
        if speed:
            speed_pairs.discard((ch.before, ch.after))
        out.append(_history_change(s, ch, speed))
    for before, after in sorted(speed_pairs):
        event = changepoints.Change("environment", before, after, None, None, None, None,
                                    MACHINE_SPEED_DETAIL)
        out.append(_history_change(s, event, True))
    return out


def _machine_explained(s: Series, ch: Any, min_effect: float, bounds: Sequence[int]
                       ) -> bool:
    """Whether a change of the machine's speed between the two stretches of step `ch` (the
    builds from the change before it to the change after it, `bounds` holding every
    change's first build) could explain it, as `compare` decides for a row: then it is the
    machine's, not the build's. The canaries of the stretches are compared, as their
    levels are: one build's two or three canary scores against the next build's resolve
    nothing, so a persistent step beside steady canaries was blamed on the machine."""
    from kscperf.compare import builds as compare

    if not ch.is_step or s.key.kind is None or not s.key.kind.is_timed or ch.low is None \
            or ch.high is None or ch.detail == links.LINK_DETAIL:
        return False
    start = max((b for b in bounds if b <= ch.before), default=0)
    end = min((b for b in bounds if b > ch.after), default=len(s.points))
    before = [v for p in s.points[start:ch.before + 1] for v in p.build.machine_scores or ()]
    after = [v for p in s.points[ch.after:end] for v in p.build.machine_scores or ()]
    if not before or not after:
        return False
    shift = machine.compare_canary_scores(before, after)
    direction = Direction.SLOWER if ch.kind == ChangeKind.SLOWER else Direction.FASTER
    threshold = ch.min_effect if ch.min_effect is not None else min_effect
    return shift.could_have_shifted and compare.machine_could_explain(
        ch.low, ch.high, direction, shift, threshold)


def _one_environment_entry(changes: list[HistoryChange]) -> list[HistoryChange]:
    """`changes` with the environment events of one class and pair of builds merged."""
    merged: dict[tuple[str, int, int], list[HistoryChange]] = {}
    rest = []
    for c in changes:
        if c.kind == "environment":
            merged.setdefault((c.key.machine_class, c.before.id, c.after.id), []).append(c)
        else:
            rest.append(c)
    for (cls, _, _), events in merged.items():
        key = SeriesKey(cls, None, f"all {len(events)} series", "*", "*", "*", "*")
        rest.append(dataclasses.replace(events[0], key=key))
    return rest


def _history_change(s: Series, ch: Any, machine_speed: bool = False) -> HistoryChange:
    before, after = s.points[ch.before], s.points[ch.after]
    detail = ""
    if ch.kind == "environment":
        parts = [_environment_difference(before.build, after.build, _sees_counter(s.key))]
        parts += [MACHINE_SPEED_DETAIL] if machine_speed else []
        detail = "; ".join(p for p in parts if p)
    elif ch.kind == ChangeKind.UNSETTLED:
        detail = ch.detail
    return HistoryChange(s.key, ch, before.build, after.build, before.status, after.status,
                         detail)


@dataclass(frozen=True)
class HistoryCheck:
    """What `history check` found: the newest build of each machine class, every change, and
    the regressions the newest builds opened (the check fails when there are any)."""

    newest: tuple[StoredBuild, ...]
    changes: tuple[HistoryChange, ...]
    opened: tuple[HistoryChange, ...]
    # Count regressions of the compile panel (a new graph break), `compilehistory`'s.
    compile_opened: tuple[Any, ...] = ()

    @property
    def failed(self) -> bool:
        """Whether the newest build of any machine class opened a regression."""
        return bool(self.opened) or bool(self.compile_opened)


def check_newest(store: HistoryStore, *,
                 min_effect: float = stats.DEFAULT_MIN_EFFECT) -> HistoryCheck:
    """The changes of the store, and the regressions whose first build after the change is
    the newest build of its machine class."""
    builds = store.builds()
    newest: dict[str, StoredBuild] = {}
    for b in builds:
        newest[b.machine_class] = b  # builds() is oldest first within a class
    changes = find_changes(store, min_effect=min_effect)
    opened = [c for c in changes if c.is_regression and c.after.id == newest[
        c.key.machine_class].id]
    return HistoryCheck(tuple(newest.values()), tuple(changes), tuple(opened))
