"""matplotlib figures rendered to SVG text, for the HTML report.

Owns drawing only: every number plotted (medians, spreads, speedups, ratios, intervals) is
computed by the caller with `stats`/`compare` and handed over in plain dataclasses.

Output is made to be inlined into one HTML page and to be byte-for-byte reproducible:
- text stays text (`svg.fonttype = none`), which matplotlib's SVG writer XML-escapes, so a
  model named `<script>` is shown, not run; every `$` in a caller's string is escaped, so a
  name is never parsed as mathtext (which would also fail on an odd number of `$`);
- no date and no creator in the metadata, a fixed `svg.hashsalt`, and every `id` prefixed
  with the caller's key so that several figures in one page never share an id;
- `check_svg` verifies that a string is such an `<svg>` element and nothing else (no script,
  no event handler, no external reference) before the report marks it safe.

matplotlib is imported lazily (it costs ~0.3 s) and only through `Figure` objects, never
pyplot's global state; the Agg backend is selected explicitly unless the host program has
already chosen one for pyplot.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from kscperf.views.style import PALETTE, Tone

__all__ = [
    "Series",
    "Panel",
    "Bar",
    "RatioPoint",
    "plot_time_vs_size",
    "plot_speedups",
    "plot_ratios",
    "plot_history",
    "check_svg",
]

# Colours per tool come from matplotlib's tab10 cycle in the order tools are given; the
# verdict colours match the report's CSS.
_HIGHLIGHT = PALETTE[Tone.BAD]

_RC = {
    "svg.fonttype": "none",
    "text.usetex": False,
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "legend.fontsize": 8.0,
    "figure.dpi": 72.0,
}


@dataclass(frozen=True)
class Series:
    """One line: `y` against `x` (NaN leaves a gap), with an optional band [`low`, `high`]
    per point, drawn emphasised when `highlight`."""

    label: str
    x: Sequence[float]
    y: Sequence[float]
    low: Sequence[float] | None = None
    high: Sequence[float] | None = None
    highlight: bool = False
    colour_index: int = 0


@dataclass(frozen=True)
class Panel:
    """One set of axes of a multi-panel figure. With `x_log` False, x values are positions
    0..n-1 labelled by `x_tick_labels`."""

    title: str
    series: Sequence[Series]
    x_label: str = ""
    y_label: str = ""
    x_log: bool = True
    y_log: bool = True
    x_tick_labels: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True)
class Bar:
    """One bar of a grouped bar chart: `value` of `series` in `group`; NaN draws no bar but a
    "n/a" mark, so a missing or incorrect result never looks like a small one."""

    group: str
    series: str
    value: float


@dataclass(frozen=True)
class RatioPoint:
    """One benchmark's NEW/BASE ratio with its interval; `tone` picks the colour (bad for
    worse, good for better, neutral for the same)."""

    label: str
    ratio: float
    low: float
    high: float
    tone: Tone = Tone.NEUTRAL


def _text(label: object) -> str:
    """A caller's string as matplotlib must get it to show it literally."""
    # Mathtext stays on for matplotlib's own log-axis tick labels; escaping "$" keeps it
    # away from names.
    return str(label).replace("$", r"\$")


# Tick positions offered on ratio axes, so that they read 0.9x, 1x, 1.1x rather than
# powers of ten; the set is chosen by how wide the range is.
_RATIO_TICKS_FINE = (0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3,
                     1.4, 1.5)
_RATIO_TICKS_MEDIUM = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 1.75, 2.0, 2.5)
_RATIO_TICKS_COARSE = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0,
                       100.0, 200.0, 500.0, 1000.0)


