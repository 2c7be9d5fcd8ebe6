"""examples/github-actions/nightly.yml runs for real, three nights in a row: its own `run:`
blocks, job by job and shard by shard, on a local stand-in for the runner
(tests/actions_runner.py: the expressions, env, outputs and GITHUB_STEP_SUMMARY
substituted, the artifact steps copying folders). Two shards of a tiny suite; night 1 has
no last nightly and runs plain, nights 2 and 3 run in lockstep with the night before and
add links to the store; each night installs its build's environment under PERF_HOME, and
only the last two are kept."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from actions_runner import JobResult, Runner
from kscperf import history
from runner_testing import DEFS, ROOT, load_doc

pytestmark = pytest.mark.slow

WORKFLOW = ROOT / "examples" / "github-actions" / "nightly.yml"
# Two processes per cell (lockstep pairs them), two values each; one tool, two tasks: one
# cell per shard.
FLAGS = "--processes 2 --values 2 --warmups 0 --min-time 0.001 --tools pt --tasks inference,jacobian"


def _checkout(dest: Path) -> Path:
    """What actions/checkout would give: the repository's files, without the environment,
    caches and build outputs of this working tree."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(src.read_bytes())
    return dest


def _runner(tmp_path: Path, perf_home: Path) -> Runner:
    # python3 on PATH, as the workflow assumes: this interpreter, for the wheel of torch
    # it can install. No run-benchmarks on PATH: each job must use its build's environment.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join([str(bin_dir)] + [
        p for p in env.get("PATH", "").split(os.pathsep) if p != str(Path(sys.executable).parent)])
    overrides = {"PERF_HOME": str(perf_home), "SUITE": str(DEFS / "toy.py"), "RUN_FLAGS": FLAGS,
                 "AB_BUDGET": "4"}
    return Runner(WORKFLOW, _checkout(tmp_path / "checkout"), tmp_path / "runs", env, overrides,
                  matrices={"shard": {"shard": [1, 2]}})


def _explain(jobs: dict[str, JobResult]) -> str:
    return "\n".join(j.explain() for j in jobs.values())


def _assert_ran(jobs: dict[str, JobResult], summary: str) -> None:
    """Every job ran and every step passed, but the comparison of two builds of one code,
    which noise can call a regression; the summary then shows it."""
    assert [j.name for j in jobs.values()] == ["setup", "shard", "merge"]
    for job in jobs.values():
        for step in job.steps:
            if step.name == "Compare with the last nightly" and step.outcome == "failure":
                assert "regression" in summary.lower(), _explain(jobs)
                continue
            assert step.outcome == "success", f"{job.name} / {step.name}\n" + _explain(jobs)


def _links(store_dir: Path) -> set[tuple[str, str]]:
    with history.open_store(str(store_dir)) as store:
        labels = {b.id: b.label for b in store.builds()}
        (cls,) = store.machine_classes()
        return {(labels[link.base_id], labels[link.new_id])
                for by_new in store.links(cls).values() for link in by_new.values()}


def _night(runner: Runner, number: int) -> tuple[dict[str, JobResult], str, Path]:
    jobs = runner.run(number)
    summary_file = runner.root / f"run-{number}" / "summary.md"
    summary = summary_file.read_text() if summary_file.exists() else ""
    _assert_ran(jobs, summary)
    return jobs, summary, runner.root / f"run-{number}"


def _dashboard(run_dir: Path) -> dict[str, Any]:
    """The report artifact of a night: its dashboard's front page and benchmark pages."""
    published = run_dir / "artifacts" / "nightly-report" / "dashboard"
    return {"index": (published / "index.html").read_text(encoding="utf-8"),
            "pages": "".join(p.read_text(encoding="utf-8")
                             for p in (published / "benchmarks").glob("*.html"))}


@pytest.fixture
def perf_home(tmp_path: Path) -> Iterator[Path]:
    """The runners' persistent folder; its environments (about 1 GB each) go afterwards."""
    yield tmp_path / "perf-home"
    shutil.rmtree(tmp_path / "perf-home" / "envs", ignore_errors=True)


def test_the_workflow_runs_three_nights_in_lockstep_with_links(tmp_path: Path,
                                                               perf_home: Path) -> None:
    runner = _runner(tmp_path, perf_home)
    store = perf_home / "history"

    # Night 1: no last nightly, so plain shards, merged and added as a build alone.
    jobs, summary, run_dir = _night(runner, 1)
    assert "No last nightly" in summary and jobs["setup"].outputs["base-build"] == ""
    shard_files = sorted(p.name for p in (run_dir / "artifacts").glob("shard-*/*"))
    assert shard_files == ["nightly-1-shard-1.json", "nightly-1-shard-2.json"]
    with history.open_store(str(store)) as s:
        assert [b.label for b in s.builds()] == ["nightly-1"]
    assert _links(store) == set()
    assert "nightly-1" in _dashboard(run_dir)["index"]
    assert (perf_home / "last-nightly.env").read_text() == \
        f"build=nightly-1\npython={perf_home}/envs/nightly-1/bin/python\n"

    # Nights 2 and 3: each in lockstep with the night before, its ab folder a link.
    for night, expected in ((2, {("nightly-1", "nightly-2")}),
                            (3, {("nightly-1", "nightly-2"), ("nightly-2", "nightly-3")})):
        base, new = f"nightly-{night - 1}", f"nightly-{night}"
        jobs, summary, run_dir = _night(runner, night)
        assert f"Lockstep: {base}" in summary, _explain(jobs)
        assert jobs["setup"].outputs == {"base-build": base,
                                         "base-python": f"{perf_home}/envs/{base}/bin/python"}
        folder = run_dir / "artifacts" / "nightly-report" / "ab" / new
        base_doc, new_doc = load_doc(folder / f"{base}.json"), load_doc(folder / f"{new}.json")
        assert base_doc["metadata"]["lockstep_id"] == new_doc["metadata"]["lockstep_id"]
        assert (base_doc["metadata"]["lockstep_role"], new_doc["metadata"]["lockstep_role"]) \
            == ("base", "new")
        assert base_doc["metadata"]["merged_shards"] == new_doc["metadata"]["merged_shards"] \
            == "1,2/2"
        assert new_doc["metadata"]["build_python"] == f"{perf_home}/envs/{new}/bin/python"
        assert _links(store) == expected
        pages = _dashboard(run_dir)
        assert new in pages["index"] and "Lockstep timeline" in pages["pages"]
        assert load_doc(perf_home / "last-nightly.json")["metadata"]["build"] == new

    # The last two environments are kept, the older pruned.
    assert sorted(p.name for p in (perf_home / "envs").iterdir()) == ["nightly-2", "nightly-3"]
