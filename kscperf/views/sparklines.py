"""Tiny inline SVG charts drawn straight from numbers, for pages that show thousands of
series (the dashboard): a sparkline of one value per build, and a history chart with each
build's spread, change points, environment marks and status.

matplotlib takes tens of milliseconds a figure; these take microseconds, and a sparkline is
a few hundred bytes. Every string placed in the SVG goes through `markupsafe.escape`; the
rest is numbers formatted here, so the result is safe to insert into a page as is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from markupsafe import Markup, escape

from kscperf.views.style import PALETTE

__all__ = ["TONE_COLOURS", "plottable", "Mark", "ChartPoint", "sparkline", "history_chart"]

# Colours by tone: `style.PALETTE`, which the stylesheets use too.
TONE_COLOURS: dict[str, str] = {str(tone): colour for tone, colour in PALETTE.items()}


# Beyond this magnitude a chart's scale (the range of its values, padded) overflows a float:
# such a value (a broken clock, a corrupt file) is left out of the line, not drawn as "nan".
_PLOTTABLE_LIMIT = 1e300


def plottable(value: float | None) -> float | None:
    """`value` when a chart can draw it, else None (a gap in the line)."""
    if value is None or not math.isfinite(value) or abs(value) > _PLOTTABLE_LIMIT:
        return None
    return value


@dataclass(frozen=True)
class Mark:
    """A vertical mark between build `position - 1` and `position` (a change point or an
    environment change), coloured by `tone`, with a tooltip `title`."""

    position: int
    tone: str
    title: str = ""


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def _scale(values: Sequence[float | None], lows: Sequence[float | None] = (),
           highs: Sequence[float | None] = ()) -> tuple[float, float]:
    usable = [float(v) for v in (*values, *lows, *highs) if v is not None and math.isfinite(v)]
    if not usable:
        return 0.0, 1.0
    low, high = min(usable), max(usable)
    if high == low:
        pad = abs(high) * 0.05 or 1.0
        return low - pad, high + pad
    pad = (high - low) * 0.08
    return low - pad, high + pad


def _y_of(low: float, high: float, top: float, span: float) -> Callable[[float | None],
                                                                       float | None]:
    """The y coordinate of a value on a vertical scale from `low` (at top + span) to `high`
    (at top); None for a missing value."""

    def y(v: float | None) -> float | None:
        if v is None or not math.isfinite(v):
            return None
        return top + span - (v - low) / (high - low) * span

    return y


def _path(points: Sequence[tuple[float, float | None]]) -> str:
    """An SVG path through the points, broken where a value is missing."""
    parts: list[str] = []
    pen_up = True
    for x, y in points:
        if y is None:
            pen_up = True
            continue
        parts.append(f"{'M' if pen_up else 'L'}{x:.1f} {y:.1f}")
        pen_up = False
    return "".join(parts)


def sparkline(values: Sequence[float | None], *, width: int = 120, height: int = 24,
              marks: Sequence[Mark] = (), label: str = "") -> Markup:
    """One value per build as a line (gaps where a value is None or not finite), the last
    value as a dot, and `marks` as vertical ticks. `label` is the accessible name."""
    n = len(values)
    low, high = _scale(values)
    step = (width - 4) / max(n - 1, 1)

    y = _y_of(low, high, 2, height - 4)
    points = [(2 + i * step, y(v)) for i, v in enumerate(values)]
    out = [f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} '
           f'{height}" role="img" aria-label="{escape(label)}">']
    for m in marks:
        x = 2 + (m.position - 0.5) * step
        out.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height}" stroke="'
                   f'{TONE_COLOURS.get(m.tone, "#999")}" stroke-width="1"><title>'
                   f'{escape(m.title)}</title></line>')
    out.append(f'<path d="{_path(points)}" fill="none" stroke="#1565c0" stroke-width="1.2"/>')
    last = next(((x, v) for x, v in reversed(points) if v is not None), None)
    if last is not None:
        out.append(f'<circle cx="{last[0]:.1f}" cy="{last[1]:.1f}" r="2" fill="#1565c0"/>')
    out.append("</svg>")
    return Markup("".join(out))


@dataclass(frozen=True)
class ChartPoint:
    """One build of a history chart: the median, the lowest and highest sample (the
    build's spread) and the tone of its status."""

    median: float | None
    low: float | None
    high: float | None
    tone: str


def history_chart(points: Sequence[ChartPoint], *, marks: Sequence[Mark] = (),
                  y_labels: tuple[str, str] = ("", ""), x_labels: tuple[str, str] = ("", ""),
                  width: int = 760, height: int = 170, label: str = "",
                  status_titles: Mapping[str, str] | None = None) -> Markup:
    """A series over its builds: each build's spread as a whisker, the medians as a line,
    `marks` as vertical lines, a status square per build along the bottom (coloured by
    tone, with `status_titles[tone]` as the tooltip), the y range (`y_labels`: top, bottom)
    and the first and last build (`x_labels`) as text."""
    status_titles = status_titles or {}
    left, right, top, bottom = 70, 10, 8, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(points)
    low, high = _scale([p.median for p in points], [p.low for p in points],
                       [p.high for p in points])
    step = plot_w / max(n - 1, 1)

    def x(i: float) -> float:
        return left + i * step

    y = _y_of(low, high, top, plot_h)
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} '
           f'{height}" role="img" aria-label="{escape(label)}">',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" '
           'stroke="#ddd"/>']
    for m in marks:
        dash = ' stroke-dasharray="4 3"' if m.tone == "env" else ""
        out.append(f'<line x1="{x(m.position - 0.5):.1f}" y1="{top}" x2="{x(m.position - 0.5):.1f}"'
                   f' y2="{top + plot_h}" stroke="{TONE_COLOURS.get(m.tone, "#999")}" '
                   f'stroke-width="1.5"{dash}><title>{escape(m.title)}</title></line>')
    # One path for all whiskers and one per status colour: a year of builds in a few
    # kilobytes (an element per build made a store's site 160 MB).
    whiskers = []
    squares: dict[str, list[str]] = {}
    side = max(2.0, min(6.0, step - 1))
    for i, p in enumerate(points):
        y_low, y_high = y(p.low), y(p.high)
        if y_low is not None and y_high is not None:
            whiskers.append(f"M{x(i):.1f} {y_low:.1f}V{y_high:.1f}")
        squares.setdefault(p.tone, []).append(
            f"M{x(i) - side / 2:.1f} {top + plot_h + 4}h{side:.1f}v6h{-side:.1f}z")
    if whiskers:
        out.append(f'<path d="{"".join(whiskers)}" stroke="#90a4ae" fill="none"/>')
    for tone, shapes in sorted(squares.items()):
        out.append(f'<path d="{"".join(shapes)}" fill="{TONE_COLOURS.get(tone, "#999")}">'
                   f'<title>{escape(status_titles.get(tone, tone))}</title></path>')
    out.append(f'<path d="{_path([(x(i), y(p.median)) for i, p in enumerate(points)])}" '
               'fill="none" stroke="#1565c0" stroke-width="1.5"/>')
    out += [f'<text x="{left - 4}" y="{top + 10}" text-anchor="end">{escape(y_labels[0])}</text>',
            f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end">{escape(y_labels[1])}'
            '</text>',
            f'<text x="{left}" y="{height - 4}">{escape(x_labels[0])}</text>',
            f'<text x="{width - right}" y="{height - 4}" text-anchor="end">'
            f'{escape(x_labels[1])}</text>', "</svg>"]
    return Markup("".join(out))
