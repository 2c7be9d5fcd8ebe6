"""Lockstep links: what the store keeps of an `ab` folder, and the step policy on them.

`run-benchmarks ab -o DIR` runs build N-1 (the base) and build N (the new build) in
lockstep and writes `DIR/<label>.json` for each. Added to a store, the new side becomes
build N, its base side's file is kept as `links/<the new build's stored name>`, and the
index holds a **link** from build N-1 to build N per benchmark and kind: the ratio NEW/BASE
as `compare` computes it for a lockstep pair (paired value by value for run time), its
interval, p-value and number of process pairs. A link is rebuilt from those two files
alone, as levels are.

The index also keeps what that night's `ab` said of each row: its verdict, q-value and
minimum effect, as `compare` gives them for the two files (`LinkRow.ab_verdict`).

Policy (`link_changes`): where a series has a link between two consecutive builds, the link
decides that pair: a step by the rule of `changepoints.step_direction`, tested with the
link's own pairs and the scatter of its series' links pooled (`tested_estimate`; its p-value
then enters the false discovery control of its night, `history.changes`), an environment
event when its two sides ran in different environments, and nothing else: the machine's
speed moved both sides alike; a single-shot kind's step must persist in its levels too
(`persists`). `chained_timeline` multiplies the links along a series into a drift-free
timeline whose interval grows along the chain. This module decides nothing else about
levels; `changes.find_changes` combines the two.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import sqlite3
from dataclasses import dataclass
from typing import Any, Sequence

from kscperf.errors import KscperfError
from kscperf.history.journal import write_pending
from kscperf.history.series import Series, environment_of, machine_class_of
from kscperf.names import Kind
from kscperf.results.files import LoadedResults, load_results
from kscperf.stats import core as stats

__all__ = ["LINKS_DIR", "LINK_DETAIL", "LINKS_SCHEMA", "AbFolder", "LinkRow", "Link",
           "read_ab_folder", "link_rows", "recorded_min_effect", "environment_change", "insert_links",
           "base_build_id", "stage_link", "index_stored_links",
           "class_links", "link_scatter", "scatter_df", "tested_estimate", "LinkTest",
           "link_detectable", "link_changes", "TimelinePoint", "chained_timeline"]

LINKS_DIR = "links"
# The detail of a step that a link found: `changes` never lets the machine's speed explain
# it away, since both sides of a link shared the machine's state.
LINK_DETAIL = "lockstep link"

# The standard error stored for a link whose interval is unbounded (SQLite's REAL cannot
# hold infinity through every driver): no test passes and no chain goes through it.
_UNBOUNDED_SE = 1e9

LINKS_SCHEMA = """
CREATE TABLE links (
    series_id INTEGER NOT NULL REFERENCES series(id),
    base_id INTEGER NOT NULL REFERENCES builds(id),
    new_id INTEGER NOT NULL REFERENCES builds(id),
    ratio REAL NOT NULL,                -- NEW/BASE of medians, paired where it could be
    low REAL NOT NULL,
    high REAL NOT NULL,
    p_value REAL NOT NULL,
    se_log REAL NOT NULL,               -- of log(ratio), for chaining
    n_pairs INTEGER NOT NULL,
    method TEXT NOT NULL,               -- stats.RatioEstimate.method
    environment TEXT NOT NULL,          -- what differed between the two sides, "" if nothing
    ab_verdict TEXT NOT NULL,           -- what the night's `ab` said of this row (compare's)
    ab_q REAL NOT NULL,                 -- its q-value (NaN stored as 1)
    ab_min_effect REAL NOT NULL,        -- the minimum effect it ran at
    PRIMARY KEY (series_id, new_id)
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class AbFolder:
    """The two files of one `ab` run: `base` is build N-1 run again, `new` is build N."""

    path: str
    base_path: str
    new_path: str
    base: LoadedResults
    new: LoadedResults


