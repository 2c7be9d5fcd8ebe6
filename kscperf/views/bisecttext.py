"""`run-benchmarks bisect` for people and programs: the progress line of each step, and
the result as a table, as markdown, or as JSON."""

from __future__ import annotations

import json
import math
from typing import Any

from kscperf.bisect.records import BisectEvent, BisectResult, Culprit, ProbeRecord
from kscperf.stats.bisection import NO_STEP_WITHIN, RULED_OUT_WITHIN
from kscperf.stats.core import INSTRUCTIONS_MIN_EFFECT
from kscperf.views.formatting import format_p, markdown_text
from kscperf.views.textunits import align_columns, format_seconds, safe_text

__all__ = ["format_bisect_event", "format_bisect", "bisect_json"]


def _ratio(r: float) -> str:
    return f"{r:.3f}x" if math.isfinite(r) else "-"


def _interval(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "-"
    return f"[{low:.3f}x, {high:.3f}x]"


def _error(e: float) -> str:
    return "-" if not math.isfinite(e) else ("<0.1%" if e < 0.001 else f"{e * 100:.2g}%")


def format_bisect_event(e: BisectEvent) -> str:
    """One progress line: the step number, stage, commit and its place in the range, the
    pairs and ratio so far, the verdict when done, the step's and the bisect's time."""
    where = f"{e.commit.short} ({e.index} of {e.commits - 1})"
    if e.stage == "build":
        return safe_text(f"[{format_seconds(e.elapsed_s)}] build {where}: {e.verdict} in "
                         f"{format_seconds(e.seconds)}")
    unit = "counting processes" if e.stage == "count" else "pairs"
    so_far = f"{e.pairs} {unit}" + (f", {_ratio(e.ratio)}" if math.isfinite(e.ratio) else "")
    said = f": {e.verdict}" if e.verdict else ""
    return safe_text(f"[{format_seconds(e.elapsed_s)}] {e.stage} {e.step} {where}: {so_far} "
                     f"in {format_seconds(e.seconds)}{said}")


def _culprit_row(c: Culprit) -> list[str]:
    what = c.commits[0].short if not c.is_range else \
        f"{c.commits[0].short}..{c.commits[-1].short} ({len(c.commits)} commits)"
    subject = c.commits[0].subject if not c.is_range else "range: cannot be split"
    return [what, subject[:50], _ratio(c.ratio), _interval(c.ratio_low, c.ratio_high),
            format_p(c.p_value), _error(c.error)]


def _probe_row(p: ProbeRecord) -> list[str]:
    return [p.stage, p.commit.short, p.verdict, _ratio(p.ratio),
            _interval(p.ratio_low, p.ratio_high), str(p.pairs), format_seconds(p.seconds),
            _error(p.error)]


def _headline(r: BisectResult) -> str:
    counts = r.by == "instructions"
    step = (f"{'instruction ' if counts else ''}step {_ratio(r.step.ratio)} "
            f"{_interval(r.step.ratio_low, r.step.ratio_high)} over {r.step.pairs} "
            f"{'counting processes a commit' if counts else 'pairs'}")
    if r.verdict == "not-reproduced":
        shown, none = ((INSTRUCTIONS_MIN_EFFECT, INSTRUCTIONS_MIN_EFFECT) if counts else
                       (NO_STEP_WITHIN, RULED_OUT_WITHIN))
        said = (f"no step of {none * 100:g} % or more" if r.step.verdict == "ruled-out" else
                f"its interval lies neither beyond ±{shown * 100:g} % (a step) nor "
                f"within ±{none * 100:g} % (none)")
        return (f"not-reproduced: {r.good.short}..{r.bad.short} ({r.commits} commits), "
                f"{step}: {said}")
    return f"{r.verdict}: {r.good.short}..{r.bad.short} ({r.commits} commits), {step}"


def _notes(r: BisectResult) -> list[str]:
    notes = []
    if r.verdict != "not-reproduced":
        if not r.culprits:
            notes.append("no culprit held when compared with its parent")
        elif r.not_all_explained:
            notes.append(f"the culprits explain {r.explained * 100:.0f}% of the step"
                         + ("; the search stopped at its probe cap" if r.capped else ""))
        if r.left_unsearched:
            notes.append(f"the culprits explain the step, so {r.left_unsearched} range(s) "
                         "split off by partial probes were left unsearched")
    for c in r.rejected:
        notes.append(f"{c.commits[-1].short} did not hold against its parent "
                     f"{c.parent.short} ({_ratio(c.ratio)})")
    if r.untestable:
        notes.append("untestable: " + ", ".join(f"{c.short} ({why})" for c, why in r.untestable))
    replayed = sum(1 for p in [r.step, *r.probes] if p.replayed)
    compared = (f"{len(r.probes) + 1} comparisons of {r.counting_runs} commits' instruction "
                "counts (one counting run a commit)" if r.by == "instructions" else
                f"{len(r.probes) + 1} lockstep comparisons")
    notes.append(compared + (f" ({replayed} replayed from the state file)" if replayed else "")
                 + f", {r.builds_run} builds run, {format_seconds(r.seconds)}")
    return notes


_CULPRIT_HEAD = ["commit", "subject", "ratio", "interval", "p", "error"]
_PROBE_HEAD = ["stage", "commit", "verdict", "ratio", "interval", "pairs", "time", "error"]


def _markdown(rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(markdown_text(c) for c in cells) + " |"
    return "\n".join([line(rows[0]), line(["---"] * len(rows[0])),
                      *(line(r) for r in rows[1:])])


def format_bisect(result: BisectResult, fmt: str = "table") -> str:
    """`result` as `table` (aligned text), `markdown` or `json` (see `bisect_json`)."""
    if fmt == "json":
        return json.dumps(bisect_json(result), indent=2)
    culprits = [_CULPRIT_HEAD, *(_culprit_row(c) for c in result.culprits)]
    probes = [_PROBE_HEAD, *(_probe_row(p) for p in [result.step, *result.probes])]
    notes = _notes(result)
    if fmt == "markdown":
        parts = [f"**{_headline(result)}**", ""]
        if result.culprits:
            parts += [_markdown(culprits), ""]
        parts += [_markdown(probes), "", *(f"- {n}" for n in notes)]
        return safe_text("\n".join(parts))
    parts = [_headline(result)]
    if result.culprits:
        parts += ["", align_columns(culprits)]
    parts += ["", align_columns(probes), "", *notes]
    return safe_text("\n".join(parts))


def _number(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _culprit_json(c: Culprit) -> dict[str, Any]:
    return {"commit": c.commits[-1].sha, "subject": c.commits[-1].subject,
            "commits": [x.sha for x in c.commits], "parent": c.parent.sha,
            "ratio": _number(c.ratio), "ratio_low": _number(c.ratio_low),
            "ratio_high": _number(c.ratio_high), "p_value": _number(c.p_value),
            "error": _number(c.error), "range": c.is_range}


def bisect_json(r: BisectResult) -> dict[str, Any]:
    """The result as plain JSON data: `verdict`; `good`, `bad`, `commits`; `step` (the
    confirmation); `culprits` (each with `commit`, `subject`, `ratio`, `ratio_low`,
    `ratio_high`, `p_value`, `error`, and `commits`, several for a range); `rejected`;
    `probes` (each with `commit`, `verdict`, `ratio`, `ratio_low`, `ratio_high`, `pairs`,
    `seconds`, `stage` and `error`); `untestable` (commit and reason); `explained`,
    `not_all_explained`, `capped`, `left_unsearched`, `seconds`, `builds_run`,
    `state_file`; `by` (time or instructions) and `counting_runs` (the commits counted)."""
    def probe(p: ProbeRecord) -> dict[str, Any]:
        return {"stage": p.stage, "commit": p.commit.sha, "verdict": p.verdict,
                "ratio": _number(p.ratio), "ratio_low": _number(p.ratio_low),
                "ratio_high": _number(p.ratio_high), "pairs": p.pairs,
                "seconds": round(p.seconds, 3), "error": _number(p.error),
                "replayed": p.replayed}

    return {"verdict": r.verdict, "good": r.good.sha, "bad": r.bad.sha, "commits": r.commits,
            "step": probe(r.step), "culprits": [_culprit_json(c) for c in r.culprits],
            "rejected": [_culprit_json(c) for c in r.rejected],
            "probes": [probe(p) for p in r.probes],
            "untestable": [{"commit": c.sha, "reason": why} for c, why in r.untestable],
            "explained": _number(r.explained), "not_all_explained": r.not_all_explained,
            "capped": r.capped, "left_unsearched": r.left_unsearched,
            "seconds": round(r.seconds, 3), "builds_run": r.builds_run,
            "state_file": r.state_path, "by": r.by, "counting_runs": r.counting_runs}
