"""tools/dashboard-bench's command line: its options, its sections by name, and the run of
the sections asked for (the usage text is the script's docstring)."""

from __future__ import annotations

import argparse
import os
import sys

from kscperf.history import links
from validation.common import ROOT
from validation.concurrency import section_concurrency
from validation.dashboard_detection import section_detection
from validation.detection import NOISE_MODELS
from validation.links import section_links
from validation.otava import section_tigerbeetle
from validation.scale import section_scale

SECTIONS = {"detection": section_detection, "tigerbeetle": section_tigerbeetle,
            "scale": section_scale, "links": section_links, "concurrency": section_concurrency}


def build_parser(doc: str | None) -> argparse.ArgumentParser:
    """dashboard-bench's options, described by the first line of `doc`."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--sections", default="detection,tigerbeetle,scale",
                        help="comma-separated: " + ",".join(SECTIONS))
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--seeds", default="",
                        help="detection: comma-separated seeds, one store per model each, "
                             "scores pooled (default: --seed alone)")
    parser.add_argument("--slack", default="",
                        help="detection: comma-separated values of "
                             "changepoints.MIN_EFFECT_SLACK_SES to score beside the shipped one")
    parser.add_argument("--no-ceiling", action="store_true",
                        help="detection: skip the oracle ceiling")
    parser.add_argument("--series", type=int, default=500,
                        help="detection: series per noise model (default 500; the issue's "
                             "targets are stated for 2000)")
    parser.add_argument("--detect-builds", type=int, default=60,
                        help="detection: builds per series (default 60)")
    parser.add_argument("--noise", default=",".join(NOISE_MODELS),
                        help="detection: comma-separated noise models, from "
                             + ",".join(NOISE_MODELS))
    parser.add_argument("--builds", type=int, default=365, help="scale: builds (default 365)")
    parser.add_argument("--otava-venv", default=str(ROOT / ".venv-otava"),
                        help="the virtual environment for apache-otava (created when missing)")
    parser.add_argument("--no-otava", action="store_true", help="run kscperf alone")
    parser.add_argument("--ab-noise", metavar="DIR",
                        help="links: the folder of recorded ab runs to resample noise from")
    parser.add_argument("--link-builds", type=int, default=30)
    parser.add_argument("--link-pairs", type=int, default=6)
    parser.add_argument("--link-prior-df", type=float, default=links.SCATTER_PRIOR_DF,
                        help="links: the most degrees of freedom a series' scatter lends a "
                             "link's test (kscperf's SCATTER_PRIOR_DF unless given)")
    parser.add_argument("--link-noise-scale", type=float, default=1.0,
                        help="links: scale the recorded log ratios (1: as recorded), to see "
                             "how detection depends on the machine's noise")
    parser.add_argument("--concurrency-trials", type=int, default=20,
                        help="concurrency: trials, each into a new store (default 20)")
    parser.add_argument("--concurrent-adds", type=int, default=9,
                        help="concurrency: history add commands started at once (default 9)")
    return parser


def main(doc: str | None) -> None:
    """Runs dashboard-bench on the command line's options: the sections named, in order,
    after a line naming the machine; an unknown section or noise model is a usage error."""
    options = build_parser(doc)
    args = options.parse_args()
    names = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [n for n in names if n not in SECTIONS]
    unknown += [n for n in args.noise.split(",") if n.strip() and n.strip() not in NOISE_MODELS]
    if unknown:
        options.error(f"unknown section(s) or noise model(s) {', '.join(unknown)}; choose "
                      f"from {', '.join(SECTIONS)} and {', '.join(NOISE_MODELS)}")
    print(f"dashboard-bench on {os.cpu_count()} CPUs, python {sys.version.split()[0]}, "
          f"seed {args.seed}")
    for name in names:
        SECTIONS[name](args)
