"""How a worker ended, as a `CellResult`: its own result file when it wrote one, else a
status (`timeout`, `oom`, `crashed`) with the phase and config it died in, the tail of its
stderr, and every config it finished before that. Never imports torch and never prints."""

from __future__ import annotations

import dataclasses
import json
import os
import signal

from kscperf.errors import CellStatus
from kscperf.orchestrator.launch import LaunchOutcome
from kscperf.spec import CellResult, CellSpec, partial_result_path, phase_path

__all__ = ["STDERR_TAIL_CHARS", "classify_outcome", "skipped_result"]

STDERR_TAIL_CHARS = 600

# Statuses whose reason gains the tail of the worker's stderr: the exception often says
# less than the worker printed (a compiler's log).
_TAILED = frozenset({CellStatus.FAILED, CellStatus.OOM, CellStatus.CRASHED, CellStatus.TIMEOUT})


def _tail(log_path: str) -> str:
    try:
        with open(log_path, "rb") as fp:
            fp.seek(0, os.SEEK_END)
            fp.seek(max(0, fp.tell() - 4 * STDERR_TAIL_CHARS))
            text = fp.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    tail = " | ".join(lines[-6:])
    return tail[-STDERR_TAIL_CHARS:]


def _with_tail(reason: str, log_path: str) -> str:
    tail = _tail(log_path)
    return f"{reason}; stderr: {tail}" if tail else reason


def _read_result(path: str) -> tuple[CellResult | None, str]:
    if not os.path.exists(path):
        return None, ""
    try:
        with open(path, encoding="utf-8") as fp:
            return CellResult.from_dict(json.load(fp)), ""
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"the worker wrote an unreadable result ({type(exc).__name__})"


def read_phase(result_path: str) -> tuple[str, str, str]:
    """The phase a worker last noted, its config and the config's place ("2 of 3"); empty
    strings for what it has not noted (or a worker that noted nothing yet)."""
    try:
        with open(phase_path(result_path), encoding="utf-8") as fp:
            lines = fp.read().split("\n")
    except OSError:
        return "", "", ""
    lines += ["", "", ""]
    return lines[0].strip(), lines[1].strip(), lines[2].strip()


def _last_phase(result_path: str) -> tuple[str, str]:
    phase, config, _ = read_phase(result_path)
    return phase, config


def _insert_where(reason: str, where: str) -> str:
    head, sep, tail = reason.partition("; stderr: ")
    return f"{head}{where}{sep}{tail}"


def skipped_result(spec: CellSpec, reason: str) -> CellResult:
    """The result of a cell skipped by the plan, which no worker runs."""
    return CellResult.for_spec(spec, CellStatus.SKIPPED, reason, "plan", wall_s=0.0)


def classify_outcome(spec: CellSpec, outcome: LaunchOutcome, result_path: str, log_path: str,
                     timeout_s: float | None, max_rss_bytes: int | None) -> CellResult:
    """The result of the worker that ran `spec` and ended as `outcome`: the one it wrote,
    with its stderr's tail added to failures; or, when it wrote none or was killed, what
    killed it, where, and the configs it finished."""
    result, unreadable = _read_result(result_path)
    if result is None or outcome.timed_out:
        partial, _ = _read_result(partial_result_path(result_path))
        abnormal = _abnormal_result(spec, outcome, timeout_s, max_rss_bytes, unreadable,
                                    partial)
        abnormal = dataclasses.replace(abnormal, reason=_with_tail(abnormal.reason, log_path))
        phase, config = _last_phase(result_path)
        where = (f", in the {phase} phase" + (f" of config {config}" if config else "")
                 if phase else "")
        return dataclasses.replace(abnormal, phase=phase or "worker",
                                   reason=_insert_where(abnormal.reason, where))
    if result.status in _TAILED:
        result = dataclasses.replace(result, reason=_with_tail(result.reason, log_path))
    if any(c.status in _TAILED for c in result.configs):
        result = dataclasses.replace(result, configs=tuple(
            dataclasses.replace(c, reason=_with_tail(c.reason, log_path))
            if c.status in _TAILED else c for c in result.configs))
    return result


def _abnormal_result(spec: CellSpec, outcome: LaunchOutcome, timeout_s: float | None,
                     max_rss_bytes: int | None, unreadable: str,
                     partial: CellResult | None) -> CellResult:
    """The result of a worker that was killed, crashed or wrote nothing usable, keeping the
    configs it finished before that."""
    kept = {"configs": partial.configs, "compile_s": partial.compile_s,
            "import_s": partial.import_s, "metadata": partial.metadata} if partial else {}
    status, reason = CellStatus.CRASHED, unreadable or (
        f"the worker exited with code {outcome.exit_code} without writing a result")
    if outcome.timed_out:
        status, reason = (CellStatus.TIMEOUT,
                          f"killed with its process group after {timeout_s:g} s (--timeout)")
    elif outcome.over_memory_bytes is not None and outcome.signal is not None:
        status, reason = (CellStatus.OOM, f"killed at {outcome.over_memory_bytes} bytes "
                          f"resident, over --max-rss {max_rss_bytes}")
    elif outcome.signal is not None:
        reason = f"the worker was killed by {_signal_name(outcome.signal)}"
    elif outcome.exit_code is None:
        reason = "the fork server died while running the worker"
    return CellResult.for_spec(spec, status, reason, "worker", wall_s=outcome.wall_s, **kept)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
