"""tools/truth-check's command line: its options, its sections by name and which of them
run, and the run of those in order, in one temporary folder (the usage text is the script's
docstring)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from validation.aa import aa
from validation.agreement import agreement
from validation.explain import fusion, overhead, planted, untouched
from validation.huge_pages import HUGE_PAGES_CELLS, huge_pages
from validation.instructions import instructions
from validation.lockstep_history import LOCKSTEP_PROFILE, lockstep_history
from validation.machine import covariate, machine
from validation.noise import machine_noise, machine_states
from validation.power import false_alarms, power, power_ab
from validation.until_resolved import record_pairs, simulate_until_resolved, until_resolved

# Run only when --sections names them: record-pairs writes tools/data, explain takes 30 min,
# instructions 45 min.
NAMED_ONLY = ("record-pairs", "explain", "instructions")
SECTIONS = ("record-pairs", "explain", "instructions", "until-resolved", "until-resolved-sim", "noise", "agreement",
            "false-alarms", "power", "power-ab", "machine", "covariate", "huge-pages")


def build_parser(doc: str | None) -> argparse.ArgumentParser:
    """truth-check's options, described by the first line of `doc`."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--false-alarm-tools", default="pt,ptnice,ts,compiled")
    parser.add_argument("--profile", default="default", choices=("fast", "default", "rigorous"))
    parser.add_argument("--skip", default="", help="comma list of sections to skip")
    parser.add_argument("--sections", default="",
                        help="comma list of the only sections to run (record-pairs and "
                             "explain run only when named here)")
    parser.add_argument("--machine-load", default="cycle", choices=("cycle", "none"),
                        help="another tenant during one run of most machine trials")
    parser.add_argument("--until-min-effect", type=float, default=0.02)
    parser.add_argument("--until-budget", type=float, default=60.0)
    parser.add_argument("--record-processes", type=int, default=100)
    parser.add_argument("--sim-sequences", type=int, default=2000)
    parser.add_argument("--sim-seed", type=int, default=20261201)
    parser.add_argument("--agreement-cells", default="",
                        help="comma list of MODEL or MODEL/CONFIG for the agreement section "
                             "(default: every pt inference cell of the shipped suite)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="interleaved rounds of the agreement section")
    parser.add_argument("--pin", type=int, default=None, metavar="CPU",
                        help="agreement: kscperf's workers and Timer on this CPU, one thread")
    parser.add_argument("--lockstep-history", metavar="DIR",
                        help="also record (or reuse) the lockstep history under DIR")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--first-repetition", type=int, default=1,
                        help="the number of the first repetition (to run them apart)")
    parser.add_argument("--lockstep-processes", type=int, default=8,
                        help="processes per build and cell of the lockstep history")
    parser.add_argument("--lockstep-values", type=int, default=LOCKSTEP_PROFILE["values"])
    parser.add_argument("--lockstep-min-time", type=float, default=LOCKSTEP_PROFILE["min_time"])
    parser.add_argument("--aa", metavar="DIR",
                        help="also record (or reuse) and score the A/A runs under DIR")
    parser.add_argument("--aa-pairs", type=int, default=20)
    parser.add_argument("--aa-ab-runs", type=int, default=20)
    parser.add_argument("--explain-aa-runs", type=int, default=20)
    parser.add_argument("--overhead-repeats", type=int, default=1)
    parser.add_argument("--untouched-processes", type=int, default=None,
                        help="process pairs a cell of the one-sided A/A (default: the profile's)")
    parser.add_argument("--untouched-budget", type=float, default=None, metavar="SECONDS",
                        help="the one-sided A/A adds pairs until each interval is resolved "
                             "at ±2 %% or this budget is spent (default: no pairs added)")
    parser.add_argument("--untouched-cells", default=None, metavar="PATTERNS",
                        help="the one-sided A/A of only the cells whose model/tool/task holds "
                             "one of these (comma list; default: every eager cell)")
    parser.add_argument("--explain-parts", default="planted,untouched,overhead,fusion",
                        help="which parts of the explain section run (comma list)")
    parser.add_argument("--instruction-pairs", type=int, default=10,
                        help="instructions: runs at +1 %% work, each against a base run")
    parser.add_argument("--instruction-history", type=int, default=30,
                        help="instructions: builds of the history, +2 %% from its middle")
    parser.add_argument("--huge-pages-cells", default=",".join(HUGE_PAGES_CELLS),
                        metavar="PATTERNS", help="huge-pages: the cells of its A/A runs (comma "
                        "list of model/tool/task patterns)")
    parser.add_argument("--huge-pages-processes", type=int, default=12,
                        help="huge-pages: process pairs of each A/A run")
    parser.add_argument("--huge-pages-repeats", type=int, default=2,
                        help="huge-pages: A/A runs in each setting")
    parser.add_argument("--lockstep-plain", action="store_true",
                        help="the lockstep history's plain nights: 12 builds, a plain ab at "
                             "the default profile each night, +10 %% at a night from 4 to 10")
    return parser


