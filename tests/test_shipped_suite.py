"""The acceptance run of the runner: `run-benchmarks --fast` on the shipped bench_defs/ with
the CPU tools pt, ptnice, ts and compiled (torch.compile) and all four tasks. Slow (minutes,
mostly torch.compile): marked `slow`, which CI also runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner_testing import BENCH_DEFS, cells_of, cli, explain, load_doc

pytestmark = pytest.mark.slow

TOOLS = ("pt", "ptnice", "ts", "compiled")
TASKS = ("inference", "fwd", "bwd", "jacobian")
MODELS = ("vrelu3", "vgelu", "sqrl", "vsqrl", "gmm")


def test_shipped_suite_is_all_ok_or_explained(tmp_path: Path) -> None:
    out = tmp_path / "shipped.json"
    proc = cli("run", "--fast", "--tools", ",".join(TOOLS), "--tasks", ",".join(TASKS),
               "--build", "acceptance", "-o", out, "-q", cwd=tmp_path, timeout=3600)
    assert out.exists(), explain(proc)
    doc = load_doc(out)
    cells = cells_of(doc)
    problems = [f"{'/'.join(str(k) for k in key)}: {c['status']} {c['reason']}"
                for key, c in cells.items()
                if not (c["status"] == "ok"
                        or (c["status"] in ("skipped", "unsupported") and c["reason"]))]
    assert not problems, "\n".join(problems) + "\n" + explain(proc)
    assert proc.returncode == 0, explain(proc)
    assert doc["kscperf"]["metadata"]["definition_problems"] == []
    assert doc["kscperf"]["complete"] is True
    # every model, tool and task was run (no cell silently missing)
    seen = {(m, t, k) for (m, t, k, _) in cells}
    assert seen == {(m, t, k) for m in MODELS for t in TOOLS for k in TASKS}
    # the reference tool is never skipped on the shipped models' small configs
    for model in MODELS:
        for task in TASKS:
            statuses = {c["status"] for (m, t, k, _), c in cells.items()
                        if (m, t, k) == (model, "pt", task)}
            assert "ok" in statuses, (model, task, statuses)
    # timed cells have the profile's number of values
    for key, cell in cells.items():
        if cell["status"] == "ok":
            assert cell["values"] == 5, key  # --fast: 1 process x 5 values
    assert BENCH_DEFS.is_dir()
