"""Launching one worker process and watching it to its end: deadline, memory cap, exit.

Two launchers share one interface (`Launcher`) and one watch loop (`_watch`):

* `ForkLauncher` (default on Linux): a zygote (`python -m kscperf.worker --serve`) imports
  torch once and forks a child per cell. The child is a new process with a copy of a
  pristine interpreter, so no state passes between cells, and it skips torch's import.
* `SpawnLauncher`: `python -m kscperf.worker SPEC RESULT`, a new interpreter per cell.

Every worker runs in its own session (process group), so a timeout kills it and anything
it started, such as compiler worker pools. Never imports torch and never prints.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Protocol, TypeVar

from kscperf.orchestrator.workerenv import python_environment, worker_environment

__all__ = ["LaunchOutcome", "Launcher", "SpawnLauncher", "ForkLauncher", "make_launcher"]

_ZYGOTE_START_TIMEOUT_S = 300.0
# How long the fork server may take to say that a child started, or how it ended once killed.
_ZYGOTE_REPLY_TIMEOUT_S = 60.0
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# How often a worker's memory is read when a cap is set, and how often a spawned worker's
# exit is polled.
_RSS_POLL_S = 0.02
_EXIT_POLL_S = 0.002


@dataclass(frozen=True)
class LaunchOutcome:
    """How a worker process ended: exit code or signal, whether it was killed for time or
    for memory (then the resident bytes seen), its wall time and peak RSS."""

    exit_code: int | None
    signal: int | None
    timed_out: bool
    wall_s: float
    maxrss_kb: int | None = None
    over_memory_bytes: int | None = None


class Launcher(Protocol):
    """Runs `python -m kscperf.worker SPEC RESULT` (or its equivalent) to completion."""

    name: str

    def launch(self, spec_path: str, result_path: str, log_path: str,
               timeout_s: float | None, max_rss_bytes: int | None = None) -> LaunchOutcome:
        """Run one worker; kill its process group past `timeout_s` seconds, or when its
        resident memory goes over `max_rss_bytes`."""
        ...

    def start(self) -> None:
        """Start now what the launcher keeps running between launches (a fork server), which
        the first launch would otherwise start. Never raises: what cannot start is left to
        each launch to report."""
        ...

    def close(self) -> None:
        """Kill a worker still running and stop what the launcher keeps running. Safe to
        call more than once."""
        ...


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fp:
            return int(fp.read().split()[1]) * _PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0


def _decode_status(status: int) -> tuple[int | None, int | None]:
    code = os.waitstatus_to_exitcode(status)
    return (None, -code) if code < 0 else (code, None)


_Ended = TypeVar("_Ended")


def _watch(pid: int, wait_until: Callable[[float | None], _Ended | None],
           deadline: float | None, max_rss_bytes: int | None) -> tuple[_Ended | None, bool,
                                                                      int | None]:
    """Wait for worker `pid` to end, through `wait_until(wake)` (the end, or None when
    `wake` passed first; None as wake means no limit). Returns (end, timed_out,
    over_memory_bytes); the end is None when the deadline passed or memory went over the
    cap first, and the caller then kills the group."""
    while True:
        wake = deadline
        if max_rss_bytes is not None:
            soon = time.perf_counter() + _RSS_POLL_S
            wake = soon if deadline is None else min(deadline, soon)
        ended = wait_until(wake)
        if ended is not None:
            return ended, False, None
        if deadline is not None and time.perf_counter() >= deadline:
            return None, True, None
        if max_rss_bytes is not None:
            rss = _rss_bytes(pid)
            if rss > max_rss_bytes:
                return None, False, rss


class SpawnLauncher:
    """A fresh interpreter per worker, run under `prefix(result path)` when given (a
    counting worker under Valgrind)."""

    name = "spawn"

    def __init__(self, python: str = sys.executable, env: dict[str, str] | None = None,
                 prefix: Callable[[str], list[str]] | None = None) -> None:
        self._python = python
        self._env = env
        # The command the interpreter runs under, given the result path (Valgrind's).
        self._prefix = prefix
        self._current: int | None = None

    def launch(self, spec_path: str, result_path: str, log_path: str,
               timeout_s: float | None, max_rss_bytes: int | None = None) -> LaunchOutcome:
        t0 = time.perf_counter()
        under = self._prefix(result_path) if self._prefix is not None else []
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [*under, self._python, "-m", "kscperf.worker", spec_path, result_path],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                env=worker_environment(self._env))
        self._current = proc.pid

        def reaped(wake: float | None) -> tuple[int, resource.struct_rusage] | None:
            while True:
                pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    return status, rusage
                if wake is not None and time.perf_counter() >= wake:
                    return None
                time.sleep(_EXIT_POLL_S)

        try:
            deadline = None if timeout_s is None else t0 + timeout_s
            ended, timed_out, over = _watch(proc.pid, reaped, deadline, max_rss_bytes)
            if ended is None:
                _kill_group(proc.pid)
                ended = reaped(None)
            assert ended is not None
        except BaseException:
            _kill_group(proc.pid)
            raise
        finally:
            self._current = None
        proc.returncode = 0  # reaped above; stop Popen from reaping again
        _kill_group(proc.pid)  # anything the worker left behind in its group
        status, rusage = ended
        code, sig = _decode_status(status)
        return LaunchOutcome(code, sig, timed_out, time.perf_counter() - t0, rusage.ru_maxrss,
                             over)

    def start(self) -> None:
        """Nothing to start: every launch is a new interpreter."""

    def close(self) -> None:
        if self._current is not None:
            _kill_group(self._current)


class _Lines:
    """Line reads from a pipe with a deadline (select on the raw fd, no hidden buffer)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""

    def read(self, deadline: float | None) -> bytes | None:
        """A line, b"" at end of file, or None when the deadline passed first."""
        while b"\n" not in self._buffer:
            wait = None if deadline is None else max(0.0, deadline - time.perf_counter())
            ready, _, _ = select.select([self._fd], [], [], wait)
            if not ready:
                return None
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return b""
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line


