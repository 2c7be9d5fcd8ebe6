"""`run-benchmarks bisect` for real: a git repository made by validation/bisect_repo.py (a
pure-Python package with a torch workload, its benchmark module inside it), each commit
checked out and built in the cache, every comparison a lockstep run of real workers. The
steps planted are 10 % and more, so that the verdicts do not hang on this machine's noise;
tools/bisect-bench measures 5 % steps and the error rates."""

from __future__ import annotations

import html
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kscperf import api
from kscperf.views import confirm
from runner_testing import default_sigint
from validation.bisect_repo import BENCH_PATH, BUILD_CMD, CELL, ENV_ARG, Scenario, make_repo

pytestmark = pytest.mark.integration

# Few values a pair: each pair still gives one pair number.
_TIMING = ["--values", "6", "--warmups", "1", "--min-time", "0.005"]


def _bisect_args(repo: Path, cache: Path, good: str, bad: str) -> list[str]:
    return [sys.executable, "-m", "kscperf", "bisect", "--repo", str(repo), "--good", good,
            "--bad", bad, "-k", CELL, "--build-cmd", BUILD_CMD, "--env", ENV_ARG,
            "--cache", str(cache), *_TIMING, BENCH_PATH]


def _bisect(tmp_path: Path, scenario: Scenario, *extra: str) -> tuple[dict[str, Any], list[str],
                                                                     subprocess.CompletedProcess[str]]:
    shas = make_repo(tmp_path / "repo", scenario)
    proc = subprocess.run(_bisect_args(tmp_path / "repo", tmp_path / "cache", shas[0], shas[-1])
                          + ["--format", "json", *extra], capture_output=True, text=True,
                          cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), shas, proc


def test_one_culprit_is_named_with_its_error_and_every_comparison(tmp_path: Path) -> None:
    result, shas, proc = _bisect(tmp_path, Scenario(commits=12, reps_at={7: 112}))
    assert result["verdict"] == "culprit", proc.stderr[-3000:]
    [culprit] = result["culprits"]
    assert culprit["commit"] == shas[7] and culprit["subject"] == "commit 7: REPS = 112"
    assert culprit["ratio_low"] > 1.0 and 0.0 <= culprit["error"] < 0.05
    assert culprit["p_value"] < 0.05
    assert result["step"]["verdict"] == "shown" and result["step"]["ratio_low"] > 1.0
    stages = [p["stage"] for p in result["probes"]]
    assert stages[-1] == "verify" and stages.count("probe") >= 2
    assert all(p["pairs"] >= 3 and p["seconds"] > 0 for p in result["probes"])
    # The probes that put the culprit at commit 7: its parent like-good, itself like-bad.
    said = {p["commit"]: p["verdict"] for p in result["probes"] if p["stage"] == "probe"}
    assert said.get(shas[7], "like-bad") == "like-bad" and said.get(shas[6]) == "like-good"
    assert result["untestable"] == [] and not result["not_all_explained"]
    # Progress: each step names its stage, commit, pairs and the time so far.
    assert any(line.startswith("[") and " probe " in line and " pairs" in line
               for line in proc.stderr.splitlines())


def test_untestable_commits_before_the_culprit_make_a_range(tmp_path: Path) -> None:
    result, shas, proc = _bisect(tmp_path, Scenario(commits=12, reps_at={7: 115},
                                                    broken=frozenset({4, 5, 6})))
    assert result["verdict"] == "range", proc.stderr[-3000:]
    [part] = result["culprits"]
    assert part["range"] and part["commits"] == shas[4:8] and part["parent"] == shas[3]
    assert [u["commit"] for u in result["untestable"]] == shas[4:7]
    assert all("exited 1" in u["reason"] for u in result["untestable"])


