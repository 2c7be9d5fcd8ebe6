"""How results look: one tone per status and per verdict, one palette, and the one Jinja
environment of the report and the dashboard.

Every coloured thing (the report's badges and figures, the dashboard's cells, sparklines
and charts) takes its colour from `PALETTE` through a `Tone`; the templates get the same
palette as CSS custom properties (`palette_css`), so a colour is defined once.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

from kscperf.errors import CellStatus, KscperfError
from kscperf.stats.verdicts import Verdict

__all__ = ["Tone", "PALETTE", "STATUS_TONE", "VERDICT_TONE", "change_tone", "palette_css",
           "templates_dir", "jinja_environment"]


class Tone(enum.StrEnum):
    """What a colour says; also the CSS class of a coloured element."""

    GOOD = "good"
    BAD = "bad"
    WARN = "warn"
    MUTED = "muted"
    NEUTRAL = "neutral"
    ENV = "env"


PALETTE = {
    Tone.BAD: "#c62828",
    Tone.GOOD: "#2e7d32",
    Tone.WARN: "#ef6c00",
    Tone.MUTED: "#78909c",
    Tone.NEUTRAL: "#607d8b",
    Tone.ENV: "#6a1b9a",
}

STATUS_TONE = {
    CellStatus.OK: Tone.GOOD,
    CellStatus.INCORRECT: Tone.BAD,
    CellStatus.FAILED: Tone.BAD,
    CellStatus.TIMEOUT: Tone.BAD,
    CellStatus.CRASHED: Tone.BAD,
    CellStatus.OOM: Tone.BAD,
    CellStatus.SKIPPED: Tone.MUTED,
    CellStatus.UNSUPPORTED: Tone.MUTED,
    CellStatus.NOT_RUN: Tone.WARN,
}

VERDICT_TONE = {
    Verdict.FAILING_NOW: Tone.BAD, Verdict.INCORRECT_NOW: Tone.BAD, Verdict.SLOWER: Tone.BAD,
    Verdict.MACHINE_SHIFT: Tone.WARN, Verdict.MISSING: Tone.WARN, Verdict.SAME: Tone.NEUTRAL,
    Verdict.NEW: Tone.NEUTRAL, Verdict.FIXED: Tone.GOOD, Verdict.FASTER: Tone.GOOD,
}


def change_tone(kind: str, is_regression: bool) -> Tone:
    """The tone of a history change of `kind` ("slower", "faster", "environment",
    "status")."""
    if kind == "environment":
        return Tone.ENV
    if is_regression:
        return Tone.BAD
    return Tone.GOOD if kind in ("faster", "status") else Tone.WARN


def palette_css() -> str:
    """`PALETTE` as CSS custom properties (`--bad: #c62828; ...`), for the templates."""
    return " ".join(f"--{tone.value}: {colour};" for tone, colour in PALETTE.items())


_MAIN_TEMPLATE = "report.html.j2"


def templates_dir() -> Path:
    """The directory holding the templates: the repository's `templates/` in a source
    checkout or editable install, else `kscperf/templates/` where a wheel puts it. Raises
    KscperfError when neither has the report template."""
    package = Path(__file__).resolve().parents[1]
    candidates = (package.parent / "templates", package / "templates")
    for candidate in candidates:
        if (candidate / _MAIN_TEMPLATE).is_file():
            return candidate
    raise KscperfError(
        f"kscperf's report template {_MAIN_TEMPLATE} is missing (looked in "
        f"{', '.join(str(c) for c in candidates)}); reinstall kscperf.")


def jinja_environment() -> Any:
    """The Jinja environment of every page: the templates folder, autoescaping (every name
    from a definition or a results file is escaped), undefined names as errors, and
    `palette_css` as a global."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.globals["palette_css"] = palette_css()
    return env
