"""The HTML report: a view-model built from loaded results (and their comparison), rendered
with the Jinja2 templates in `templates/` into one self-contained HTML document.

Owns the shape of the report and the choice of what is shown where. Every statistic comes
from `stats`/`compare`, every number is turned into text by `formatting`, every figure is
drawn by `plots`; the templates only place strings. Jinja2 runs with autoescaping, so every
name from a definition or a results file is escaped; the only markup inserted as is, the
SVG figures, passes `plots.check_svg` first, and matplotlib escapes the text inside them.

The page needs nothing but itself: CSS and SVG are inline, there is no script, and it names
no external resource, so it opens from disk with no network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from kscperf.stats import core as stats
from kscperf.views import formatting, plots
from kscperf.compare.builds import (
    Comparison,
    ComparisonRow,
    Verdict,
    compare_builds,
    refuse_incomparable,
)
from kscperf.compare.compilestats import cell_panels
from kscperf.errors import TIMED_STATUSES, CellStatus, KscperfError
from kscperf.names import BenchmarkName, Kind
from kscperf.results.fileio import write_text_atomic
from kscperf.results.files import LoadedResults
from kscperf.results.metadata import REPORT_KEYS
from kscperf.views.compileview import ChangeRow, PanelRow, change_rows, panel_rows
from kscperf.views.explaintext import OP_HEADER, CodeView, code_views, explanation_title, \
    op_cells
from kscperf.views.reportsummary import RunSummary, run_summary
from kscperf.views.style import STATUS_TONE, VERDICT_TONE, Tone, jinja_environment, templates_dir
from kscperf.results.samples import (
    REFERENCE_TOOL,
    BuildRow,
    BuildSamples,
    CellView,
    build_samples,
    odd_value_count,
    summarize_build,
)

__all__ = [
    "TEMPLATE_NAME",
    "templates_dir",
    "ReportView",
    "build_report_view",
    "render_report",
    "write_report",
]

TEMPLATE_NAME = "report.html.j2"

# The correctness badge of an ok cell; any other status is shown as it reads everywhere.
_PASSED_BADGE = "pass"


@dataclass(frozen=True)
class EnvRow:
    """One metadata key and its value in each build; `differs` when they are not all one."""

    key: str
    values: list[str]
    differs: bool


@dataclass(frozen=True)
class BuildHeader:
    """A build's label, file and what the reader must know about it (incomplete, plain)."""

    name: str
    path: str
    notes: list[str]


@dataclass(frozen=True)
class Figure:
    """A caption and its checked SVG."""

    title: str
    svg: Any  # markupsafe.Markup of a checked SVG element


@dataclass(frozen=True)
class CellRow:
    """One tool's line in a model table; the first line of a task/config group carries the
    rowspan of the group."""

    task: str
    config: str
    group_size: int
    first_of_group: bool
    tool: str
    time: str
    spread: str
    speedup: str
    badge: str
    badge_class: str
    badge_detail: str
    badge_note: str
    compile: str
    prep: str
    peak_rss: str
    peak_cuda: str
    row_class: str
    machine_mark: str = ""
    instructions: str = "—"


@dataclass(frozen=True)
class ModelSection:
    """One model's table of the shown build and its figures."""

    anchor: str
    name: str
    rows: list[CellRow]
    figures: list[Figure]
    machine_note: str = ""
    compile_panel: list[PanelRow] = field(default_factory=list)
    # Whether any of its cells has instruction counts (run --instructions): the column.
    counted: bool = False


@dataclass(frozen=True)
class PlainRow:
    """One benchmark of a plain pyperf file."""

    name: str
    median: str
    spread: str
    n_values: str


@dataclass(frozen=True)
class CompareRow:
    """One `ComparisonRow` as text."""

    verdict: str
    verdict_class: str
    name: str
    kind: str
    base: str
    new: str
    ratio: str
    interval: str
    p_value: str
    q_value: str
    detectable: str
    status: str
    regression: bool = False
    # A run-time regression's op diff (--explain): its title and first ops, as text.
    ops_title: str = ""
    ops: list[list[str]] = field(default_factory=list)


@dataclass(frozen=True)
class GeoRow:
    """One geometric mean of NEW/BASE as text."""

    label: str
    ratio: str
    interval: str
    n: str


@dataclass(frozen=True)
class ComparisonSection:
    """The comparison of the last two builds as text, counts and figures."""

    base: str
    new: str
    criteria: str
    regression: bool
    counts: list[tuple[str, str, str]]  # (verdict, css class, count)
    warnings: list[str]
    machine: list[str]  # what the canaries say about the two runs' machines
    rows: list[CompareRow]
    geomeans: list[GeoRow]
    figures: list[Figure]
    compile_changes: list[ChangeRow] = field(default_factory=list)
    code: list[CodeView] = field(default_factory=list)  # compiled cells' generated code


