"""Launching workers, one fresh process per cell and process index; timeouts, process-group
kills, progress callbacks, and turning whatever a worker did into a `CellResult`.

Never imports torch and never prints. Two launchers share one interface (`Launcher`):

* `ForkLauncher` (default on Linux): a zygote (`python -m kscperf.worker --serve`) imports
  torch once and forks a child per cell. The child is a new process with a copy of a
  pristine interpreter, so no state passes between cells, and it skips torch's import.
* `SpawnLauncher`: `python -m kscperf.worker SPEC RESULT`, a new interpreter per cell.

Every worker runs in its own session (process group), so a timeout kills it and anything
it started, such as compiler worker pools.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from kscperf.errors import CellStatus
from kscperf.plan import PlannedCell
from kscperf.lockstep import PARTNER_ENDED, TURN
from kscperf.spec import CellResult, CellSpec, TimingProfile, \
    partial_result_path, phase_path

__all__ = [
    "LaunchOutcome",
    "Launcher",
    "SpawnLauncher",
    "ForkLauncher",
    "make_launcher",
    "RunOptions",
    "Progress",
    "run_cells",
    "STDERR_TAIL_CHARS",
    "WORKER_MALLOC_ENV",
    "worker_environment",
    "python_environment",
    "is_this_python",
    "run_cells_lockstep",
]

STDERR_TAIL_CHARS = 600

# glibc serves large allocations with mmap() below a threshold that it raises by itself as
# the process frees big blocks, so whether a 4 MB tensor costs a thousand page faults per
# call depended on what the process had done before: a 5-10x swing for large-tensor cells
# between processes and against torch.utils.benchmark (tools/truth-check). Fixed thresholds
# make every worker keep and reuse freed memory up to 64 MB blocks, as a long-running
# training process does. A value the user has set is kept.
WORKER_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(64 * 2**20),
                     "MALLOC_TRIM_THRESHOLD_": str(256 * 2**20)}


def worker_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every worker starts with: this process's, plus `WORKER_MALLOC_ENV`
    where the user has not set those variables, plus `extra` (a build's own variables)."""
    return {**WORKER_MALLOC_ENV, **os.environ, **(extra or {})}


def is_this_python(python: str) -> bool:
    """Whether `python` is the interpreter running this process. Compared by path, not by
    what the path resolves to: a virtual environment's python is a link to its base
    interpreter, yet has packages of its own."""
    return os.path.abspath(python) == os.path.abspath(sys.executable)


_kscperf_only_dir: str | None = None


def _kscperf_only_path() -> str:
    """A folder that holds only a link to this kscperf package, for another Python's path:
    the folder this package was installed into would also bring this environment's torch."""
    global _kscperf_only_dir
    if _kscperf_only_dir is None:
        import atexit
        import shutil

        _kscperf_only_dir = tempfile.mkdtemp(prefix="kscperf-path-")
        os.symlink(os.path.dirname(os.path.abspath(__file__)),
                   os.path.join(_kscperf_only_dir, "kscperf"))
        atexit.register(shutil.rmtree, _kscperf_only_dir, True)
    return _kscperf_only_dir


