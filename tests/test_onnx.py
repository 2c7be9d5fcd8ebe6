"""The onnxrt tool (kscperf_onnx), a real third-party compiler through the plug-in interface,
registered by kscperf's own `kscperf.tools` entry point: inference is exported, run in an
ONNX Runtime session and checked; the other tasks are unsupported with the reason; without
onnxruntime every cell is skipped with a one-line reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner_testing import DEFS, QUICK, cells_of, cli, explain, load_doc, statuses

pytestmark = pytest.mark.integration

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")


def test_onnxrt_runs_inference_and_declines_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    proc = cli("run", DEFS / "toy.py", *QUICK, "--tools", "onnxrt", "-o", out, "-q")
    assert proc.returncode == 0, explain(proc)
    doc = load_doc(out)
    assert statuses(doc, "toy", "onnxrt", "inference") == {"ok"}
    cells = cells_of(doc)
    assert cells["toy", "onnxrt", "inference", "3x4"]["check"]["passed"] is True
    for task in ("fwd", "bwd", "jacobian"):
        cell = cells["toy", "onnxrt", task, None]
        assert cell["status"] == "unsupported"
        assert cell["reason"].startswith(f"onnxrt does not support {task}: an ONNX Runtime "
                                         "session runs the exported graph without autograd")
    run = next(r for r in doc["kscperf"]["runs"] if r["task"] == "inference")
    assert run["compile_s"] > 0  # export and session creation


def test_onnxrt_without_onnxruntime_is_skipped(tmp_path: Path) -> None:
    # A module that stands for onnxruntime as a machine without the extra has it: absent.
    absent = tmp_path / "absent"
    absent.mkdir()
    (absent / "onnxruntime.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'onnxruntime'\", name='onnxruntime')\n")
    out = tmp_path / "run.json"
    proc = cli("run", DEFS / "toy.py", *QUICK, "--tools", "onnxrt", "-o", out, "-q",
               pythonpath=[absent])
    assert proc.returncode == 0, explain(proc)
    for (_, _, task, _), cell in cells_of(load_doc(out)).items():
        assert cell["status"] == "skipped", task
        assert cell["reason"] == ("tool onnxrt is not available here: No module named "
                                  "'onnxruntime': install the onnx extra "
                                  "(pip install -e '.[onnx]')")
