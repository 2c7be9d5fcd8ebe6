"""One run of the benchmarks, from a typed `RunConfig` to results files: the one run loop
of `run`, `check` and `ab`.

`prepare_session` selects the cells, checks up front that every output can be written and
every build's Python can run workers, and assembles each build's metadata; `Session.run`
schedules the workers (one build alone, or two in lockstep), writes partial results every
few seconds and on Ctrl-C or SIGTERM, and returns a `SessionResult` whose `exit_status`
is the exit policy. Never imports torch and never prints: progress goes to a callback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from kscperf import __version__
from kscperf.orchestrator import counting, schedule
from kscperf.plan import definitions
from kscperf.plan import cells as plan
from kscperf.results import fileio
from kscperf.results import files as results
from kscperf.results.envinfo import (cuda_driver_present, git_info, kscperf_source,
                                     library_versions, machine_info, now_iso)
from kscperf.errors import BAD_STATUSES, KscperfError
from kscperf.names import EAGER_TOOLS, split_device
from kscperf.orchestrator.heartbeat import OnRunning
from kscperf.orchestrator.launch import Launcher, make_launcher
from kscperf.orchestrator.resolve import DEFAULT_BUDGET_S, OnLook, Resolver
from kscperf.orchestrator.workerenv import is_this_python, resolve_python
from kscperf.paths import RESULTS_DIR
from kscperf.plan.plugins import plugin_tool_names
from kscperf.results.metadata import PER_RUN_KEYS, WORKER_ENV_KEYS
from kscperf.spec import PROFILES, CellResult, TimingProfile, WorkerSettings
from kscperf.stats.core import DEFAULT_MIN_EFFECT

__all__ = ["RunConfig", "Build", "Selection", "Session", "SessionResult", "select_cells",
           "prepare_session", "shipped_bench_defs", "OnProgress", "StoppingRule"]

_PARTIAL_WRITE_INTERVAL_S = 10.0
# Told, after each worker, its progress and the label of its build ("" for a single build).
OnProgress = Callable[[schedule.Progress, str], None]
# Given the planned cells and each build's results so far, the source of further rounds.
StoppingRule = Callable[[Sequence[plan.PlannedCell], Sequence[list[CellResult]]],
                        schedule.MoreRounds]


@dataclass(frozen=True, kw_only=True)
class RunConfig(WorkerSettings):
    """Everything one run is asked to do, built once: from argparse by the CLI, from
    keywords by the Python API. `tools` and `tasks` are comma lists (None: all); `shard` is
    `I/N`, split by the expected costs of `balance` (an earlier results file) when given;
    `profile` is `fast`, `default` or `rigorous`, and `processes`, `values`, `warmups` and
    `min_time` override it. The settings every worker gets (seed, timeout, isolation, ...)
    are the `WorkerSettings` fields. Invalid choices raise KscperfError when the config is
    made."""

    paths: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    tools: str | None = None
    tasks: str | None = None
    shard: str | None = None
    balance: str | None = None
    profile: str = "default"
    processes: int | None = None
    values: int | None = None
    warmups: int | None = None
    min_time: float | None = None
    # ab --until-resolved: add pairs until every cell is resolved or the budget is spent.
    until_resolved: bool = False
    budget_s: float = DEFAULT_BUDGET_S
    min_effect: float = DEFAULT_MIN_EFFECT
    # --instructions: after the timing, each cell's instructions per call counted in fresh
    # processes by `instruction_counter` (auto, perf, callgrind: orchestrator.counting).
    instructions: bool = False
    instruction_processes: int = counting.DEFAULT_PROCESSES
    instruction_counter: str = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        counting.check_settings(self.instructions, self.instruction_processes,
                                self.check_only, self.instruction_counter)
        if self.profile not in PROFILES:
            raise KscperfError(f"profile {self.profile!r} is not one of "
                               f"{', '.join(PROFILES)}.")
        if self.until_resolved and not (self.budget_s > 0 and self.min_effect > 0):
            raise KscperfError(f"until_resolved needs a budget above 0 s (not {self.budget_s!r}) "
                               f"and a minimum effect above 0 (not {self.min_effect!r}).")

    def timing_profile(self) -> tuple[str, TimingProfile]:
        """The profile's name and numbers, overrides applied; a check-only run is one
        process of the fast profile, named `check`."""
        if self.check_only:
            base = PROFILES["fast"]
            return "check", TimingProfile(1, self.values or base.values,
                                          base.warmups if self.warmups is None else self.warmups,
                                          self.min_time or base.min_time)
        base = PROFILES[self.profile]
        return self.profile, TimingProfile(
            processes=self.processes or base.processes, values=self.values or base.values,
            warmups=base.warmups if self.warmups is None else self.warmups,
            min_time=self.min_time or base.min_time)

    def run_options(self, profile: TimingProfile) -> schedule.RunOptions:
        """What the scheduler passes on to every worker."""
        return schedule.RunOptions(profile=profile, **self.worker_settings())


@dataclass(frozen=True)
class Build:
    """One build under test: its label (None: the git commit of the working directory,
    with -dirty, else a timestamp), the Python that runs its workers, their extra
    environment variables, its results file (None: results/<label>.json, or no file
    for a check-only run), and in lockstep where it reads the definition modules from."""

    label: str | None = None
    python: str = sys.executable
    env: tuple[tuple[str, str], ...] = ()
    output: str | None = None
    # In lockstep: (the root the cells were planned from, this build's own root), when
    # this build reads the definition modules under that root from its own copy (bisect).
    module_root: schedule.ModuleRoot = ()
    # In lockstep: this build's own --explain, when only one side profiles (None: the run's).
    explain: bool | None = None


@dataclass(frozen=True)
class Selection:
    """The planned cells, the definition modules that broke the convention, the tools, and
    for a shard what the results file records of it (empty otherwise)."""

    cells: list[plan.PlannedCell]
    problems: list[definitions.DefinitionProblem]
    tool_names: list[str]
    shard_metadata: dict[str, Any] = field(default_factory=dict)


def shipped_bench_defs() -> str:
    """The shipped `bench_defs/` folder of this checkout; KscperfError when it is absent."""
    path = Path(__file__).resolve().parents[2] / "bench_defs"
    if not path.is_dir():
        raise KscperfError("no PATH given and the shipped bench_defs/ folder is not here; "
                           "pass the files or folders of benchmark definitions to run.")
    return str(path)


def select_cells(config: RunConfig) -> Selection:
    """The cells `config` selects from its paths (default: the shipped suite), tools,
    tasks, patterns and shard. KscperfError when nothing matches."""
    files = definitions.find_definition_files(list(config.paths) or [shipped_bench_defs()])
    models, problems = definitions.scan_models(files)
    try:
        plugins = plugin_tool_names(config.tool_plugins)
    except ValueError as exc:
        raise KscperfError(f"{exc}.") from None
    tool_names = plan.resolve_tools(config.tools, list(plugins),
                                    [t for m in models for t in m.tool_names])
    task_names = plan.resolve_tasks(config.tasks)
    cells = plan.plan_cells(models, tool_names, task_names, list(config.patterns),
                            cuda_present=cuda_driver_present())
    shard_metadata: dict[str, Any] = {}
    if config.shard:
        cells, shard_metadata = _shard(cells, config)
    if not cells and not problems:
        raise KscperfError("no cell matches: check PATH, -k, --tools and --tasks "
                           "(`run-benchmarks list` shows what there is).")
    return Selection(cells, problems, tool_names, shard_metadata)


def _shard(cells: list[plan.PlannedCell], config: RunConfig
           ) -> tuple[list[plan.PlannedCell], dict[str, Any]]:
    """The cells of `config.shard`, split by expected cost, and what the results file
    records of the shard: which one, the whole plan's fingerprint, the expected costs."""
    assert config.shard is not None
    index, count = plan.parse_shard(config.shard)
    measured = None
    if config.balance:
        loaded = results.load_results(config.balance)
        if not loaded.has_kscperf:
            raise KscperfError(f"--balance {config.balance} was not written by kscperf, so it "
                               "holds no cell costs; give an earlier kscperf results file.")
        measured = plan.measured_costs_s(loaded.runs)
    costs = plan.expected_costs_s(cells, measured)
    owner = plan.assign_shards(cells, count, costs)
    loads = [sum(c for c, k in zip(costs, owner) if k == shard) for shard in range(count)]
    metadata = {"shard": f"{index}/{count}", "shard_plan": plan.plan_fingerprint(cells, costs),
                "shard_plan_cells": len(cells),
                "shard_balance": os.path.basename(config.balance) if config.balance
                else "static estimate",
                "shard_expected_s": round(loads[index - 1], 3),
                "shard_expected_mean_s": round(sum(loads) / count, 3)}
    mine = [c for c, k in zip(cells, owner) if k == index - 1]
    if not mine and cells:
        raise KscperfError(f"--shard {config.shard} has no cells: the plan has only "
                           f"{len(cells)}; use at most {len(cells)} shards.")
    return mine, metadata


