"""The acceptance run of the runner: `run-benchmarks --fast` on the shipped bench_defs/ with
the CPU tools pt, ptnice, ts and compiled (torch.compile) and all four tasks; then the same
plan in 3 shards balanced by that run's costs, merged; then vrelu3's own tools (a real g++
build) and the onnxrt plug-in. Slow (minutes, mostly torch.compile):
marked `slow`, which CI also runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from runner_testing import BENCH_DEFS, cells_of, cli, explain, load_doc

pytestmark = pytest.mark.slow

TOOLS = ("pt", "ptnice", "ts", "compiled")
TASKS = ("inference", "fwd", "bwd", "jacobian")
MODELS = ("vrelu3", "vgelu", "sqrl", "vsqrl", "gmm")


SELECTION = ["--fast", "--tools", ",".join(TOOLS), "--tasks", ",".join(TASKS),
             "--build", "acceptance", "-q"]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    tmp = tmp_path_factory.mktemp("shipped")
    out = tmp / "shipped.json"
    return out, cli("run", *SELECTION, "-o", out, cwd=tmp, timeout=3600)


def test_shipped_suite_is_all_ok_or_explained(shipped: tuple[Path, Any]) -> None:
    out, proc = shipped
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


def test_three_balanced_shards_merge_into_the_whole_run(shipped: tuple[Path, Any],
                                                         tmp_path: Path) -> None:
    whole, _ = shipped
    shards = []
    for i in (1, 2, 3):
        shards.append(tmp_path / f"shard{i}.json")
        proc = cli("run", *SELECTION, "--shard", f"{i}/3", "--balance", whole, "-o",
                   shards[-1], cwd=tmp_path, timeout=3600)
        assert proc.returncode == 0, explain(proc)
    merged = tmp_path / "merged.json"
    proc = cli("merge", *shards, "-o", merged, cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    whole_doc, merged_doc = load_doc(whole), load_doc(merged)
    assert set(cells_of(merged_doc)) == set(cells_of(whole_doc))
    assert ({b["metadata"]["name"] for b in merged_doc["benchmarks"]}
            == {b["metadata"]["name"] for b in whole_doc["benchmarks"]})
    assert merged_doc["kscperf"]["complete"] is True
    # Balanced by the whole run's costs: no shard expected over the mean by more than 25 %.
    for shard in shards:
        md = load_doc(shard)["kscperf"]["metadata"]
        assert md["shard_balance"] == "shipped.json"
        assert md["shard_expected_s"] <= 1.25 * md["shard_expected_mean_s"], md
    compared = cli("compare", whole, merged, cwd=tmp_path)
    assert compared.returncode == 0, explain(compared)


@pytest.fixture(scope="module")
def own_and_onnx(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[Any, Any], Any]:
    """vrelu3's own tools (a real g++ build into an empty extensions folder) and onnxrt."""
    tmp = tmp_path_factory.mktemp("own_tools")
    out = tmp / "own.json"
    proc = cli("run", BENCH_DEFS / "relu3.py", "--fast", "-q", "-o", out, "--tools",
               "embedded_cpp,manual_cuda,manual_cuda_transfer,onnxrt",
               cwd=tmp, env={"TORCH_EXTENSIONS_DIR": str(tmp / "ext")}, timeout=1800)
    assert out.exists(), explain(proc)
    return cells_of(load_doc(out)), proc


def test_vrelu3_embedded_cpp_is_ok_on_every_task(own_and_onnx: tuple[dict[Any, Any], Any]
                                                 ) -> None:
    cells, proc = own_and_onnx
    for task in TASKS:
        statuses = {c["status"] for (m, t, k, _), c in cells.items()
                    if (m, t, k) == ("vrelu3", "embedded_cpp", task)}
        assert "ok" in statuses and statuses <= {"ok", "skipped"}, (task, explain(proc))
    assert cells["vrelu3", "embedded_cpp", "jacobian", "16"]["status"] == "ok"
    assert all(c["compile_s"] and c["compile_s"][0] > 0 for (m, t, _, _), c in cells.items()
               if t == "embedded_cpp" and c["status"] == "ok")


def test_vrelu3_cuda_tools_are_skipped_without_a_gpu(own_and_onnx: tuple[dict[Any, Any], Any]
                                                     ) -> None:
    cells, _ = own_and_onnx
    for tool in ("manual_cuda", "manual_cuda_transfer"):
        assert {c["status"] for (m, t, _, _), c in cells.items() if t == tool} == {"skipped"}


def test_onnxrt_is_ok_for_inference_only(own_and_onnx: tuple[dict[Any, Any], Any]) -> None:
    cells, proc = own_and_onnx
    onnx = {k: c for (m, t, k, _), c in cells.items() if t == "onnxrt"}
    if importlib.util.find_spec("onnxruntime") is None:  # the onnx extra is not installed
        assert {c["status"] for c in onnx.values()} == {"skipped"}
        return
    assert onnx["inference"]["status"] == "ok", explain(proc)
    for task in ("fwd", "bwd", "jacobian"):
        assert onnx[task]["status"] == "unsupported" and onnx[task]["reason"]
