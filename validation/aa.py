"""truth-check's A/A section (with --aa DIR): identical builds compared, as a user compares two
nightlies that changed nothing. Separate runs: pairs of plain runs compared with `compare`;
lockstep: `ab` runs of one build against itself. The files are kept under DIR (a second call
reuses them and only scores), and the score is the share of rows called slower or faster per
kind (run time, prep, compile): every one of them is a false call."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import kscperf
from kscperf.compare import builds as compare
from validation.common import MODELS, exit_if_interrupted

# What each A/A run times: the two models of tools/models with an eager, a TorchScript and a
# torch.compile tool, so that run time, prep and compile rows all occur.
AA_SETTINGS: dict[str, Any] = dict(tools="pt,ts,compiled", tasks="inference")
_KINDS = ("time", "prep", "compile")


def _record(root: Path, pairs: int, ab_runs: int) -> tuple[list[tuple[str, str]], list[str]]:
    """The separate pairs (two files each) and the `ab` folders under `root`, recording what
    is missing."""
    separate = []
    for k in range(1, pairs + 1):
        files = []
        for side in ("a", "b"):
            path = root / "separate" / f"pair-{k:02d}" / f"{side}.json"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                exit_if_interrupted(kscperf.run(str(MODELS), build=f"same-{side}",
                                                output=str(path), **AA_SETTINGS), "truth-check")
            files.append(str(path))
        separate.append((files[0], files[1]))
    folders = []
    for k in range(1, ab_runs + 1):
        folder = root / "ab" / f"run-{k:02d}"
        if not folder.exists():
            exit_if_interrupted(kscperf.run_ab(str(MODELS), base=kscperf.Build("same-a"),
                                               new=kscperf.Build("same-b"),
                                               output_dir=str(folder), **AA_SETTINGS),
                                "truth-check")
        folders.append(str(folder))
    return separate, folders


def _calls(comparisons: list[compare.Comparison]) -> dict[str, list[compare.ComparisonRow]]:
    """Per kind, the rows with a speed verdict, and which of them were called changed."""
    rows: dict[str, list[compare.ComparisonRow]] = {k: [] for k in _KINDS}
    for comparison in comparisons:
        for r in comparison.rows:
            if str(r.kind) in rows and r.verdict.value in ("same", "slower", "faster",
                                                           "machine-shift"):
                rows[str(r.kind)].append(r)
    return rows


def _print_calls(title: str, comparisons: list[compare.Comparison]) -> None:
    print(f"  {title}:")
    for kind, rows in _calls(comparisons).items():
        called = [r for r in rows if r.verdict.value in ("slower", "faster")]
        print(f"    {kind:8s} {len(called)} of {len(rows)} rows called slower or faster "
              f"({len(called) / max(len(rows), 1):.1%}; target <= 1 %)")
        for r in called:
            print(f"      {r.name}: {r.verdict.value} {r.ratio:.3f}x [{r.ratio_low:.3f}x, "
                  f"{r.ratio_high:.3f}x] q {r.q_value:.2g}")


def aa(root: Path, pairs: int, ab_runs: int) -> None:
    """The A/A section: `pairs` separate pairs and `ab_runs` lockstep runs of identical
    builds under `root`, scored by `compare` at the default profile and minimum effect."""
    print(f"\n== A/A: identical builds, {pairs} pairs of separate runs compared and {ab_runs} "
          f"ab runs, tools/models with {AA_SETTINGS['tools']}, default profile ==")
    separate, folders = _record(root, pairs, ab_runs)
    _print_calls("separate runs (compare)", [
        kscperf.compare_builds(a, b) for a, b in separate])
    lockstep = []
    for folder in folders:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
        if len(names) != 2:
            sys.exit(f"truth-check: {folder} is not an ab folder of two files")
        lockstep.append(kscperf.compare_builds(*(os.path.join(folder, n) for n in
                                                 ("same-a.json", "same-b.json"))))
    _print_calls("lockstep (ab)", lockstep)
