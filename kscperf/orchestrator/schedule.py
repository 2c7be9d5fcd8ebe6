"""Scheduling cells: every (process index, cell) of the plan's rounds, one worker at a time,
in one build or in two builds at once in lockstep (`run-benchmarks ab`).

Owns the spec each worker gets (timeouts, the loops a cell's first process calibrated),
resuming, and progress with an ETA. Launching is `launch`'s and reading a worker's end is
`outcome`'s. Never imports torch and never prints.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from kscperf.orchestrator.heartbeat import Beat, OnRunning, Running, eta_while_running, watching
from kscperf.orchestrator.launch import Launcher
from kscperf.orchestrator.lockstep import TurnPipes
from kscperf.orchestrator.outcome import classify_outcome, skipped_result
from kscperf.plan.cells import PlannedCell
from kscperf.spec import CellResult, CellSpec, TimingProfile, WorkerSettings

__all__ = ["RunOptions", "Progress", "OnResult", "MoreRounds", "ModuleRoot", "run_cells",
           "run_counts", "run_cells_lockstep"]

# A worker's clock runs on while it waits for its partner's turns: twice the time, so that a
# build as slow as its timeout allows is not killed for the other.
_LOCKSTEP_TIMEOUT_FACTOR = 2.0

# Calibrated loops per cell name, per config name.
_Loops = dict[str, dict[str, int]]


@dataclass(frozen=True, kw_only=True)
class RunOptions(WorkerSettings):
    """Everything the scheduler passes on to workers, besides the cell itself: the run's
    worker settings and its timing profile."""

    profile: TimingProfile


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


# Called with the index of the build (0 alone; 0 or 1 in lockstep) and the progress.
OnResult = Callable[[int, Progress], None]

# Asked, once the rounds given are done and after each further round, for the next one:
# (process index, cell) pairs; empty ends the run (`ab --until-resolved`).
MoreRounds = Callable[[], list[tuple[int, PlannedCell]]]

# (the root the cells were planned from, the root one build reads its modules from), or ().
ModuleRoot = tuple[str, ...]


def _rerooted(path: str, planned_root: str, own_root: str) -> str:
    """`path` moved from under `planned_root` to the same place under `own_root`; a path
    outside `planned_root` (an absolute PATH, the same for every build) is kept."""
    rel = os.path.relpath(path, planned_root)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return path
    return os.path.join(own_root, rel)


def _timeout_for(cell: PlannedCell, options: RunOptions) -> float | None:
    return cell.model.timeout_s or options.timeout_s


def _remember_loops(loops: _Loops, result: CellResult) -> None:
    # The first process of a cell calibrates; its later processes reuse the same loops.
    for c in result.configs:
        if c.loops > 0:
            loops.setdefault(result.name, {}).setdefault(c.config, c.loops)


def _cell_spec(cell: PlannedCell, process_index: int, options: RunOptions, loops: _Loops,
               turns: tuple[str, ...] = ()) -> CellSpec:
    timeout_s = _timeout_for(cell, options)
    return CellSpec(
        **dict(options.worker_settings(), timeout_s=timeout_s),
        model=cell.model.name, tool=cell.tool, task=cell.task,
        module_path=cell.model.module_path, process_index=process_index,
        values=options.profile.values, warmups=options.profile.warmups,
        min_time=options.profile.min_time,
        loops=tuple(sorted(loops.get(cell.name, {}).items())), configs=cell.configs,
        turns=turns,
        # A partner that keeps the turn for a whole timeout is hung, and is being killed.
        turn_wait_s=timeout_s)


def _launch_cell(launcher: Launcher, cell: PlannedCell, spec: CellSpec, stem: str,
                 options: RunOptions, timeout_factor: float = 1.0,
                 beat: Beat | None = None) -> CellResult:
    """Write `spec` at `stem`, run its worker (`beat` told of its phase as it runs) and read
    how it ended."""
    spec_path, result_path, log_path = stem + ".spec.json", stem + ".result.json", stem + ".log"
    with open(spec_path, "w", encoding="utf-8") as fp:
        json.dump(spec.to_dict(), fp)
    timeout = _timeout_for(cell, options)
    if timeout is not None:
        timeout *= timeout_factor
    with watching(result_path, beat):
        outcome = launcher.launch(spec_path, result_path, log_path, timeout,
                                  options.max_rss_bytes)
    return classify_outcome(spec, outcome, result_path, log_path, timeout,
                            options.max_rss_bytes)


def _run_rounds(todo: list[tuple[int, PlannedCell]], options: RunOptions,
                loops: tuple[_Loops, ...], prefix: str,
                run_one: Callable[[int, PlannedCell, str, Beat | None], tuple[CellResult, ...]],
                on_result: OnResult | None, more: MoreRounds | None = None,
                on_running: OnRunning | None = None) -> tuple[list[CellResult], ...]:
    """The one loop of every schedule: each (process index, cell) in order, cells the plan
    skipped without a worker, calibrated loops remembered per build, progress after each
    and `on_running` told every few seconds while one runs; then, while `more` gives
    further rounds, those."""
    out: tuple[list[CellResult], ...] = tuple([] for _ in loops)
    t_start = time.perf_counter()
    # A worker killed on Ctrl-C may still finish a write while the folder is removed: that
    # must not turn the interrupt into an error, and lose the run's exit status 130.
    with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as tmp:
        for index, (process_index, cell) in enumerate(_rounds_and_more(todo, more)):
            if cell.skip_reason:
                done = tuple(skipped_result(_cell_spec(cell, process_index, options, build_loops),
                                            cell.skip_reason) for build_loops in loops)
            else:
                beat = None if on_running is None else _beat(on_running, index,
                                                             max(len(todo), index + 1), cell,
                                                             process_index,
                                                             time.perf_counter() - t_start)
                done = run_one(process_index, cell, os.path.join(tmp, f"{index:05d}"), beat)
            elapsed = time.perf_counter() - t_start
            total = max(len(todo), index + 1)
            eta = elapsed / (index + 1) * (total - index - 1) if index < len(todo) else None
            for build, result in enumerate(done):
                _remember_loops(loops[build], result)
                out[build].append(result)
                if on_result is not None:
                    on_result(build, Progress(index + 1, total, cell, process_index,
                                              result, elapsed, eta))
    return out


def _beat(on_running: OnRunning, index: int, total: int, cell: PlannedCell, process_index: int,
          elapsed_before_s: float) -> Beat:
    def beat(phase: str, config: str, position: str, running_s: float) -> None:
        on_running(Running(index, total, cell, process_index, phase, config, position,
                           running_s, eta_while_running(elapsed_before_s, index, total,
                                                        running_s)))

    return beat


def _rounds_and_more(todo: list[tuple[int, PlannedCell]], more: MoreRounds | None
                     ) -> Iterator[tuple[int, PlannedCell]]:
    yield from todo
    while more is not None:
        further = more()
        if not further:
            return
        yield from further


def run_cells(rounds: list[tuple[int, PlannedCell]], options: RunOptions, launcher: Launcher,
              *, on_result: OnResult | None = None, on_running: OnRunning | None = None,
              prior: Sequence[CellResult] = ()) -> list[CellResult]:
    """Run every (process index, cell) in order, one worker at a time, and return their
    results in the same order. (cell, process index) pairs already in `prior` (for
    --resume) are not run again, and their calibrated loops are reused. KeyboardInterrupt
    propagates after the current worker's process group is killed; the results gathered so
    far have already been handed to `on_result` (with build index 0)."""
    done = {(r.name, r.process_index) for r in prior}
    loops: _Loops = {}
    for r in prior:
        _remember_loops(loops, r)
    todo = [(p, c) for p, c in rounds if (c.name, p) not in done]

    def run_one(process_index: int, cell: PlannedCell, stem: str,
                beat: Beat | None) -> tuple[CellResult, ...]:
        spec = _cell_spec(cell, process_index, options, loops)
        return (_launch_cell(launcher, cell, spec, stem, options, beat=beat),)

    return _run_rounds(todo, options, (loops,), "kscperf-", run_one, on_result,
                       on_running=on_running)[0]


def run_counts(rounds: list[tuple[int, PlannedCell]], options: RunOptions, launcher: Launcher,
               counter: str, *, timed: Sequence[CellResult] = (), module_root: ModuleRoot = (),
               on_result: OnResult | None = None,
               on_running: OnRunning | None = None) -> list[CellResult]:
    """Run every (process index, cell) of `rounds` in order as a counting worker
    (`CellSpec.count_instructions`) counting by `counter`, one at a time through `launcher`
    (which starts it under Callgrind where that is the counter), and return their results
    in that order. Each config counts as many
    calls as the timing results `timed` calibrated for it; `module_root` rereads a
    definition module as `run_cells_lockstep` does for one build. Cells the plan skipped,
    or marked not to count (`skip_reason`), get a skipped result and no worker."""
    loops: _Loops = {}
    for r in timed:
        _remember_loops(loops, r)

    def run_one(process_index: int, cell: PlannedCell, stem: str,
                beat: Beat | None) -> tuple[CellResult, ...]:
        spec = dataclasses.replace(_cell_spec(cell, process_index, options, loops),
                                   count_instructions=True, count_method=counter)
        if module_root:
            spec = dataclasses.replace(spec, module_path=_rerooted(spec.module_path,
                                                                   *module_root))
        return (_launch_cell(launcher, cell, spec, stem, options, beat=beat),)

    return _run_rounds(rounds, options, (loops,), "kscperf-count-", run_one, on_result,
                       on_running=on_running)[0]


def run_cells_lockstep(rounds: list[tuple[int, PlannedCell]], options: RunOptions,
                       launchers: tuple[Launcher, Launcher], *,
                       on_result: OnResult | None = None, more: MoreRounds | None = None,
                       fresh_zygotes: float | None = None,
                       module_roots: tuple[ModuleRoot, ModuleRoot] = ((), ()),
                       explain: tuple[bool | None, bool | None] = (None, None)
                       ) -> tuple[list[CellResult], list[CellResult]]:
    """Run every (process index, cell) of `rounds` in two builds at once, one launcher per
    build: the two workers of a pair take turns, one timed value each, so that both builds
    meet the same state of the machine; nothing else of one runs while the other times.
    The build that starts alternates with the process index. Returns each build's results
    in `rounds` order; `on_result(build_index, progress)` is told of each as it ends.
    After `rounds`, the rounds `more` gives are run the same way, until it gives none.
    `fresh_zygotes` (None: never) restarts both launchers at a new process index once the
    pairs since the last start took at least `fresh_zygotes` times as long as that start
    did: every worker of a zygote inherits its memory layout, which made one build of an
    A/A pair up to 6 % faster for a whole run on an Intel VM, and fresh zygotes turn that
    into noise that varies between pairs. 0.0, every lockstep run's setting, gives every
    pair its own zygotes, so that process pairs are the independent replicates the
    intervals take them for (docs/method.md, "Fresh zygotes").
    `module_roots` gives each build's (planned root, own root): a definition module under
    the planned root is read by that build's workers from the same place under its own
    (`bisect`: each commit's checkout holds its own benchmark module). `explain` gives a
    build's own `--explain` setting (None: the options'), so that one side alone profiles."""
    # One record of loops for both builds: the pair's workers agree on each config's loops
    # (`Turns.share_loops`), and every later pair starts with that count on both sides.
    shared: _Loops = {}
    loops: tuple[_Loops, _Loops] = (shared, shared)
    t0 = time.perf_counter()
    for launcher in launchers:
        # Both fork servers up before the first pair, so that neither's imports run beside
        # the other build's first timed values.
        launcher.start()
    # [process index of the last pair, seconds of the last start, seconds of pairs since]
    zygotes = [0, time.perf_counter() - t0, 0.0]

    def run_one(process_index: int, cell: PlannedCell, stem: str,
                beat: Beat | None) -> tuple[CellResult, ...]:
        if (fresh_zygotes is not None and process_index != zygotes[0]
                and zygotes[2] >= fresh_zygotes * zygotes[1]):
            t_restart = time.perf_counter()
            _restart(launchers)
            zygotes[1:] = [time.perf_counter() - t_restart, 0.0]
        zygotes[0] = process_index
        t_pair = time.perf_counter()
        pair = _run_pair(launchers, cell, process_index, options, loops, stem,
                         first=process_index % 2, module_roots=module_roots, explain=explain)
        zygotes[2] += time.perf_counter() - t_pair
        return pair

    base, new = _run_rounds(rounds, options, loops, "kscperf-ab-", run_one, on_result, more)
    return base, new


def _restart(launchers: tuple[Launcher, Launcher]) -> None:
    """Both launchers closed and started afresh, the two starts side by side: nothing is
    timed meanwhile, and each start is an import of torch."""
    for launcher in launchers:
        launcher.close()
    other = threading.Thread(target=launchers[1].start, daemon=True)
    other.start()
    launchers[0].start()
    other.join()


def _run_pair(launchers: tuple[Launcher, Launcher], cell: PlannedCell, process_index: int,
              options: RunOptions, loops: tuple[_Loops, _Loops], stem: str,
              first: int, module_roots: tuple[ModuleRoot, ModuleRoot] = ((), ()),
              explain: tuple[bool | None, bool | None] = (None, None)
              ) -> tuple[CellResult, CellResult]:
    """One cell's process `process_index` in both builds at once, taking turns: side
    `first` starts with the turn. Each side is told when the other has ended."""
    pipes = TurnPipes(stem)
    results: list[CellResult | None] = [None, None]
    errors: list[BaseException] = []

    def side(i: int) -> None:
        try:
            spec = _cell_spec(cell, process_index, options, loops[i],
                              turns=pipes.worker_turns(i))
            if module_roots[i]:
                spec = dataclasses.replace(spec, module_path=_rerooted(spec.module_path,
                                                                       *module_roots[i]))
            own_explain = explain[i]
            if own_explain is not None:
                spec = dataclasses.replace(spec, explain=own_explain)
            results[i] = _launch_cell(launchers[i], cell, spec, f"{stem}.{i}", options,
                                      timeout_factor=_LOCKSTEP_TIMEOUT_FACTOR)
        finally:
            pipes.partner_ended(i)

    def other_side() -> None:
        try:
            side(1)
        except BaseException as exc:  # raised again in the calling thread
            errors.append(exc)

    other = threading.Thread(target=other_side, daemon=True)
    try:
        pipes.give_turn(first)
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
        # A thread still running writes to the pipes when its worker ends: leave them open.
        if not other.is_alive():
            pipes.close()
    if errors:
        raise errors[0]
    assert results[0] is not None and results[1] is not None
    return results[0], results[1]
