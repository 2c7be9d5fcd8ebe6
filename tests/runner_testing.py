"""Shared helpers of the runner's tests: where the fixtures are, and running the real
`run-benchmarks` command in a subprocess and reading what it wrote.

Not a test module (pytest collects test_*.py only); imported by the test_*.py next to it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
DEFS = FIXTURES / "defs"
BENCH_DEFS = ROOT / "bench_defs"

# Keeps a real run short: one process, one value, no warmup, tiny loops.
QUICK = ["--fast", "--values", "1", "--warmups", "0", "--min-time", "0.001"]


def run_benchmarks_command() -> list[str]:
    """The installed `run-benchmarks` script of this interpreter's environment."""
    script = Path(sys.executable).with_name("run-benchmarks")
    return [str(script)] if script.exists() else [sys.executable, "-m", "kscperf"]


def default_sigint() -> None:
    """A `preexec_fn` for a child that a test interrupts with SIGINT, as Ctrl-C does: a shell
    without job control starts background commands with SIGINT ignored, the child inherits
    that, and a Python started so never turns SIGINT into KeyboardInterrupt. The child gets
    the default instead, as at a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cli(*args: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None,
        pythonpath: list[str | os.PathLike[str]] | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run `run-benchmarks ARGS` as users do, in its own process, and capture its output."""
    full_env = dict(os.environ)
    if pythonpath:
        parts = [str(p) for p in pythonpath]
        if full_env.get("PYTHONPATH"):
            parts.append(full_env["PYTHONPATH"])
        full_env["PYTHONPATH"] = os.pathsep.join(parts)
    full_env.update(env or {})
    return subprocess.run(run_benchmarks_command() + [str(a) for a in args], cwd=cwd,
                          env=full_env, capture_output=True, text=True, timeout=timeout)


def load_doc(path: str | os.PathLike[str]) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fp:
        return json.load(fp)


def cells_of(doc: dict[str, Any]) -> dict[tuple[str, str, str, str | None], dict[str, Any]]:
    """The `kscperf.cells` entries keyed by (model, tool, task, config)."""
    return {(c["model"], c["tool"], c["task"], c["config"]): c for c in doc["kscperf"]["cells"]}


def statuses(doc: dict[str, Any], model: str, tool: str, task: str) -> set[str]:
    """The statuses of every config of one cell."""
    return {c["status"] for (m, t, k, _), c in cells_of(doc).items()
            if (m, t, k) == (model, tool, task)}


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    """What to print when a command did not do what a test expected."""
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def single_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused command printed: exit status 2, one `run-benchmarks: error:`
    line on stderr, no traceback."""
    assert proc.returncode == 2, explain(proc)
    assert "Traceback" not in proc.stderr + proc.stdout, explain(proc)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, explain(proc)
    assert lines[0].startswith("run-benchmarks: error: "), explain(proc)
    return lines[0]


# The headless browser of the report and dashboard tests, when the machine has one.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not on PATH")
# Flags for a browser that must not reach the network or keep state between runs.
_CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                   "--no-first-run", "--disable-background-networking",
                   "--disable-component-update", "--disable-sync", "--disable-extensions",
                   "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000")


def chromium(tmp_path: Path, page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Open `page` from disk in headless Chromium, with its own profile under `tmp_path`
    and `extra` flags (--dump-dom, --screenshot=...); its console goes to stderr."""
    assert CHROMIUM is not None
    profile = tmp_path / f"profile-{page.stem}"
    return subprocess.run(
        [CHROMIUM, *_CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
        capture_output=True, text=True, timeout=120)


def console_messages(stderr: str) -> list[str]:
    """The page's console messages and uncaught errors in Chromium's stderr."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