@dataclass(frozen=True)
class HistorySection:
    """Every build in the order given, and one history figure per model and task."""

    builds: list[str]
    base: str
    new: str
    figures: list[Figure]


@dataclass(frozen=True)
class ReportView:
    """Everything the template shows, as strings, flags and checked SVG."""

    title: str
    shown_build: str
    builds: list[BuildHeader]
    environment: list[EnvRow]
    models: list[ModelSection]
    plain_rows: list[PlainRow]
    comparison: ComparisonSection | None
    history: HistorySection | None
    notes: list[str] = field(default_factory=list)
    several_builds: bool = False  # then the keys that differ are shown, the rest folded
    summary: RunSummary | None = None  # what the shown build's run found, first


def _safe_svg(svg: str) -> Any:
    from markupsafe import Markup

    return Markup(plots.check_svg(svg))


# ------------------------------------------------------------------------------ tables

def _env_value(value: Any) -> str:
    if value is None:
        return ""
    return formatting.safe_text(value)


def _environment(results: Sequence[LoadedResults]) -> list[EnvRow]:
    # REPORT_KEYS first, in their order; any others follow alphabetically.
    keys = [k for k in REPORT_KEYS if any(k in r.metadata for r in results)]
    extra = sorted({str(k) for r in results for k in r.metadata} - set(keys))
    rows = []
    for key in keys + extra:
        values = [_env_value(r.metadata.get(key)) for r in results]
        rows.append(EnvRow(formatting.safe_text(key), values, len(set(values)) > 1))
    return rows


def _build_headers(results: Sequence[LoadedResults]) -> list[BuildHeader]:
    headers = []
    for r in results:
        notes = []
        if not r.complete:
            notes.append("incomplete: the run was interrupted; missing cells are not failures")
        if not r.has_kscperf:
            notes.append("plain pyperf file: run times only, no correctness or memory")
        headers.append(BuildHeader(formatting.safe_text(r.build), formatting.safe_text(r.path),
                                   notes))
    return headers


def _check_detail(view: CellView) -> str:
    c = view.check
    if view.status in TIMED_STATUSES and c is not None:
        text = (f"{c.what}: max abs err {c.max_abs_err:.3g}, max rel err {c.max_rel_err:.3g} "
                f"(rtol {c.rtol:.3g}, atol {c.atol:.3g})" + (f"; {c.detail}" if c.detail else ""))
        return formatting.safe_text(text)
    return formatting.safe_text(view.reason)


def _cell_row(row: BuildRow, tool: str, view: CellView, first: bool, size: int) -> CellRow:
    badge = (_PASSED_BADGE if view.status is CellStatus.OK
             else formatting.STATUS_MARKS[view.status])
    badge_class = STATUS_TONE[view.status].value
    timed = view.status in TIMED_STATUSES and view.n_values > 0
    time_text = formatting.format_seconds(view.median_s) if timed else "—"
    spread_text = f"± {formatting.format_seconds(view.spread_s)}" if timed else ""
    # `summarize_build` leaves the speedup NaN for anything not ok, so an incorrect or
    # failed cell can never show as fast.
    speedup_text = (f"{view.speedup:.2f}x" if math.isfinite(view.speedup) else "—")
    rss = view.peak_rss_bytes
    cuda = view.peak_cuda_bytes
    detail = _check_detail(view)
    return CellRow(
        task=formatting.safe_text(row.task), config=formatting.config_text(row.config),
        group_size=size, first_of_group=first, tool=formatting.safe_text(tool),
        time=time_text, spread=spread_text, speedup=speedup_text, badge=badge,
        badge_class=badge_class, badge_detail=detail,
        badge_note=detail if view.status is not CellStatus.OK else "",
        compile=formatting.format_seconds(view.compile_s),
        prep=formatting.format_seconds(view.prep_s),
        peak_rss=formatting.format_bytes(rss) if rss else "—",
        peak_cuda=formatting.format_bytes(cuda) if cuda else "—",
        row_class=badge_class if badge_class != "good" else "",
        machine_mark=formatting.MACHINE_STATE_MARK if timed and view.odd_processes else "",
        instructions=(f"{formatting.format_count(view.instructions)} "
                      f"± {formatting.format_count(view.instructions_spread)}"
                      if math.isfinite(view.instructions) else "—"))