def _ratio_axis(ax: Any, which: str, values: Sequence[float]) -> None:
    """Make `ax`'s `which` ("x" or "y") axis a log ratio axis: ticks such as 0.9x, 1x, 1.1x
    and limits that hold `values` and 1."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    # Always show at least 0.95x..1.05x, so that one value (or none) does not leave
    # matplotlib a degenerate range to pad as it likes.
    low, high = min(finite + [1.0 / 1.05]) / 1.03, max(finite + [1.05]) * 1.03
    if which == "x":
        ax.set_xscale("log")
        ax.set_xlim(low, high)
        axis = ax.xaxis
    else:
        ax.set_yscale("log")
        ax.set_ylim(low, high)
        axis = ax.yaxis
    spread = high / low
    ticks = (_RATIO_TICKS_FINE if spread <= 1.35 else
             _RATIO_TICKS_MEDIUM if spread <= 3.0 else _RATIO_TICKS_COARSE)
    # Ticks outside the view limits are simply not drawn.
    axis.set_major_locator(FixedLocator(list(ticks)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


def _seconds_text(v: float, _pos: object = None) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if v >= scale or unit == "ns":
            return f"{v / scale:g} {unit}"
    return f"{v:g} s"


def _count_text(v: float, _pos: object = None) -> str:
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= scale:
            return f"{v / scale:g}{suffix}"
    return f"{v:g}"


def _plain_log_axis(axis: Any, formatter: Any) -> None:
    """Label a log axis's decades in plain text. matplotlib's default labels are mathtext,
    which is slow to lay out and reads worse than "10 ms"."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10.0))
    axis.set_major_formatter(FuncFormatter(formatter))
    # Minor ticks at 2 and 5 only: every tick is an object to lay out, and the default
    # eight per decade made drawing several times slower.
    axis.set_minor_locator(LogLocator(base=10.0, subs=(2.0, 5.0)))
    axis.set_minor_formatter(NullFormatter())


def _matplotlib() -> Any:
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        # Nothing here needs a GUI; Agg never opens a window or needs a display.
        matplotlib.use("Agg")
    return matplotlib


def _text_width_in(labels: Sequence[str], points: float = 9.0) -> float:
    """A generous estimate of the widest label's width in inches (DejaVu Sans averages
    under 0.65 em per character)."""
    longest = max((len(label) for label in labels), default=0)
    return longest * 0.65 * points / 72.0


def _new_figure(axes_width_in: float, axes_height_in: float, *, columns: int = 1,
                left: float = 0.85, right: float = 0.2, top: float = 0.45,
                bottom: float = 0.5, gap: float = 0.0) -> tuple[Any, list[Any]]:
    """A figure with `columns` axes of the given size side by side and fixed margins in
    inches. Margins are computed from the labels rather than left to a layout engine:
    matplotlib's constrained layout draws every figure twice and tripled the time a report
    took."""
    from matplotlib.figure import Figure

    width = left + right + columns * axes_width_in + (columns - 1) * gap
    height = top + bottom + axes_height_in
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=left / width, right=1.0 - right / width, top=1.0 - top / height,
                        bottom=bottom / height, wspace=gap / axes_width_in if columns > 1 else 0)
    axes = list(fig.subplots(1, columns, squeeze=False)[0])
    return fig, axes


def _suptitle(fig: Any, title: str) -> None:
    fig.suptitle(_text(title), x=0.01, ha="left", y=0.995, va="top", fontsize=10, wrap=True)


# An SVG as matplotlib writes it is tags and text between them; names from files only ever
# appear in the text (XML-escaped, so it holds no "<"). Everything below that rewrites or
# checks markup therefore looks at tags only: a model called `a onload=b` is text, not an
# attribute.
_TOKEN = re.compile(r"<!--.*?-->|<[^>]*>", re.S)
_ID = re.compile(r'\bid="([^"]+)"')
_HREF = re.compile(r'href="#([^"]+)"')
_URL_REF = re.compile(r"url\(#([^)]+)\)")
_KEY_OK = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def _map_tags(svg: str, rewrite: Callable[[str], str]) -> str:
    return _TOKEN.sub(lambda m: rewrite(m.group(0)), svg)


def _prefix_ids(svg: str, prefix: str) -> str:
    def rewrite(tag: str) -> str:
        tag = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', tag)
        tag = _HREF.sub(lambda m: f'href="#{prefix}-{m.group(1)}"', tag)
        return _URL_REF.sub(lambda m: f"url(#{prefix}-{m.group(1)})", tag)

    return _map_tags(svg, rewrite)