def test_a_range_without_a_step_is_not_reproduced(tmp_path: Path) -> None:
    shas = make_repo(tmp_path / "repo", Scenario(commits=6))
    proc = subprocess.run(_bisect_args(tmp_path / "repo", tmp_path / "cache", shas[0],
                                       shas[-1]), capture_output=True, text=True,
                          cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = proc.stdout.splitlines()[0]
    assert first.startswith("not-reproduced: ") and "step " in first
    assert " probe " not in proc.stderr  # nothing was bisected
    assert proc.stderr.count(": built in") == 2 and "2 builds run" in proc.stdout
    # A second bisect of the same range builds nothing again: both ends are reused. (Its
    # own confirmation may differ from the first's on a noisy machine and go on to probe,
    # which builds the commits it probes for the first time; never the ends again.)
    again = subprocess.run(_bisect_args(tmp_path / "repo", tmp_path / "cache", shas[0],
                                        shas[-1]), capture_output=True, text=True,
                           cwd=tmp_path, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    built = [line for line in again.stderr.splitlines() if ": built in" in line]
    reused = [line for line in again.stderr.splitlines() if ": reused in" in line]
    for end in (shas[0], shas[-1]):
        assert any(end[:12] in line for line in reused), again.stderr[-3000:]
        assert not any(end[:12] in line for line in built), again.stderr[-3000:]
    if again.stdout.startswith("not-reproduced: "):
        assert "0 builds run" in again.stdout


def test_an_interrupted_bisect_resumes_from_its_finished_comparisons(tmp_path: Path) -> None:
    shas = make_repo(tmp_path / "repo", Scenario(commits=12, reps_at={5: 112}))
    args = _bisect_args(tmp_path / "repo", tmp_path / "cache", shas[0], shas[-1])
    proc = subprocess.Popen(args + ["--format", "json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            preexec_fn=default_sigint)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if " probe " in line and (": like-" in line or ": partial" in line):
            proc.send_signal(signal.SIGINT)  # Ctrl-C, after the first finished probe
            break
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, "".join(seen) + err
    assert "go on with the same command and --resume" in err
    assert "Traceback" not in err
    [state] = (tmp_path / "cache" / "state").iterdir()
    finished = json.loads(state.read_text())["records"]
    assert "confirm" in finished and any(k.startswith("probe ") for k in finished)

    resumed = subprocess.run(args + ["--format", "json", "--resume"], capture_output=True,
                             text=True, cwd=tmp_path, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout)
    assert result["verdict"] == "culprit" and result["culprits"][0]["commit"] == shas[5]
    assert result["step"]["replayed"] and result["probes"][0]["replayed"]
    assert not result["probes"][-1]["replayed"]
    # The ends were built before the interrupt, and are reused.
    assert f"build {shas[0][:12]} (0 of 11): reused" in resumed.stderr


def test_resume_without_an_interrupted_bisect_says_so(tmp_path: Path) -> None:
    shas = make_repo(tmp_path / "repo", Scenario(commits=3))
    proc = subprocess.run(_bisect_args(tmp_path / "repo", tmp_path / "cache", shas[0],
                                       shas[-1]) + ["--resume"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "--resume: no bisect of this range" in proc.stderr


def test_bad_ranges_get_one_sentence(tmp_path: Path) -> None:
    shas = make_repo(tmp_path / "repo", Scenario(commits=3))
    for good, bad, says in [(shas[2], shas[0], "is not an ancestor of --bad"),
                            ("nosuch", shas[1], "--good nosuch is not a commit of"),
                            (shas[1], shas[1], "are the same commit")]:
        proc = subprocess.run(_bisect_args(tmp_path / "repo", tmp_path / "cache", good, bad),
                              capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert proc.returncode == 2 and says in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1


def _nightly(repo: Path, shas: list[str], night: int, last: int | None, tmp: Path) -> None:
    """The lockstep nightly of commit `shas[night]`, as examples/nightly-ab.sh runs it:
    in the checkout of the new build (`repo`, its package on PYTHONPATH), the last
    nightly's build (`shas[last]`, in a worktree of its own) as the base; the first night
    a plain run. Added to the store."""
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", shas[night]], check=True)
    label = shas[night][:12]
    common = ["-k", CELL, "-q", BENCH_PATH]
    if last is None:
        args = ["run", "--build", label, "-o", str(tmp / "runs" / f"{label}.json")]
    else:
        base = tmp / "worktrees" / shas[last][:12]
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(base),
                        shas[last]], check=True)
        args = ["ab", "--base-build", shas[last][:12], "--base-env", f"PYTHONPATH={base}",
                "--new-build", label, "--new-env", f"PYTHONPATH={repo}",
                "-o", str(tmp / "runs" / label)]
    env = dict(os.environ, PYTHONPATH=str(repo))
    run = subprocess.run([sys.executable, "-m", "kscperf", *args, *common], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    added = str(tmp / "runs" / (label if last is not None else f"{label}.json"))
    api.history_add([added], str(tmp / "store"))


def test_the_dashboards_bisect_command_finds_the_changes_culprit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shas = make_repo(repo, Scenario(commits=17, reps_at={9: 130}))
    nightlies = [0, 4, 8, 12, 16]
    for night, last in zip(nightlies, [None, *nightlies]):
        _nightly(repo, shas, night, last, tmp_path)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "main"], check=True)
    api.build_dashboard(str(tmp_path / "store"), str(tmp_path / "site"))
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    slower = next(c for c in api.history_changes(str(tmp_path / "store")) if c.kind == "slower")
    command = confirm.confirm_commands(slower).bisect
    assert f"--good {shas[8][:12]} --bad {shas[12][:12]}" in command
    assert "--env 'PYTHONPATH={checkout}'" in command and command.endswith(f" {BENCH_PATH}")
    shown = html.unescape(page.replace("&#39;", "'"))
    assert command in shown  # the open change's bisect command, as printed
    words = shlex.split(command)
    assert words[:2] == ["run-benchmarks", "bisect"]
    proc = subprocess.run([sys.executable, "-m", "kscperf", *words[1:], *_TIMING,
                           "--format", "json"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["verdict"] == "culprit" and result["culprits"][0]["commit"] == shas[9]


def test_a_builds_file_of_ready_environments_is_bisected_by_label(tmp_path: Path) -> None:
    # Nightly wheels: each entry a ready environment. Here each "environment" is a Python
    # wrapper that puts one commit's checkout on the path.
    shas = make_repo(tmp_path / "repo", Scenario(commits=6, reps_at={3: 115}))
    lines = ["# label python (relative to this file)"]
    for i, sha in enumerate(shas):
        checkout = tmp_path / "checkouts" / f"n{i}"
        subprocess.run(["git", "-C", str(tmp_path / "repo"), "worktree", "add", "-q",
                        "--detach", str(checkout), sha], check=True)
        wrapper = tmp_path / "envs" / f"n{i}" / "python"
        wrapper.parent.mkdir(parents=True)
        wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={checkout}:$PYTHONPATH exec '
                           f'{sys.executable} "$@"\n')
        wrapper.chmod(0o755)
        lines.append(f"nightly-{i}  envs/n{i}/python")
    (tmp_path / "builds.txt").write_text("\n".join(lines) + "\n")
    proc = subprocess.run([sys.executable, "-m", "kscperf", "bisect", "--builds",
                           str(tmp_path / "builds.txt"), "--good", "nightly-0", "--bad",
                           "nightly-5", "-k", CELL, "--cache", str(tmp_path / "cache"),
                           *_TIMING, "--format", "json",
                           str(tmp_path / "checkouts" / "n5" / BENCH_PATH)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["verdict"] == "culprit" and result["culprits"][0]["commit"] == "nightly-3"
    assert result["builds_run"] == 0
    bad = subprocess.run([sys.executable, "-m", "kscperf", "bisect", "--builds",
                          str(tmp_path / "builds.txt"), "--good", "nightly-5", "--bad",
                          "nightly-1", BENCH_PATH], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert bad.returncode == 2 and "comes after --bad nightly-1" in bad.stderr