def _model_rows(tools: list[str], rows: list[BuildRow]) -> list[CellRow]:
    out = []
    for row in rows:
        present = [t for t in tools if t in row.cells]
        for i, tool in enumerate(present):
            out.append(_cell_row(row, tool, row.cells[tool], i == 0, len(present)))
    return out


# ------------------------------------------------------------------------------ figures

def _time_figure(model: str, tools: list[str], rows: list[BuildRow], key: str) -> Figure:
    panels = []
    for task in dict.fromkeys(r.task for r in rows):
        task_rows = [r for r in rows if r.task == task and r.config is not None]
        configs = [str(r.config) for r in task_rows]
        numels = [next((v.numel for v in r.cells.values() if v.numel), None) for r in task_rows]
        # Log-log against size only when every config has one; otherwise configs are
        # shown in their definition order on a linear axis.
        sizes = [float(n) for n in numels if n is not None]
        by_size = bool(numels) and len(sizes) == len(numels)
        xs = sizes if by_size else [float(i) for i in range(len(configs))]
        series = []
        for t_index, tool in enumerate(tools):
            y, low, high = [], [], []
            for r in task_rows:
                view = r.cells.get(tool)
                if view is None or view.status is not CellStatus.OK or not view.n_values:
                    y.append(math.nan)
                    low.append(math.nan)
                    high.append(math.nan)
                else:
                    y.append(view.median_s)
                    low.append(max(view.median_s - view.spread_s, view.median_s * 0.01))
                    high.append(view.median_s + view.spread_s)
            series.append(plots.Series(formatting.safe_text(tool), xs, y, low, high,
                                       colour_index=t_index))
        panels.append(plots.Panel(formatting.safe_text(task), series,
                                  x_label="elements" if by_size else "config",
                                  y_label="seconds per call", x_log=by_size,
                                  x_tick_labels=() if by_size else [
                                      formatting.safe_text(c) for c in configs]))
    # Names reach matplotlib through safe_text too: a control character in a label would
    # land raw in the SVG (and in matplotlib's missing-glyph warning on the terminal).
    model = formatting.safe_text(model)
    title = f"{model}: time against config size (median, band: ± MAD; correct cells only)"
    return Figure(f"{model}: time against config size",
                  _safe_svg(plots.plot_time_vs_size(title, panels, key=key)))


def _speedup_figure(model: str, tools: list[str], rows: list[BuildRow], key: str
                    ) -> Figure | None:
    if REFERENCE_TOOL not in tools:
        return None
    others = [t for t in tools if t != REFERENCE_TOOL]
    if not others:
        return None
    bars = []
    for task in dict.fromkeys(r.task for r in rows):
        for tool in others:
            speedups = [r.cells[tool].speedup for r in rows
                        if r.task == task and tool in r.cells]
            bars.append(plots.Bar(formatting.safe_text(task), formatting.safe_text(tool),
                                  stats.geometric_mean(speedups)))
    model = formatting.safe_text(model)
    title = f"{model}: speedup over {REFERENCE_TOOL} (geometric mean over correct configs)"
    return Figure(f"{model}: speedup over {REFERENCE_TOOL}",
                  _safe_svg(plots.plot_speedups(title, bars, key=key,
                                                y_label=f"speedup over {REFERENCE_TOOL}")))


def _models(results: LoadedResults, build: BuildSamples,
            summary: tuple[list[str], list[BuildRow]], figure_prefix: str) -> list[ModelSection]:
    tools, rows = summary
    panels = cell_panels(results.runs)
    sections = []
    for i, model in enumerate(dict.fromkeys(r.model for r in rows)):
        model_rows = [r for r in rows if r.model == model]
        figures = [_time_figure(model, tools, model_rows, f"{figure_prefix}{i}-time")]
        speed = _speedup_figure(model, tools, model_rows, f"{figure_prefix}{i}-speedup")
        if speed is not None:
            figures.append(speed)
        sections.append(ModelSection(
            f"model-{i}", formatting.safe_text(model), _model_rows(tools, model_rows), figures,
            formatting.machine_state_note(odd_value_count(model_rows), build.odd_processes),
            panel_rows([p for p in panels if p.model == model]),
            counted=any(math.isfinite(v.instructions) for r in model_rows
                        for v in r.cells.values())))
    return sections


def _plain_rows(build: BuildSamples) -> list[PlainRow]:
    return [PlainRow(formatting.safe_text(b.name), formatting.format_seconds(b.central),
                     f"± {formatting.format_seconds(b.spread)}", str(len(b.values)))
            for b in build.benchmarks.values()]