@contextlib.contextmanager
def _style(key: str) -> Iterator[None]:
    """The rcParams of every figure, in force while it is built and saved (font sizes are
    fixed when an artist is created), and nowhere else."""
    if not _KEY_OK.match(key):
        raise ValueError(f"figure key {key!r} must be a letter then letters, digits, - or _")
    matplotlib = _matplotlib()
    with matplotlib.rc_context({**_RC, "svg.hashsalt": f"kscperf-{key}"}):
        yield


def _render(fig: Any, key: str) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg",
                metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    start = text.find("<svg")
    if start < 0:
        raise RuntimeError("matplotlib produced no <svg> element")
    # The XML prolog and DOCTYPE mean nothing inside HTML; the <metadata> block is empty
    # once Date and Creator are gone.
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", text[start:], count=1, flags=re.S)
    return check_svg(_prefix_ids(svg.strip(), key))


# Checked in tags (and in the CSS of <style>), never in text.
_FORBIDDEN = (
    re.compile(r"<\s*/?\s*(script|foreignObject|iframe|object|embed|image|a|animate\w*|set)\b",
               re.I),
    re.compile(r"<!", re.I),  # comments, DOCTYPE, ENTITY, CDATA: matplotlib writes none
    re.compile(r"<\?", re.I),
    re.compile(r"\son[a-z]+\s*=", re.I),
    re.compile(r"javascript:", re.I),
    re.compile(r"href\s*=\s*[\"'](?!#)", re.I),
    re.compile(r"url\(\s*(?!#)", re.I),
    re.compile(r"@import|expression\s*\(", re.I),
)
_STYLE = re.compile(r"<style\b[^>]*>(.*?)</style>", re.S | re.I)


def check_svg(svg: str) -> str:
    """Return `svg` unchanged if it is one `<svg>` element as this module renders it: it
    starts with `<svg`, ends with `</svg>`, and no tag is a script, foreign object,
    embedded document, animation, comment or declaration, or carries an event handler or a
    reference outside the SVG; nor does its CSS. Text between tags is not inspected: the
    SVG writer has escaped it, and it may say anything. Raise ValueError otherwise. The
    report calls this before marking an SVG safe to inline."""
    stripped = svg.strip()
    if not (stripped.startswith("<svg") and stripped.endswith("</svg>")):
        raise ValueError("not a single <svg> element")
    tags = [m.group(0) for m in _TOKEN.finditer(stripped)]
    if sum(1 for t in tags if re.match(r"<\s*svg\b", t, re.I)) != 1:
        raise ValueError("nested or several <svg> elements")
    markup = tags + _STYLE.findall(stripped)
    for pattern in _FORBIDDEN:
        for piece in markup:
            found = pattern.search(piece)
            if found:
                raise ValueError(f"SVG contains forbidden markup {found.group(0)!r}")
    return svg


def _finite(values: Sequence[float] | None) -> bool:
    return values is not None and any(
        isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def _colour(index: int) -> str:
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf", "#d62728"]
    return palette[index % len(palette)]


def _legend(ax: Any, handles: list[Any], labels: list[str], *, outside: bool = False) -> None:
    if not handles:
        return
    # Explicit labels: matplotlib silently drops automatic labels that start with "_",
    # and a tool may well be called "_experimental". A fixed location: "best" tries many.
    if outside:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  frameon=False, borderaxespad=0.0)
    else:
        ax.legend(handles, labels, loc="upper left", frameon=True, framealpha=0.8)


