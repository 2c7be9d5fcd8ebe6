"""examples/slurm/ on a real one-node Slurm cluster: Debian's slurmctld, slurmd and munge,
started as root with a configuration in a temporary folder (no cgroups:
proctrack/linuxproc, task/none). The test submits examples/slurm/submit.sh as a user would,
three nights in a row, and waits each time for the shard array and the merge job. Night 1
has no last nightly: plain shards, the merged build checked against an unsharded run of the
same selection, the store and the dashboard. Nights 2 and 3 run in lockstep with the night
before: each side's shards merged apart, the folder added to the store as a link, checked
against what the stored files say. It stops every daemon it started.
Skipped where the packages are missing or the test does not run as root (`.ci/run`
installs them)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from filecmp import cmp
from pathlib import Path
from typing import Any, Iterator

import pytest

from kscperf import history
from kscperf.history import links
from kscperf.results.files import load_results
from runner_testing import DEFS, ROOT, cli, explain, load_doc

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol")
# Two processes per cell: lockstep pairs them.
FLAGS = "--processes 2 --values 2 --warmups 0 --min-time 0.001 --tools pt,ptnice --tasks inference"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(any(shutil.which(d) is None for d in DAEMONS),
                       reason="Slurm and munge are not installed (.ci/run installs them)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the daemons are started as root"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(d: Path, host: str) -> str:
    return "\n".join([
        "ClusterName=kscperftest", f"SlurmctldHost={host}", "SlurmUser=root",
        "SlurmdUser=root", "AuthType=auth/munge", f"AuthInfo=socket={d}/munge.sock",
        "CredType=cred/munge", "MpiDefault=none", "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none", "SwitchType=switch/none", "ReturnToService=2",
        "SchedulerType=sched/backfill", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", f"SlurmctldPidFile={d}/slurmctld.pid",
        f"SlurmdPidFile={d}/slurmd.pid", f"SlurmdSpoolDir={d}/slurmd",
        f"StateSaveLocation={d}/state", f"SlurmctldLogFile={d}/slurmctld.log",
        f"SlurmdLogFile={d}/slurmd.log", f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        f"NodeName={host} CPUs={os.cpu_count()} State=UNKNOWN",
        f"PartitionName=perf Nodes={host} Default=YES MaxTime=INFINITE State=UP", ""])


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _stop(pid: int | None) -> None:
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A running one-node cluster: the environment its commands need (SLURM_CONF)."""
    d = tmp_path / "slurm"
    for sub in ("slurmd", "state"):
        (d / sub).mkdir(parents=True)
    host = socket.gethostname().split(".")[0]
    (d / "slurm.conf").write_text(_config(d, host))
    env = {**os.environ, "SLURM_CONF": str(d / "slurm.conf")}
    key = d / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o600)
    started: list[Path] = []
    try:
        subprocess.run(["munged", "--force", f"--socket={d}/munge.sock", f"--key-file={key}",
                        f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log",
                        f"--seed-file={d}/munge.seed"], check=True, env=env)
        started.append(d / "munged.pid")
        for daemon in ("slurmctld", "slurmd"):
            subprocess.run([daemon, "-f", str(d / "slurm.conf")], check=True, env=env)
            started.append(d / f"{daemon}.pid")
        for _ in range(100):  # the node registers within seconds
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, text=True,
                                   capture_output=True).stdout.strip()
            if state == "idle":
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the Slurm node never became idle ({state!r}); see {d}/slurmd.log")
        yield env
    finally:
        subprocess.run(["scontrol", "shutdown"], env=env, capture_output=True)
        for pid_file in reversed(started):
            _stop(_pid(pid_file))


def _wait_for_jobs(env: dict[str, str], timeout_s: float = 900) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        queue = subprocess.run(["squeue", "-h"], env=env, text=True, capture_output=True)
        if queue.returncode == 0 and not queue.stdout.strip():
            return
        time.sleep(1)
    pytest.fail("the Slurm jobs did not finish in time")


def _submit(env: dict[str, str], cwd: Path, build: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["bash", str(ROOT / "examples" / "slurm" / "submit.sh")], cwd=cwd,
                          env={**env, "BUILD": build}, text=True, capture_output=True,
                          timeout=120)
    assert proc.returncode == 0, explain(proc)
    assert "shards in array job" in proc.stdout, explain(proc)
    _wait_for_jobs(env)
    return proc