@dataclass
class SessionResult:
    """What a session did: per build its label, results file (None for a check-only run
    without one), raw worker results and loaded results; whether it was interrupted."""

    labels: list[str]
    outputs: list[str | None]
    runs: list[list[CellResult]]
    loaded: list[results.LoadedResults]
    problems: list[definitions.DefinitionProblem]
    workers: int
    wall_s: float
    interrupted: bool = False

    @property
    def has_bad_cells(self) -> bool:
        """Whether any cell of any build is incorrect, failed, timed out, crashed or oom."""
        return any(c.status in BAD_STATUSES for lr in self.loaded for c in lr.cells)

    def exit_status(self, regressed: bool = False) -> int:
        """130 when interrupted; 1 when a definition module is broken, a cell is bad, or
        `regressed` (the caller's --fail-on-regression verdict); else 0."""
        if self.interrupted:
            return 130
        return 1 if self.problems or self.has_bad_cells or regressed else 0


@dataclass
class Session:
    """A prepared run: what `prepare_session` checked and assembled, ready to `run`."""

    config: RunConfig
    builds: list[Build]
    selection: Selection
    profile: TimingProfile
    metadata: list[dict[str, Any]]
    prior: list[CellResult] = field(default_factory=list)

    @property
    def lockstep(self) -> bool:
        """Whether two builds run in lockstep."""
        return len(self.builds) == 2

    @property
    def outputs(self) -> list[str | None]:
        """Each build's results file (None: a check-only run that writes none)."""
        return [b.output for b in self.builds]

    def run(self, on_progress: OnProgress | None = None,
            on_look: OnLook | None = None,
            on_running: OnRunning | None = None,
            stopping: StoppingRule | None = None,
            restart_ratio: float = 0.0) -> SessionResult:
        """Run every worker, write each build's results file (partial ones along the way,
        marked incomplete), and return what was done. Ctrl-C and SIGTERM stop the run
        after writing what was measured (`interrupted`); an OSError does too, then raises
        KscperfError saying so. With `until_resolved`, pairs are added after the profile's
        until every cell is resolved or the budget is spent, `on_look` told after each
        round. `on_running` is told every few seconds what the running worker is doing
        (not in lockstep). In lockstep, `stopping` (given the cells and the results gathered
        so far, appended to as workers end) is another source of further rounds. In
        lockstep both zygotes restart at each new process index, as
        `schedule.run_cells_lockstep` does with `fresh_zygotes=restart_ratio` (0.0: every
        pair its own zygotes; a larger ratio only in the bench that measures why)."""
        rounds = plan.plan_rounds(self.selection.cells, self.profile.processes)
        gathered: list[list[CellResult]] = [[] for _ in self.builds]
        if not self.lockstep:
            gathered[0].extend(self.prior)
        counted: list[list[CellResult]] = [[] for _ in self.builds]
        writer = _PartialWriter(self, gathered, counted)
        labels = [str(md["build"]) for md in self.metadata]

        def on_result(build: int, progress: schedule.Progress) -> None:
            gathered[build].append(progress.result)
            if on_progress is not None:
                on_progress(progress, labels[build] if self.lockstep else "")
            writer.maybe_write()

        if stopping is None and self.config.until_resolved:
            config = self.config

            def stopping(cells: Sequence[plan.PlannedCell],
                         so_far: Sequence[list[CellResult]]) -> schedule.MoreRounds:
                return Resolver(cells, so_far, min_effect=config.min_effect,
                                budget_s=config.budget_s, on_look=on_look).more

        more = stopping(self.selection.cells, gathered) if self.lockstep and stopping else None
        with _sigterm_interrupts():
            t0 = time.perf_counter()
            # Process pairs are the replicates of every lockstep interval: fresh zygotes
            # make them independent.
            interrupted = self._run_workers(rounds, on_result, writer, more, on_running,
                                            fresh_zygotes=restart_ratio if self.lockstep
                                            else None)
            if self.config.instructions and not interrupted:
                interrupted = self._count(gathered, counted, writer, on_progress)
            wall_s = time.perf_counter() - t0
            writer.write(complete=not interrupted)
        loaded = [] if interrupted else [
            results.load_results(out) if out else _in_memory(runs, md)
            for out, runs, md in zip(self.outputs, gathered, self.metadata)]
        workers = len(gathered[0]) if more is not None else len(rounds)
        return SessionResult(labels, self.outputs, gathered, loaded, self.selection.problems,
                             workers, wall_s, interrupted)

    def _run_workers(self, rounds: list[tuple[int, plan.PlannedCell]],
                     on_result: schedule.OnResult, writer: _PartialWriter,
                     more: schedule.MoreRounds | None = None,
                     on_running: OnRunning | None = None,
                     fresh_zygotes: float | None = None) -> bool:
        """Schedule every worker; whether Ctrl-C (or SIGTERM) stopped them. An OSError
        writes what was measured and becomes a KscperfError."""
        launchers: list[Launcher] = []
        try:
            launchers = self._launchers()
            self._schedule(rounds, launchers, on_result, more, on_running, fresh_zygotes)
        except KeyboardInterrupt:
            return True
        except OSError as exc:
            writer.write(complete=False)
            what = "ab" if self.lockstep else "the run"
            wrote = (f"; wrote what was measured so far to {' and '.join(writer.paths)}, "
                     "marked incomplete" if writer.paths else "")
            raise KscperfError(f"{what} stopped: {exc}{wrote}.") from None
        finally:
            for launcher in launchers:
                launcher.close()
        return False

    def _count(self, timed: list[list[CellResult]], counted: list[list[CellResult]],
               writer: _PartialWriter, on_progress: OnProgress | None) -> bool:
        """--instructions: each build's cells counted once all are timed, build after build
        (`counting.count_cells`), into its list in `counted`; whether Ctrl-C stopped it."""
        options = self.config.run_options(self.profile)
        for index, (build, md) in enumerate(zip(self.builds, self.metadata)):
            label = f"{md['build']}: instructions" if self.lockstep else "instructions"

            def on_count(_: int, progress: schedule.Progress, index: int = index,
                         label: str = label) -> None:
                counted[index].append(progress.result)
                if on_progress is not None:
                    on_progress(progress, label)
                writer.maybe_write()

            try:
                counting.count_cells(self.selection.cells, options, build.python, dict(build.env),
                                     timed[index], self.config.instruction_processes,
                                     self.config.instruction_counter,
                                     module_root=build.module_root, on_result=on_count)
            except KeyboardInterrupt:
                return True
        return False

    def _launchers(self) -> list[Launcher]:
        uses_compiler = any(split_device(c.tool)[0] not in EAGER_TOOLS
                            for c in self.selection.cells)
        # Threads that spin-wait after a parallel region would run on into the partner's value.
        passive = ({"OMP_WAIT_POLICY": "PASSIVE"}
                   if self.lockstep and "OMP_WAIT_POLICY" not in os.environ else {})
        return [make_launcher(self.config.isolation, uses_compiler, b.python,
                              {**passive, **dict(b.env)}, own_code_only=self.lockstep)
                for b in self.builds]

    def _schedule(self, rounds: list[tuple[int, plan.PlannedCell]], launchers: list[Launcher],
                  on_result: schedule.OnResult, more: schedule.MoreRounds | None,
                  on_running: OnRunning | None = None,
                  fresh_zygotes: float | None = None) -> None:
        options = self.config.run_options(self.profile)
        if self.lockstep:
            schedule.run_cells_lockstep(rounds, options, (launchers[0], launchers[1]),
                                        on_result=on_result, more=more,
                                        fresh_zygotes=fresh_zygotes,
                                        module_roots=(self.builds[0].module_root,
                                                      self.builds[1].module_root),
                                        explain=(self.builds[0].explain,
                                                 self.builds[1].explain))
        else:
            schedule.run_cells(rounds, options, launchers[0], on_result=on_result,
                               on_running=on_running, prior=self.prior)


