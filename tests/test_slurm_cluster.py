"""examples/slurm/ on a real one-node Slurm cluster: Debian's slurmctld, slurmd and munge,
started as root with a configuration in a temporary folder (no cgroups:
proctrack/linuxproc, task/none). The test submits examples/slurm/submit.sh as a user would,
waits for the shard array and the merge job, checks the merged build against an unsharded
run of the same selection, the store and the dashboard, and stops every daemon it started.
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
from pathlib import Path
from typing import Iterator

import pytest

from kscperf import history
from runner_testing import DEFS, ROOT, cli, explain, load_doc

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol")
FLAGS = "--fast --values 2 --warmups 0 --min-time 0.001 --tools pt,ptnice --tasks inference"

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


def test_submit_sh_runs_the_shards_and_the_merge_on_a_real_cluster(
        tmp_path: Path, cluster: dict[str, str]) -> None:
    results = tmp_path / "nightly"
    env = {**cluster, "SUITE": str(DEFS / "toy.py"), "SHARDS": "2", "RESULTS": str(results),
           "RUN_FLAGS": FLAGS, "BUILD": "night1", "KSCPERF_VENV": sys.prefix}
    proc = subprocess.run(["bash", str(ROOT / "examples" / "slurm" / "submit.sh")], cwd=tmp_path,
                          env=env, text=True, capture_output=True, timeout=60)
    assert proc.returncode == 0, explain(proc)
    assert "shards in array job" in proc.stdout, explain(proc)
    _wait_for_jobs(cluster)

    merged = load_doc(results / "night1.json")
    shards = [load_doc(results / "shards" / "night1" / f"shard-{i}-of-2.json") for i in (1, 2)]
    unsharded = tmp_path / "unsharded.json"
    run = cli("run", DEFS / "toy.py", *FLAGS.split(), "--build", "night1", "-o", unsharded)
    assert run.returncode == 0, explain(run)

    def cells(doc: dict) -> set[tuple[str, str, str, str | None, str]]:
        return {(c["model"], c["tool"], c["task"], c.get("config"), c["status"])
                for c in doc["kscperf"]["cells"]}

    assert cells(merged) == cells(load_doc(unsharded))
    assert all(cells(s) for s in shards) and not cells(shards[0]) & cells(shards[1])
    with history.open_store(str(results / "history")) as store:
        assert [b.label for b in store.builds()] == ["night1"]
    assert "night1" in (results / "dashboard" / "index.html").read_text(encoding="utf-8")
    assert (results / "night1.html").is_file()
