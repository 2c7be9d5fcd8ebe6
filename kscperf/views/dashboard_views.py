"""The dashboard's view-model: what each page shows, as plain typed records that the Jinja
templates `templates/dashboard_*.j2` only lay out. Built by `kscperf.views.dashboard`."""

from __future__ import annotations

from dataclasses import dataclass, field

from markupsafe import Markup

from kscperf.views.compileview import CompileHistoryView
from kscperf.views.dashboard_timeline import TimelineView

__all__ = ['MetricView', 'SummaryRow', 'ChangeView', 'EnvironmentView', 'ModelRow', 'ClassView', 'IndexView', 'ModelBenchmarkRow', 'ModelView', 'ChartView', 'BuildLine', 'SectionView', 'BenchmarkView']



@dataclass(frozen=True)
class MetricView:
    """One front-page number: its latest value, the change from the build before, and a
    sparkline over the builds."""

    latest: str
    change: str
    tone: str
    spark: Markup


@dataclass(frozen=True)
class SummaryRow:
    """One tool x task of one machine class on the front page."""

    machine_class: str
    tool: str
    task: str
    speedup: MetricView
    pass_rate: MetricView
    compile: MetricView
    memory: MetricView


@dataclass(frozen=True)
class ChangeView:
    """One change, as text, with links and the commands that confirm it."""

    what: str
    tone: str
    benchmark: str
    kind: str
    machine_class: str
    model: str
    tool: str
    task: str
    href: str
    ratio: str
    interval: str
    before: str
    before_date: str
    after: str
    after_date: str
    compare: str
    ab: str
    bisect: str
    expanded: bool = False
    # Its op diff, where both builds' files carry --explain profiles: title and first ops.
    ops_title: str = ""
    ops: list[list[str]] = field(default_factory=list)


@dataclass(frozen=True)
class EnvironmentView:
    """One environment change of a machine class, over the series it touched."""

    machine_class: str
    before: str
    after: str
    detail: str
    series: int


@dataclass(frozen=True)
class ModelRow:
    """A model in the front page's index."""

    model: str
    href: str
    tools: str
    tasks: str
    benchmarks: int
    open_changes: int


@dataclass(frozen=True)
class ClassView:
    """A machine class: its builds, first and newest."""

    name: str
    builds: int
    first: str
    newest: str


@dataclass(frozen=True)
class IndexView:
    """The front page."""

    title: str
    generated: str
    root: str
    store: str
    classes: list[ClassView]
    summary: list[SummaryRow]
    changes: list[ChangeView]
    environment: list[EnvironmentView]
    models: list[ModelRow]
    too_noisy: str = ""  # how many series cannot see a step of the minimum effect
    not_run: list[str] = field(default_factory=list)  # per class, the tools never run


@dataclass(frozen=True)
class ModelBenchmarkRow:
    """A benchmark on its model's page: the run-time sparkline and the latest build."""

    benchmark: str
    href: str
    machine_class: str
    tool: str
    task: str
    config: str
    spark: Markup
    latest: str
    status: str
    tone: str
    changes: int


@dataclass(frozen=True)
class ModelView:
    """A model's page."""

    title: str
    root: str
    model: str
    rows: list[ModelBenchmarkRow]


@dataclass(frozen=True)
class ChartView:
    """One kind of one benchmark: its history chart and its changes."""

    kind: str
    chart: Markup
    changes: list[ChangeView]
    sight: str = ""  # the smallest step the series could find now, in words


@dataclass(frozen=True)
class BuildLine:
    """One build of a benchmark's table."""

    label: str
    commit: str
    date: str
    values: list[str]
    status: str
    tone: str
    events: str


@dataclass(frozen=True)
class SectionView:
    """One benchmark on one machine class: a chart per kind, a line per build."""

    machine_class: str
    charts: list[ChartView]
    kinds: list[str]
    builds: list[BuildLine]
    table_note: str
    timeline: TimelineView | None = None  # the chained lockstep links, if any


@dataclass(frozen=True)
class BenchmarkView:
    """A benchmark's page."""

    title: str
    root: str
    benchmark: str
    model: str
    model_href: str
    sections: list[SectionView]
    compile: list[CompileHistoryView] = field(default_factory=list)
