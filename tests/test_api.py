"""The public Python API: the example of docs/api.md runs as written, and the API's answers
to bad input are one-line KscperfErrors, never tracebacks of its internals."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import kscperf
from kscperf.errors import CellStatus
from runner_testing import DEFS

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]


def _example() -> str:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("## Example", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "docs/api.md has no python example under '## Example'"
    return blocks[0]


def test_the_documented_example_runs(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _example()], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "base 0 ['ok', 'ok', 'ok', 'ok']"
    assert lines[1] == "new 0 ['ok', 'ok', 'ok', 'ok']"
    rows = [ln.split() for ln in lines[2:-1]]
    assert sorted(name for name, _, _ in rows) == sorted(
        f"relu2/{tool}/{task}/1000" for tool in ("pt", "ptnice") for task in ("fwd", "bwd")), lines
    # Two separate one-process (fast) runs of one build: each row's verdict is one that two
    # correct runs of a cell can get, but which one is not asserted. This VM's CPUs switch speed by 1.5x for seconds
    # at a time, and a clean CI run of 2026-12-07 called one of these rows slower at 1.65x.
    # That separate runs of one build are no regression is test_compare_runs.py's expected
    # failure; `ab`, which pairs the builds' values, is the documented answer.
    assert {verdict for _, verdict, _ in rows} <= {"same", "slower", "faster",
                                                   "machine-shift"}, lines
    assert all(float(ratio.removesuffix("x")) > 0 for _, _, ratio in rows), lines
    report = Path(lines[-1].removeprefix("wrote "))
    assert report.is_file() and "relu2" in report.read_text(encoding="utf-8")


def test_the_api_names_are_exported_without_torch() -> None:
    code = ("import sys, kscperf\n"
            "names = [kscperf.run, kscperf.run_checks, kscperf.run_ab, kscperf.load,\n"
            "         kscperf.compare_builds, kscperf.write_report, kscperf.merge_shards,\n"
            "         kscperf.Build, kscperf.RunConfig, kscperf.KscperfError]\n"
            "assert 'torch' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError):
        kscperf.no_such_name  # noqa: B018


def test_bad_input_is_one_kscperf_error(tmp_path: Path) -> None:
    with pytest.raises(kscperf.KscperfError, match="does not exist|no such"):
        kscperf.run(str(tmp_path / "missing.py"), output=str(tmp_path / "out.json"))
    with pytest.raises(kscperf.KscperfError, match="unknown tool 'nope'"):
        kscperf.run(str(DEFS / "toy.py"), tools="nope", output=str(tmp_path / "out.json"))
    with pytest.raises(kscperf.KscperfError, match="profile 'slow'"):
        kscperf.RunConfig(profile="slow")
    with pytest.raises(kscperf.KscperfError, match="no such results file"):
        kscperf.load(str(tmp_path / "missing.json"))


def test_run_checks_in_process_reports_statuses(tmp_path: Path) -> None:
    seen: list[str] = []
    result = kscperf.run_checks(str(DEFS / "toy.py"), tools="pt", tasks="fwd",
                                on_progress=lambda p, label: seen.append(p.cell.name))
    assert seen == ["toy/pt/fwd"]
    assert result.outputs == [None] and not result.interrupted
    assert {c.status for c in result.loaded[0].cells} == {CellStatus.OK}
    assert result.exit_status() == 0
