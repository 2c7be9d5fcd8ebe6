"""A real git repository to bisect: a small pure-Python package (`slowpkg`) whose one
function does a torch workload of `REPS` repetitions, a benchmark module inside the
repository (`bench/slow.py`, model `slow`) that calls it, and a history of commits that
change `REPS` where a scenario plants a step and mark some commits unbuildable (a `BROKEN`
file, which `BUILD_CMD` refuses). Used by tests/test_bisect_cli.py and tools/bisect-bench.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Scenario", "make_repo", "BUILD_CMD", "BENCH_PATH", "CELL", "BASE_REPS",
           "ENV_ARG"]

# The build command of the scenarios: a commit with a BROKEN file does not build.
BUILD_CMD = "test ! -e BROKEN"
# The benchmark module, relative to the repository, and its one timed cell.
BENCH_PATH = "bench/slow.py"
CELL = "slow/pt/inference"
# How the workers find the package of each checkout.
ENV_ARG = "PYTHONPATH={checkout}"
BASE_REPS = 100

_PACKAGE_INIT = '''"""slowpkg: a function whose cost is REPS repetitions of one torch op."""
from slowpkg.cost import REPS
from slowpkg.work import run

__all__ = ["REPS", "run"]
'''

_WORK = '''import torch

from slowpkg.cost import REPS


def run(x):
    y = x
    for _ in range(REPS):
        y = torch.sin(y)
    return y
'''

_BENCH = '''"""The model bisected: slowpkg.run on one input (the package comes from PYTHONPATH)."""
import torch

import slowpkg


def slow_bench_configs():
    yield torch.randn(2048)


def slow_pytorch(x):
    return slowpkg.run(x)
'''


@dataclass(frozen=True)
class Scenario:
    """A range of `commits` commits (commit 0 the good end): the commits at which `REPS`
    takes a new value (index: reps), and the commits that do not build."""

    commits: int = 64
    reps_at: dict[int, int] = field(default_factory=dict)
    broken: frozenset[int] = frozenset()


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="bisect bench", GIT_AUTHOR_EMAIL="bench@example.org",
               GIT_COMMITTER_NAME="bisect bench", GIT_COMMITTER_EMAIL="bench@example.org",
               GIT_AUTHOR_DATE="2026-12-01T00:00:00Z", GIT_COMMITTER_DATE="2026-12-01T00:00:00Z")
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout


def make_repo(path: str | Path, scenario: Scenario) -> list[str]:
    """Create the repository of `scenario` at `path` (a new folder) and return its commit
    ids, oldest first."""
    repo = Path(path)
    (repo / "slowpkg").mkdir(parents=True)
    (repo / "bench").mkdir()
    (repo / "slowpkg" / "__init__.py").write_text(_PACKAGE_INIT)
    (repo / "slowpkg" / "work.py").write_text(_WORK)
    (repo / BENCH_PATH).write_text(_BENCH)
    _git(repo, "init", "-q", "-b", "main")
    reps = BASE_REPS
    shas = []
    for i in range(scenario.commits):
        reps = scenario.reps_at.get(i, reps)
        (repo / "slowpkg" / "cost.py").write_text(f"REPS = {reps}\n")
        (repo / "NOTES.md").write_text("".join(f"note {k}\n" for k in range(i + 1)))
        broken = repo / "BROKEN"
        if i in scenario.broken:
            broken.write_text("this commit does not build\n")
        elif broken.exists():
            broken.unlink()
        _git(repo, "add", "-A")
        what = f"REPS = {reps}" if i in scenario.reps_at else f"note {i}"
        _git(repo, "commit", "-q", "-m", f"commit {i}: {what}")
        shas.append(_git(repo, "rev-parse", "HEAD").strip())
    return shas