def _in_memory(runs: list[CellResult], metadata: dict[str, Any]) -> results.LoadedResults:
    """What a check-only run without a file shows: the cells, no timings."""
    return results.LoadedResults(path="", metadata=metadata, benchmarks={}, runs_values={},
                                 cells=results.summarize_cells(runs), runs=runs)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Inside the block SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so that a killed
    run still writes what it measured. Handlers can only be set in the main thread; in
    another, SIGTERM keeps its own meaning."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


class _PartialWriter:
    """Writes every build's results file: at most every few seconds while running (marked
    incomplete), and once at the end."""

    def __init__(self, session: Session, gathered: list[list[CellResult]],
                 counted: list[list[CellResult]]) -> None:
        self._session = session
        self._gathered = gathered
        self._counted = counted
        self._last = time.monotonic()
        self.paths = [p for p in session.outputs if p]

    def maybe_write(self) -> None:
        if time.monotonic() - self._last > _PARTIAL_WRITE_INTERVAL_S:
            self.write(complete=False)

    def write(self, complete: bool) -> None:
        for path, runs, md, counts in zip(self._session.outputs, self._gathered,
                                          self._session.metadata, self._counted):
            if path:
                results.write_results(path, runs, _file_metadata(md, runs), complete=complete,
                                      counts=counts)
        self._last = time.monotonic()