def read_ab_folder(path: str) -> AbFolder:
    """The base and new files of the `ab -o` folder `path`. Raises KscperfError unless the
    folder holds exactly one results file of each role of one lockstep run."""
    try:
        names = sorted(n for n in os.listdir(path) if n.endswith(".json"))
    except OSError as exc:
        raise KscperfError(f"cannot read the folder {path}: {exc.strerror or exc}.") from None
    by_role: dict[str, list[tuple[str, LoadedResults]]] = {}
    for name in names:
        file = os.path.join(path, name)
        loaded = load_results(file)
        role = str(loaded.metadata.get("lockstep_role") or "")
        by_role.setdefault(role, []).append((file, loaded))
    base, new = by_role.get("base", []), by_role.get("new", [])
    if len(base) != 1 or len(new) != 1 or set(by_role) - {"base", "new"}:
        raise KscperfError(f"{path} is not a folder written by run-benchmarks ab -o (it must "
                           "hold one base and one new results file of one lockstep run, "
                           f"and holds {len(names)} .json files); add a results file "
                           "instead, or the folder as ab wrote it.")
    if base[0][1].metadata.get("lockstep_id") != new[0][1].metadata.get("lockstep_id"):
        raise KscperfError(f"{base[0][0]} and {new[0][0]} come from different ab runs; add "
                           "the folder as ab wrote it.")
    return AbFolder(path, base[0][0], new[0][0], base[0][1], new[0][1])


@dataclass(frozen=True)
class LinkRow:
    """One benchmark and kind of a link, before it is stored; `benchmark` is its series'
    name (without the kind's suffix)."""

    kind: str
    benchmark: str
    ratio: float
    low: float
    high: float
    p_value: float
    se_log: float
    n_pairs: int
    method: str
    ab_verdict: str
    ab_q: float
    ab_min_effect: float


def _df(n: int, method: str) -> float:
    """The degrees of freedom a link's interval and tests take: n-1 for paired or
    per-process tests, else infinite (a normal interval)."""
    return float(n - 1) if method in ("pairs", "processes") and n > 1 else math.inf


def _se_log(ratio: float, low: float, high: float, n: int, method: str) -> float:
    """The standard error of log(ratio) that the interval [low, high] implies (`_df`)."""
    from scipy.stats import t as student_t

    if not (low > 0 and high > 0):
        return math.inf
    df = _df(n, method)
    quantile = float(student_t.ppf(1 - stats.ALPHA / 2, df)) if math.isfinite(df) else 1.959964
    return math.log(high / low) / (2 * quantile)


def link_rows(base: LoadedResults, new: LoadedResults) -> list[LinkRow]:
    """The rows of NEW against BASE, of every kind (run time, compile, prep, memory), as
    `compare` computes them for the two files of one lockstep run (value pairs for run time
    where each side has at least two processes; the processes of each side for the rest,
    which both sides measured under the same machine state), for every benchmark with a
    finite ratio in both builds and an interval. Every kind: a series without a link would be judged on
    levels from separate runs, which the machine's drift moves. The pairs of an `ab
    --until-resolved` run are tested as a fixed sample (`compare_builds(fixed_sample=True)`):
    its confidence sequence is valid at any stopping time but, with the few pairs a clear
    night needs, its p-value cannot get small enough for the false discovery control
    across a store (docs/changepoints.md, "Links and levels"). Each row also carries what
    the night's `ab` printed for it: `compare`'s verdict and q-value at the minimum effect
    the run recorded (`lockstep_min_effect`), with its confidence sequence where it ran
    until resolved."""
    from kscperf.compare import builds as compare

    comparison = compare.compare_builds(base, new, force=True, fixed_sample=True)
    ab_min_effect = recorded_min_effect(new)
    said = {(str(r.kind), r.name): r for r in compare.compare_builds(
        base, new, force=True, min_effect=ab_min_effect).rows}
    out = []
    for r in comparison.rows:
        # A row its comparison could not test (no interval: one zygote a side for prep or
        # compile, one value against one) makes no link; the levels judge its pair.
        if not (r.ratio > 0 and math.isfinite(r.ratio)) or not math.isfinite(r.p_value) \
                or math.isnan(r.ratio_low) or math.isnan(r.ratio_high):
            continue
        suffix = Kind(r.kind).suffix
        ab = said.get((str(r.kind), r.name))
        out.append(LinkRow(str(r.kind), r.name[: len(r.name) - len(suffix)] if suffix
                           else r.name, r.ratio, r.ratio_low, r.ratio_high, r.p_value,
                           _se_log(r.ratio, r.ratio_low, r.ratio_high, r.n_base, r.method),
                           r.n_base, r.method, str(ab.verdict) if ab else "",
                           ab.q_value if ab and math.isfinite(ab.q_value) else 1.0,
                           ab_min_effect))
    return sorted(out, key=lambda row: (row.kind, row.benchmark))


