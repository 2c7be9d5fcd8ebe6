"""`run-benchmarks`: argparse, one thin `cmd_<name>` per subcommand, and the only module
that prints. A `KscperfError` becomes one line on stderr and exit status 2.

Exit status: 0 when every cell is ok, skipped or unsupported; 1 when any is incorrect,
failed, timeout, crashed or oom, or a definition module is broken (results still written);
2 for bad usage or unreadable input.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from kscperf import __version__
from kscperf.errors import BAD_STATUSES, CellStatus, KscperfError

__all__ = ["main", "build_parser"]

SUBCOMMANDS = ("run", "ab", "list", "check", "compare", "report", "merge")
_PARTIAL_WRITE_INTERVAL_S = 10.0


def _shipped_bench_defs() -> str:
    path = Path(__file__).resolve().parent.parent / "bench_defs"
    if not path.is_dir():
        raise KscperfError("no PATH given and the shipped bench_defs/ folder is not here; "
                           "pass the files or folders of benchmark definitions to run.")
    return str(path)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0")
    return value


def _cpu_list(text: str) -> tuple[int, ...]:
    cpus: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.partition("-")
            cpus += range(int(low), int(high or low) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a CPU list like 0-3,6") from None
    available = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(cpus)
    missing = sorted(set(cpus) - set(available))
    if not cpus or missing:
        raise argparse.ArgumentTypeError(f"CPUs {missing} are not available to this process")
    return tuple(sorted(set(cpus)))


def _env_assignment(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not name.replace("_", "a").isalnum() or name[0].isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="definition files or folders (default: the shipped bench_defs/)")
    p.add_argument("-k", dest="patterns", action="append", metavar="PATTERN",
                   help="keep cells whose model/tool/task contains PATTERN (repeatable)")
    p.add_argument("--tools", help="comma list of tools (default: all)")
    p.add_argument("--tasks", help="comma list of tasks: inference,fwd,bwd,jacobian")
    p.add_argument("--tool-plugin", action="append", default=[], metavar="[NAME=]MODULE:OBJ",
                   help="register a third-party compiler tool (repeatable)")
    p.add_argument("--shard", metavar="I/N", help="only shard I of N of the cells (1-based)")


def _add_execution(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=_positive_float, default=600.0, metavar="SECONDS",
                   help="kill one process of a cell after this long (default 600)")
    p.add_argument("--seed", type=_non_negative_int, default=0, help="input seed (default 0)")
    p.add_argument("--isolation", choices=("fork", "spawn"), default="fork",
                   help="fork workers from a preloaded zygote (default) or spawn them")
    p.add_argument("--jacobian-max-elements", type=_positive_int, default=1_000_000,
                   help="skip jacobian configs with more entries (default 1000000)")
    p.add_argument("--max-rss", type=_positive_int, metavar="BYTES",
                   help="cap a worker's memory; over it the cell is oom")
    p.add_argument("--affinity", type=_cpu_list, default=(), metavar="CPUS",
                   help="pin workers to these CPUs (e.g. 1 or 0-3,6), one torch thread each")


def _add_timing(p: argparse.ArgumentParser) -> None:
    profile = p.add_mutually_exclusive_group()
    profile.add_argument("--fast", dest="profile", action="store_const", const="fast")
    profile.add_argument("--rigorous", dest="profile", action="store_const", const="rigorous")
    p.set_defaults(profile="default")
    p.add_argument("--processes", type=_positive_int, help="worker processes per cell")
    p.add_argument("--values", type=_positive_int, help="values per process")
    p.add_argument("--warmups", type=_non_negative_int, help="warmup values per process")
    p.add_argument("--min-time", type=_positive_float, help="seconds one value lasts at least")
    p.add_argument("--compile-cache", choices=("warm", "cold"), default="warm",
                   help="cold: every worker gets empty compiler caches (default warm)")


def _add_comparison(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-effect", type=_positive_float, default=0.05,
                   help="smallest relative change called faster/slower (default 0.05)")
    p.add_argument("--format", choices=("table", "markdown", "json"), default="table")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when anything got significantly slower, incorrect or failing")


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
                     "(default results/<build>.json)")
    run.add_argument("--replace", action="store_true", help="overwrite an existing -o FILE")
    run.add_argument("--resume", metavar="FILE",
                     help="finish an incomplete results file, skipping what it holds")
    run.add_argument("--report", metavar="HTML", help="also write the HTML report")
    run.add_argument("--baseline", metavar="FILE", help="compare with this build in --report")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress lines")

    ab = sub.add_parser(
        "ab", help="run two builds in lockstep and compare them",
        description="Run every cell in two builds at once, their workers taking turns value "
                    "by value, write one results file per build, and print the comparison. "
                    "Pairing cancels the drift of a shared machine that separate runs cannot "
                    "(see README, 'Two builds in lockstep'). Without --affinity, both builds' "
                    "workers run on the last CPU available, with one torch thread.")
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
                    help="where LABEL.json of each build goes (default results/ab-<time>)")
    ab.add_argument("--replace", action="store_true", help="overwrite existing files")
    ab.add_argument("--report", metavar="HTML", help="also write the HTML report")
    _add_comparison(ab)
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
    cmp_.add_argument("--force", action="store_true",
                      help="compare even across machines, torch versions or profiles")

    rep = sub.add_parser("report", help="write a self-contained HTML report")
    rep.add_argument("files", nargs="+", metavar="FILE", help="results files, oldest first")
    rep.add_argument("-o", "--output", required=True, metavar="HTML")
    rep.add_argument("--force", action="store_true",
                     help="compare even across machines, torch versions or profiles")

    mrg = sub.add_parser("merge", help="merge shard results of one build into one file")
    mrg.add_argument("files", nargs="+", metavar="FILE")
    mrg.add_argument("-o", "--output", required=True, metavar="FILE")
    return parser


def _err(text: str) -> None:
    from kscperf.formatting import safe_text

    print(safe_text(text), file=sys.stderr, flush=True)


def _select(args: argparse.Namespace) -> tuple[list[Any], list[Any], list[str]]:
    from kscperf import definitions, plan, tools
    from kscperf.envinfo import cuda_driver_present

    files = definitions.find_definition_files(args.paths or [_shipped_bench_defs()])
    models, problems = definitions.scan_models(files)
    try:
        plugins = tools.plugin_tool_names(tuple(args.tool_plugin))
    except ValueError as exc:
        raise KscperfError(f"{exc}.") from None
    tool_names = plan.resolve_tools(args.tools, list(plugins))
    task_names = plan.resolve_tasks(args.tasks)
    cells = plan.plan_cells(models, tool_names, task_names, args.patterns,
                            cuda_present=cuda_driver_present())
    if getattr(args, "shard", None):
        cells = plan.shard_cells(cells, *plan.parse_shard(args.shard))
    if not cells and not problems:
        raise KscperfError("no cell matches: check PATH, -k, --tools and --tasks "
                           "(`run-benchmarks list` shows what there is).")
    return cells, problems, tool_names


def cmd_list(args: argparse.Namespace) -> int:
    cells, problems, _ = _select(args)
    from kscperf.formatting import safe_text

    for cell in cells:
        note = f"  (skipped: {cell.skip_reason})" if cell.skip_reason else ""
        print(safe_text(f"{cell.name}  [{cell.model.module_path}]{note}"))
    print(f"{len(cells)} cells", file=sys.stderr)
    for p in problems:
        _err(f"warning: {p.message}")
    return 1 if problems else 0


def _default_build(metadata: dict[str, Any]) -> str:
    if metadata.get("git_commit"):
        return metadata["git_commit"][:12] + ("-dirty" if metadata.get("git_dirty") else "")
    return time.strftime("%Y%m%d-%H%M%S")


def _build_metadata(args: argparse.Namespace, profile_name: str, profile: Any) -> dict[str, Any]:
    from kscperf import __version__ as version
    from kscperf.envinfo import git_info, library_versions, machine_info, now_iso

    md: dict[str, Any] = {"date": now_iso(), "kscperf_version": version}
    md.update(git_info(os.getcwd()))
    md.update(machine_info())
    md.update(library_versions())
    md.update(profile=profile_name, processes=profile.processes, values=profile.values,
              warmups=profile.warmups, min_time=profile.min_time, seed=args.seed,
              isolation=args.isolation, compile_cache=getattr(args, "compile_cache", "warm"),
              worker_affinity=",".join(map(str, args.affinity)) or "none")
    md["build"] = getattr(args, "build", None) or _default_build(md)
    return md


def _progress_printer(quiet: bool) -> Callable[..., None]:
    from kscperf.formatting import format_seconds, safe_text

    def show(p: Any, label: str = "") -> None:
        if quiet:
            return
        eta = f" ETA {format_seconds(p.eta_s)}" if p.eta_s is not None and p.done < p.total else ""
        status = p.result.worst_status().value
        reason = ""
        if status not in ("ok",):
            bad = next((c for c in p.result.configs if c.status.value == status), None)
            reason = ": " + (bad.reason if bad else p.result.reason)
            reason = reason[:160]
        wall = f" {format_seconds(p.result.wall_s)}" if p.result.wall_s else ""
        print(safe_text(f"[{p.done}/{p.total}{eta}] {label}{p.cell.name} "
                        f"#{p.process_index + 1} {status}{wall}{reason}"), file=sys.stderr,
              flush=True)

    return show


def _install_sigterm() -> None:
    def raise_interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, raise_interrupt)


def _profile(args: argparse.Namespace, check_only: bool = False) -> tuple[str, Any]:
    from kscperf.spec import PROFILES, TimingProfile

    base = PROFILES["fast" if check_only else args.profile]
    return ("check" if check_only else args.profile), TimingProfile(
        processes=1 if check_only else (args.processes or base.processes),
        values=getattr(args, "values", None) or base.values,
        warmups=base.warmups if getattr(args, "warmups", None) is None else args.warmups,
        min_time=getattr(args, "min_time", None) or base.min_time)


def _run_options(args: argparse.Namespace, profile: Any, check_only: bool) -> Any:
    from kscperf import orchestrator

    return orchestrator.RunOptions(
        profile=profile, seed=args.seed, timeout_s=args.timeout,
        tool_plugins=tuple(args.tool_plugin), check_only=check_only,
        compile_cache=getattr(args, "compile_cache", "warm"),
        jacobian_max_elements=args.jacobian_max_elements, max_rss_bytes=args.max_rss,
        affinity=args.affinity)


def _uses_compiler(cells: list[Any]) -> bool:
    from kscperf.tools import EAGER_TOOLS, split_device

    return any(split_device(c.tool)[0] not in EAGER_TOOLS for c in cells)


def _execute(args: argparse.Namespace, check_only: bool) -> int:
    from kscperf import orchestrator, plan, results

    cells, problems, _ = _select(args)
    profile_name, profile = _profile(args, check_only)
    metadata = _build_metadata(args, profile_name, profile)
    output = None if check_only else args.output
    prior: list[Any] = []
    if not check_only and args.resume:
        prior, prior_md = results.load_cell_runs_for_resume(args.resume)
        metadata = dict(prior_md, date=metadata["date"])
        output = output or args.resume
        if os.path.abspath(output) != os.path.abspath(args.resume):
            results.check_writable(output, args.replace)
    elif output is None and not check_only:
        output = os.path.join("results", f"{metadata['build']}.json")
        results.check_writable(output, args.replace)
    elif output is not None:
        results.check_writable(output, args.replace)
    metadata["definition_problems"] = [p.message for p in problems]
    for p in problems:
        _err(f"error: {p.message}")

    options = _run_options(args, profile, check_only)
    rounds = plan.plan_rounds(cells, profile.processes)
    gathered: list[Any] = list(prior)
    last_write = [time.monotonic()]
    show = _progress_printer(args.quiet)

    def on_result(p: Any) -> None:
        gathered.append(p.result)
        show(p)
        if output and time.monotonic() - last_write[0] > _PARTIAL_WRITE_INTERVAL_S:
            results.write_results(output, gathered, _with_worker_env(metadata, gathered),
                                  complete=False)
            last_write[0] = time.monotonic()

    launcher = orchestrator.make_launcher(args.isolation, _uses_compiler(cells))
    _install_sigterm()
    t0 = time.perf_counter()
    try:
        orchestrator.run_cells(rounds, options, launcher, on_result=on_result, prior=prior)
    except KeyboardInterrupt:
        launcher.close()
        if output:
            results.write_results(output, gathered, _with_worker_env(metadata, gathered),
                                  complete=False)
            _err(f"interrupted: wrote the {len(gathered)} results measured so far to {output}, "
                 f"marked incomplete; finish it with --resume {output}")
        else:
            _err("interrupted")
        return 130
    finally:
        launcher.close()
    wall_s = time.perf_counter() - t0
    if output:
        results.write_results(output, gathered, _with_worker_env(metadata, gathered))
    return _finish(args, gathered, output, wall_s, problems, check_only)


def _with_worker_env(metadata: dict[str, Any], runs: list[Any]) -> dict[str, Any]:
    merged = dict(metadata)
    for r in runs:
        for key, value in r.metadata.items():
            if key.startswith("malloc_"):
                merged[key] = value  # the workers' allocator settings, not the parent's
            elif key not in ("hostname", "cpu_model_name", "platform", "python_version",
                             "cpu_count", "python_executable", "cpu_affinity",
                             "lockstep_unpaired_values"):  # per run, not per build
                merged.setdefault(key, value)
    return merged


def _finish(args: argparse.Namespace, runs: list[Any], output: str | None, wall_s: float,
            problems: list[Any], check_only: bool) -> int:
    from kscperf import compare, results
    from kscperf.formatting import format_check_table, format_run_table, format_seconds

    loaded = results.LoadedResults(path=output or "", metadata={}, benchmarks={},
                                   runs_values={}, cells=results.summarize_cells(runs), runs=runs)
    if output:
        loaded = results.load_results(output)
    if check_only:
        print(format_check_table(loaded.cells))
    else:
        tools, rows = compare.summarize_build(loaded)
        print(format_run_table(tools, rows))
    counts: dict[str, int] = {}
    for cell in loaded.cells:
        counts[cell["status"]] = counts.get(cell["status"], 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    print(f"\n{len(loaded.cells)} results ({summary}) in {format_seconds(wall_s)} wall time")
    if output:
        print(f"wrote {output}")
    if not check_only and getattr(args, "report", None):
        _write_report([loaded], args.report, args.baseline, force=False)
        print(f"wrote {args.report}")
    bad = any(CellStatus(c["status"]) in BAD_STATUSES for c in loaded.cells)
    return 1 if bad or problems else 0


def cmd_run(args: argparse.Namespace) -> int:
    return _execute(args, check_only=False)


def cmd_check(args: argparse.Namespace) -> int:
    return _execute(args, check_only=True)


def _check_imports_torch(side: str, python: str) -> None:
    import subprocess

    from kscperf.orchestrator import is_this_python

    if is_this_python(python):
        return
    try:
        proc = subprocess.run([python, "-c", "import torch"], capture_output=True, text=True,
                              timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KscperfError(f"--{side}-python {python} could not be run: {exc}.") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise KscperfError(f"--{side}-python {python} cannot import torch ({last}); install "
                           "the build under test and torch in that environment.")


def _ab_builds(args: argparse.Namespace) -> list[tuple[str, str, dict[str, str]]]:
    import shutil

    builds = []
    for side in ("base", "new"):
        given = getattr(args, f"{side}_python")
        python = shutil.which(given) if os.sep not in given else given
        if not python or not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise KscperfError(f"--{side}-python {given} is not an executable file; give "
                               "the python of the environment that holds that build.")
        _check_imports_torch(side, python)
        builds.append((getattr(args, f"{side}_build"), python,
                       dict(getattr(args, f"{side}_env"))))
    if builds[0][0] == builds[1][0]:
        raise KscperfError(f"both builds are labelled {builds[0][0]!r}; give --base-build and "
                           "--new-build different labels.")
    bad = [label for label, _, _ in builds if not label or os.sep in label or label[0] == "."]
    if bad:
        raise KscperfError(f"build label {bad[0]!r} cannot be a file name; use letters, digits, "
                           "'-' or '_'.")
    return builds


def _ab_metadata(args: argparse.Namespace, profile_name: str, profile: Any,
                 builds: list[tuple[str, str, dict[str, str]]], problems: list[Any]
                 ) -> list[dict[str, Any]]:
    import uuid

    from kscperf.orchestrator import is_this_python

    lockstep_id = uuid.uuid4().hex
    shared = _build_metadata(args, profile_name, profile)
    metadatas = []
    for role, (label, python, env) in zip(("base", "new"), builds):
        md = dict(shared)
        if not is_this_python(python):
            # This Python's versions say nothing of that build's: its workers report theirs.
            for key in [k for k in md if k.endswith("_version") and k != "kscperf_version"]:
                del md[key]
            md["python_executable"] = python
        md.update(build=label, lockstep_id=lockstep_id, lockstep_role=role,
                  build_python=python,
                  build_env=" ".join(f"{k}={v}" for k, v in sorted(env.items())) or "none",
                  definition_problems=[p.message for p in problems])
        metadatas.append(md)
    return metadatas


def _ab_file_metadata(md: dict[str, Any], runs: list[Any]) -> dict[str, Any]:
    merged = _with_worker_env(md, runs)
    if "python_version" not in md and runs and "python_version" in runs[0].metadata:
        # Another Python ran this build: its workers say which.
        merged["python_version"] = runs[0].metadata["python_version"]
    return merged


def cmd_ab(args: argparse.Namespace) -> int:
    from kscperf import compare, orchestrator, plan, results
    from kscperf.formatting import format_comparison, format_seconds

    builds = _ab_builds(args)
    if not args.affinity and hasattr(os, "sched_getaffinity"):
        # Both builds' workers on one CPU: a pair must meet the same state of the machine,
        # and a CPU left idle while the partner runs elsewhere is where a VM loses speed.
        args.affinity = (max(os.sched_getaffinity(0)),)
    cells, problems, _ = _select(args)
    profile_name, profile = _profile(args)
    out_dir = args.output_dir or os.path.join("results", time.strftime("ab-%Y%m%d-%H%M%S"))
    outputs = [os.path.join(out_dir, f"{label}.json") for label, _, _ in builds]
    for path in outputs:
        results.check_writable(path, args.replace, resumable=False, other="-o DIR")
    metadatas = _ab_metadata(args, profile_name, profile, builds, problems)
    for p in problems:
        _err(f"error: {p.message}")

    options = _run_options(args, profile, check_only=False)
    rounds = plan.plan_rounds(cells, profile.processes)
    gathered: tuple[list[Any], list[Any]] = ([], [])
    show = _progress_printer(args.quiet)

    def on_result(i: int, p: Any) -> None:
        gathered[i].append(p.result)
        show(p, f"{builds[i][0]}: ")

    # Threads that spin-wait after a parallel region would run on into the partner's value.
    passive = {} if "OMP_WAIT_POLICY" in os.environ else {"OMP_WAIT_POLICY": "PASSIVE"}
    launchers = tuple(orchestrator.make_launcher(args.isolation, _uses_compiler(cells), python,
                                                 {**passive, **env})
                      for _, python, env in builds)
    _install_sigterm()
    t0 = time.perf_counter()

    def write(complete: bool) -> None:
        for path, runs, md in zip(outputs, gathered, metadatas):
            results.write_results(path, runs, _ab_file_metadata(md, runs), complete=complete)

    try:
        orchestrator.run_cells_lockstep(rounds, options, (launchers[0], launchers[1]),
                                        on_result=on_result)
    except KeyboardInterrupt:
        write(complete=False)
        _err(f"interrupted: wrote what both builds measured so far to {' and '.join(outputs)}, "
             "marked incomplete")
        return 130
    except OSError as exc:
        write(complete=False)
        raise KscperfError(f"ab stopped: {exc}; wrote what both builds measured so far to "
                           f"{' and '.join(outputs)}, marked incomplete.") from None
    finally:
        for launcher in launchers:
            launcher.close()
    write(complete=True)
    wall_s = time.perf_counter() - t0
    loaded = [results.load_results(path) for path in outputs]
    comparison = compare.compare_builds(loaded[0], loaded[1], min_effect=args.min_effect)
    print(format_comparison(comparison, args.format))
    _err(f"{len(rounds)} worker pairs in {format_seconds(wall_s)} wall time; wrote "
         f"{' and '.join(outputs)}")
    runs = gathered[0] + gathered[1]
    unpaired = [r for r in runs if r.metadata.get("lockstep_unpaired_values")]
    if unpaired:
        _err(f"warning: {len(unpaired)} of {len(runs)} workers timed some values without their "
             "partner taking turns (it ended or hung first): see lockstep_unpaired_values")
    if args.report:
        _write_report(loaded, args.report, None, force=False)
        _err(f"wrote {args.report}")
    bad = any(CellStatus(c["status"]) in BAD_STATUSES for lr in loaded for c in lr.cells)
    if problems or bad:
        return 1
    return 1 if args.fail_on_regression and comparison.has_regression else 0


def cmd_compare(args: argparse.Namespace) -> int:
    from kscperf import compare, results
    from kscperf.formatting import format_comparison

    base, new = results.load_results(args.base), results.load_results(args.new)
    comparison = compare.compare_builds(base, new, min_effect=args.min_effect, force=args.force)
    print(format_comparison(comparison, args.format))
    return 1 if args.fail_on_regression and comparison.has_regression else 0


def _write_report(loaded: list[Any], out: str, baseline: str | None, force: bool) -> None:
    from kscperf import compare, report, results

    if baseline:
        loaded = [results.load_results(baseline)] + loaded
    comparison = None
    if len(loaded) >= 2:
        comparison = compare.compare_builds(loaded[-2], loaded[-1], force=force)
    report.write_report(out, report.render_report(loaded, comparison, force=force))


def cmd_report(args: argparse.Namespace) -> int:
    from kscperf import results

    _write_report([results.load_results(f) for f in args.files], args.output, None, args.force)
    print(f"wrote {args.output}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from kscperf import results

    results.check_writable(args.output, replace=False)
    results.merge_results(args.files, args.output)
    print(f"wrote {args.output}")
    return 0


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run, "ab": cmd_ab, "list": cmd_list, "check": cmd_check, "compare": cmd_compare,
    "report": cmd_report, "merge": cmd_merge,
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
