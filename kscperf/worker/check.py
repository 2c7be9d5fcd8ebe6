"""Comparison of a tool's values with the float64 reference, with dtype-aware tolerances.

An element passes when |got - ref| <= atol * scale + rtol * |ref|, where scale is
max(1, max |ref|) of that tensor: an absolute tolerance relative to the tensor's magnitude,
so that values near zero in a large-valued result (cancellation) are judged fairly. NaN or
Inf where the reference is finite always fails; where the reference is NaN or Inf the tool
must give the same. Defaults by dtype of the tool's inputs,
overridable per model with `B_tolerances`.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import torch

from kscperf.spec import CheckResult

__all__ = ["DEFAULT_TOLERANCES", "tolerance_for", "compare_values"]

# float32 and lower follow torch.testing's order of magnitude, loosened for the longer
# reductions of whole models (gmm sums over thousands of points).
DEFAULT_TOLERANCES: dict[str, dict[str, float]] = {
    "float64": {"rtol": 1e-7, "atol": 1e-7},
    "float32": {"rtol": 1e-4, "atol": 1e-5},
    "float16": {"rtol": 1e-2, "atol": 1e-3},
    "bfloat16": {"rtol": 5e-2, "atol": 1e-2},
}


def tolerance_for(dtype: torch.dtype, overrides: Mapping[str, Any]) -> tuple[float, float]:
    """(rtol, atol) for inputs of `dtype`, with a model's `B_tolerances` taking precedence.

    `overrides` may be keyed by dtype name ({"float32": {"rtol": ..}}) or flat
    ({"rtol": .., "atol": ..}, for every dtype)."""
    name = str(dtype).removeprefix("torch.")
    tol = dict(DEFAULT_TOLERANCES.get(name, DEFAULT_TOLERANCES["float32"]))
    flat = {k: v for k, v in overrides.items() if k in ("rtol", "atol")}
    tol.update(flat)
    tol.update(overrides.get(name, {}) if isinstance(overrides.get(name), Mapping) else {})
    return float(tol["rtol"]), float(tol["atol"])


def compare_values(got: Sequence[torch.Tensor], ref: Sequence[torch.Tensor], what: str,
                   rtol: float, atol: float) -> CheckResult:
    """Compare each tensor of `got` (any device/dtype) with `ref` (float64, CPU)."""
    if len(got) != len(ref):
        return CheckResult(False, what, math.inf, math.inf, rtol, atol,
                           f"{len(got)} tensors where the reference has {len(ref)}")
    max_abs = max_rel = 0.0
    detail = ""
    passed = True
    for k, (g, r) in enumerate(zip(got, ref)):
        if tuple(g.shape) != tuple(r.shape):
            return CheckResult(False, what, math.inf, math.inf, rtol, atol,
                               f"shape {tuple(g.shape)} where the reference has {tuple(r.shape)}")
        if g.is_complex() or r.is_complex():
            return CheckResult(False, what, math.inf, math.inf, rtol, atol, "complex values")
        g64 = g.detach().to("cpu", torch.float64)
        r64 = r.detach().to("cpu", torch.float64)
        if r64.numel() == 0:
            continue
        bad_nonfinite = (~torch.isfinite(g64)) & torch.isfinite(r64)
        if bool(bad_nonfinite.any()):
            n = int(bad_nonfinite.sum())
            return CheckResult(False, what, math.inf, math.inf, rtol, atol,
                               f"{n} NaN or Inf value(s) where the reference is finite")
        # Where the reference is NaN or +-Inf the tool must give the same (Inf of the same
        # sign); the tolerance arithmetic below ignores those elements.
        bad_special = (~torch.isfinite(r64)) & ~((g64 == r64) | (g64.isnan() & r64.isnan()))
        if bool(bad_special.any()):
            n = int(bad_special.sum())
            return CheckResult(False, what, math.inf, math.inf, rtol, atol,
                               f"{n} value(s) differ where the reference is NaN or Inf")
        finite = torch.isfinite(r64)
        diff = (g64 - r64).abs().where(finite, torch.zeros_like(r64))
        scale = max(1.0, float(r64[finite].abs().max())) if bool(finite.any()) else 1.0
        allowed = atol * scale + rtol * r64.abs().where(finite, torch.zeros_like(r64))
        abs_err = float(diff.max())
        rel_err = float((diff / r64.abs().clamp_min(1e-300)).where(
            r64 != 0, diff).max())
        max_abs, max_rel = max(max_abs, abs_err), max(max_rel, rel_err)
        over = diff > allowed
        if bool(over.any()) and passed:
            passed = False
            idx = int(torch.argmax((diff - allowed).flatten()))
            detail = (f"tensor {k}: {int(over.sum())} of {r64.numel()} elements out of "
                      f"tolerance, worst at flat index {idx}: got {float(g64.flatten()[idx]):.6g}, "
                      f"expected {float(r64.flatten()[idx]):.6g}")
    return CheckResult(passed, what, max_abs, max_rel, rtol, atol, detail)