def python_environment(python: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The extra environment for workers run by `python`: for another Python than this one,
    this kscperf (and nothing else of this environment) first on its path, so that worker
    and orchestrator speak the same protocol whatever that Python has installed; then
    `extra`."""
    env = dict(extra or {})
    if not is_this_python(python):
        rest = env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_kscperf_only_path(), rest) if p)
    return env


_ZYGOTE_START_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class LaunchOutcome:
    """How a worker process ended: exit code or signal, whether it was killed for time."""

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

    def close(self) -> None: ...


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# How often a worker's memory is read when --max-rss is set.
_RSS_POLL_S = 0.02


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fp:
            return int(fp.read().split()[1]) * _PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0


def _decode_status(status: int) -> tuple[int | None, int | None]:
    code = os.waitstatus_to_exitcode(status)
    return (None, -code) if code < 0 else (code, None)


class SpawnLauncher:
    """A fresh interpreter per worker."""

    name = "spawn"

    def __init__(self, python: str = sys.executable, env: dict[str, str] | None = None) -> None:
        self._python = python
        self._env = env
        self._current: int | None = None

    def launch(self, spec_path: str, result_path: str, log_path: str,
               timeout_s: float | None, max_rss_bytes: int | None = None) -> LaunchOutcome:
        t0 = time.perf_counter()
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [self._python, "-m", "kscperf.worker", spec_path, result_path],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                env=worker_environment(self._env))
        self._current = proc.pid
        try:
            deadline = None if timeout_s is None else t0 + timeout_s
            timed_out = False
            over: int | None = None
            while True:
                pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if deadline is not None and time.perf_counter() > deadline:
                    timed_out = True
                elif max_rss_bytes is not None:
                    rss = _rss_bytes(proc.pid)
                    over = rss if rss > max_rss_bytes else None
                if timed_out or over:
                    _kill_group(proc.pid)
                    pid, status, rusage = os.wait4(proc.pid, 0)
                    break
                time.sleep(0.002)
        except BaseException:
            _kill_group(proc.pid)
            raise
        finally:
            self._current = None
        proc.returncode = 0  # reaped above; stop Popen from reaping again
        _kill_group(proc.pid)  # anything the worker left behind in its group
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


class ForkLauncher:
    """Workers forked from a zygote that has imported torch but never initialised CUDA.

    If the zygote dies it is restarted at the next launch; a cell whose zygote died under it
    is reported as crashed."""

    name = "fork"

    def __init__(self, python: str = sys.executable, log_path: str | None = None,
                 preload_compilers: bool = True, env: dict[str, str] | None = None) -> None:
        self._python = python
        self._env = env
        # The zygote's own stderr: kept only when it fails to start, to be read. One file
        # per launcher: `ab` runs two zygotes at once.
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix=f"kscperf-zygote-{os.getpid()}-",
                                            suffix=".log")
            os.close(fd)
        self._log_path = log_path
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
        assert self._proc is not None and self._proc.stdin is not None and self._lines
        t0 = time.perf_counter()
        request = {"spec": spec_path, "result": result_path, "log": log_path}
        try:
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            self._proc.stdin.flush()
            started = self._lines.read(t0 + 60)
            if not started:
                raise BrokenPipeError
            pid = int(json.loads(started)["pid"])
            self._current = pid
            deadline = None if timeout_s is None else t0 + timeout_s
            over: int | None = None
            while True:
                wake = deadline
                if max_rss_bytes is not None:
                    soon = time.perf_counter() + _RSS_POLL_S
                    wake = soon if deadline is None else min(deadline, soon)
                line = self._lines.read(wake)
                if line is not None:
                    break
                if deadline is not None and time.perf_counter() >= deadline:
                    break
                if max_rss_bytes is not None:
                    rss = _rss_bytes(pid)
                    if rss > max_rss_bytes:
                        over = rss
                        break
            timed_out = line is None and over is None
            if line is None:
                _kill_group(pid)
                line = self._lines.read(time.perf_counter() + 60)
            if not line:
                raise BrokenPipeError
        except (BrokenPipeError, OSError, ValueError, KeyError):
            self.close()
            return LaunchOutcome(None, None, False, time.perf_counter() - t0)
        except BaseException:
            if self._current is not None:
                _kill_group(self._current)
            raise
        finally:
            self._current = None
        _kill_group(pid)
        done = json.loads(line)
        code, sig = _decode_status(int(done["status"]))
        return LaunchOutcome(code, sig, timed_out, time.perf_counter() - t0, done.get("maxrss_kb"),
                             over)

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
                  python: str = sys.executable, env: dict[str, str] | None = None) -> Launcher:
    """`fork` where the platform has fork(), else (or on request) `spawn`, of workers run by
    `python` with `env` added to their environment. The zygote preloads torch.compile's
    modules only when `preload_compilers` (the plan uses a compiler), since they take
    seconds to import."""
    env = python_environment(python, env)
    if isolation == "fork" and hasattr(os, "fork") and sys.platform.startswith("linux"):
        return ForkLauncher(python, preload_compilers=preload_compilers, env=env)
    return SpawnLauncher(python, env)


@dataclass(frozen=True)
class RunOptions:
    """Everything the orchestrator passes on to workers, besides the cell itself."""

    profile: TimingProfile
    seed: int = 0
    timeout_s: float | None = 600.0
    tool_plugins: tuple[str, ...] = ()
    check_only: bool = False
    compile_cache: str = "warm"
    jacobian_max_elements: int = 1_000_000
    max_rss_bytes: int | None = None
    affinity: tuple[int, ...] = ()


@dataclass
class Progress:
    """What a progress callback is told after each worker: its place in the plan and an ETA."""

    done: int
    total: int
    cell: PlannedCell
    process_index: int
    result: CellResult
    elapsed_s: float
    eta_s: float | None


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


_TAILED = frozenset({CellStatus.FAILED, CellStatus.OOM, CellStatus.CRASHED, CellStatus.TIMEOUT})


def _read_result(path: str) -> tuple[CellResult | None, str]:
    if not os.path.exists(path):
        return None, ""
    try:
        with open(path, encoding="utf-8") as fp:
            return CellResult.from_dict(json.load(fp)), ""
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"the worker wrote an unreadable result ({type(exc).__name__})"


def _last_phase(result_path: str) -> tuple[str, str]:
    try:
        with open(phase_path(result_path), encoding="utf-8") as fp:
            phase, _, config = fp.read().partition("\n")
        return phase.strip(), config.strip()
    except OSError:
        return "", ""


def _insert_where(reason: str, where: str) -> str:
    head, sep, tail = reason.partition("; stderr: ")
    return f"{head}{where}{sep}{tail}"


def _outcome_result(spec: CellSpec, outcome: LaunchOutcome, result_path: str, log_path: str,
                    timeout_s: float | None, max_rss_bytes: int | None) -> CellResult:
    result, unreadable = _read_result(result_path)
    if result is None or outcome.timed_out:
        partial, _ = _read_result(partial_result_path(result_path))
        abnormal = _abnormal_result(spec, outcome, log_path, timeout_s, max_rss_bytes,
                                    unreadable, partial)
        phase, config = _last_phase(result_path)
        where = (f", in the {phase} phase" + (f" of config {config}" if config else "")
                 if phase else "")
        return dataclasses.replace(abnormal, phase=phase or "worker",
                                   reason=_insert_where(abnormal.reason, where))
    # The worker's own stderr often says more than the exception did (a compiler's log).
    if result.status in _TAILED:
        result = dataclasses.replace(result, reason=_with_tail(result.reason, log_path))
    if any(c.status in _TAILED for c in result.configs):
        result = dataclasses.replace(result, configs=tuple(
            dataclasses.replace(c, reason=_with_tail(c.reason, log_path))
            if c.status in _TAILED else c for c in result.configs))
    return result


def _abnormal_result(spec: CellSpec, outcome: LaunchOutcome, log_path: str,
                     timeout_s: float | None, max_rss_bytes: int | None, unreadable: str,
                     partial: CellResult | None) -> CellResult:
    """The result of a worker that was killed, crashed or wrote nothing usable, keeping the
    configs it finished before that."""
    kept = {"configs": partial.configs, "compile_s": partial.compile_s,
            "import_s": partial.import_s, "metadata": partial.metadata} if partial else {}
    if outcome.timed_out:
        return CellResult.for_spec(spec, CellStatus.TIMEOUT, _with_tail(
            f"killed with its process group after {timeout_s:g} s (--timeout)", log_path),
            "worker", wall_s=outcome.wall_s, **kept)
    if outcome.signal is not None:
        try:
            name = signal.Signals(outcome.signal).name
        except ValueError:
            name = f"signal {outcome.signal}"
        if outcome.over_memory_bytes is not None:
            return CellResult.for_spec(spec, CellStatus.OOM, _with_tail(
                f"killed at {outcome.over_memory_bytes} bytes resident, over --max-rss "
                f"{max_rss_bytes}", log_path), "worker", wall_s=outcome.wall_s, **kept)
        return CellResult.for_spec(spec, CellStatus.CRASHED, _with_tail(
            f"the worker was killed by {name}", log_path), "worker", wall_s=outcome.wall_s,
            **kept)
    if outcome.exit_code is None:
        return CellResult.for_spec(spec, CellStatus.CRASHED, _with_tail(
            "the fork server died while running the worker", log_path), "worker",
            wall_s=outcome.wall_s, **kept)
    reason = unreadable or (f"the worker exited with code {outcome.exit_code} without "
                            "writing a result")
    return CellResult.for_spec(spec, CellStatus.CRASHED, _with_tail(reason, log_path), "worker",
                               wall_s=outcome.wall_s, **kept)


def _skipped(spec: CellSpec, reason: str) -> CellResult:
    return CellResult.for_spec(spec, CellStatus.SKIPPED, reason, "plan", wall_s=0.0)


def _remember_loops(loops: dict[str, dict[str, int]], result: CellResult) -> None:
    # The first process of a cell calibrates; its later processes reuse the same loops.
    for c in result.configs:
        if c.loops > 0:
            loops.setdefault(result.name, {}).setdefault(c.config, c.loops)


def _cell_spec(cell: PlannedCell, process_index: int, options: RunOptions,
               loops: dict[str, dict[str, int]], turns: tuple[str, ...] = ()) -> CellSpec:
    timeout = cell.model.timeout_s or options.timeout_s
    return CellSpec(
        model=cell.model.name, tool=cell.tool, task=cell.task,
        module_path=cell.model.module_path, process_index=process_index,
        seed=options.seed, values=options.profile.values,
        warmups=options.profile.warmups, min_time=options.profile.min_time,
        loops=tuple(sorted(loops.get(cell.name, {}).items())),
        check_only=options.check_only, tool_plugins=options.tool_plugins,
        jacobian_max_elements=options.jacobian_max_elements,
        compile_cache=options.compile_cache, affinity=options.affinity, turns=turns,
        # A partner that keeps the turn for a whole timeout is hung, and is being killed.
        turn_wait_s=timeout)



def _write_spec(spec: CellSpec, stem: str) -> tuple[str, str, str]:
    spec_path, result_path, log_path = stem + ".spec.json", stem + ".result.json", stem + ".log"
    with open(spec_path, "w", encoding="utf-8") as fp:
        json.dump(spec.to_dict(), fp)
    return spec_path, result_path, log_path


def _launch_cell(launcher: Launcher, cell: PlannedCell, spec: CellSpec, stem: str,
                 options: RunOptions, timeout_factor: float = 1.0) -> CellResult:
    spec_path, result_path, log_path = _write_spec(spec, stem)
    timeout = cell.model.timeout_s or options.timeout_s
    if timeout is not None:
        timeout *= timeout_factor
    outcome = launcher.launch(spec_path, result_path, log_path, timeout, options.max_rss_bytes)
    return _outcome_result(spec, outcome, result_path, log_path, timeout,
                           options.max_rss_bytes)


def _resume_state(rounds: list[tuple[int, PlannedCell]], prior: Sequence[CellResult]
                  ) -> tuple[list[tuple[int, PlannedCell]], dict[str, dict[str, int]]]:
    done = {(r.name, r.process_index) for r in prior}
    loops: dict[str, dict[str, int]] = {}
    for r in prior:
        _remember_loops(loops, r)
    return [(p, c) for p, c in rounds if (c.name, p) not in done], loops


def run_cells(rounds: list[tuple[int, PlannedCell]], options: RunOptions, launcher: Launcher,
              *, on_result: Callable[[Progress], None] | None = None,
              prior: Sequence[CellResult] = (),
              work_dir: str | None = None) -> list[CellResult]:
    """Run every (process index, cell) in order, one worker at a time, and return their
    results in the same order. (cell, process index) pairs already in `prior` (for
    --resume) are not run again, and their calibrated loops are reused. KeyboardInterrupt
    propagates after the current worker's process group is killed; the results gathered so
    far have already been handed to `on_result`."""
    todo, loops = _resume_state(rounds, prior)
    results: list[CellResult] = []
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kscperf-", dir=work_dir) as tmp:
        for index, (process_index, cell) in enumerate(todo):
            spec = _cell_spec(cell, process_index, options, loops)
            if cell.skip_reason:
                result = _skipped(spec, cell.skip_reason)
            else:
                result = _launch_cell(launcher, cell, spec, os.path.join(tmp, f"{index:05d}"),
                                      options)
                _remember_loops(loops, result)
            results.append(result)
            elapsed = time.perf_counter() - t_start
            remaining = len(todo) - index - 1
            eta = elapsed / (index + 1) * remaining
            if on_result is not None:
                on_result(Progress(index + 1, len(todo), cell, process_index, result, elapsed,
                                   eta))
    return results


def _run_pair(launchers: tuple[Launcher, Launcher], cell: PlannedCell, process_index: int,
              options: RunOptions, loops: tuple[dict[str, dict[str, int]], ...], stem: str,
              first: int) -> tuple[CellResult, CellResult]:
    """One cell's process `process_index` in both builds at once, taking turns: side
    `first` starts with the turn. Each side is told when the other has ended."""
    fifos = (stem + ".turn0", stem + ".turn1")
    for path in fifos:
        os.mkfifo(path, 0o600)
    # Opened read-write here for the pair's whole life: no open() by a worker ever blocks,
    # and a worker that dies cannot leave its partner's reads at end of file.
    fds = [os.open(path, os.O_RDWR) for path in fifos]
    results: list[CellResult | None] = [None, None]
    errors: list[BaseException] = []

    def side(i: int) -> None:
        try:
            spec = _cell_spec(cell, process_index, options, loops[i],
                              turns=(fifos[i], fifos[1 - i]))
            # A worker's clock runs on while it waits for its partner's turns: twice the
            # time, so that a build as slow as its timeout allows is not killed for the other.
            results[i] = _launch_cell(launchers[i], cell, spec, f"{stem}.{i}", options,
                                      timeout_factor=2.0)
        finally:
            os.write(fds[1 - i], PARTNER_ENDED)

    def other_side() -> None:
        try:
            side(1)
        except BaseException as exc:  # raised again in the calling thread
            errors.append(exc)

    other = threading.Thread(target=other_side, daemon=True)
    try:
        os.write(fds[first], TURN)
        other.start()
        try:
            side(0)
            other.join()
        except BaseException:
            # Ctrl-C (only this thread sees signals): kill the other build's worker too.
            launchers[1].close()
            other.join(timeout=30)
            raise
    finally:
        # A thread still running writes to these when its worker ends: leave them open.
        if not other.is_alive():
            for fd in fds:
                os.close(fd)
    if errors:
        raise errors[0]
    assert results[0] is not None and results[1] is not None
    return results[0], results[1]


def run_cells_lockstep(rounds: list[tuple[int, PlannedCell]], options: RunOptions,
                       launchers: tuple[Launcher, Launcher], *,
                       on_result: Callable[[int, Progress], None] | None = None,
                       work_dir: str | None = None) -> tuple[list[CellResult], list[CellResult]]:
    """Run every (process index, cell) of `rounds` in two builds at once, one launcher per
    build: the two workers of a pair take turns, one timed value each, so that both builds
    meet the same state of the machine; nothing else of one runs while the other times.
    The build that starts alternates with the process index. Returns each build's results
    in `rounds` order; `on_result(build_index, progress)` is told of each as it ends."""
    loops: tuple[dict[str, dict[str, int]], ...] = ({}, {})
    out: tuple[list[CellResult], list[CellResult]] = ([], [])
    for launcher in launchers:
        # Both fork servers up before the first pair, so that neither's imports run beside
        # the other build's first timed values.
        launcher.start()
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kscperf-ab-", dir=work_dir) as tmp:
        for index, (process_index, cell) in enumerate(rounds):
            if cell.skip_reason:
                pair = tuple(_skipped(_cell_spec(cell, process_index, options, loops[i]),
                                      cell.skip_reason) for i in (0, 1))
            else:
                pair = _run_pair(launchers, cell, process_index, options, loops,
                                 os.path.join(tmp, f"{index:05d}"), first=process_index % 2)
            elapsed = time.perf_counter() - t_start
            eta = elapsed / (index + 1) * (len(rounds) - index - 1)
            for i, result in enumerate(pair):
                _remember_loops(loops[i], result)
                out[i].append(result)
                if on_result is not None:
                    on_result(i, Progress(index + 1, len(rounds), cell, process_index, result,
                                          elapsed, eta))
    return out
