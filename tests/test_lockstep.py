"""The lockstep of `run-benchmarks ab`: two workers, one per build, take turns value by value;
one that ends, crashes or hangs never holds the other up for long, and the survivor's values
are kept. Real FIFOs, real threads and real worker processes."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kscperf.orchestrator.lockstep import TurnPipes
from kscperf.worker.turns import Turns
from runner_testing import cli

pytestmark = pytest.mark.integration

WORK = Path(__file__).parent / "fixtures" / "work" / "work.py"


def test_two_sides_alternate_one_timed_value_each(tmp_path: Path) -> None:
    pipes = TurnPipes(str(tmp_path / "pair"))
    events: list[tuple[int, float, float]] = []
    unpaired: dict[int, int] = {}

    def run(side: int) -> None:
        turns = Turns(*pipes.worker_turns(side), wait_s=30)
        turns.take()
        for _ in range(8):  # what measure_values does with after_value, with a fake value
            t0 = time.perf_counter()
            time.sleep(0.003)
            events.append((side, t0, time.perf_counter()))
            turns.after_value()
        pipes.partner_ended(side)  # what the scheduler does when a worker ends
        unpaired[side] = turns.unpaired_values

    pipes.give_turn(1)  # side 1 starts
    threads = [threading.Thread(target=run, args=(s,)) for s in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ordered = sorted(events, key=lambda e: e[1])
    assert [side for side, _, _ in ordered] == [1, 0] * 8
    assert all(a[2] <= b[1] for a, b in zip(ordered, ordered[1:])), "timed values overlapped"
    assert unpaired == {0: 0, 1: 0}
    pipes.close()


def test_a_partner_that_keeps_the_turn_is_left_after_the_wait(tmp_path: Path) -> None:
    pipes = TurnPipes(str(tmp_path / "pair"))
    turns = Turns(*pipes.worker_turns(0), wait_s=0.2)
    t0 = time.perf_counter()
    turns.take()  # nobody ever hands the turn over
    assert turns.alone and 0.15 < time.perf_counter() - t0 < 5
    turns.after_value()
    turns.after_value()
    assert turns.unpaired_values == 2
    pipes.close()


def test_an_ended_partner_lets_the_other_go_on_alone(tmp_path: Path) -> None:
    pipes = TurnPipes(str(tmp_path / "pair"))
    pipes.partner_ended(1)  # side 1's worker ended: side 0 is told
    turns = Turns(*pipes.worker_turns(0), wait_s=None)
    t0 = time.perf_counter()
    turns.take()
    turns.after_value()
    assert turns.alone and turns.unpaired_values == 1 and time.perf_counter() - t0 < 5
    pipes.close()


def _ab(tmp_path: Path, *extra: str, processes: int = 2
        ) -> tuple[subprocess.CompletedProcess[str], dict, dict]:
    proc = cli("ab", WORK, "--tools", "pt,ptnice", "--tasks", "inference",
               "--processes", str(processes),
               "--values", "4", "-q", "-o", tmp_path / "ab", "--format", "json",
               "--fail-on-regression", *extra, cwd=tmp_path)
    base = json.loads((tmp_path / "ab" / "base.json").read_text())
    new = json.loads((tmp_path / "ab" / "new.json").read_text())
    return proc, base, new


def _statuses(doc: dict) -> dict[str, str]:
    return {c["tool"]: c["status"] for c in doc["kscperf"]["cells"]}


def test_a_build_that_crashes_is_failing_now_and_the_other_keeps_its_values(
        tmp_path: Path) -> None:
    proc, base, new = _ab(tmp_path, "--new-env", "KSCPERF_TEST_WORK_FAULT=crash")
    assert proc.returncode == 1, proc.stderr
    assert _statuses(base) == {"pt": "ok", "ptnice": "ok"}
    assert _statuses(new) == {"pt": "ok", "ptnice": "crashed"}
    verdicts = {r["name"]: r["verdict"] for r in json.loads(proc.stdout)["benchmarks"]}
    assert verdicts["work/ptnice/inference/4096"] == "failing-now", verdicts
    assert verdicts["work/pt/inference/4096"] == "same"
    for run in base["kscperf"]["runs"]:
        assert len(run["configs"][0]["values"]) == 4
        assert run["metadata"]["lockstep_unpaired_values"] >= 0
    assert base["metadata"]["lockstep_id"] == new["metadata"]["lockstep_id"]
    assert (base["metadata"]["lockstep_role"], new["metadata"]["lockstep_role"]) == \
        ("base", "new")
    assert new["metadata"]["build_env"] == "KSCPERF_TEST_WORK_FAULT=crash"
    # Each pair has its own zygotes (a zygote's layout offsets all its workers alike): no two
    # processes of a side share one.
    for doc in (base, new):
        zygotes = [r["metadata"]["zygote"] for r in doc["kscperf"]["runs"] if r["tool"] == "pt"]
        assert len(zygotes) == 2 and len(set(zygotes)) == 2, zygotes


def test_a_build_that_hangs_times_out_alone(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    proc, base, new = _ab(tmp_path, "--new-env", "KSCPERF_TEST_WORK_FAULT=hang",
                          "--timeout", "8", "-k", "ptnice")
    assert time.perf_counter() - t0 < 120
    assert proc.returncode == 1, proc.stderr
    assert _statuses(base) == {"ptnice": "ok"}
    assert _statuses(new) == {"ptnice": "timeout"}


def test_workers_allocate_on_huge_pages_unless_a_build_says_otherwise(tmp_path: Path) -> None:
    # Without them the pairs of a memory-bound config scattered 8x wider (method.md,
    # "Isolation"); a build's own --new-env still decides for that build, and each file
    # records what its workers had.
    proc, base, new = _ab(tmp_path, "--new-env", "THP_MEM_ALLOC_ENABLE=0", "-k", "work/pt/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for doc, expected in ((base, "1"), (new, "0")):
        seen = {r["metadata"]["thp_mem_alloc_enable"] for r in doc["kscperf"]["runs"]}
        assert seen == {expected}, (doc["metadata"]["lockstep_role"], seen)
        assert doc["metadata"]["thp_mem_alloc_enable"] == expected


def test_ab_refuses_bad_builds_in_one_line(tmp_path: Path) -> None:
    import venv

    no_torch = tmp_path / "no-torch"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(no_torch)
    for args, culprit in ((["--new-python", str(tmp_path / "nope")], "--new-python"),
                          (["--new-python", str(no_torch / "bin" / "python")],
                           "cannot import torch"),
                          (["--base-build", "x", "--new-build", "x"], "'x'"),
                          (["--new-build", "a/b"], "cannot be a file name"),
                          (["--new-env", "NOEQUALS"], "NAME=VALUE")):
        proc = cli("ab", WORK, *args, "-o", tmp_path / "refused", timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        last = proc.stderr.strip().splitlines()[-1]
        assert culprit in last and "Traceback" not in proc.stderr
        assert not (tmp_path / "refused").exists()


def test_ab_leaves_existing_results_alone(tmp_path: Path) -> None:
    out = tmp_path / "kept"
    out.mkdir()
    (out / "base.json").write_text("measured before")
    proc = cli("ab", WORK, "-o", out, timeout=60)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and "already exists" in line and "-o DIR" in line
    assert "--resume" not in line
    assert (out / "base.json").read_text() == "measured before"
    assert not (out / "new.json").exists()


def test_a_build_in_another_python_environment(tmp_path: Path) -> None:
    import site
    import venv

    # A second environment that sees this one's torch through a .pth file but has no
    # kscperf: ab must bring its own, and record that environment's python.
    env_dir = tmp_path / "other-env"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    other_site = next(env_dir.glob("lib/python*/site-packages"))
    here = [p for p in site.getsitepackages() if Path(p, "torch").is_dir()]
    (other_site / "parent.pth").write_text("\n".join(here) + "\n")
    python = env_dir / "bin" / "python"
    assert subprocess.run([str(python), "-c", "import torch; import kscperf"], cwd=tmp_path,
                          capture_output=True, text=True).stderr.strip().endswith(
        "No module named 'kscperf'")
    proc, base, new = _ab(tmp_path, "--new-python", str(python), "-k", "work/pt/")
    assert proc.returncode == 0, proc.stderr
    assert _statuses(new) == {"pt": "ok"}
    assert new["metadata"]["python_executable"] == str(python)
    assert new["metadata"]["torch_version"] == base["metadata"]["torch_version"]
    assert [r["verdict"] for r in json.loads(proc.stdout)["benchmarks"]
            if r["kind"] == "time"] == ["same"]


def test_each_build_reads_its_own_package_not_the_one_in_the_folder_ab_runs_in(
        tmp_path: Path) -> None:
    # A checkout of one build in the folder `ab` runs in (the nightly's own checkout) would
    # come first on a `python -m` worker's path, and both builds would time its code.
    for where in ("cwd", "base", "new"):
        package = (tmp_path if where == "cwd" else tmp_path / where) / "shadowpkg"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f"WHERE = {where!r}\n")
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "own.py").write_text(
        "import torch\nimport shadowpkg\n\n\ndef own_bench_configs():\n"
        "    assert shadowpkg.WHERE != 'cwd', 'read the package of the folder ab runs in'\n"
        "    yield torch.ones(8)\n\n\ndef own_pytorch(x):\n    return x * 2\n")
    proc = cli("ab", tmp_path / "defs" / "own.py", "--tools", "pt", "--tasks", "inference",
               "--processes", "1", "--values", "2", "--base-env",
               f"PYTHONPATH={tmp_path / 'base'}", "--new-env", f"PYTHONPATH={tmp_path / 'new'}",
               "-o", tmp_path / "out", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_partner_times_each_config_with_the_loops_the_first_side_calibrated(
        tmp_path: Path) -> None:
    pipes = TurnPipes(str(tmp_path / "pair"))
    seen: dict[int, dict[str, int]] = {}

    def run(side: int) -> None:
        turns = Turns(*pipes.worker_turns(side), wait_s=30)
        turns.take()
        for config, calibrated in (("small", 64 + side), ("big", 2 + side)):
            # what measure_values does: calibrate unless the partner shared its loops
            if config not in turns.partner_loops:
                turns.share_loops(config, calibrated)
            seen.setdefault(side, {})[config] = turns.partner_loops.get(config, calibrated)
            for _ in range(3):
                turns.after_value()
        pipes.partner_ended(side)

    pipes.give_turn(1)  # side 1 starts, so it calibrates
    threads = [threading.Thread(target=run, args=(s,)) for s in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert seen == {0: {"small": 65, "big": 3}, 1: {"small": 65, "big": 3}}
    pipes.close()


def test_a_config_name_too_long_for_one_whole_write_is_calibrated_by_each_side(
        tmp_path: Path) -> None:
    pipes = TurnPipes(str(tmp_path / "pair"))
    first = Turns(*pipes.worker_turns(0), wait_s=0.1)
    second = Turns(*pipes.worker_turns(1), wait_s=5)
    first.share_loops("x" * 5000, 8)
    first.share_loops("short", 16)
    first.after_value()  # hands the turn over (and, with nobody to hand it back, goes alone)
    second.take()
    assert second.partner_loops == {"short": 16} and not second.alone
    pipes.close()


def test_both_builds_time_every_value_with_the_same_loops(tmp_path: Path) -> None:
    # The new build's ptnice does 4x the work: calibrated apart, its loops would be a quarter.
    # Three processes a side: the paired test's unit is the process, and at two (one degree
    # of freedom) a loaded machine that moves one process's ratio from 4.0 to 3.5 already
    # leaves even a 4x slowdown without a verdict (it did once in CI).
    processes = 3
    proc, base, new = _ab(tmp_path, "--new-env", "KSCPERF_TEST_NICE_WORK=4",
                          processes=processes)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    verdicts = {r["name"]: r["verdict"] for r in json.loads(proc.stdout)["benchmarks"]}
    assert verdicts["work/ptnice/inference/4096"] == "slower", verdicts
    loops = {(run["tool"], c["config"], run["process_index"], side): c["loops"]
             for side, doc in (("base", base), ("new", new))
             for run in doc["kscperf"]["runs"] for c in run["configs"]}
    assert len(loops) == 2 * processes * 2 * len({k[1] for k in loops})
    for tool in ("pt", "ptnice"):
        counts = {n for (t, _, _, _), n in loops.items() if t == tool}
        assert len(counts) == 1 and counts.pop() >= 8, loops