def recorded_min_effect(new: LoadedResults) -> float:
    """The minimum effect the `ab` run of `new` ran at (its metadata), else the default."""
    try:
        value = float(new.metadata.get("lockstep_min_effect", stats.DEFAULT_MIN_EFFECT))
    except (TypeError, ValueError):
        return stats.DEFAULT_MIN_EFFECT
    return value if math.isfinite(value) and value >= 0 else stats.DEFAULT_MIN_EFFECT


def environment_change(base: LoadedResults, new: LoadedResults) -> str:
    """What differs between the environments the two sides ran in (torch, CUDA, driver,
    CPU, GPU, Python...), for people; "" when nothing does."""
    b, n = environment_of(base), environment_of(new)
    return "; ".join(f"{k} {b.get(k, '-')} -> {n.get(k, '-')}"
                     for k in sorted(set(b) | set(n)) if b.get(k) != n.get(k))


def insert_links(db: sqlite3.Connection, machine_class: str, base_id: int, new_id: int,
                 rows: Sequence[LinkRow], environment: str) -> None:
    """Write the links of one `ab` run into the store's index, inside the store's own
    transaction (the store is their only caller). A row without a series of its kind and
    benchmark in the store is left out."""
    series_ids = {(k, b): i for i, k, b in db.execute(
        "SELECT id, kind, benchmark FROM series WHERE machine_class = ?", (machine_class,))}
    db.executemany(
        "INSERT INTO links VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [(series_ids[(r.kind, r.benchmark)], base_id, new_id, r.ratio, r.low, r.high,
          r.p_value, r.se_log if math.isfinite(r.se_log) else _UNBOUNDED_SE, r.n_pairs,
          r.method, environment, r.ab_verdict, r.ab_q, r.ab_min_effect)
         for r in rows if (r.kind, r.benchmark) in series_ids])


def base_build_id(db: sqlite3.Connection, root: str, folder: AbFolder, new_label: str,
                  machine_class: str, machine: str | None) -> int:
    """The id of the stored build that the base side of `folder` ran again; KscperfError
    when the store `root` does not hold it for the new build's machine class."""
    label = folder.base.build
    row = db.execute("SELECT id FROM builds WHERE machine_class = ? AND label = ?",
                     (machine_class, label)).fetchone()
    if row is None or machine_class_of(folder.base, machine) != machine_class:
        raise KscperfError(
            f"{folder.path} links build {new_label!r} to its base {label!r}, which the store "
            f"{root} does not hold for machine class {machine_class!r}; add the base build "
            "first (if another job is adding it now, add this folder again once that add is "
            f"done), or add the new build's file alone ({folder.new_path}).")
    return int(row[0])


