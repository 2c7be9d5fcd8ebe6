"""The Python API of kscperf: run benchmarks, load results, compare builds, render reports.

    import kscperf

    result = kscperf.run("bench_defs/relu3.py", output="new.json", profile="fast")
    comparison = kscperf.compare_builds("old.json", "new.json")
    kscperf.write_report(["old.json", "new.json"], "report.html")

Everything here is what `run-benchmarks` does, without printing: the CLI is a thin layer
over these functions. Bad input raises `KscperfError` with one sentence naming the culprit.
Importing kscperf never imports torch; only the worker processes do.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from kscperf.bisect.records import BisectInterrupted
from kscperf.compare import builds as _compare
from kscperf.errors import KscperfError
from kscperf.orchestrator.resolve import OnLook
from kscperf.orchestrator.session import Build, OnProgress, RunConfig, SessionResult, prepare_session
from kscperf.paths import BISECT_CACHE, DEFAULT_STORE
from kscperf.results import fileio as _fileio, merge as _merge
from kscperf.results import files as _results
from kscperf.stats import bisection as _bisection
from kscperf.stats.core import DEFAULT_MIN_EFFECT, INSTRUCTIONS_MIN_EFFECT
from kscperf.views import report as _report

__all__ = ["run", "run_checks", "run_ab", "load", "compare_builds", "write_report",
           "merge_shards", "history_add", "history_rebuild", "history_changes",
           "history_check", "build_dashboard", "bisect_commits", "BisectInterrupted",
           "DEFAULT_STORE", "Build", "RunConfig", "SessionResult"]


ResultsLike = str | _results.LoadedResults


def _config(paths: tuple[str, ...], settings: dict[str, Any], **fixed: Any) -> RunConfig:
    """The run configuration of `paths` and the caller's `settings`; KscperfError naming a
    setting that RunConfig does not have."""
    known = {f.name for f in dataclasses.fields(RunConfig)} - {"paths", "check_only"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise KscperfError(f"unknown setting {unknown[0]!r}; the settings are "
                           f"{', '.join(sorted(known))}.")
    return RunConfig(paths=tuple(paths), **settings, **fixed)


def run(*paths: str, output: str | None = None, build: str | None = None,
        replace: bool = False, resume: str | None = None, env: Mapping[str, str] | None = None,
        on_progress: OnProgress | None = None, **settings: Any) -> SessionResult:
    """Run every MODEL × TOOL × TASK found in `paths` (files or folders of benchmark
    definitions; none: the shipped suite), each in fresh worker processes, and write the
    results file `output` (default results/<build>.json). `build` labels the build (default:
    the git commit of the working directory); `env` adds variables to the workers'
    environment. `settings` are the fields of `RunConfig` (profile="fast",
    tools="pt,compiled", tasks="bwd", processes=..., ...). Returns the session's result;
    after Ctrl-C it is `interrupted`, with what was measured written to `output` and marked
    incomplete."""
    config = _config(paths, settings)
    target = Build(label=build, env=tuple(sorted((env or {}).items())), output=output)
    session = prepare_session(config, [target], replace=replace, resume=resume)
    return session.run(on_progress)


def run_checks(*paths: str, output: str | None = None, replace: bool = False,
               on_progress: OnProgress | None = None, **settings: Any) -> SessionResult:
    """Only the correctness checks of the cells in `paths`, one process each, no timing.
    Writes `output` when given."""
    config = _config(paths, settings, check_only=True)
    session = prepare_session(config, [Build(output=output)], replace=replace)
    return session.run(on_progress)


def run_ab(*paths: str, base: Build = Build(label="base"), new: Build = Build(label="new"),
           output_dir: str | None = None, replace: bool = False,
           on_progress: OnProgress | None = None, on_look: OnLook | None = None,
           **settings: Any) -> SessionResult:
    """Run the cells of `paths` in two builds at once, their workers taking turns value by
    value, and write `output_dir/<label>.json` for each (default results/ab-<time>/).
    A build is told apart by its Python (`Build(python=...)`) or its environment variables
    (`Build(env=(("NAME", "value"),))`). Compare the two with `compare_builds(*result.loaded)`.
    With `until_resolved=True` (and `min_effect`, `budget_s`), pairs are added to every
    cell whose run-time verdict is open until it is resolved or the budget is spent;
    `on_look` is told where the open cells stand after each round."""
    config = _config(paths, settings)
    session = prepare_session(config, [base, new], replace=replace, output_dir=output_dir)
    return session.run(on_progress, on_look)


def load(path: str) -> _results.LoadedResults:
    """A results file written by kscperf (or a plain pyperf file), parsed and validated."""
    return _results.load_results(path)


def _loaded(item: ResultsLike) -> _results.LoadedResults:
    return item if isinstance(item, _results.LoadedResults) else _results.load_results(item)


def compare_builds(base: ResultsLike, new: ResultsLike, *,
                   min_effect: float = DEFAULT_MIN_EFFECT,
                   force: bool = False,
                   instructions_min_effect: float = INSTRUCTIONS_MIN_EFFECT
                   ) -> _compare.Comparison:
    """NEW against BASE, benchmark by benchmark: ratio, interval, p-value, verdict, and
    geometric means; instruction counts (run --instructions) with their own minimum effect.
    Files from different machines, torch versions, profiles or instruction counters raise
    KscperfError unless `force`."""
    return _compare.compare_builds(_loaded(base), _loaded(new), min_effect=min_effect,
                                   force=force, instructions_min_effect=instructions_min_effect)


def write_report(builds: Sequence[ResultsLike], output: str, *, force: bool = False) -> str:
    """Write the self-contained HTML report of `builds` (oldest first; the last two are
    compared) to `output`, and return its path."""
    loaded = [_loaded(b) for b in builds]
    comparison = None
    if len(loaded) >= 2:
        comparison = _compare.compare_builds(loaded[-2], loaded[-1], force=force)
    _report.write_report(output, _report.render_report(loaded, comparison, force=force))
    return output


def merge_shards(paths: Sequence[str], output: str, *, allow_partial: bool = False) -> str:
    """Merge the shard files of one build into `output`, which must not exist yet, and
    return its path. Files of different builds, machine classes, torch versions, profiles
    or plans, overlapping shards and a missing shard (unless `allow_partial`) raise
    KscperfError and write nothing."""
    _fileio.check_writable(output, replace=False)
    _merge.merge_results(list(paths), output, allow_partial=allow_partial)
    return output


def history_add(paths: Sequence[str], store: str = DEFAULT_STORE, *,
                machine: str | None = None, allow_incomplete: bool = False) -> list[Any]:
    """Add the results files `paths` to the history store `store` (created when missing),
    all or none, and return the `history.StoredBuild`s added. A file that is not a kscperf
    results file, is incomplete (unless `allow_incomplete`), or is already in the store
    raises KscperfError naming it, and the store is left as it was. `machine` names the
    machine class (default: the host that ran the file)."""
    import os

    from kscperf import history

    new_store = not os.path.exists(store)
    try:
        with history.open_store(store, create=True) as opened:
            return opened.add_builds(list(paths), machine=machine,
                                     allow_incomplete=allow_incomplete)
    except BaseException:
        # A refused first add leaves no empty store behind, as if never asked.
        if new_store:
            history.remove_empty_store(store)
        raise


def history_rebuild(store: str = DEFAULT_STORE) -> int:
    """Recreate the index of `store` from its results files; return how many builds it
    holds."""
    from kscperf import history

    history.open_store(store).close()  # KscperfError for a folder that is not a store
    with history.rebuild_index(store) as opened:
        return len(opened.builds())


def history_changes(store: str = DEFAULT_STORE, *, min_effect: float = DEFAULT_MIN_EFFECT,
                    include_blind: bool = False) -> list[Any]:
    """Every change found in the history store (`history.HistoryChange`s: slower, faster,
    environment or status), newest first within each machine class, regressions first,
    each with its series' smallest findable step; with `include_blind` (what `history
    changes` prints), also a `too-noisy` entry for each series that cannot see a step of
    `min_effect`."""
    from kscperf import history

    with history.open_store(store) as opened:
        return history.find_changes(opened, min_effect=min_effect, include_blind=include_blind)


def history_check(store: str = DEFAULT_STORE, *,
                  min_effect: float = DEFAULT_MIN_EFFECT) -> Any:
    """The store's changes and the regressions opened by its newest build
    (`history.HistoryCheck`; `.failed` when there are any)."""
    import dataclasses

    from kscperf import history
    from kscperf.history import compilehistory

    with history.open_store(store) as opened:
        check = history.check_newest(opened, min_effect=min_effect)
        return dataclasses.replace(check, compile_opened=compilehistory.opened_compile_regressions(
            opened.builds()))


def build_dashboard(store: str = DEFAULT_STORE, output: str = "dashboard", *,
                    min_effect: float = DEFAULT_MIN_EFFECT) -> str:
    """Write the static dashboard of the history store `store` into the folder `output`
    (index.html and one page per model and per benchmark; it opens from disk with no
    server and no network) and return the path of its front page."""
    from kscperf import history
    from kscperf.views import dashboard

    with history.open_store(store) as opened:
        return dashboard.write_dashboard(opened, output, min_effect=min_effect)


def bisect_commits(config: RunConfig | str, *, good: str, bad: str, repo: str | None = None,
                   builds_file: str | None = None, cache_dir: str = BISECT_CACHE,
                   build_cmd: str | None = None, python: str | None = None,
                   env: Sequence[tuple[str, str]] = (),
                   error: float = _bisection.DEFAULT_ERROR,
                   max_pairs: int = _bisection.DEFAULT_MAX_PAIRS, resume: bool = False,
                   by: str = "time", instruction_processes: int = 3,
                   on_event: Any = None, **settings: Any) -> Any:
    """The commit that made the step between `good` and `bad` (docs/method.md, "Bisecting a
    step"): in the git repository `repo`, each commit checked out under `cache_dir` and
    built with `build_cmd`, its workers run by `python` (relative to the checkout or
    absolute) with `env` (where `{checkout}` is the checkout); or between two labels of a
    `builds_file`. `config` is a `RunConfig` (paths relative to the repository are read from
    each checkout), or one definition path with `settings` as `run` takes them. `by`
    "instructions" compares commits by their instruction counts instead of lockstep time,
    each commit counted once in `instruction_processes` processes. Returns a
    `bisect.records.BisectResult` (`verdict` culprit, not-reproduced or range). Raises
    KscperfError for bad input, and BisectInterrupted on Ctrl-C with the finished
    comparisons kept for `resume=True`; `on_event` is told of each step's progress."""
    from kscperf.bisect import builds, drive

    if isinstance(config, str):
        config = _config((config,), settings)
    request = drive.BisectRequest(
        good=good, bad=bad, config=config, cache_dir=cache_dir, repo=repo,
        builds_file=builds_file, recipe=builds.BuildRecipe(build_cmd, python, tuple(env)),
        error=error, max_pairs=max_pairs, resume=resume, by=by,
        instruction_processes=instruction_processes)
    return drive.run_bisect(request, on_event)