def sections_to_skip(skip: str, sections: str) -> set[str]:
    """The sections that do not run: with `sections` (a comma list), every section it does
    not name; otherwise those of `skip` (a comma list) and the `NAMED_ONLY` ones."""
    skipped = set(filter(None, skip.split(",")))
    only = set(filter(None, sections.split(",")))
    if only:
        skipped = set(SECTIONS) - only
    else:
        skipped.update(NAMED_ONLY)
    return skipped


def main(doc: str | None) -> None:
    """Runs truth-check on the command line's options (first re-executing this command with
    the allocator settings of kscperf's workers when they are not in the environment)."""
    from kscperf.orchestrator.workerenv import WORKER_MALLOC_ENV

    if any(k not in os.environ for k in WORKER_MALLOC_ENV):
        # Timer runs in this process: give it the allocator settings kscperf's workers get,
        # or the comparison measures glibc's mmap threshold instead of the tools.
        os.execve(sys.executable, [sys.executable, *sys.argv],
                  {**WORKER_MALLOC_ENV, **os.environ})
    args = build_parser(doc).parse_args()
    LOCKSTEP_PROFILE.update(values=args.lockstep_values, min_time=args.lockstep_min_time)
    skip = sections_to_skip(args.skip, args.sections)
    with tempfile.TemporaryDirectory() as tmp:
        _run_sections(tmp, skip, args)


def _run_sections(tmp: str, skip: set[str], args: argparse.Namespace) -> None:
    """The sections not in `skip`, in their order, in the temporary folder `tmp`."""
    if "record-pairs" not in skip:
        record_pairs(tmp, args.record_processes)
    if "explain" not in skip:
        parts = set(args.explain_parts.split(","))
        if "planted" in parts:
            planted(tmp, args.trials, args.explain_aa_runs, args.profile)
        if "untouched" in parts:
            untouched(tmp, args.profile, args.untouched_processes, args.untouched_budget,
                      args.untouched_cells.split(",") if args.untouched_cells else None)
        if "overhead" in parts:
            overhead(tmp, args.overhead_repeats)
        if "fusion" in parts:
            fusion(tmp, args.profile)
    if "instructions" not in skip:
        instructions(tmp, args.instruction_pairs, args.instruction_history)
    if "until-resolved" not in skip:
        until_resolved(tmp, args.trials, args.until_min_effect, args.until_budget)
    if "until-resolved-sim" not in skip:
        simulate_until_resolved(args.sim_sequences, args.sim_seed)
    if "noise" not in skip:
        machine_noise(10)
        machine_states(30.0)
    if "agreement" not in skip:
        agreement(tmp, args.profile, set(filter(None, args.agreement_cells.split(","))),
                  args.rounds, args.pin)
    if "false-alarms" not in skip:
        false_alarms(tmp, args.false_alarm_tools, args.profile)
    if "power" not in skip:
        power(tmp, args.trials, args.profile)
    if "power-ab" not in skip:
        power_ab(tmp, args.trials, args.profile)
    if "machine" not in skip:
        machine(tmp, args.trials, args.machine_load)
    if "covariate" not in skip:
        covariate(tmp)
    if "huge-pages" not in skip:
        huge_pages(tmp, args.huge_pages_cells.split(","), args.huge_pages_processes,
                   args.huge_pages_repeats)
    if args.aa:
        aa(Path(args.aa).resolve(), args.aa_pairs, args.aa_ab_runs)
    if args.lockstep_history:
        lockstep_history(Path(args.lockstep_history).resolve(), args.repetitions,
                         args.lockstep_processes, args.first_repetition, args.lockstep_plain)