def _plot_time_vs_size(title: str, panels: Sequence[Panel], *, key: str) -> str:
    n = max(1, len(panels))
    rotated = [t for p in panels if not p.x_log for t in p.x_tick_labels]
    bottom = 0.55 + (0.5 * _text_width_in(rotated) if rotated else 0.0)
    fig, axes = _new_figure(3.0, 2.4, columns=n, left=0.95, top=0.65, bottom=bottom,
                            gap=0.85)
    _suptitle(fig, title)
    for ax, panel in zip(axes, panels):
        handles, labels = [], []
        for s in panel.series:
            if not _finite(s.y):
                continue
            colour = _colour(s.colour_index)
            (line,) = ax.plot(list(s.x), list(s.y), marker="o", markersize=3, color=colour,
                              linewidth=2.0 if s.highlight else 1.2)
            if _finite(s.low) and _finite(s.high):
                ax.fill_between(list(s.x), list(s.low), list(s.high),  # type: ignore[arg-type]
                                color=colour, alpha=0.2, linewidth=0)
            handles.append(line)
            labels.append(_text(s.label))
        if panel.x_log:
            ax.set_xscale("log")
            _plain_log_axis(ax.xaxis, _count_text)
        else:
            ax.set_xticks(range(len(panel.x_tick_labels)))
            ax.set_xticklabels([_text(t) for t in panel.x_tick_labels], rotation=30,
                               ha="right")
            ax.set_xlim(-0.5, max(0.5, len(panel.x_tick_labels) - 0.5))
        if panel.y_log and handles:
            ax.set_yscale("log")
            _plain_log_axis(ax.yaxis, _seconds_text)
        ax.set_title(_text(panel.title))
        ax.set_xlabel(_text(panel.x_label))
        ax.set_ylabel(_text(panel.y_label))
        ax.grid(True, which="major", alpha=0.3)
        if not handles:
            ax.text(0.5, 0.5, "no correct timings", ha="center", va="center",
                    transform=ax.transAxes)
        _legend(ax, handles, labels)
    return _render(fig, key)


