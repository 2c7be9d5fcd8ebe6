"""Process isolation: no state passes from one cell to the next, under fork (the default)
and spawn; spawn is the fallback where fork is missing; a dead fork server is replaced."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import sys
from pathlib import Path

import pytest

from kscperf.orchestrator import launch
from runner_testing import QUICK, cli

pytestmark = pytest.mark.integration

POLLUTION = Path(__file__).parent / "fixtures" / "isolation" / "pollution.py"


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None
         ) -> tuple[subprocess.CompletedProcess, list[dict]]:
    out = tmp_path / "out.json"
    proc = cli(POLLUTION, "--tools", "pt", "--tasks", "inference", *QUICK, "-o", out, *args,
               env=env)
    cells = json.loads(out.read_text())["kscperf"]["cells"]
    return proc, cells


def _status(cells: list[dict], model: str) -> dict:
    return next(c for c in cells if c["model"] == model)


@pytest.mark.parametrize("isolation", ["fork", "spawn"])
def test_no_state_leaks_between_cells(tmp_path: Path, isolation: str) -> None:
    proc, cells = _run(tmp_path, "-k", "polluter", "-k", "witness", "--isolation", isolation)
    assert _status(cells, "polluter")["status"] == "ok"
    witness = _status(cells, "witness")
    assert witness["status"] == "ok", witness["reason"]
    assert proc.returncode == 0, proc.stderr


def test_witness_can_see_pollution_in_one_process() -> None:
    # The witness is able to fail: polluting in its own process is seen.
    code = (f"import importlib.util, torch; spec = importlib.util.spec_from_file_location("
            f"'p', {str(POLLUTION)!r}); m = importlib.util.module_from_spec(spec); "
            f"spec.loader.exec_module(m); x = torch.ones(2); m.polluter_pytorch(x); "
            f"m.witness_pytorch(x)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0
    for leak in ("thread count", "module global", "sys.modules entry", "environment variable",
                 "live tensor", "dynamo config", "dynamo counters"):
        assert leak in proc.stderr


def test_dead_fork_server_is_replaced(tmp_path: Path) -> None:
    proc, cells = _run(tmp_path, "-k", "zygotekiller", "-k", "witness",
                       env={"KSCPERF_TEST_KILL_PARENT": "1"})
    killer = [c for c in cells if c["model"] == "zygotekiller"]
    assert [c["status"] for c in killer] == ["crashed"]
    assert "fork server died" in killer[0]["reason"]
    assert _status(cells, "witness")["status"] == "ok"
    assert proc.returncode == 1


def test_spawn_is_the_fallback_without_fork(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    assert isinstance(launch.make_launcher("spawn"),
                      launch.SpawnLauncher)
    assert isinstance(launch.make_launcher("fork"),
                      launch.ForkLauncher)
    # A platform without fork() cannot be had here; take fork() away from os.
    monkeypatch.delattr(os, "fork")
    assert isinstance(launch.make_launcher("fork"),
                      launch.SpawnLauncher)


def test_isolation_recorded(tmp_path: Path) -> None:
    _, _ = _run(tmp_path, "-k", "witness", "--isolation", "spawn")
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["kscperf"]["metadata"]["isolation"] == "spawn"


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_compile_cache_choice(tmp_path: Path, cache: str) -> None:
    proc, cells = _run(tmp_path, "-k", "cachewitness", "--compile-cache", cache,
                       env={"KSCPERF_TEST_EXPECT_CACHE": cache})
    assert _status(cells, "cachewitness")["status"] == "ok", proc.stderr
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["kscperf"]["metadata"]["compile_cache"] == cache
    leftovers = [p for p in Path(tempfile.gettempdir()).glob("kscperf-cold-cache-*")
                 if p.stat().st_mtime > doc_time(doc)]
    assert not leftovers


def doc_time(doc: dict) -> float:
    import datetime

    return datetime.datetime.fromisoformat(doc["kscperf"]["metadata"]["date"]).timestamp()
