"""Tests of kscperf.worker.check: dtype-aware tolerances with per-model overrides, and the
comparison with the float64 reference (errors, NaN, shapes, magnitude-relative atol)."""

from __future__ import annotations

import math

import pytest
import torch

from kscperf.worker.check import DEFAULT_TOLERANCES, compare_values, tolerance_for

F64 = torch.float64


def t(*values: float, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


# -- tolerance_for -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, expected", [
    (torch.float64, (1e-7, 1e-7)),
    (torch.float32, (1e-4, 1e-5)),
    (torch.float16, (1e-2, 1e-3)),
    (torch.bfloat16, (5e-2, 1e-2)),
    (torch.int64, (1e-4, 1e-5)),  # anything else: float32's
])
def test_default_tolerances_by_dtype(dtype: torch.dtype, expected: tuple[float, float]) -> None:
    assert tolerance_for(dtype, {}) == expected


def test_flat_override_applies_to_every_dtype_and_keeps_the_other_default() -> None:
    overrides = {"rtol": 1e-2}
    assert tolerance_for(torch.float32, overrides) == (1e-2, 1e-5)
    assert tolerance_for(torch.float64, overrides) == (1e-2, 1e-7)


def test_per_dtype_override_applies_to_that_dtype_only() -> None:
    overrides = {"float32": {"atol": 1e-3}}
    assert tolerance_for(torch.float32, overrides) == (1e-4, 1e-3)
    assert tolerance_for(torch.float64, overrides) == (1e-7, 1e-7)


def test_per_dtype_override_beats_flat_override() -> None:
    overrides = {"rtol": 0.5, "atol": 0.5, "float64": {"rtol": 1e-9}}
    assert tolerance_for(torch.float64, overrides) == (1e-9, 0.5)
    assert tolerance_for(torch.float32, overrides) == (0.5, 0.5)


def test_overrides_never_change_the_defaults() -> None:
    before = {k: dict(v) for k, v in DEFAULT_TOLERANCES.items()}
    tolerance_for(torch.float32, {"rtol": 3.0, "float32": {"atol": 3.0}})
    assert DEFAULT_TOLERANCES == before


# -- compare_values ------------------------------------------------------------------------

def test_exact_match_passes_with_zero_errors() -> None:
    ref = [t(1.0, -2.0, 3.0)]
    result = compare_values([t(1.0, -2.0, 3.0, dtype=torch.float32)], ref, "output", 1e-4, 1e-5)
    assert result.passed
    assert (result.max_abs_err, result.max_rel_err) == (0.0, 0.0)
    assert (result.what, result.rtol, result.atol, result.detail) == ("output", 1e-4, 1e-5, "")


def test_max_errors_are_reported_over_all_tensors() -> None:
    ref = [t(1.0, 2.0, 4.0), t(10.0, -10.0)]
    got = [t(1.0, 2.002, 4.0), t(10.0, -10.05)]
    result = compare_values(got, ref, "gradient", rtol=1e-2, atol=0.0)
    assert result.passed
    assert result.max_abs_err == pytest.approx(0.05)
    assert result.max_rel_err == pytest.approx(0.005)  # 0.05 / 10 beats 0.002 / 2 = 0.001
    failed = compare_values(got, ref, "gradient", rtol=1e-3, atol=0.0)
    assert not failed.passed
    assert failed.max_abs_err == pytest.approx(0.05)
    assert failed.detail.startswith("tensor 1: 1 of 2 elements out of tolerance, "
                                    "worst at flat index 1: got -10.05, expected -10")


def test_relative_tolerance_boundary() -> None:
    ref = [t(100.0)]
    assert compare_values([t(100.0 + 0.0099)], ref, "output", 1e-4, 0.0).passed
    assert not compare_values([t(100.0 + 0.0101)], ref, "output", 1e-4, 0.0).passed