class _ForkServerGone(Exception):
    """The fork server broke its protocol or died while running a worker."""


class ForkLauncher:
    """Workers forked from a zygote that has imported torch but never initialised CUDA.

    If the zygote dies it is restarted at the next launch; a cell whose zygote died under it
    is reported as crashed (an outcome with neither exit code nor signal)."""

    name = "fork"

    def __init__(self, python: str = sys.executable, preload_compilers: bool = True,
                 env: dict[str, str] | None = None) -> None:
        self._python = python
        self._env = env
        # The zygote's own stderr: kept only when it fails to start, to be read. One file
        # per launcher: `ab` runs two zygotes at once.
        fd, self._log_path = tempfile.mkstemp(prefix=f"kscperf-zygote-{os.getpid()}-",
                                              suffix=".log")
        os.close(fd)
        self._serve_args = [] if preload_compilers else ["--no-compilers"]
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: _Lines | None = None
        self._current: int | None = None
        self._fallback: SpawnLauncher | None = None
        self._fallback_reason = ""

    def _start(self) -> None:
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [self._python, "-m", "kscperf.worker", "--serve", *self._serve_args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, start_new_session=True,
                env=worker_environment(self._env))
        assert self._proc.stdout is not None
        self._lines = _Lines(self._proc.stdout.fileno())
        line = self._lines.read(time.perf_counter() + _ZYGOTE_START_TIMEOUT_S)
        if not line or not json.loads(line).get("ready"):
            with open(self._log_path, "rb") as fp:
                tail = fp.read()[-2000:].decode("utf-8", "replace")
            self.close()
            raise RuntimeError(f"the fork server did not start: {tail}")

    def start(self) -> None:
        """Start the zygote now (it is otherwise started by the first launch). One that
        cannot start (a broken torch import, say) must not stop the run: from then on every
        worker is spawned instead, and fails or not on its own."""
        if self._fallback is not None:
            return
        if self._proc is None or self._proc.poll() is not None:
            try:
                self._start()
            except (RuntimeError, OSError, ValueError) as exc:
                self._fallback_reason = f"kscperf: fork server unavailable, spawning: {exc}\n"
                self._fallback = SpawnLauncher(self._python, self._env)

    def launch(self, spec_path: str, result_path: str, log_path: str,
               timeout_s: float | None, max_rss_bytes: int | None = None) -> LaunchOutcome:
        self.start()
        if self._fallback is not None:
            with open(log_path, "ab") as log:
                log.write(self._fallback_reason.encode())
            return self._fallback.launch(spec_path, result_path, log_path, timeout_s,
                                         max_rss_bytes)
        t0 = time.perf_counter()
        try:
            pid = self._request(spec_path, result_path, log_path, t0)
            self._current = pid
            deadline = None if timeout_s is None else t0 + timeout_s
            line, timed_out, over = _watch(pid, self._reply, deadline, max_rss_bytes)
            if line is None:
                _kill_group(pid)
                line = self._reply(time.perf_counter() + _ZYGOTE_REPLY_TIMEOUT_S)
            if line is None:
                raise _ForkServerGone
            done = json.loads(line)
            code, sig = _decode_status(int(done["status"]))
        except (_ForkServerGone, OSError, ValueError, KeyError):
            self.close()
            return LaunchOutcome(None, None, False, time.perf_counter() - t0)
        except BaseException:
            if self._current is not None:
                _kill_group(self._current)
            raise
        finally:
            self._current = None
        _kill_group(pid)  # anything the worker left behind in its group
        return LaunchOutcome(code, sig, timed_out, time.perf_counter() - t0,
                             done.get("maxrss_kb"), over)

    def _request(self, spec_path: str, result_path: str, log_path: str, t0: float) -> int:
        """Ask the zygote for a child; its pid."""
        assert self._proc is not None and self._proc.stdin is not None
        request = {"spec": spec_path, "result": result_path, "log": log_path}
        self._proc.stdin.write((json.dumps(request) + "\n").encode())
        self._proc.stdin.flush()
        started = self._reply(t0 + _ZYGOTE_REPLY_TIMEOUT_S)
        if started is None:
            raise _ForkServerGone
        return int(json.loads(started)["pid"])

    def _reply(self, wake: float | None) -> bytes | None:
        """The zygote's next line, or None when `wake` passed first. A closed pipe means
        the zygote is gone."""
        assert self._lines is not None
        line = self._lines.read(wake)
        if line == b"":
            raise _ForkServerGone
        return line

    def close(self) -> None:
        if self._fallback is not None:
            self._fallback.close()
        if self._current is not None:
            _kill_group(self._current)
        if self._proc is not None:
            try:
                if self._proc.stdin:
                    self._proc.stdin.close()
                self._proc.wait(timeout=5)
            except (subprocess.TimeoutExpired, OSError):
                _kill_group(self._proc.pid)
                self._proc.wait()
            if self._proc.stdout:
                self._proc.stdout.close()
        try:
            os.unlink(self._log_path)
        except OSError:
            pass
        self._proc = None


def make_launcher(isolation: str, preload_compilers: bool = True,
                  python: str = sys.executable, env: dict[str, str] | None = None, *,
                  own_code_only: bool = False) -> Launcher:
    """`fork` where the platform has fork(), else (or on request) `spawn`, of workers run by
    `python` with `env` added to their environment (`own_code_only`: see
    `workerenv.python_environment`). The zygote preloads torch.compile's modules only when
    `preload_compilers` (the plan uses a compiler), since they take seconds to import."""
    env = python_environment(python, env, own_code_only=own_code_only)
    if isolation == "fork" and hasattr(os, "fork") and sys.platform.startswith("linux"):
        return ForkLauncher(python, preload_compilers=preload_compilers, env=env)
    return SpawnLauncher(python, env)