# ------------------------------------------------------------------------------ comparison

def _ratio_tone(verdict: Verdict) -> Tone:
    tone = VERDICT_TONE[verdict]
    # A ratio is drawn worse or better only with such a verdict; anything else is the same.
    return tone if tone in (Tone.BAD, Tone.GOOD) else Tone.NEUTRAL


# The ops a regression opens with in the report.
REPORT_OPS = 5


def _compare_row(r: ComparisonRow, comparison: Comparison) -> CompareRow:
    status = formatting.status_text(r.base_status, r.new_status, r.reason, arrow="→")
    explained = comparison.explanation(r.name) if r.is_regression else None
    return CompareRow(
        ops_title=formatting.safe_text(explanation_title(explained)) if explained else "",
        ops=[[formatting.safe_text(c) for c in op_cells(o)]
             for o in explained.ops[:REPORT_OPS]] if explained else [],
        verdict=formatting.verdict_text(r), verdict_class=VERDICT_TONE[r.verdict].value,
        regression=r.is_regression,
        name=formatting.safe_text(r.name), kind=r.kind,
        base=formatting.format_quantity(r.base_value, r.unit),
        new=formatting.format_quantity(r.new_value, r.unit),
        ratio=formatting.format_ratio(r.ratio),
        interval=formatting.format_interval(r.ratio_low, r.ratio_high),
        p_value=formatting.format_p(r.p_value), q_value=formatting.format_p(r.q_value),
        detectable=formatting.format_percent(r.min_detectable_effect),
        status=formatting.safe_text(status))


def _ratio_figures(comparison: Comparison) -> list[Figure]:
    models: dict[str, list[ComparisonRow]] = {}
    for r in comparison.rows:
        if r.kind is Kind.TIME and r.verdict not in (Verdict.NEW, Verdict.MISSING):
            models.setdefault(r.model, []).append(r)
    figures = []
    for i, (model, rows) in enumerate(sorted(models.items())):
        rows = sorted(rows, key=lambda r: (r.tool, r.task, r.config))
        points = [plots.RatioPoint(
            formatting.safe_text(f"{r.tool}/{r.task}/{r.config}" if r.model else r.name),
            r.ratio, r.ratio_low, r.ratio_high,
            _ratio_tone(r.verdict)) for r in rows]
        label = formatting.safe_text(model or "benchmarks")
        title = (f"{label}: run time NEW/BASE with "
                 f"{formatting.format_confidence(comparison.alpha)} intervals")
        figures.append(Figure(f"{label}: NEW/BASE", _safe_svg(plots.plot_ratios(
            title, points, min_effect=comparison.min_effect, key=f"ratio{i}"))))
    return figures


def _comparison_section(comparison: Comparison) -> ComparisonSection:
    counts: dict[Verdict, int] = {}
    for r in comparison.rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    warnings = [f"compared despite {formatting.safe_text(d)}"
                for d in comparison.ignored_differences]
    for side in (comparison.base, comparison.new):
        if not side.complete:
            warnings.append(f"{formatting.safe_text(side.path)} is incomplete")
    geomeans = [GeoRow(formatting.safe_text(formatting.geomean_label(g)),
                       formatting.format_ratio(g.ratio), formatting.format_interval(g.low, g.high),
                       str(g.n)) for g in comparison.geomeans]
    criteria = formatting.comparison_criteria(comparison)
    return ComparisonSection(
        base=formatting.safe_text(comparison.base.build),
        new=formatting.safe_text(comparison.new.build), criteria=criteria,
        regression=comparison.has_regression,
        counts=[(v.value, VERDICT_TONE[v].value, str(counts[v])) for v in Verdict if v in counts],
        warnings=warnings, rows=[_compare_row(r, comparison) for r in comparison.rows],
        machine=[formatting.safe_text(line) for line in formatting.machine_lines(comparison.machine)],
        geomeans=geomeans, figures=_ratio_figures(comparison),
        compile_changes=change_rows(comparison.compile_changes),
        code=code_views(comparison.code_diffs))


# ------------------------------------------------------------------------------ history

def _relative_medians(name: str, per_build: list[BuildSamples]) -> list[float]:
    """The central time of benchmark `name` in each build over that in the first build that
    has one; NaN where a build has no correct timing of it (only those are drawn)."""
    medians = []
    for build in per_build:
        b = build.benchmarks.get(name)
        ok = b is not None and b.status is CellStatus.OK and b.has_values
        medians.append(b.central if b is not None and ok else math.nan)
    first = next((m for m in medians if math.isfinite(m)), math.nan)
    return [m / first if math.isfinite(m) and first > 0 else math.nan for m in medians]