def _file_metadata(metadata: dict[str, Any], runs: list[CellResult]) -> dict[str, Any]:
    """A build's metadata as written: the workers' allocator settings and library versions
    (theirs, not this process's), and, for a build run by another Python, its version."""
    merged = dict(metadata)
    for r in runs:
        for key, value in r.metadata.items():
            if key in WORKER_ENV_KEYS:
                merged[key] = value
            elif key not in PER_RUN_KEYS:  # per worker process, not per build
                merged.setdefault(key, value)
    if "python_version" not in metadata and runs and "python_version" in runs[0].metadata:
        merged["python_version"] = runs[0].metadata["python_version"]
    return merged


def _default_label(metadata: dict[str, Any]) -> str:
    if metadata.get("git_commit"):
        return metadata["git_commit"][:12] + ("-dirty" if metadata.get("git_dirty") else "")
    return time.strftime("%Y%m%d-%H%M%S")


def _on_path(pythonpath: str, folder: str) -> bool:
    return any(os.path.abspath(p) == os.path.abspath(folder)
               for p in pythonpath.split(os.pathsep) if p)


def _source_metadata(config: RunConfig, toplevel: str) -> dict[str, Any]:
    """`metadata.SOURCE_KEYS` besides the top folder: the definition paths (relative to
    `toplevel` when inside it), whether the workers' PYTHONPATH holds `toplevel`, and this
    Python (a lockstep build's own replaces it)."""
    if not toplevel:
        return {}
    paths = []
    for p in config.paths:
        rel = os.path.relpath(os.path.abspath(p), toplevel)
        paths.append(os.path.abspath(p) if rel.startswith(os.pardir) else rel)
    on_path = _on_path(os.environ.get("PYTHONPATH", ""), toplevel)
    return {"definition_paths": shlex.join(paths), "source_on_pythonpath": int(on_path),
            "source_python": sys.executable}


