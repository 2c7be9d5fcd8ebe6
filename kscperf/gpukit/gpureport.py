"""The GPU proof kit's reports: its lines for the terminal, a markdown page and a JSON file,
laid out from a `gpucheck.Report`. Judges nothing: every status and ratio is the report's.
"""

from __future__ import annotations

import json
import os
from typing import Any

from kscperf.gpukit.gpucheck import NO_CUDA_LINE, Check, Report
from kscperf.results.fileio import write_text_atomic

__all__ = ["NO_CUDA_LINE", "check_line", "facts_lines", "render_markdown", "render_json",
           "write_reports"]

# The facts shown, in order, with their labels; the rest is in the JSON.
_FACTS = (("gpu_name", "GPU"), ("gpu_memory_bytes", "memory"), ("sm_count", "SMs"),
          ("l2_cache_bytes", "L2"), ("gpu_driver", "driver"), ("torch_version", "torch"),
          ("cuda_version", "CUDA"), ("triton_version", "triton"),
          ("python_version", "Python"), ("float32_matmul_precision",
                                          "float32 matmul precision"),
          ("allow_tf32_matmul", "TF32 matmul"), ("allow_tf32_cudnn", "TF32 cuDNN"))
_NVML = (("sm_clock_mhz", "SM clock", "MHz"), ("memory_clock_mhz", "memory clock", "MHz"),
         ("max_sm_clock_mhz", "max SM clock", "MHz"), ("temperature_c", "temperature", "°C"),
         ("power_w", "power", "W"))


def _value(key: str, value: Any) -> str:
    if key.endswith("_bytes") and isinstance(value, int):
        return f"{value / 2**30:.1f} GiB" if value >= 2**30 else f"{value / 2**20:.0f} MiB"
    return str(value)


def check_line(check: Check) -> str:
    """A check as one terminal line: `STATUS name: summary [target]`."""
    target = f"  [target: {check.target}]" if check.target else ""
    return f"{check.status.value.upper():4} {check.name}: {check.summary}{target}"


def _nvml_line(facts: dict[str, Any]) -> str:
    nvml = facts.get("nvml")
    if not isinstance(nvml, dict):
        return ""
    if "unavailable" in nvml:
        return str(nvml["unavailable"])
    parts = [f"{label} {nvml[k]:g} {unit}" for k, label, unit in _NVML
             if isinstance(nvml.get(k), (int, float))]
    reasons = ", ".join(nvml.get("throttle_reasons") or []) or "none"
    return ", ".join(parts) + f", throttle reasons: {reasons}"


def facts_lines(report: Report) -> list[str]:
    """The machine facts as lines: the device, then NVML's state before and after."""
    facts = report.facts_before
    if "unavailable" in facts:
        return [f"INFO facts: {facts['unavailable']}"]
    shown = "; ".join(f"{label} {_value(k, facts[k])}" for k, label in _FACTS if k in facts)
    lines = [f"INFO facts: {shown}"]
    for when, f in (("before", report.facts_before), ("after", report.facts_after)):
        nvml = _nvml_line(f)
        if nvml:
            lines.append(f"INFO nvml {when}: {nvml}")
    return lines


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        text = f"{value * 1e6:.2f} µs" if value < 1.0 else f"{value:.3f}"
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _ratio_cell(key: str, value: Any) -> str:
    if key.endswith("_ratio") or key == "ratio":
        return "—" if value is None else f"{value:.3f}"
    if key.endswith("_bytes") and isinstance(value, int):
        return f"{value:,}"
    if key.endswith("_s") and isinstance(value, float):
        return f"{value:.3f} s"
    return _cell(value)


def _table(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["(nothing)"]
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        lines.append("| " + " | ".join(_ratio_cell(k, row.get(k)) for k in keys) + " |")
    return lines


def render_markdown(report: Report) -> str:
    """The report as a markdown page: the verdict, one line per check, the machine facts,
    then each section's table."""
    verdict = "every check passed" if report.exit_status == 0 else "a check failed"
    lines = [f"# gpu-check on {report.device}, {report.started}", "",
             f"{verdict} (exit status {report.exit_status}); "
             f"{report.elapsed_s:.0f} s of a {report.budget_s:.0f} s budget.", "",
             "## Checks", "", "```", *(check_line(c) for c in report.checks), "```", "",
             "## Machine", "", "```", *facts_lines(report), "```"]
    for name, rows in report.tables.items():
        lines += ["", f"## {name}", "", *_table(rows)]
    return "\n".join(lines) + "\n"


def render_json(report: Report) -> str:
    """The report as JSON: everything it holds, plain types."""
    return json.dumps(report.to_dict(), indent=1, sort_keys=True)


def write_reports(report: Report, out_dir: str) -> tuple[str, str]:
    """Write `gpu-check.md` and `gpu-check.json` into `out_dir`; their paths."""
    os.makedirs(out_dir, exist_ok=True)
    md = os.path.join(out_dir, "gpu-check.md")
    js = os.path.join(out_dir, "gpu-check.json")
    write_text_atomic(md, render_markdown(report), "the gpu-check markdown report")
    write_text_atomic(js, render_json(report), "the gpu-check JSON report")
    return md, js