def stage_link(db: sqlite3.Connection, root: str, folder: AbFolder, new: LoadedResults,
               machine_class: str, base_id: int, new_id: int, stored: str) -> tuple[str, str]:
    """Inside the store's add: index the links of `folder` and write its base side's copy
    under its temporary name (`journal.write_pending`); return (temporary, final)."""
    insert_links(db, machine_class, base_id, new_id, link_rows(folder.base, new),
                 environment_change(folder.base, new))
    os.makedirs(os.path.join(root, LINKS_DIR), exist_ok=True)
    target = os.path.join(root, LINKS_DIR, stored)
    with open(folder.base_path, "rb") as fp:
        return write_pending(target, fp.read(), "the store's link"), target


def index_stored_links(db: sqlite3.Connection, root: str, builds_dir: str) -> None:
    """For a rebuild of the index: the links of every file under `root/links/`, each the
    base side of the stored build of the same name under `builds_dir`."""
    links_dir = os.path.join(root, LINKS_DIR)
    names = sorted(n for n in os.listdir(links_dir) if n.endswith(".json")) \
        if os.path.isdir(links_dir) else []
    for name in names:
        row = db.execute("SELECT id, machine_class FROM builds WHERE file = ?",
                         (f"{builds_dir}/{name}",)).fetchone()
        base = load_results(os.path.join(links_dir, name))
        base_row = None if row is None else db.execute(
            "SELECT id FROM builds WHERE machine_class = ? AND label = ?",
            (row[1], base.build)).fetchone()
        if row is None or base_row is None:
            raise KscperfError(f"{links_dir}/{name} links builds the store does not hold "
                               f"({builds_dir}/{name} and build {base.build!r}); remove it "
                               "and rebuild the index.")
        new = load_results(os.path.join(root, builds_dir, name))
        insert_links(db, row[1], int(base_row[0]), int(row[0]), link_rows(base, new),
                     environment_change(base, new))


@dataclass(frozen=True)
class Link:
    """One stored link of one series: build `base_id` to build `new_id`."""

    base_id: int
    new_id: int
    ratio: float
    low: float
    high: float
    p_value: float
    se_log: float
    n_pairs: int
    method: str
    environment: str
    # What the night's `ab` said of this row (`LinkRow`); "" for links made without it.
    ab_verdict: str = ""
    ab_q: float = 1.0
    ab_min_effect: float = stats.DEFAULT_MIN_EFFECT


def class_links(db: sqlite3.Connection, machine_class: str
                ) -> dict[tuple[str, str], dict[int, Link]]:
    """(kind, benchmark) -> {new build id: its link} for one machine class."""
    out: dict[tuple[str, str], dict[int, Link]] = {}
    for kind, bench, *fields in db.execute(
            "SELECT s.kind, s.benchmark, l.base_id, l.new_id, l.ratio, l.low, l.high, "
            "l.p_value, l.se_log, l.n_pairs, l.method, l.environment, l.ab_verdict, l.ab_q, "
            "l.ab_min_effect FROM links l "
            "JOIN series s ON s.id = l.series_id WHERE s.machine_class = ?", (machine_class,)):
        link = Link(*fields)
        out.setdefault((kind, bench), {})[link.new_id] = link
    return out


def _series_links(series: Series, links: dict[int, Link]) -> dict[int, Link]:
    """Position i in the series -> the link from its build i-1 to build i."""
    out = {}
    for i in range(1, len(series.points)):
        link = links.get(series.points[i].build.id)
        if link is not None and link.base_id == series.points[i - 1].build.id:
            out[i] = link
    return out


# Fewest links of one environment in a series from which their scatter is estimated.
MIN_LINKS_FOR_SCATTER = 5


def link_scatter(series_links: Sequence[Link]) -> float:
    """The standard deviation of the log ratios of a series' links within one environment,
    robustly (the median absolute deviation, so that a real step or two do not count): how
    far two nights' links of unchanged builds scatter. NaN with fewer than
    `MIN_LINKS_FOR_SCATTER` links. A single-shot kind (prep, compile) measures one value per
    process, and its nights differ by more than their processes do (zygotes, caches): on
    this VM identical builds' prep links ranged 0.87-1.37x with intervals of a few percent."""
    logs = sorted(math.log(k.ratio) for k in series_links
                  if not k.environment and k.ratio > 0 and math.isfinite(k.ratio))
    if len(logs) < MIN_LINKS_FOR_SCATTER:
        return math.nan
    center = statistics.median(logs)
    return 1.4826 * statistics.median(abs(v - center) for v in logs)


