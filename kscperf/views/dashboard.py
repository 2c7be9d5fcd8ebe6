"""The dashboard: a static site built from a history store, that opens from disk.

    OUT/index.html                 per machine class, tool and task: geomean speedup over
                                   `pt`, pass rate, compile time, peak memory, each with a
                                   sparkline and the latest build's change; the open changes,
                                   regressions first, with the commands that confirm them;
                                   the environment changes; the models
    OUT/models/<slug>.html         a model's benchmarks, each with its run-time sparkline
    OUT/benchmarks/<slug>.html     one benchmark's history per kind: per-build spread, change
                                   points, environment marks and status, and a table per build

Owns building the view-model (its types: `dashboard_views`) and its rendering by the Jinja templates `templates/dashboard_*.j2`
(autoescaped, so every name is escaped). Statistics come from `stats`, the changes from
`history.find_changes`, text from `formatting`, the inline SVG charts from `sparklines`
(microseconds per chart: a store of 365 builds x 2,000 series builds in seconds). Links are
relative, nothing is fetched: the site works from file:// with no server and no network.
The one script, the search filter inlined in each page, only hides rows; without it every
row shows.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import os
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from markupsafe import Markup

from kscperf.stats import core as stats
from kscperf.views import formatting, historytext
from kscperf.views.compileview import with_compile_tables
from kscperf.history import (
    HistoryChange, HistoryStore, Series, SeriesPoint, StoredBuild, detectable_steps,
    find_changes)
from kscperf.errors import CellStatus, KscperfError
from kscperf.history.summary import GroupSummary, Trend, open_changes, summarize_groups
from kscperf.names import Kind
from kscperf.views import dashboard_timeline as timeline
from kscperf.views.confirm import confirm_commands
from kscperf.views.explaintext import OP_HEADER, explanation_title, op_cells
from kscperf.history.explained import change_explanation
from kscperf.views.dashboard_views import (
    MetricView, SummaryRow, ChangeView, EnvironmentView, ModelRow, ClassView, IndexView, ModelBenchmarkRow, ModelView, ChartView, BuildLine, SectionView, BenchmarkView)
from kscperf.results.fileio import write_text_atomic
from kscperf.views.sparklines import ChartPoint, Mark, history_chart, plottable, sparkline
from kscperf.views.style import STATUS_TONE, change_tone, jinja_environment

__all__ = ["IndexView", "ModelView", "BenchmarkView", "build_views", "write_dashboard"]

# A benchmark page's table lists this many newest builds, and every older one where
# something changed; the charts show every build. (A year of nightlies in every table made
# the site of 2,000 series 160 MB.)
_TABLE_BUILDS = 30
# The front page shows the commands of this many regressions, its first ones, unfolded.
_EXPANDED_CHANGES = 3


@dataclass
class _Pages:
    index: IndexView
    models: dict[str, ModelView] = field(default_factory=dict)
    benchmarks: dict[str, BenchmarkView] = field(default_factory=dict)


# --------------------------------------------------------------------------------------
# Names, links and text
# --------------------------------------------------------------------------------------

def _slug(name: str) -> str:
    """A file name for any model or benchmark name: readable where it can be, unique by a
    hash of the whole name."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._")[:60] or "x"
    return f"{readable}-{hashlib.sha1(name.encode('utf-8')).hexdigest()[:10]}.html"


def _model_href(model: str) -> str:
    return f"models/{_slug(model)}"


def _benchmark_href(benchmark: str) -> str:
    return f"benchmarks/{_slug(benchmark)}"


def _text(s: object) -> str:
    return formatting.safe_text(s)


