"""The dashboard's lockstep parts, as view-models: a benchmark's chained lockstep timeline
beside its raw levels, runs of machine-speed events read as one entry, and tools that never
ran on a machine class folded into one line. The numbers come from `kscperf.history`
(`links.chained_timeline`); this module only groups and lays them out as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from kscperf.history import MACHINE_SPEED_DETAIL, HistoryChange, HistoryStore, Series, StoredBuild
from kscperf.history import links
from kscperf.names import Kind
from kscperf.views import formatting

__all__ = ["TimelineRow", "TimelineView", "timeline_view", "timelines", "SpeedEvent",
           "merge_speed_runs", "environment_entries", "tools_that_ran", "not_run_lines"]


@dataclass(frozen=True)
class TimelineRow:
    """One build of a chained lockstep timeline, newest first on the page."""

    label: str
    level: str       # the build's own median, as separate runs see it
    link: str        # the link from the build before: ratio [interval], or "" at a chain's start
    chained: str     # the chained level from the chain's first build, with its interval
    tone: str        # "bad" slower beyond the link's own noise, "good" faster, else ""


@dataclass(frozen=True)
class TimelineView:
    """The lockstep timeline of one run-time series (its chains in build order)."""

    chains: int
    rows: list[TimelineRow]


def _ratio_text(ratio: float, low: float, high: float) -> str:
    return f"{formatting.format_ratio(ratio)} {formatting.format_interval(low, high)}"


def timeline_view(series: Series, by_new: dict[int, links.Link]) -> TimelineView | None:
    """The chained timeline of a run-time series with links, or None when it has none."""
    chains = links.chained_timeline(series, by_new)
    if not chains:
        return None
    rows = []
    for chain in chains:
        for p in chain:
            point = series.points[p.position]
            link = p.link
            tone = ""
            if link is not None and link.low > 1:
                tone = "bad"
            elif link is not None and link.high < 1:
                tone = "good"
            rows.append(TimelineRow(
                point.build.label, formatting.format_seconds(point.median)
                if point.median == point.median else "-",
                _ratio_text(link.ratio, link.low, link.high) if link is not None else "",
                _ratio_text(p.level, p.low, p.high) if link is not None else "1 (chain start)",
                tone))
    return TimelineView(len(chains), rows[::-1])


def timelines(store: HistoryStore, all_series: Sequence[Series]
              ) -> dict[tuple[str, str], TimelineView]:
    """(benchmark, machine class) -> the chained timeline of its run-time series, for every
    series of `all_series` with links."""
    class_links = {cls: store.links(cls) for cls in store.machine_classes()}
    out = {}
    for s in all_series:
        by_new = class_links.get(s.key.machine_class, {}).get((str(Kind.TIME), s.key.benchmark))
        view = timeline_view(s, by_new) if s.key.kind is Kind.TIME and by_new else None
        if view is not None:
            out[(s.key.benchmark, s.key.machine_class)] = view
    return out


@dataclass(frozen=True)
class SpeedEvent:
    """An environment event of one machine class between two builds (by position)."""

    machine_class: str
    before: int
    after: int
    detail: str
    series: int


def merge_speed_runs(events: Sequence[SpeedEvent]) -> list[tuple[SpeedEvent, int]]:
    """`events` with each run of machine-speed-only events between consecutive builds of
    one class merged into one (from the run's first build to its last), each with the
    number of pairs of builds it covers; other events are kept as they are (count 1)."""
    out: list[tuple[SpeedEvent, int]] = []
    for e in sorted(events, key=lambda e: (e.machine_class, e.before, e.after, e.detail)):
        if out and e.detail == MACHINE_SPEED_DETAIL:
            last, pairs = out[-1]
            if last.detail == MACHINE_SPEED_DETAIL and last.machine_class == e.machine_class \
                    and last.after == e.before:
                out[-1] = (SpeedEvent(e.machine_class, last.before, e.after, e.detail,
                                      max(last.series, e.series)), pairs + 1)
                continue
        out.append((e, 1))
    return out


def environment_entries(changes: Sequence[HistoryChange]
                        ) -> list[tuple[str, StoredBuild, StoredBuild, str, int]]:
    """(machine class, last build before, first build after, what changed, series marked)
    per environment event of `changes`; a run of machine-speed events over consecutive
    builds is one entry, from its first build to its last."""
    counted: dict[tuple[str, int, int, str], int] = {}
    builds: dict[tuple[str, int], StoredBuild] = {}
    for c in changes:
        if c.kind == "environment":
            key = (c.key.machine_class, c.before.position, c.after.position, c.detail)
            counted[key] = counted.get(key, 0) + 1
            for b in (c.before, c.after):
                builds[(b.machine_class, b.position)] = b
    merged = merge_speed_runs([SpeedEvent(*key, n) for key, n in counted.items()])
    return [(e.machine_class, builds[(e.machine_class, e.before)],
             builds[(e.machine_class, e.after)],
             e.detail if pairs == 1 else f"{e.detail} ({pairs} pairs of builds in a row)",
             e.series) for e, pairs in merged]


def tools_that_ran(groups: Sequence[Any]) -> dict[tuple[str, str], bool]:
    """(machine class, tool) -> whether any build ran any of its configs, from the front
    page's `history.summary.GroupSummary`s (a pass rate exists where something ran)."""
    ran: dict[tuple[str, str], bool] = {}
    for g in groups:
        anything = any(v is not None for v in g.pass_rate.values)
        ran[(g.machine_class, g.tool)] = ran.get((g.machine_class, g.tool), False) or anything
    return ran


def not_run_lines(ran: dict[tuple[str, str], bool]) -> list[str]:
    """One line per machine class naming its tools that never ran (every config of every
    task skipped, unsupported or missing), from (class, tool) -> whether anything ran."""
    by_class: dict[str, list[str]] = {}
    for (cls, tool), anything in sorted(ran.items()):
        if not anything:
            by_class.setdefault(cls, []).append(tool)
    return [f"{cls}: {', '.join(tools)} never ran (every config skipped or unsupported)"
            for cls, tools in by_class.items()]