# The asymptotic efficiency of the median absolute deviation against the standard deviation
# for normal data: a scatter from m links carries about this share of m - 1 degrees of
# freedom (Huber and Ronchetti, Robust Statistics, 2nd ed., 5.4).
MAD_EFFICIENCY = 0.37
# The most degrees of freedom the scatter lends a link's test, however long its series. Pair
# noise here is heavy-tailed (0.6 % of the recorded pairs lie beyond 10 %, with a standard
# deviation of 2.6 %), so a link whose own pairs disagree must keep the weight of its own
# variance: with
# the scatter's full weight (0.37 (m - 1), 134 after a year) a year of 3-pair links listed
# 7,230 false steps per 1,000 series; at 7, 1.5, while finding 96 % of the steps of 10 % or
# more (docs/changepoints.md, "A link's test", measured with tools/dashboard-bench
# --sections links --link-prior-df).
SCATTER_PRIOR_DF = 7.0


def scatter_df(links_used: int, prior_df: float = SCATTER_PRIOR_DF) -> float:
    """The degrees of freedom a `link_scatter` from `links_used` links lends a link's test:
    those of a median absolute deviation, at most `prior_df`."""
    return min(MAD_EFFICIENCY * max(links_used - 1, 0), prior_df)


def _scatter_links(series_links: Sequence[Link]) -> int:
    return sum(1 for k in series_links
               if not k.environment and k.ratio > 0 and math.isfinite(k.ratio))


def tested_estimate(link: Link, scatter: float, links_used: int, *,
                    single_shot: bool = False,
                    prior_df: float = SCATTER_PRIOR_DF) -> stats.RatioEstimate:
    """The estimate a link is tested with: its own (its pairs' standard error and degrees of
    freedom) where its series has no scatter yet (`link_scatter` NaN), else the two
    estimates of its noise pooled, each by its degrees of freedom, as a moderated t-test
    does (Smyth 2004, with the prior's degrees of freedom capped): the link's own pairs
    (n - 1) and the scatter of its series' links (`scatter_df(links_used)`), with their sum
    as the test's degrees of freedom. A night
    whose pairs agree by chance is held to what the series' nights show; a link of three
    pairs is no longer left with the two degrees of freedom of its pairs. A link without
    degrees of freedom of its own (unpaired values), or of a `single_shot` kind (compile,
    prep, memory: one value a process, so that its processes share the night's state and
    their agreement says nothing of the next night), is held to the larger of the two,
    with the degrees of freedom of the one it is held to (the scatter's uncapped)."""
    own_df = _df(link.n_pairs, link.method)
    own = stats.RatioEstimate(link.ratio, link.low, link.high, link.p_value, link.se_log,
                              own_df, link.method, link.n_pairs, link.n_pairs)
    if not math.isfinite(scatter) or not link.se_log < _UNBOUNDED_SE:
        return own
    if math.isfinite(own_df) and not single_shot:
        sdf = scatter_df(links_used, prior_df)
        variance = (own_df * link.se_log ** 2 + sdf * scatter ** 2) / (own_df + sdf)
        se, df = math.sqrt(variance), own_df + sdf
    elif scatter > link.se_log:
        se, df = scatter, scatter_df(links_used, math.inf)
    else:
        return own
    return stats.t_estimate(link.ratio, se, df, stats.ALPHA, link.method, link.n_pairs,
                            link.n_pairs)


