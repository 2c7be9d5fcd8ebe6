"""The progress lines of a run for people: one after each worker, one every few seconds
while a worker runs, and the looks of `ab --until-resolved`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kscperf.errors import CellStatus
from kscperf.names import split_device
from kscperf.views.formatting import format_interval, format_percent, format_ratio
from kscperf.views.textunits import format_seconds, safe_text

if TYPE_CHECKING:
    from kscperf.orchestrator.resolve import Look

__all__ = ["format_progress", "format_running", "format_look"]

# What each phase a worker notes reads as in a progress line.
_PHASE_WORDS = {"import": "importing", "configs": "making configs", "compile": "compiling",
                "prep": "getting ready", "check": "checking",
                "run": "timing", "recheck": "checking again", "explain": "profiling its ops",
                "teardown": "tearing down"}


def format_progress(p: Any, label: str) -> str:
    """The line after a worker ended (`schedule.Progress`; `label` the build's in
    lockstep, else ""): done of total, ETA, cell, process, status, wall time, and the
    reason of a status that is not ok."""
    eta = f" ETA {format_seconds(p.eta_s)}" if p.eta_s is not None and p.done < p.total else ""
    status = p.result.worst_status()
    reason = ""
    if status is not CellStatus.OK:
        bad = next((c for c in p.result.configs if c.status == status), None)
        reason = (": " + (bad.reason if bad else p.result.reason))[:160]
    wall = f" {format_seconds(p.result.wall_s)}" if p.result.wall_s else ""
    prefix = f"{label}: " if label else ""
    return safe_text(f"[{p.done}/{p.total}{eta}] {prefix}{p.cell.name} "
                     f"#{p.process_index + 1} {status.value}{wall}{reason}")


def format_running(r: Any) -> str:
    """The line while a worker runs (`heartbeat.Running`): its phase and config."""
    what = _PHASE_WORDS.get(r.phase, r.phase or "starting")
    if r.phase == "prep" and split_device(r.cell.tool)[0] == "compiled":
        what = "compiling"  # torch.compile compiles each new config on its first call
    where = f" config {r.config}" + (f" ({r.position})" if r.position else "") \
        if r.config else ""
    eta = f" ETA {format_seconds(r.eta_s)}" if r.eta_s is not None else ""
    return safe_text(f"[{r.done}/{r.total}{eta}] {r.cell.name} #{r.process_index + 1} "
                     f"running {format_seconds(r.running_s)}: {what}{where}")


def format_look(look: Look) -> str:
    """One look of `ab --until-resolved` (`kscperf.orchestrator.resolve.Look`) as progress lines: how
    many benchmarks are resolved, the time left, then each open one with its ratio, its
    interval, its pairs and the detectable effect they reached."""
    if look.next_pairs:
        then = f"next round {look.next_pairs} pair{'s' if look.next_pairs != 1 else ''}"
    elif look.open:
        then = "the budget allows no further pair: stopping"
    else:
        then = "all resolved: stopping"
    lines = [f"until resolved: {look.resolved} of {look.benchmarks} benchmarks resolved, "
             f"{format_seconds(look.time_left_s)} of {format_seconds(look.budget_s)} "
             f"left; {then}"]
    lines += [safe_text(f"  open {b.name} {format_ratio(b.ratio)} "
                        f"{format_interval(b.low, b.high)} after {b.pairs} pairs "
                        f"(detectable {format_percent(b.detectable)})") for b in look.open]
    return "\n".join(lines)