def test_atol_scales_with_the_tensors_magnitude() -> None:
    # 0.005 next to an exact 0 is cancellation noise in a tensor of magnitude 1000 ...
    big = compare_values([t(1000.0, 0.005)], [t(1000.0, 0.0)], "output", 1e-4, 1e-5)
    assert big.passed
    # ... but a real error in a tensor of magnitude 1 (the scale never drops below 1)
    small = compare_values([t(1.0, 0.005)], [t(1.0, 0.0)], "output", 1e-4, 1e-5)
    assert not small.passed
    tiny = compare_values([t(1e-3, 2e-5)], [t(1e-3, 0.0)], "output", 0.0, 1e-5)
    assert not tiny.passed
    assert small.max_rel_err == pytest.approx(0.005)  # where ref == 0 the error itself


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nonfinite_where_the_reference_is_finite_fails(bad: float) -> None:
    result = compare_values([t(1.0, bad, 3.0)], [t(1.0, 2.0, 3.0)], "output", 1.0, 1.0)
    assert not result.passed
    assert result.max_abs_err == math.inf
    assert result.detail == "1 NaN or Inf value(s) where the reference is finite"


def test_nan_where_the_reference_is_nan_too_passes() -> None:
    result = compare_values([t(1.0, math.nan)], [t(1.0, math.nan)], "output", 1e-4, 1e-5)
    assert result.passed
    assert result.max_abs_err == 0.0


def test_same_infinity_where_the_reference_is_infinite_passes() -> None:
    result = compare_values([t(-math.inf, 2.0, math.inf)], [t(-math.inf, 2.0, math.inf)],
                            "output", 1e-4, 1e-5)
    assert result.passed
    assert result.max_abs_err == 0.0


@pytest.mark.parametrize("got, ref", [
    ((math.inf, 2.0), (-math.inf, 2.0)),  # wrong sign of infinity
    ((5.0, 2.0), (math.inf, 2.0)),        # finite where the reference overflowed
    ((5.0, 2.0), (math.nan, 2.0)),        # finite where the reference is NaN
    ((math.inf, 2.0), (math.nan, 2.0)),
])
def test_anything_else_where_the_reference_is_nan_or_inf_fails(
        got: tuple[float, ...], ref: tuple[float, ...]) -> None:
    result = compare_values([t(*got)], [t(*ref)], "output", 1.0, 1.0)
    assert not result.passed
    assert result.detail == "1 value(s) differ where the reference is NaN or Inf"


def test_shape_mismatch_fails_even_when_broadcastable() -> None:
    result = compare_values([torch.ones(1, 3, dtype=F64)], [torch.ones(3, dtype=F64)],
                            "output", 1.0, 1.0)
    assert not result.passed
    assert result.detail == "shape (1, 3) where the reference has (3,)"
    assert result.max_abs_err == math.inf


def test_tensor_count_mismatch_fails() -> None:
    result = compare_values([t(1.0)], [t(1.0), t(2.0)], "gradient", 1.0, 1.0)
    assert not result.passed
    assert result.detail == "1 tensors where the reference has 2"


def test_low_precision_and_empty_tensors() -> None:
    ref = [t(1.0, 2.0, 3.0), torch.zeros(0, dtype=F64)]
    got = [t(1.0, 2.0, 3.0, dtype=torch.float16), torch.zeros(0, dtype=torch.float16)]
    assert compare_values(got, ref, "output", 1e-2, 1e-3).passed


def test_complex_values_fail() -> None:
    result = compare_values([torch.ones(2, dtype=torch.complex64)], [torch.ones(2, dtype=F64)],
                            "output", 1.0, 1.0)
    assert not result.passed
    assert result.detail == "complex values"


def test_result_round_trips_through_a_dict() -> None:
    from kscperf.spec import CheckResult

    result = compare_values([t(1.0, 2.5)], [t(1.0, 2.0)], "jacobian", 1e-4, 1e-5)
    assert CheckResult.from_dict(result.to_dict()) == result