def _shared_metadata(config: RunConfig, selection: Selection, profile_name: str,
                     profile: TimingProfile) -> dict[str, Any]:
    md: dict[str, Any] = {"date": now_iso(), "kscperf_version": __version__,
                          "kscperf_source": kscperf_source()}
    md.update(git_info(os.getcwd()))
    md.update(_source_metadata(config, md.get("git_toplevel", "")))
    md.update(machine_info())
    md.update(library_versions())
    md.update(selection.shard_metadata)
    md.update(profile=profile_name, processes=profile.processes, values=profile.values,
              warmups=profile.warmups, min_time=profile.min_time, seed=config.seed,
              isolation=config.isolation, compile_cache=config.compile_cache,
              worker_affinity=",".join(map(str, config.affinity)) or "none")
    if config.instructions:
        md.update(counting.count_metadata(config.instruction_counter))
    return md


def _lockstep_metadata(shared: dict[str, Any], builds: list[Build]) -> list[dict[str, Any]]:
    lockstep_id = uuid.uuid4().hex
    out = []
    for role, build in zip(("base", "new"), builds):
        md = dict(shared)
        if not is_this_python(build.python):
            # This Python's versions say nothing of that build's: its workers report theirs.
            for key in [k for k in md if k.endswith("_version") and k != "kscperf_version"]:
                del md[key]
            md["python_executable"] = build.python
        if "source_python" in md:
            md["source_python"] = build.python
            if dict(build.env).get("PYTHONPATH") is not None:
                md["source_on_pythonpath"] = int(_on_path(dict(build.env)["PYTHONPATH"],
                                                          md["git_toplevel"]))
        md.update(build=build.label, lockstep_id=lockstep_id, lockstep_role=role,
                  build_python=build.python,
                  build_env=" ".join(f"{k}={v}" for k, v in sorted(build.env)) or "none")
        out.append(md)
    return out


