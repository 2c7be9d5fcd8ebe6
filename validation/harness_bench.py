"""tools/harness-bench's command line: its options and which of its measurements run, in
what order (the usage text is the script's docstring)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from validation.harness import canary_default, marginal, shards, startup, suite
from validation.pyperf_side import pyperf_side_by_side


def build_parser(doc: str | None) -> argparse.ArgumentParser:
    """harness-bench's options, described by the first line of `doc`."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--cells", type=int, default=11)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--isolation", default="fork,spawn",
                        help="comma list of the isolations whose marginal cost is measured")
    parser.add_argument("--no-suite", action="store_true")
    parser.add_argument("--no-warmup-run", action="store_true")
    parser.add_argument("--shards", type=int, default=0, help="also time the suite in N shards")
    parser.add_argument("--only-shards", action="store_true",
                        help="only the suite and its shards")
    parser.add_argument("--canary", action="store_true",
                        help="only the canary's share of a default-profile suite run")
    parser.add_argument("--pyperf", action="store_true",
                        help="only the side by side with pyperf's Runner")
    return parser


def main(doc: str | None) -> None:
    """Runs harness-bench on the command line's options: --canary and --pyperf alone when
    given; otherwise the start-up and marginal cost (unless --only-shards), then the suite
    and its shards (unless --no-suite)."""
    args = build_parser(doc).parse_args()
    print(f"harness-bench on {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    if args.canary or args.pyperf:
        with tempfile.TemporaryDirectory() as tmp:
            if args.canary:
                canary_default(tmp)
            if args.pyperf:
                pyperf_side_by_side(args.repeats, tmp)
        return
    if not args.only_shards:
        startup(args.repeats * 2 - 1)
        marginal(args.cells, args.repeats, args.isolation.split(","))
    if args.no_suite and not args.only_shards:
        return
    with tempfile.TemporaryDirectory() as tmp:
        whole = suite(not args.no_warmup_run, tmp)
        if args.shards > 1:
            shards(args.shards, whole, tmp)