def _quantity(value: float | None, kind: Kind | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return formatting.format_quantity(value, kind.unit if kind is not None else "second")


def _point_text(p: SeriesPoint, kind: Kind | None) -> str:
    """A point's central value (± spread for run time), marked when some of its processes
    ran in another machine state."""
    text = _quantity(p.median, kind)
    if kind is Kind.TIME and math.isfinite(p.spread):
        text += f" ±{_quantity(p.spread, kind)}"
    return _marked(text, p)


def _marked(text: str, p: SeriesPoint) -> str:
    return text + (f" {formatting.MACHINE_STATE_MARK}" if p.odd_processes else "")


def _kind_title(kind: Kind | None) -> str:
    return kind.title() if kind is not None else "every kind"


def _kind_order(kind: Kind | None) -> int:
    return list(Kind).index(kind) if kind is not None else len(Kind)


def _build_text(b: StoredBuild) -> str:
    return _text(historytext.build_text(b.label, b.git_commit))


def _date(b: StoredBuild) -> str:
    # The run's date: builds of one commit (reruns) differ by it, and a nightly is known by it.
    return (b.run_date or b.commit_date)[:16].replace("T", " ")


def _change_tone(c: HistoryChange) -> str:
    return change_tone(c.kind, c.is_regression).value


# The ops an open change shows of its op diff.
_CHANGE_OPS = 3


def _change_view(c: HistoryChange, page: str, expanded: bool = False,
                 explain: bool = False) -> ChangeView:
    commands = confirm_commands(c)
    explained = change_explanation(c) if explain else None
    return ChangeView(
        ops_title=_text(explanation_title(explained)) if explained else "",
        ops=[[_text(x) for x in op_cells(o)] for o in explained.ops[:_CHANGE_OPS]]
        if explained else [],
        what=_text(historytext.change_what(c)), tone=_change_tone(c),
        benchmark=_text(c.key.benchmark), kind=str(c.key.kind or "*"),
        machine_class=_text(c.key.machine_class), model=_text(c.key.model),
        tool=_text(c.key.tool), task=_text(c.key.task), href=page,
        ratio=formatting.format_ratio(c.change.ratio),
        interval=formatting.format_interval(c.change.low, c.change.high),
        before=_build_text(c.before), before_date=_date(c.before),
        after=_build_text(c.after), after_date=_date(c.after),
        compare=_text(commands.compare + (" --explain" if explained else "")),
        ab=_text(commands.ab), bisect=_text(commands.bisect),
        expanded=expanded)


def _mark(c: HistoryChange, position: int) -> Mark:
    return Mark(position, _change_tone(c), f"{historytext.change_what(c)}: "
                f"{formatting.format_ratio(c.change.ratio)} from {c.after.label}")


# --------------------------------------------------------------------------------------
# The front page's numbers (computed by `history.summary`)
# --------------------------------------------------------------------------------------

def _metric(trend: Trend, shown: str, label: str) -> MetricView:
    change, tone = "", "neutral"
    if trend.change is not None:
        change = f"{(trend.change - 1) * 100:+.1f}%"
        tone = "neutral" if trend.better is None else "good" if trend.better else "bad"
    return MetricView(shown, change, tone,
                      sparkline([plottable(v) for v in trend.values], label=label))


def _summary_row(g: GroupSummary) -> SummaryRow:
    rate = g.pass_rate.last
    rate_now = f"{rate * 100:.0f}% ({g.passed}/{g.counted})" if rate is not None else "-"
    rate_change, rate_tone = "", "neutral"
    if g.pass_change is not None:
        rate_change = f"{g.pass_change:+.0f} pt" if g.pass_change else ""
        rate_tone = "bad" if g.pass_change < 0 else "good" if g.pass_change > 0 else "neutral"
    name = f"{g.machine_class} {g.tool} {g.task}"
    return SummaryRow(
        _text(g.machine_class), _text(g.tool), _text(g.task),
        _metric(g.speedup, formatting.format_ratio(g.speedup.last or math.nan),
                f"geomean speedup of {name}"),
        MetricView(rate_now, rate_change, rate_tone,
                   sparkline([plottable(v) for v in g.pass_rate.values],
                             label=f"pass rate of {name}")),
        _metric(g.compile_s, _quantity(g.compile_s.last, Kind.COMPILE),
                f"compile time of {name}"),
        _metric(g.peak_rss, _quantity(g.peak_rss.last, Kind.PEAK_RSS),
                f"peak memory of {name}"))


# --------------------------------------------------------------------------------------
# Changes: open ones, environment events
# --------------------------------------------------------------------------------------

def _environment_events(changes: Sequence[HistoryChange]) -> list[EnvironmentView]:
    out = [EnvironmentView(_text(cls), _build_text(b), _build_text(a), _text(detail), n)
           for cls, b, a, detail, n in timeline.environment_entries(changes)]
    return sorted(out, key=lambda e: (e.machine_class, e.after))


# --------------------------------------------------------------------------------------
# Model and benchmark pages
# --------------------------------------------------------------------------------------

def _chart_point(p: SeriesPoint) -> ChartPoint:
    samples = [v for v in p.samples if plottable(v) is not None]
    return ChartPoint(plottable(p.median), min(samples) if samples else None,
                      max(samples) if samples else None, STATUS_TONE[p.status])


# The tooltip of each status colour of a chart.
_TONE_TITLES = {"good": "ok", "bad": "incorrect or failing", "warn": "not run",
                "muted": "skipped or unsupported"}


def _chart(s: Series, changes: Sequence[HistoryChange]) -> Markup:
    kind = s.key.kind
    first = s.points[0].build.position if s.points else 0
    medians = [p.median for p in s.points if math.isfinite(p.median)]
    return history_chart(
        [_chart_point(p) for p in s.points], status_titles=_TONE_TITLES,
        marks=[_mark(c, c.after.position - first) for c in changes],
        y_labels=(_quantity(max(medians), kind) if medians else "",
                  _quantity(min(medians), kind) if medians else ""),
        x_labels=(s.points[0].build.label, s.points[-1].build.label) if s.points else ("", ""),
        label=f"{_kind_title(kind)} of {s.key.benchmark} on {s.key.machine_class}")


def _section(cls: str, series: list[Series], by_series: dict[Any, list[HistoryChange]],
             page: str, sights: dict[Any, str]) -> SectionView:
    series = sorted(series, key=lambda s: _kind_order(s.key.kind))
    charts = [ChartView(_kind_title(s.key.kind), _chart(s, by_series.get(
        s.key, [])), [_change_view(c, page) for c in by_series.get(s.key, [])],
        sights.get(s.key, "")) for s in series]
    by_build: dict[int, dict[Kind | None, SeriesPoint]] = {}
    builds: dict[int, StoredBuild] = {}
    for s in series:
        for p in s.points:
            by_build.setdefault(p.build.position, {})[s.key.kind] = p
            builds[p.build.position] = p.build
    events: dict[int, list[str]] = {}
    for s in series:
        for c in by_series.get(s.key, []):
            events.setdefault(c.after.position, []).append(
                f"{_kind_title(s.key.kind)}: {historytext.change_what(c)}")
    lines = []
    newest = max(by_build, default=0)
    for pos in sorted(by_build, reverse=True):
        if pos <= newest - _TABLE_BUILDS and pos not in events:
            continue
        points = by_build[pos]
        main = points.get(Kind.TIME) or next(iter(points.values()))
        b = builds[pos]
        lines.append(BuildLine(
            _text(b.label), b.short_commit, _date(b),
            [_point_text(points[s.key.kind], s.key.kind) if s.key.kind in points else ""
             for s in series],
            str(main.status), STATUS_TONE[main.status],
            _text("; ".join(dict.fromkeys(events.get(pos, []))))))
    note = (f"The newest {_TABLE_BUILDS} builds, and every older one where something "
            f"changed; the charts show all {len(by_build)}." if len(lines) < len(by_build)
            else f"All {len(by_build)} builds.")
    return SectionView(_text(cls), charts, [_kind_title(s.key.kind) for s in series], lines,
                       note)


def _model_row(s: Series, changes: Sequence[HistoryChange], page: str) -> ModelBenchmarkRow:
    first = s.points[0].build.position if s.points else 0
    last = s.points[-1] if s.points else None
    spark = sparkline([plottable(p.median) for p in s.points],
                      width=160, marks=[_mark(c, c.after.position - first) for c in changes],
                      label=f"run time of {s.key.benchmark}")
    return ModelBenchmarkRow(
        _text(s.key.benchmark), page, _text(s.key.machine_class), _text(s.key.tool),
        _text(s.key.task), _text(s.key.config), spark,
        _marked(_quantity(last.median, Kind.TIME), last) if last else "-",
        str(last.status if last else CellStatus.NOT_RUN),
        STATUS_TONE[last.status if last else CellStatus.NOT_RUN], len(changes))


def _pages_of_benchmarks(all_series: Sequence[Series], by_series: dict[Any, list[HistoryChange]],
                         sights: dict[Any, str]) -> tuple[dict[str, ModelView], dict[str, BenchmarkView]]:
    by_page: dict[str, dict[str, list[Series]]] = {}
    compiles: dict[tuple[str, str], Series] = {}
    for s in all_series:
        if s.key.kind is Kind.COMPILE:
            compiles[(s.key.machine_class, s.key.benchmark)] = s
        else:
            by_page.setdefault(s.key.benchmark, {}).setdefault(s.key.machine_class, []).append(s)
    models: dict[str, list[ModelBenchmarkRow]] = {}
    benchmarks: dict[str, BenchmarkView] = {}
    for bench, per_class in sorted(by_page.items()):
        page = _benchmark_href(bench)
        sections = []
        model = ""
        for cls, series in sorted(per_class.items()):
            key = series[0].key
            model = key.model
            compile_series = compiles.get((cls, key.cell))
            shown = series + ([compile_series] if compile_series is not None else [])
            sections.append(_section(cls, shown, by_series, "../" + page, sights))
            for s in series:
                if s.key.kind is Kind.TIME:
                    models.setdefault(model, []).append(
                        _model_row(s, by_series.get(s.key, []), "../" + page))
        benchmarks[page] = BenchmarkView(_text(f"kscperf: {bench}"), "../", _text(bench),
                                         _text(model), "../" + _model_href(model), sections)
    model_views = {_model_href(m): ModelView(_text(f"kscperf: {m}"), "../", _text(m), rows)
                   for m, rows in models.items()}
    return model_views, benchmarks


def _model_index(all_series: Sequence[Series], open_changes: Sequence[HistoryChange]
                 ) -> list[ModelRow]:
    tools: dict[str, dict[str, None]] = {}
    tasks: dict[str, dict[str, None]] = {}
    count: dict[str, set[str]] = {}
    for s in all_series:
        if s.key.kind is not Kind.TIME:
            continue
        tools.setdefault(s.key.model, {})[s.key.tool] = None
        tasks.setdefault(s.key.model, {})[s.key.task] = None
        count.setdefault(s.key.model, set()).add(s.key.benchmark)
    opened: dict[str, int] = {}
    for c in open_changes:
        opened[c.key.model] = opened.get(c.key.model, 0) + 1
    return [ModelRow(_text(m), _model_href(m), _text(" ".join(tools[m])),
                     _text(" ".join(tasks[m])), len(count[m]), opened.get(m, 0))
            for m in sorted(count)]


def build_views(store: HistoryStore, *, min_effect: float = stats.DEFAULT_MIN_EFFECT,
                generated: str | None = None) -> Any:
    """The view-model of every page of the dashboard of `store` (front page, model pages,
    benchmark pages). Every string in it is plain text for the templates to escape;
    charts are `Markup` built from numbers and escaped names."""
    all_series = list(store.series())
    changes = find_changes(store, min_effect=min_effect, series=all_series,
                           per_series_environment=True)
    by_series: dict[Any, list[HistoryChange]] = {}
    for c in changes:
        by_series.setdefault(c.key, []).append(c)
    generated = generated or datetime.datetime.now().isoformat(timespec="seconds")
    still_open = open_changes(changes)
    builds = store.builds()
    classes = []
    count: dict[str, int] = {}
    for cls in store.machine_classes():
        mine = [b for b in builds if b.machine_class == cls]
        count[cls] = len(mine)
        classes.append(ClassView(_text(cls), len(mine), _build_text(mine[0]),
                                 _build_text(mine[-1])))
    groups = summarize_groups(all_series, count)
    ran = timeline.tools_that_ran(groups)
    summary = [_summary_row(g) for g in groups if ran[(g.machine_class, g.tool)]]
    steps = detectable_steps(store, all_series)
    sights = {k: historytext.sight_text(d, min_effect) for k, d in steps.items()}
    models, benchmarks = _pages_of_benchmarks(all_series, by_series, sights)
    for (bench, cls), view in timeline.timelines(store, all_series).items():
        benchmarks[_benchmark_href(bench)].sections[:] = [
            replace(x, timeline=view) if x.machine_class == _text(cls) else x
            for x in benchmarks[_benchmark_href(bench)].sections]
    index = IndexView(
        title="kscperf dashboard", generated=generated, root="", store=_text(store.root),
        classes=classes, summary=summary,
        changes=[_change_view(c, _benchmark_href(c.key.benchmark if c.key.kind is not Kind.COMPILE
                                                 else _first_config(c, all_series)),
                              expanded=c.is_regression and i < _EXPANDED_CHANGES,
                              explain=True)
                 for i, c in enumerate(still_open)],
        environment=_environment_events(changes), models=_model_index(all_series, still_open),
        too_noisy=historytext.too_noisy_text(steps.values(), min_effect),
        not_run=[_text(line) for line in timeline.not_run_lines(ran)])
    return _Pages(index, models, with_compile_tables(benchmarks, builds, _TABLE_BUILDS))


def _first_config(c: HistoryChange, all_series: Iterable[Series]) -> str:
    """The benchmark page that shows a cell's compile time: its first config's."""
    for s in all_series:
        if s.key.kind is Kind.TIME and s.key.cell == c.key.cell and \
                s.key.machine_class == c.key.machine_class:
            return s.key.benchmark
    return c.key.benchmark


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------

# The folders of the dashboard's own pages: a rebuild into the same folder removes the
# pages of benchmarks and models that no longer exist there, and nothing else.
_PAGE_FOLDERS = ("models", "benchmarks")


def write_dashboard(store: HistoryStore, output: str, *,
                    min_effect: float = stats.DEFAULT_MIN_EFFECT) -> str:
    """Write the dashboard of `store` into the folder `output` (made when missing; pages of
    an earlier dashboard there are replaced, and its pages of models and benchmarks the
    store no longer has are removed) and return the front page's path. Each page is
    written atomically. Raises KscperfError when `output` is a file."""
    if os.path.exists(output) and not os.path.isdir(output):
        raise KscperfError(f"{output} is a file; the dashboard is a folder of pages, so give "
                           "-o a folder (new or an earlier dashboard's).")
    pages = build_views(store, min_effect=min_effect)
    env = jinja_environment()
    try:
        for sub in _PAGE_FOLDERS:
            os.makedirs(os.path.join(output, sub), exist_ok=True)
    except OSError as exc:
        raise KscperfError(f"cannot write the dashboard to {output}: "
                           f"{exc.strerror or exc}.") from None
    template = env.get_template("dashboard_model.html.j2")
    for href, model in pages.models.items():
        write_text_atomic(os.path.join(output, href), template.render(view=model), "the dashboard")
    template = env.get_template("dashboard_benchmark.html.j2")
    for href, bench in pages.benchmarks.items():
        write_text_atomic(os.path.join(output, href), template.render(view=bench), "the dashboard")
    front = os.path.join(output, "index.html")
    write_text_atomic(front, env.get_template("dashboard_index.html.j2").render(
        view=pages.index, op_header=OP_HEADER), "the dashboard")
    _remove_stale_pages(output, {*pages.models, *pages.benchmarks})
    return front


def _remove_stale_pages(output: str, written: set[str]) -> None:
    """Remove the pages under the dashboard's own folders that this build did not write."""
    for sub in _PAGE_FOLDERS:
        for name in os.listdir(os.path.join(output, sub)):
            href = f"{sub}/{name}"
            if name.endswith(".html") and href not in written:
                try:
                    os.unlink(os.path.join(output, href))
                except OSError:
                    pass  # a page left behind is stale, not wrong: never fail the build