def _checked_lockstep_builds(builds: Sequence[Build]) -> list[Build]:
    checked = []
    for role, build in zip(("base", "new"), builds):
        python = resolve_python(build.python, f"--{role}-python")
        label = role if build.label is None else build.label
        checked.append(dataclasses.replace(build, label=label, python=python))
    if checked[0].label == checked[1].label:
        raise KscperfError(f"both builds are labelled {checked[0].label!r}; give --base-build "
                           "and --new-build different labels.")
    bad = [b.label for b in checked if not b.label or os.sep in b.label or b.label[0] == "."]
    if bad:
        raise KscperfError(f"build label {bad[0]!r} cannot be a file name; use letters, "
                           "digits, '-' or '_'.")
    return checked


def _lockstep_session(config: RunConfig, builds: Sequence[Build], replace: bool,
                      output_dir: str | None) -> Session:
    builds = _checked_lockstep_builds(builds)
    if not config.affinity and hasattr(os, "sched_getaffinity"):
        # Both builds' workers on one CPU: a pair must meet the same state of the machine,
        # and a CPU left idle while the partner runs elsewhere is where a VM loses speed.
        config = dataclasses.replace(config, affinity=(max(os.sched_getaffinity(0)),))
    selection = select_cells(config)
    profile_name, profile = config.timing_profile()
    out_dir = output_dir or os.path.join(RESULTS_DIR, time.strftime("ab-%Y%m%d-%H%M%S"))
    builds = [dataclasses.replace(b, output=os.path.join(out_dir, f"{b.label}.json"))
              for b in builds]
    for b in builds:
        assert b.output is not None
        fileio.check_writable(b.output, replace, resumable=False, other="-o DIR")
    shared = _shared_metadata(config, selection, profile_name, profile)
    metadata = _lockstep_metadata(shared, builds)
    for md in metadata:
        md["definition_problems"] = [p.message for p in selection.problems]
        if config.until_resolved:
            # What tells `compare` to judge these files by their confidence sequences.
            md.update(lockstep_stopping="until-resolved", lockstep_budget_s=config.budget_s,
                      lockstep_min_effect=config.min_effect)
    return Session(config, builds, selection, profile, metadata)


def _single_session(config: RunConfig, build: Build, replace: bool,
                    resume: str | None) -> Session:
    selection = select_cells(config)
    profile_name, profile = config.timing_profile()
    metadata = _shared_metadata(config, selection, profile_name, profile)
    metadata["build"] = build.label or _default_label(metadata)
    output = build.output
    prior: list[CellResult] = []
    if resume and not config.check_only:
        prior, prior_metadata = results.load_cell_runs_for_resume(resume)
        metadata = dict(prior_metadata, date=metadata["date"])
        output = output or resume
        if os.path.abspath(output) != os.path.abspath(resume):
            fileio.check_writable(output, replace)
    elif not config.check_only:
        output = output or os.path.join(RESULTS_DIR, f"{metadata['build']}.json")
        fileio.check_writable(output, replace)
    elif output is not None:
        fileio.check_writable(output, replace)
    metadata["definition_problems"] = [p.message for p in selection.problems]
    return Session(config, [Build(metadata["build"], build.python, build.env, output)],
                   selection, profile, [metadata], prior)


def prepare_session(config: RunConfig, builds: Sequence[Build] = (Build(),), *,
                    replace: bool = False, resume: str | None = None,
                    output_dir: str | None = None) -> Session:
    """Check and assemble one run before anything is measured: one build alone (`resume`
    finishes an incomplete results file), or two (BASE, NEW) in lockstep, their files
    going to `output_dir/<label>.json`. Raises KscperfError for anything the user can fix:
    an output that exists (unless `replace`) or cannot be written, a Python without torch,
    build labels that clash, no cell selected."""
    if len(builds) == 2:
        return _lockstep_session(config, builds, replace, output_dir)
    if len(builds) != 1:
        raise KscperfError(f"a run takes one build, or two in lockstep, not {len(builds)}.")
    if config.until_resolved:
        raise KscperfError("until_resolved runs two builds in lockstep: use `ab` (run_ab).")
    return _single_session(config, builds[0], replace, resume)