def link_detectable(series_links: Sequence[Link], *, single_shot: bool = False) -> float:
    """The smallest step (0.05 = 5 %) a link like the series' newest one could show at 80 %
    power, tested as `link_changes` tests it (`tested_estimate`, `single_shot` for compile,
    prep and memory). NaN without a link within one environment."""
    usable = [k for k in series_links if not k.environment and math.isfinite(k.se_log)]
    if not usable:
        return math.nan
    newest = max(usable, key=lambda k: k.new_id)
    estimate = tested_estimate(newest, link_scatter(series_links), _scatter_links(series_links),
                               single_shot=single_shot)
    return stats.min_detectable_effect(estimate.se_log, estimate.df)


# A single-shot link step persists when the median level of the builds from the step on (at
# least this many) has moved from the median level of as many builds before it, in the
# link's direction, by at least half the link's log ratio.
PERSIST_BUILDS = 3


def _log_level(point: Any) -> float | None:
    return math.log(point.median) if point.status == "ok" and point.median > 0 \
        and math.isfinite(point.median) else None


def persists(series: Series, position: int, log_ratio: float) -> bool | None:
    """Whether a step of `log_ratio` at `position` shows in the series' levels (separate
    runs, one per build) as well: the median of the levels of `PERSIST_BUILDS` builds from
    it on against as many before it. None while fewer builds follow: the next builds will
    say. A night whose one zygote a side was offset (a single-shot kind's usual false
    link) leaves the levels where they were: at most the one build of its new side moves,
    and a median of three does not follow it."""
    before = [v for p in series.points[max(0, position - PERSIST_BUILDS):position]
              if (v := _log_level(p)) is not None]
    after = [v for p in series.points[position:position + PERSIST_BUILDS]
             if (v := _log_level(p)) is not None]
    if len(series.points) - position < PERSIST_BUILDS:
        return None
    if len(before) < 2 or len(after) < 2:
        return False
    shift = statistics.median(after) - statistics.median(before)
    return shift * log_ratio > 0 and abs(shift) >= abs(log_ratio) / 2


@dataclass(frozen=True)
class LinkTest:
    """How `link_changes` judged the link into position `position` of a series: the
    estimate it tested (`tested_estimate`), the scatter of the series' links (NaN when too
    few) and how many links it came from, and the direction of the step it makes by
    `changepoints.step_direction` before any false discovery control (+1, -1, 0; 0 also
    for an environment event, a status change, or a single-shot step its levels did not
    follow); `persisted`, for a single-shot step, what `persists` said (None: too few
    builds follow it yet)."""

    position: int
    link: Link
    estimate: stats.RatioEstimate
    scatter: float
    scatter_links: int
    direction: int
    persisted: bool | None = True


def link_changes(series: Series, links: dict[int, Link], *,
                 min_effect: float = stats.DEFAULT_MIN_EFFECT,
                 prior_df: float = SCATTER_PRIOR_DF
                 ) -> tuple[list[Any], dict[int, LinkTest]]:
    """The `changepoints.Change`s the links of one series decide, and how each linked pair of
    consecutive builds was judged (by the `after` index of the pair).

    Promises: a link across environments is an environment event and never a step; a link
    of two builds both "ok" is a candidate step by the rule the levels' steps follow
    (`changepoints.step_direction`: significant, and at or near `min_effect`), tested with
    `tested_estimate`, so that a night's offset that every night of the series shows is not
    a step (the false discovery control of its night decides); a single-shot kind's step
    must also persist in the levels (`persists`: not confirmed while too few builds follow
    it, dropped when they do not follow it); a pair whose status changed
    is left to the levels' status events; a link without a bounded interval (its night's
    comparison had nothing to test) does not decide its pair, which the levels then judge."""
    from kscperf.stats.changepoints import Change, step_direction

    changes: list[Any] = []
    judged: dict[int, LinkTest] = {}
    by_position = _series_links(series, links)
    scatter = link_scatter(list(by_position.values()))
    used = _scatter_links(list(by_position.values()))
    single_shot = series.key.single_shot
    for i, link in sorted(by_position.items()):
        if not link.environment and not link.se_log < _UNBOUNDED_SE:
            # A night whose comparison could not be tested (one zygote a side for a
            # single-shot kind, a side without values) leaves its pair to the levels.
            continue
        estimate = tested_estimate(link, scatter, used, single_shot=single_shot,
                                   prior_df=prior_df)
        if link.environment:
            changes.append(Change("environment", i - 1, i, None, None, None, None,
                                  link.environment))
            judged[i] = LinkTest(i, link, estimate, scatter, used, 0)
            continue
        if series.points[i - 1].status != "ok" or series.points[i].status != "ok":
            judged[i] = LinkTest(i, link, estimate, scatter, used, 0)
            continue
        direction = step_direction(estimate, min_effect=min_effect)
        judged[i] = LinkTest(i, link, estimate, scatter, used, direction)
        if direction:
            # A single-shot kind's step must also persist in its levels (`persists`), as
            # its level steps must; unconfirmed, it waits for the builds after it.
            held = persists(series, i, math.log(link.ratio)) if single_shot else True
            if held is False:
                judged[i] = dataclasses.replace(judged[i], direction=0, persisted=False)
                continue
            judged[i] = dataclasses.replace(judged[i], persisted=held)
            changes.append(Change("slower" if direction > 0 else "faster", i - 1, i,
                                  link.ratio, estimate.low, estimate.high, estimate.p_value,
                                  LINK_DETAIL, confirmed=bool(held), min_effect=min_effect))
    return changes, judged