def _plot_speedups(title: str, bars: Sequence[Bar], *, key: str, y_label: str = "") -> str:
    groups: list[str] = []
    series: list[str] = []
    for b in bars:
        if b.group not in groups:
            groups.append(b.group)
        if b.series not in series:
            series.append(b.series)
    values = {(b.group, b.series): b.value for b in bars}
    width = 0.8 / max(1, len(series))
    fig, (ax,) = _new_figure(max(2.5, 0.35 * len(groups) * max(1, len(series))), 2.2,
                             right=0.7 + _text_width_in([_text(s) for s in series], 8.0),
                             bottom=0.45 + 0.5 * _text_width_in(groups))
    _suptitle(fig, title)
    finite = [v for v in values.values() if math.isfinite(v) and v > 0]
    # Bars grow from 1 (as fast as the reference) up or down, on a log scale, so 2x faster
    # and 2x slower look the same size.
    for j, name in enumerate(series):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(groups))]
        ys = [values.get((g, name), math.nan) for g in groups]
        heights = [y - 1.0 if math.isfinite(y) and y > 0 else 0.0 for y in ys]
        ax.bar(xs, heights, width, bottom=1.0, color=_colour(j))
        for x, y in zip(xs, ys):
            if not (math.isfinite(y) and y > 0):
                ax.text(x, 1.0, "n/a", ha="center", va="bottom", rotation=90, fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([_text(g) for g in groups], rotation=30, ha="right")
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylabel(_text(y_label))
    _ratio_axis(ax, "y", finite)
    ax.grid(True, axis="y", alpha=0.3)
    from matplotlib.patches import Patch

    handles = [Patch(color=_colour(j)) for j in range(len(series))]
    _legend(ax, handles, [_text(name) for name in series], outside=True)
    return _render(fig, key)


def _plot_ratios(title: str, points: Sequence[RatioPoint], *, min_effect: float,
                 key: str) -> str:
    fig, (ax,) = _new_figure(5.0, max(0.6, 0.2 * len(points)),
                             left=0.3 + _text_width_in([_text(p.label) for p in points]),
                             top=0.4, bottom=0.6)
    _suptitle(fig, title)
    ax.axvspan(1.0 / (1.0 + min_effect), 1.0 + min_effect, color="#eceff1", zorder=0)
    ax.axvline(1.0, color="black", linewidth=0.8)
    extent: list[float] = [1.0 / (1.0 + min_effect), 1.0 + min_effect]
    for i, p in enumerate(points):
        y = len(points) - 1 - i
        colour = PALETTE.get(p.tone, PALETTE[Tone.NEUTRAL])
        if not (math.isfinite(p.ratio) and p.ratio > 0):
            ax.text(1.0, y, "n/a", ha="center", va="center", fontsize=7)
            continue
        extent.append(p.ratio)
        if math.isfinite(p.low) and math.isfinite(p.high) and p.low > 0:
            extent += [p.low, p.high]
            ax.errorbar([p.ratio], [y], xerr=[[p.ratio - p.low], [p.high - p.ratio]],
                        fmt="o", color=colour, markersize=4, capsize=2, linewidth=1)
        else:
            ax.plot([p.ratio], [y], "o", color=colour, markersize=4)
    ax.set_yticks(range(len(points)))
    ax.set_yticklabels([_text(p.label) for p in reversed(points)])
    ax.set_ylim(-0.7, max(0.7, len(points) - 0.3))
    _ratio_axis(ax, "x", extent)
    ax.set_xlabel("NEW / BASE (left of 1: faster or smaller)")
    ax.grid(True, axis="x", alpha=0.3)
    return _render(fig, key)


def _plot_history(title: str, builds: Sequence[str], series: Sequence[Series], *, key: str,
                  y_label: str = "") -> str:
    legend_labels = [f"{_text(s.label)} (regression)" for s in series if s.highlight]
    legend_labels += [_text(s.label) for s in series if not s.highlight]
    fig, (ax,) = _new_figure(max(3.0, 0.7 * len(builds)), 2.4, left=0.75, top=0.4,
                             right=0.7 + _text_width_in(legend_labels, 8.0),
                             bottom=0.35 + 0.5 * _text_width_in([_text(b) for b in builds]))
    _suptitle(fig, title)
    handles, labels = [], []
    seen_colours: set[int] = set()
    every_y: list[float] = []
    for s in sorted(series, key=lambda s: s.highlight):
        if not _finite(s.y):
            continue
        every_y += list(s.y)
        if s.highlight:
            (line,) = ax.plot(list(s.x), list(s.y), color=_HIGHLIGHT, linewidth=2.2,
                              marker="o", markersize=4, zorder=3)
            handles.append(line)
            labels.append(f"{_text(s.label)} (regression)")
        else:
            (line,) = ax.plot(list(s.x), list(s.y), color=_colour(s.colour_index),
                              linewidth=1.0, marker="o", markersize=2.5, alpha=0.7)
            if s.colour_index not in seen_colours:
                seen_colours.add(s.colour_index)
                handles.append(line)
                labels.append(_text(s.label))
    ax.set_xticks(range(len(builds)))
    ax.set_xticklabels([_text(b) for b in builds], rotation=30, ha="right")
    ax.set_xlim(-0.3, max(0.3, len(builds) - 0.7))
    _ratio_axis(ax, "y", every_y)
    ax.set_ylabel(_text(y_label))
    ax.grid(True, alpha=0.3)
    _legend(ax, handles, labels, outside=True)
    return _render(fig, key)


def plot_time_vs_size(title: str, panels: Sequence[Panel], *, key: str) -> str:
    """Time against config size, one panel per task and one line per tool, each with its
    spread as a shaded band; log-log unless a panel says otherwise. `key` (a letter, then
    letters, digits, "-" or "_"; unique within a page) prefixes every id. Returns checked
    SVG."""
    with _style(key):
        return _plot_time_vs_size(title, panels, key=key)


def plot_speedups(title: str, bars: Sequence[Bar], *, key: str, y_label: str = "") -> str:
    """A grouped bar chart (groups on x, one bar per series in the order first seen) on a
    log scale, bars growing from 1; a NaN bar is drawn as "n/a". Returns checked SVG."""
    with _style(key):
        return _plot_speedups(title, bars, key=key, y_label=y_label)


def plot_ratios(title: str, points: Sequence[RatioPoint], *, min_effect: float,
                key: str) -> str:
    """NEW/BASE ratios with their intervals as horizontal error bars, one row per benchmark,
    a line at 1 and the band of no change (within `min_effect`) shaded; points without a
    finite ratio are marked "n/a". Returns checked SVG."""
    with _style(key):
        return _plot_ratios(title, points, min_effect=min_effect, key=key)


def plot_history(title: str, builds: Sequence[str], series: Sequence[Series], *, key: str,
                 y_label: str = "") -> str:
    """One line per series across builds (x = position of the build, labelled with its
    name) on a log ratio scale; highlighted series drawn thick in red on top and named in
    the legend, the others coloured by `colour_index` and named once per colour. Returns
    checked SVG."""
    with _style(key):
        return _plot_history(title, builds, series, key=key, y_label=y_label)