def _cells(doc: dict[str, Any]) -> set[tuple[str, str, str, str | None, str]]:
    return {(c["model"], c["tool"], c["task"], c.get("config"), c["status"])
            for c in doc["kscperf"]["cells"]}


def _first_night(tmp_path: Path, results: Path) -> None:
    """The plain night: the merged build is the unsharded run's, in the store alone."""
    merged = load_doc(results / "night1.json")
    shards = [load_doc(results / "shards" / "night1" / f"shard-{i}-of-2.json") for i in (1, 2)]
    unsharded = tmp_path / "unsharded.json"
    run = cli("run", DEFS / "toy.py", *FLAGS.split(), "--build", "night1", "-o", unsharded)
    assert run.returncode == 0, explain(run)
    assert _cells(merged) == _cells(load_doc(unsharded))
    assert all(_cells(s) for s in shards) and not _cells(shards[0]) & _cells(shards[1])
    with history.open_store(str(results / "history")) as store:
        assert [b.label for b in store.builds()] == ["night1"]
        (cls,) = store.machine_classes()
        assert store.links(cls) == {}
    assert "night1" in (results / "dashboard" / "index.html").read_text(encoding="utf-8")
    assert (results / "night1.html").is_file()


def _lockstep_night(results: Path, base: str, new: str) -> set[tuple[str, str]]:
    """A lockstep night's folder, merged side by side, and the store's build and link of
    it against the files: the links of the whole store, as (base, new) labels."""
    folder = results / "ab" / new
    base_doc, new_doc = load_doc(folder / f"{base}.json"), load_doc(folder / f"{new}.json")
    assert base_doc["metadata"]["lockstep_id"] == new_doc["metadata"]["lockstep_id"]
    assert base_doc["metadata"]["merged_shards"] == new_doc["metadata"]["merged_shards"] == "1,2/2"
    assert _cells(new_doc) == _cells(load_doc(results / f"{new}.json"))
    with history.open_store(str(results / "history")) as store:
        builds = {b.label: b for b in store.builds()}
        (cls,) = store.machine_classes()
        stored = store.links(cls)
    # The stored build is this night's merged file; the stored link file, its base side.
    assert cmp(builds[new].file, results / f"{new}.json", shallow=False)
    link_file = results / "history" / "links" / Path(builds[new].file).name
    assert cmp(link_file, folder / f"{base}.json", shallow=False)
    # The store's link of this night is the one its two files give.
    expected = {(r.kind, r.benchmark): r.ratio for r in links.link_rows(
        load_results(str(folder / f"{base}.json")), load_results(str(folder / f"{new}.json")))}
    got = {key: by_new[builds[new].id].ratio for key, by_new in stored.items()
           if builds[new].id in by_new}
    assert expected and got == pytest.approx(expected)
    assert all(by_new[builds[new].id].base_id == builds[base].id
               for by_new in stored.values() if builds[new].id in by_new)
    assert "Lockstep timeline" in "".join(
        p.read_text(encoding="utf-8") for p in (results / "dashboard" / "benchmarks").glob("*.html"))
    labels = {b.id: b.label for b in builds.values()}
    return {(labels[link.base_id], labels[link.new_id])
            for by_new in stored.values() for link in by_new.values()}


def test_submit_sh_runs_three_nights_on_a_real_cluster_with_links(
        tmp_path: Path, cluster: dict[str, str]) -> None:
    results = tmp_path / "nightly"
    env = {**cluster, "SUITE": str(DEFS / "toy.py"), "SHARDS": "2", "RESULTS": str(results),
           "RUN_FLAGS": FLAGS, "KSCPERF_VENV": sys.prefix, "AB_BUDGET": "4"}
    first = _submit(env, tmp_path, "night1")
    assert "lockstep" not in first.stderr, explain(first)
    _first_night(tmp_path, results)

    for night, expected in ((2, {("night1", "night2")}),
                            (3, {("night1", "night2"), ("night2", "night3")})):
        base, new = f"night{night - 1}", f"night{night}"
        proc = _submit(env, tmp_path, new)
        assert f"lockstep: {base}" in proc.stderr, explain(proc)
        merge_out = "".join(p.read_text() for p in tmp_path.glob("kscperf-merge-*.out"))
        assert "Traceback" not in merge_out, merge_out
        assert _lockstep_night(results, base, new) == expected, merge_out
        assert (results / f"{new}.html").is_file(), merge_out
    assert (results / "last-nightly.env").read_text() == \
        f"build=night3\npython={sys.prefix}/bin/python\n"