@dataclass(frozen=True)
class TimelinePoint:
    """One build on a chained lockstep timeline: `level` relative to the chain's first
    build (1.0), with its interval; `link` the link that reached it (None at a chain's
    start)."""

    position: int
    level: float
    low: float
    high: float
    link: Link | None


def chained_timeline(series: Series, links: dict[int, Link]) -> list[list[TimelinePoint]]:
    """The chains of consecutive linked builds of one series, each a drift-free timeline:
    the product of the link ratios from the chain's first build, with the standard errors
    of their logs added in quadrature (normal quantiles), so the interval grows along the
    chain. A build without a link from its predecessor, or a link across environments,
    starts a new chain."""
    by_position = _series_links(series, links)
    chains: list[list[TimelinePoint]] = []
    log_level = variance = 0.0
    z = 1.959964
    for i in range(len(series.points)):
        link = by_position.get(i)
        # A link without a bounded interval (stored with se 1e9) cannot carry a chain.
        if link is None or link.environment or not link.se_log < _UNBOUNDED_SE:
            chains.append([TimelinePoint(i, 1.0, 1.0, 1.0, None)])
            log_level = variance = 0.0
            continue
        log_level += math.log(link.ratio)
        variance += link.se_log ** 2
        spread = z * math.sqrt(variance)
        chains[-1].append(TimelinePoint(i, math.exp(log_level), math.exp(log_level - spread),
                                        math.exp(log_level + spread), link))
    return [c for c in chains if len(c) > 1]


def with_links(series: Series, level_changes: Sequence[Any], links: dict[int, Link], *,
               min_effect: float = stats.DEFAULT_MIN_EFFECT,
               prior_df: float = SCATTER_PRIOR_DF
               ) -> tuple[list[Any], dict[int, LinkTest]]:
    """The changes of one series once its links decide the pairs they cover: the level
    changes (`changepoints.detect_series`) less every step and environment event at a
    covered pair, plus `link_changes`; status events are the levels' everywhere. In order of
    `after`. Also returns how each covered position was judged (`LinkTest`). `prior_df` is
    for benchmarks of the rule (`tested_estimate`)."""
    decided, covered = link_changes(series, links, min_effect=min_effect, prior_df=prior_df)
    linked_environment = {c.after for c in decided if c.kind == "environment"}
    kept = [c for c in level_changes
            if c.kind == "status" or c.after not in covered
            or (c.kind == "environment" and c.after not in linked_environment)]
    return sorted([*kept, *decided], key=lambda c: (c.after, c.kind)), covered
