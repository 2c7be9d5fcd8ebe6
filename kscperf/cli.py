"""`run-benchmarks`: argparse, one typed `RunConfig` built from it, one thin `cmd_<name>` per
subcommand over the Python API, and the only module that prints. A `KscperfError` becomes
one line on stderr and exit status 2.

Exit status: 0 when every cell is ok, skipped or unsupported; 1 when any is incorrect,
failed, timeout, crashed or oom, or a definition module is broken (results still written),
and for `history check` when the newest build opened a regression; 2 for bad usage or
unreadable input; 130 when interrupted (what was measured is written).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any, Callable, Sequence

from kscperf import __version__
from kscperf.cliargs import cpu_list as _cpu_list, env_assignment as _env_assignment, \
    non_negative_int as _non_negative_int, positive_float as _positive_float, \
    positive_int as _positive_int
from kscperf.errors import KscperfError
from kscperf.paths import BISECT_CACHE, DEFAULT_STORE, RESULTS_DIR
from kscperf.spec import COMPILE_CACHES, ISOLATIONS, WorkerSettings
from kscperf.stats.bisection import DEFAULT_ERROR as DEFAULT_BISECT_ERROR, DEFAULT_MAX_PAIRS
from kscperf.stats.core import DEFAULT_MIN_EFFECT, INSTRUCTIONS_MIN_EFFECT

__all__ = ["main", "build_parser"]

SUBCOMMANDS = ("run", "ab", "list", "check", "compare", "report", "merge", "history",
               "dashboard", "bisect")

# The defaults of the options that set a run's worker settings: their one source.
_WORKER = WorkerSettings()


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="definition files or folders (default: the shipped bench_defs/)")
    p.add_argument("-k", dest="patterns", action="append", metavar="PATTERN",
                   help="keep cells whose model/tool/task contains PATTERN (repeatable)")
    p.add_argument("--tools", help="comma list of tools (default: all)")
    p.add_argument("--tasks", help="comma list of tasks: inference,fwd,bwd,jacobian")
    p.add_argument("--tool-plugin", dest="tool_plugins", action="append", default=[],
                   metavar="[NAME=]MODULE:OBJ",
                   help="register a third-party compiler tool (repeatable)")
    p.add_argument("--shard", metavar="I/N",
                   help="only shard I of N of the cells (1-based), split evenly by expected cost")
    p.add_argument("--balance", metavar="FILE",
                   help="with --shard: take each cell's expected cost from this earlier "
                        "results file (default: an estimate by tool)")


def _add_execution(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", dest="timeout_s", type=_positive_float,
                   default=_WORKER.timeout_s, metavar="SECONDS",
                   help="kill one process of a cell after this long (default %(default)g)")
    p.add_argument("--seed", type=_non_negative_int, default=_WORKER.seed,
                   help="input seed (default %(default)s)")
    p.add_argument("--isolation", choices=ISOLATIONS, default=_WORKER.isolation,
                   help="fork workers from a preloaded zygote, or spawn them "
                        "(default %(default)s)")
    p.add_argument("--jacobian-max-elements", type=_positive_int,
                   default=_WORKER.jacobian_max_elements,
                   help="skip jacobian configs with more entries (default %(default)d)")
    p.add_argument("--max-rss", dest="max_rss_bytes", type=_positive_int, metavar="BYTES",
                   default=_WORKER.max_rss_bytes,
                   help="cap a worker's memory; over it the cell is oom")
    p.add_argument("--affinity", type=_cpu_list, default=_WORKER.affinity, metavar="CPUS",
                   help="pin workers to these CPUs (e.g. 1 or 0-3,6), one torch thread each")


def _add_timing(p: argparse.ArgumentParser) -> None:
    profile = p.add_mutually_exclusive_group()
    profile.add_argument("--fast", dest="profile", action="store_const", const="fast")
    profile.add_argument("--rigorous", dest="profile", action="store_const", const="rigorous")
    p.add_argument("--processes", type=_positive_int, help="worker processes per cell")
    p.add_argument("--values", type=_positive_int, help="values per process")
    p.add_argument("--warmups", type=_non_negative_int, help="warmup values per process")
    p.add_argument("--min-time", type=_positive_float, help="seconds one value lasts at least")
    p.add_argument("--compile-cache", choices=COMPILE_CACHES, default=_WORKER.compile_cache,
                   help="cold: every worker gets empty compiler caches (default %(default)s)")
    p.add_argument("--explain", action="store_true", help="profile each config's ops after "
                   "its timing, for compare --explain (docs/method.md, 'Explaining a change')")


def _add_min_effect(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-effect", type=_positive_float, default=DEFAULT_MIN_EFFECT,
                   help="smallest relative change called faster/slower (default %(default)g)")


def _add_instructions(p: argparse.ArgumentParser) -> None:
    p.add_argument("--instructions", action="store_true",
                   help="after the timing, count each CPU cell's instructions per call "
                        "(docs/method.md, 'Counting instructions')")
    p.add_argument("--instruction-processes", type=_positive_int, default=2, metavar="N",
                   help="counting processes per cell, 2 or more (default %(default)d)")
    _add_instruction_counter(p)


def _add_instruction_counter(p: argparse.ArgumentParser) -> None:
    p.add_argument("--instruction-counter", choices=("auto", "perf", "callgrind"),
                   default="auto", help="the CPU's hardware counter (perf), Valgrind's "
                   "Callgrind, or auto: perf where the machine has one (default)")


def _add_instructions_min_effect(p: argparse.ArgumentParser) -> None:
    p.add_argument("--instructions-min-effect", type=_positive_float,
                   default=INSTRUCTIONS_MIN_EFFECT,
                   help="smallest relative change of an instruction count called "
                        "faster/slower (default %(default)g)")


def _add_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "markdown", "json"), default="table",
                   help="how to print it (default %(default)s)")


def _add_comparison(p: argparse.ArgumentParser) -> None:
    _add_min_effect(p)
    _add_format(p)
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when anything got significantly slower, incorrect or failing")
    p.add_argument("--explain-all", dest="explain_which", action="store_const", const="all",
                   default="", help="the op diff of every run-time benchmark both builds profiled")


def build_parser() -> argparse.ArgumentParser:
    """The `run-benchmarks` argument parser."""
    parser = argparse.ArgumentParser(
        prog="run-benchmarks",
        description="Correctness-checked, process-isolated pyperf benchmarks of "
                    "differentiable functions across tools and tasks.")
    parser.add_argument("--version", action="version", version=f"kscperf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run the benchmarks (the default command)")
    _add_selection(run)
    _add_execution(run)
    _add_timing(run)
    run.add_argument("--build", help="build label (default: git commit of the working "
                                     "directory, with -dirty; else a timestamp)")
    run.add_argument("-o", "--output", metavar="FILE", help="results file "
                     f"(default {RESULTS_DIR}/<build>.json)")
    run.add_argument("--replace", action="store_true", help="overwrite an existing -o FILE")
    run.add_argument("--resume", metavar="FILE",
                     help="finish an incomplete results file, skipping what it holds")
    run.add_argument("--report", metavar="HTML", help="also write the HTML report")
    run.add_argument("--baseline", metavar="FILE", help="compare with this build in --report")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    _add_instructions(run)

    ab = sub.add_parser(
        "ab", help="run two builds in lockstep and compare them",
        description="Run every cell in two builds at once, their workers taking turns value "
                    "by value, write one results file per build, and print the comparison. "
                    "Pairing cancels the drift of a shared machine that separate runs cannot "
                    "(see docs/method.md, 'Two builds in lockstep'). Without --affinity, both "
                    "builds' workers run on the last CPU available, with one torch thread.")
    _add_selection(ab)
    _add_execution(ab)
    _add_timing(ab)
    for side in ("base", "new"):
        ab.add_argument(f"--{side}-python", default=sys.executable, metavar="PYTHON",
                        help=f"the Python that runs the {side.upper()} build's workers, with "
                             "torch and the code under test installed (default: this one)")
        ab.add_argument(f"--{side}-env", action="append", default=[], type=_env_assignment,
                        metavar="NAME=VALUE",
                        help=f"set a variable for the {side.upper()} build's workers "
                             "(repeatable)")
        ab.add_argument(f"--{side}-build", default=side, metavar="LABEL",
                        help=f"the {side.upper()} build's label and file name "
                             f"(default {side})")
    ab.add_argument("-o", "--output-dir", metavar="DIR",
                    help=f"where LABEL.json of each build goes (default {RESULTS_DIR}/ab-<time>)")
    ab.add_argument("--replace", action="store_true", help="overwrite existing files")
    ab.add_argument("--report", metavar="HTML", help="also write the HTML report")
    _add_comparison(ab)
    _add_instructions(ab)
    _add_instructions_min_effect(ab)
    ab.add_argument("--until-resolved", action="store_true",
                    help="after the profile's process pairs, add pairs to every cell whose "
                         "run-time verdict is open until its interval is wholly beyond or "
                         "within --min-effect, or --budget is spent (docs/method.md, "
                         "'Running until resolved')")
    ab.add_argument("--budget", dest="budget_s", type=_positive_float, default=600.0,
                    metavar="SECONDS",
                    help="with --until-resolved: start no pair that would end after this "
                         "many seconds of the whole run (default 600)")
    ab.add_argument("-q", "--quiet", action="store_true", help="no progress lines")

    lst = sub.add_parser("list", help="print the cells without running them")
    _add_selection(lst)

    chk = sub.add_parser("check", help="run the correctness checks only, without timing")
    _add_selection(chk)
    _add_execution(chk)
    chk.add_argument("-q", "--quiet", action="store_true", help="no progress lines")

    cmp_ = sub.add_parser("compare", help="compare two builds' results files")
    cmp_.add_argument("base", metavar="BASE")
    cmp_.add_argument("new", metavar="NEW")
    _add_comparison(cmp_)
    _add_instructions_min_effect(cmp_)
    cmp_.add_argument("--force", action="store_true",
                      help="compare even across machines, torch versions or profiles")
    cmp_.add_argument("--explain", action="store_true", help="the op diff of each run-time "
                      "regression, from files recorded with run --explain")

    rep = sub.add_parser("report", help="write a self-contained HTML report")
    rep.add_argument("files", nargs="+", metavar="FILE", help="results files, oldest first")
    rep.add_argument("-o", "--output", required=True, metavar="HTML")
    rep.add_argument("--force", action="store_true",
                     help="compare even across machines, torch versions or profiles")

    mrg = sub.add_parser("merge", help="merge shard results of one build into one file")
    mrg.add_argument("files", nargs="+", metavar="FILE")
    mrg.add_argument("-o", "--output", required=True, metavar="FILE")
    mrg.add_argument("--allow-partial", action="store_true",
                     help="merge even with shards missing; the result is marked incomplete")
    _add_history(sub)
    _add_bisect(sub)
    return parser


def _add_bisect(sub: Any) -> None:
    bis = sub.add_parser("bisect", help="find the commit of a step between two builds",
                         description="Confirm the step between GOOD and BAD in lockstep, "
                         "probe commits between them until each part of it lies at one "
                         "commit (or a stretch that cannot be built), verify each culprit "
                         "against its parent (docs/method.md, 'Bisecting a step').")
    _add_selection(bis)
    _add_execution(bis)
    _add_timing(bis)
    bis.add_argument("--repo", metavar="DIR", help="the git repository of the code under test")
    bis.add_argument("--builds", dest="builds_file", metavar="FILE",
                     help="instead of --repo: ready environments, 'LABEL PYTHON' per line")
    bis.add_argument("--good", required=True, metavar="COMMIT", help="the build before the step")
    bis.add_argument("--bad", required=True, metavar="COMMIT", help="the build after it")
    bis.add_argument("--cache", dest="cache_dir", default=BISECT_CACHE, metavar="DIR",
                     help="worktrees, builds and state, kept between bisects "
                          "(default %(default)s)")
    bis.add_argument("--build-cmd", metavar="CMD",
                     help="run in each checkout; a commit whose command fails is untestable")
    bis.add_argument("--python", metavar="PYTHON", help="the workers' Python, relative to the "
                     "checkout or absolute (default: this one)")
    bis.add_argument("--env", action="append", default=[], type=_env_assignment,
                     metavar="NAME=VALUE", help="a variable for the workers and the build; "
                     "{checkout} is the commit's checkout (repeatable)")
    bis.add_argument("--error", type=_positive_float, default=DEFAULT_BISECT_ERROR,
                     help="the chance of a wrong culprit allowed (default %(default)g)")
    bis.add_argument("--max-pairs", type=_positive_int, default=DEFAULT_MAX_PAIRS,
                     help="pairs a probe adds before it says can't-tell (default %(default)d)")
    bis.add_argument("--resume", action="store_true",
                     help="go on from the state an interrupted bisect of this range kept")
    bis.add_argument("--by", choices=("time", "instructions"), default="time",
                     help="compare commits by lockstep time (default), or by instructions "
                          "counted, one counting run a commit")
    bis.add_argument("--instruction-processes", type=_positive_int, default=3, metavar="N",
                     help="with --by instructions: counting processes a commit (default "
                          "%(default)d, at least 3)")
    _add_instruction_counter(bis)
    _add_format(bis)
    bis.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def _add_store(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=DEFAULT_STORE, metavar="DIR",
                   help="the history store folder (default: %(default)s)")


def _add_history(sub: Any) -> None:
    hist = sub.add_parser(
        "history", help="keep builds in a history store and find the changes over them",
        description="A history store keeps results files in build order with an SQLite "
                    "index; see docs/dashboard.md.")
    actions = hist.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add results files, or ab -o folders with their "
                                         "lockstep links, to the store (all or none)")
    add.add_argument("files", nargs="+", metavar="FILE|DIR")
    _add_store(add)
    add.add_argument("--machine", metavar="CLASS",
                     help="the machine class of these files (default: their host)")
    add.add_argument("--allow-incomplete", action="store_true",
                     help="accept interrupted runs and partial merges")
    rebuild = actions.add_parser("rebuild", help="recreate the index from the stored files")
    _add_store(rebuild)
    for name, text in (("changes", "list every change found in the store"),
                       ("check", "exit 1 when the newest build opens a regression; print a "
                                 "markdown summary")):
        p = actions.add_parser(name, help=text)
        _add_store(p)
        _add_min_effect(p)
        if name == "changes":
            _add_format(p)
    dash = sub.add_parser("dashboard", help="write the static dashboard of a history store")
    _add_store(dash)
    dash.add_argument("-o", "--output", required=True, metavar="DIR",
                      help="the folder to write (index.html and the pages)")
    _add_min_effect(dash)


def _config(args: argparse.Namespace, check_only: bool = False) -> Any:
    """The run configuration of the parsed options, built once: an option's destination is
    the name of the `RunConfig` field it sets."""
    from kscperf.orchestrator.session import RunConfig

    given = vars(args)
    fields = {f.name: given[f.name] for f in dataclasses.fields(RunConfig)
              if given.get(f.name) is not None}
    for name in ("paths", "patterns", "tool_plugins"):
        if name in fields:
            fields[name] = tuple(fields[name])
    fields["check_only"] = check_only
    return RunConfig(**fields)


def _err(text: str) -> None:
    from kscperf.views.formatting import safe_text

    print(safe_text(text), file=sys.stderr, flush=True)


def _printer(quiet: bool, view: str) -> Callable[..., None] | None:
    """None when `quiet`, else a callback printing `kscperf.views.progress.<view>` of what
    it is told to standard error."""
    from kscperf.views import progress

    def show(*told: Any) -> None:
        print(getattr(progress, view)(*told), file=sys.stderr, flush=True)

    return None if quiet else show


def _prepared(args: argparse.Namespace, config: Any, builds: list[Any], **options: Any) -> Any:
    """The session, checked; definition problems are reported before anything runs."""
    from kscperf.orchestrator.session import prepare_session

    session = prepare_session(config, builds, **options)
    for p in session.selection.problems:
        _err(f"error: {p.message}")
    return session


def cmd_list(args: argparse.Namespace) -> int:
    """`list`: the selected cells, one per line, without running them."""
    from kscperf.orchestrator.session import select_cells
    from kscperf.views.formatting import safe_text

    selection = select_cells(_config(args))
    for cell in selection.cells:
        note = f"  (skipped: {cell.skip_reason})" if cell.skip_reason else ""
        print(safe_text(f"{cell.name}  [{cell.model.module_path}]{note}"))
    print(f"{len(selection.cells)} cells", file=sys.stderr)
    for p in selection.problems:
        _err(f"warning: {p.message}")
    return 1 if selection.problems else 0


def _print_tables(loaded: Any, check_only: bool) -> str:
    """The run's tables (run time, compile, compile panel), or the check table; what the
    summary line adds about values marked as timed in another machine state."""
    from kscperf.compare.compilestats import cell_panels
    from kscperf.views.compileview import format_panel_table
    from kscperf.views.formatting import format_check_table, format_compile_table, \
        format_run_table, machine_state_note
    from kscperf.results.samples import build_samples, odd_value_count, summarize_build

    marked = ""
    if check_only:
        print(format_check_table(loaded.cells))
        return marked
    build = build_samples(loaded)
    tools, rows = summarize_build(loaded, build)
    print(format_run_table(tools, rows))
    note = machine_state_note(odd_value_count(rows), build.odd_processes)
    if note:
        print(note)
        marked = f"; {odd_value_count(rows)} marked {note[0]}"
    compile_table = format_compile_table(tools, rows)
    if compile_table:
        print("\n" + compile_table)
    panel_table = format_panel_table(cell_panels(loaded.runs))
    if panel_table:
        print("\n" + panel_table)
    return marked


def _print_outcome(result: Any, check_only: bool) -> None:
    from kscperf.views.formatting import format_seconds

    loaded = result.loaded[0]
    marked = _print_tables(loaded, check_only)
    counts: dict[str, int] = {}
    for cell in loaded.cells:
        counts[cell.status.value] = counts.get(cell.status.value, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    print(f"\n{len(loaded.cells)} results ({summary}{marked}) in "
          f"{format_seconds(result.wall_s)} wall time")
    if result.outputs[0]:
        print(f"wrote {result.outputs[0]}")


def _run_one_build(args: argparse.Namespace, check_only: bool, build: Any,
                   **options: Any) -> tuple[Any, int | None]:
    """Run one build; the result, and the exit status when the run was interrupted."""
    session = _prepared(args, _config(args, check_only), [build], **options)
    result = session.run(_printer(args.quiet, "format_progress"),
                         on_running=_printer(args.quiet, "format_running"))
    output = result.outputs[0]
    if result.interrupted:
        if output:
            # What was measured comes first: the resume hint is the last thing to read.
            from kscperf import api

            _print_tables(api.load(output), check_only)
            sys.stdout.flush()
            _err(f"interrupted: wrote the {len(result.runs[0])} results measured so far to "
                 f"{output}, marked incomplete; finish it with --resume {output}")
        else:
            _err("interrupted")
        return result, result.exit_status()
    _print_outcome(result, check_only)
    return result, None


def cmd_run(args: argparse.Namespace) -> int:
    """`run`: every selected cell timed, the results file written, the run table printed."""
    from kscperf import api

    result, interrupted = _run_one_build(
        args, False, api.Build(label=args.build, output=args.output), replace=args.replace,
        resume=args.resume)
    if interrupted is not None:
        return interrupted
    if args.report:
        baseline = [args.baseline] if args.baseline else []
        print(f"wrote {api.write_report([*baseline, result.loaded[0]], args.report)}")
    return int(result.exit_status())


def cmd_check(args: argparse.Namespace) -> int:
    """`check`: the correctness checks of every selected cell, one process each, no timing."""
    from kscperf import api

    result, interrupted = _run_one_build(args, True, api.Build())
    return interrupted if interrupted is not None else int(result.exit_status())


def _explain_which(args: argparse.Namespace) -> str:
    """The op diffs to print: "all" (--explain-all), "regressions" (--explain) or ""."""
    return args.explain_which or ("regressions" if args.explain else "")


def cmd_ab(args: argparse.Namespace) -> int:
    """`ab`: two builds in lockstep, one results file each, and their comparison printed."""
    from kscperf import api
    from kscperf.views.formatting import format_comparison, format_seconds

    builds = [api.Build(label=args.base_build, python=args.base_python, env=tuple(args.base_env)),
              api.Build(label=args.new_build, python=args.new_python, env=tuple(args.new_env))]
    explain = _explain_which(args)
    config = dataclasses.replace(_config(args), explain=bool(explain))
    session = _prepared(args, config, builds, replace=args.replace, output_dir=args.output_dir)
    result = session.run(_printer(args.quiet, "format_progress"),
                         _printer(args.quiet, "format_look"))
    written = " and ".join(result.outputs)
    if result.interrupted:
        _err(f"interrupted: wrote what both builds measured so far to {written}, marked "
             "incomplete")
        return int(result.exit_status())
    comparison = api.compare_builds(*result.loaded, min_effect=args.min_effect,
                                    instructions_min_effect=args.instructions_min_effect)
    print(format_comparison(comparison, args.format, explain=explain))
    _err(f"{result.workers} worker pairs in {format_seconds(result.wall_s)} wall time; wrote "
         f"{written}")
    if args.instructions:
        _err("instructions: counted once both builds were timed, BASE then NEW, one after "
             "the other (a count needs no lockstep)")
    runs = result.runs[0] + result.runs[1]
    unpaired = [r for r in runs if r.metadata.get("lockstep_unpaired_values")]
    if unpaired:
        _err(f"warning: {len(unpaired)} of {len(runs)} workers timed some values without their "
             "partner taking turns (it ended or hung first): see lockstep_unpaired_values")
    if args.report:
        _err(f"wrote {api.write_report(result.loaded, args.report)}")
    return int(result.exit_status(args.fail_on_regression and comparison.has_regression))


_BISECT_OPTIONS = ("good", "bad", "repo", "builds_file", "cache_dir", "build_cmd", "python",
                   "error", "max_pairs", "resume", "by", "instruction_processes")


def cmd_bisect(args: argparse.Namespace) -> int:
    """`bisect`: the culprit of a step, printed as a table, markdown or JSON."""
    from kscperf import api
    from kscperf.views.bisecttext import format_bisect, format_bisect_event

    try:
        given = {name: getattr(args, name) for name in _BISECT_OPTIONS}
        result = api.bisect_commits(_config(args), env=tuple(args.env), **given, on_event=None
                            if args.quiet else lambda e: _err(format_bisect_event(e)))
    except api.BisectInterrupted as stop:
        _err(f"interrupted: {stop.finished} finished comparisons kept in {stop.state_path}; "
             "go on with the same command and --resume")
        return 130
    print(format_bisect(result, args.format))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """`compare`: NEW against BASE, printed as a table, markdown or JSON."""
    from kscperf import api
    from kscperf.views.formatting import format_comparison

    comparison = api.compare_builds(args.base, args.new, min_effect=args.min_effect,
                                    force=args.force,
                                    instructions_min_effect=args.instructions_min_effect)
    print(format_comparison(comparison, args.format, explain=_explain_which(args)))
    return 1 if args.fail_on_regression and comparison.has_regression else 0


def cmd_report(args: argparse.Namespace) -> int:
    """`report`: the HTML report of the given results files."""
    from kscperf import api

    print(f"wrote {api.write_report(args.files, args.output, force=args.force)}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """`merge`: one build's shard files joined into one results file."""
    from kscperf import api

    print(f"wrote {api.merge_shards(args.files, args.output, allow_partial=args.allow_partial)}")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    """`history add|rebuild|changes|check`: the history store."""
    from kscperf import api, history
    from kscperf.views import confirm
    from kscperf.views.formatting import safe_text
    from kscperf.views.historytext import build_text, format_history_changes, format_history_check

    if args.action == "add":
        added = api.history_add(args.files, args.store, machine=args.machine,
                                allow_incomplete=args.allow_incomplete)
        for b in added:
            print(safe_text(f"added {build_text(b.label, b.git_commit)} ({b.machine_class}, "
                            f"build {b.position + 1}) as {b.file}"))
        return 0
    if args.action == "rebuild":
        print(f"rebuilt the index of {args.store}: {api.history_rebuild(args.store)} builds")
        return 0
    if args.action == "changes":
        changes = api.history_changes(args.store, min_effect=args.min_effect,
                                      include_blind=True)
        print(format_history_changes(changes, args.format))
        return 0
    check = api.history_check(args.store, min_effect=args.min_effect)
    print(format_history_check(check, confirm.confirm_commands, history.change_explanation))
    return 1 if check.failed else 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    """`dashboard`: the static site of a history store."""
    from kscperf import api

    print(f"wrote {api.build_dashboard(args.store, args.output, min_effect=args.min_effect)}")
    return 0


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run, "ab": cmd_ab, "list": cmd_list, "check": cmd_check, "compare": cmd_compare,
    "report": cmd_report, "merge": cmd_merge, "history": cmd_history,
    "dashboard": cmd_dashboard, "bisect": cmd_bisect,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default sys.argv[1:]), run the command, return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, "run")
    args = build_parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except KscperfError as exc:
        _err(f"run-benchmarks: error: {exc}")
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