def _history_section(results: Sequence[LoadedResults], comparison: Comparison
                     ) -> HistorySection:
    per_build = [build_samples(r) for r in results]
    parts: dict[str, BenchmarkName] = {}
    for build in per_build:
        for b in build.of_kind(Kind.TIME):
            parts.setdefault(b.name, b.parts)
    regressions = {r.name for r in comparison.regressions if r.kind is Kind.TIME}
    groups: dict[tuple[str, str], list[str]] = {}
    for name, p in parts.items():
        groups.setdefault((p.model, p.task), []).append(name)
    tools = list(dict.fromkeys(p.tool for p in parts.values()))
    figures = []
    builds = [r.build for r in results]
    for i, ((model, task), members) in enumerate(groups.items()):
        series = []
        for name in members:
            p = parts[name]
            highlighted = name in regressions
            if not model:
                label = name
            else:
                label = f"{p.tool}/{p.config}" if highlighted else p.tool
            series.append(plots.Series(formatting.safe_text(label), list(range(len(results))),
                                       _relative_medians(name, per_build),
                                       highlight=highlighted, colour_index=tools.index(p.tool)))
        group_label = formatting.safe_text(f"{model} / {task}" if model else "benchmarks")
        title = f"{group_label}: median time relative to its first build"
        figures.append(Figure(group_label, _safe_svg(plots.plot_history(
            title, [formatting.safe_text(b) for b in builds], series, key=f"history{i}",
            y_label="time / first build"))))
    return HistorySection([formatting.safe_text(b) for b in builds],
                          formatting.safe_text(comparison.base.build),
                          formatting.safe_text(comparison.new.build), figures)


# ------------------------------------------------------------------------------ entry points

def build_report_view(results: Sequence[LoadedResults], comparison: Comparison | None = None,
                      *, force: bool = False) -> ReportView:
    """The report's view-model. With two or more builds and no `comparison`, the last two
    are compared (`compare_builds(results[-2], results[-1], ...)`); with three or more,
    history lines cover all builds in the order given. Raises KscperfError for no builds,
    or for builds that may not be compared with the last one (different machines, torch
    versions or profiles) unless `force`; a `comparison` handed in vouches for its own
    pair."""
    if not results:
        raise KscperfError("a report needs at least one results file.")
    notes: list[str] = []
    if len(results) >= 2:
        last = results[-1]
        for earlier in results[:-1]:
            # A comparison handed in was already allowed (or forced) by whoever made it;
            # every other build of the history is judged here.
            judged = comparison is not None and earlier is results[-2]
            differences = refuse_incomparable(earlier, last, force=force or judged,
                                              what="report")
            notes += [f"{formatting.safe_text(earlier.path)} differs from "
                      f"{formatting.safe_text(last.path)}: {formatting.safe_text(d)}"
                      for d in differences]
        if comparison is None:
            comparison = compare_builds(results[-2], last, force=force)
    shown = results[-1]
    shown_samples = build_samples(shown)
    summary = summarize_build(shown, shown_samples) if shown.has_kscperf else None
    models = _models(shown, shown_samples, summary, "m") if summary is not None else []
    plain_rows = [] if shown.has_kscperf else _plain_rows(shown_samples)
    history = (_history_section(results, comparison)
               if comparison is not None and len(results) >= 3 else None)
    return ReportView(
        title=formatting.safe_text(f"kscperf report: {shown.build}"),
        shown_build=formatting.safe_text(shown.build),
        builds=_build_headers(results), environment=_environment(results),
        models=models, plain_rows=plain_rows,
        comparison=_comparison_section(comparison) if comparison is not None else None,
        history=history, notes=notes, several_builds=len(results) > 1,
        summary=run_summary(shown, summary) if summary is not None else None)


def render_report(results: Sequence[LoadedResults], comparison: Comparison | None = None,
                  *, force: bool = False) -> str:
    """One self-contained HTML document for `results` (see `build_report_view` for what is
    compared): environment of each build, per-model tables and figures of the last build,
    the comparison of the last two builds and the history of all of them. Deterministic:
    the same inputs give the same bytes."""
    view = build_report_view(results, comparison, force=force)
    template = jinja_environment().get_template(TEMPLATE_NAME)
    return template.render(view=view, op_header=OP_HEADER)


def write_report(path: str, html: str) -> None:
    """Write `html` to `path` atomically; KscperfError when it cannot be written."""
    write_text_atomic(path, html, "the report")
