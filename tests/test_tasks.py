"""Tests of kscperf.worker.tasks: the task table, the checked value of each task against
hand-computed values on tiny functions, the seeded cotangents, and the timed callables that
a task's prepare builds."""

from __future__ import annotations

import pytest
import torch

from kscperf import names
from kscperf.worker import tasks
from kscperf.worker.tasks import (OutputError, differentiable_indices, flatten_output,
                           jacobian_elements, make_cotangents, task_for)

F64 = torch.float64


def square(x: torch.Tensor) -> torch.Tensor:
    return x * x


def product(x: torch.Tensor, y: torch.Tensor, s: float) -> torch.Tensor:
    return x * y * s


def two_outputs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x * x, x.sum().reshape(1)


X = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=F64)
Y = torch.tensor([4.0, 0.25, -1.0, 2.0], dtype=F64)


# -- the task table ------------------------------------------------------------------------

def test_the_table_holds_every_task_name_in_order() -> None:
    assert tuple(tasks.TASK_TABLE) == names.TASKS
    assert all(task.name == name for name, task in tasks.TASK_TABLE.items())
    assert all(tasks.task_for(name) is task for name, task in tasks.TASK_TABLE.items())


def test_what_each_task_checks_and_whether_it_differentiates() -> None:
    assert {name: (t.checks, t.differentiates) for name, t in tasks.TASK_TABLE.items()} == {
        "inference": ("output", False), "fwd": ("output", True), "bwd": ("gradient", True),
        "jacobian": ("jacobian", True)}


# -- cotangents ----------------------------------------------------------------------------

def test_cotangents_are_seeded_not_ones_and_identical_across_calls() -> None:
    outs = [torch.zeros(5), torch.zeros(2, 3)]
    first = make_cotangents(outs, seed=42)
    torch.manual_seed(123)  # the global generator must not matter
    torch.randn(10)
    second = make_cotangents(outs, seed=42)
    assert [c.shape for c in first] == [torch.Size([5]), torch.Size([2, 3])]
    assert all(c.dtype == F64 for c in first)
    for a, b in zip(first, second):
        assert torch.equal(a, b)
    assert not any(torch.equal(c, torch.ones_like(c)) for c in first)
    assert len({float(v) for v in first[0]}) == 5  # not a constant either
    other = make_cotangents(outs, seed=43)
    assert not torch.equal(first[0], other[0])


def test_cotangents_do_not_disturb_the_global_generator() -> None:
    torch.manual_seed(5)
    expected = torch.randn(3)
    torch.manual_seed(5)
    make_cotangents([torch.zeros(4)], seed=1)
    assert torch.equal(torch.randn(3), expected)


# -- Task.value on x * x -------------------------------------------------------------------

def test_inference_value_is_the_output_without_a_graph() -> None:
    (out,) = task_for("inference").value(square, (X,), (0,), 0, "square")
    assert torch.equal(out, X * X)
    assert not out.requires_grad
    assert not X.requires_grad  # inputs untouched


def test_fwd_value_is_the_output() -> None:
    (out,) = task_for("fwd").value(square, (X,), (0,), 0, "square")
    assert torch.equal(out, X * X)
    assert not out.requires_grad  # detached
    assert not X.requires_grad


def test_bwd_value_is_the_gradient_for_the_seeded_cotangent() -> None:
    (v,) = make_cotangents([X], seed=7)
    (grad,) = task_for("bwd").value(square, (X,), (0,), 7, "square")
    assert torch.allclose(grad, 2 * X * v, rtol=0, atol=1e-15)
    assert not torch.allclose(grad, 2 * X)  # what an all-ones cotangent would give
    (again,) = task_for("bwd").value(square, (X,), (0,), 7, "square")
    assert torch.equal(grad, again)


def test_bwd_cotangent_follows_the_output_dtype() -> None:
    x32 = X.to(torch.float32)
    (v,) = make_cotangents([x32], seed=3)
    (grad,) = task_for("bwd").value(square, (x32,), (0,), 3, "square")
    assert grad.dtype == torch.float32
    assert torch.allclose(grad, (2 * X * v).float())


def test_jacobian_value_is_diag_2x() -> None:
    (jac,) = task_for("jacobian").value(square, (X,), (0,), 0, "square")
    assert torch.equal(jac, torch.diag(2 * X))


# -- several arguments and outputs ---------------------------------------------------------

def test_multiple_arguments_all_differentiated() -> None:
    args = (X, Y, 3.0)
    diff = differentiable_indices(args, None)
    assert diff == (0, 1)
    (v,) = make_cotangents([X], seed=11)
    gx, gy = task_for("bwd").value(product, args, diff, 11, "product")
    assert torch.allclose(gx, 3.0 * Y * v)
    assert torch.allclose(gy, 3.0 * X * v)
    jx, jy = task_for("jacobian").value(product, args, diff, 0, "product")
    assert torch.equal(jx, torch.diag(3.0 * Y))
    assert torch.equal(jy, torch.diag(3.0 * X))


def test_declared_diff_args_restrict_what_is_differentiated() -> None:
    args = (X, Y, 3.0)
    (v,) = make_cotangents([X], seed=11)
    (gy,) = task_for("bwd").value(product, args, (1,), 11, "product")
    assert torch.allclose(gy, 3.0 * X * v)
    (jy,) = task_for("jacobian").value(product, args, (1,), 0, "product")
    assert torch.equal(jy, torch.diag(3.0 * X))


def test_multiple_outputs_get_one_cotangent_each() -> None:
    v0, v1 = make_cotangents([X, torch.zeros(1)], seed=2)
    (grad,) = task_for("bwd").value(two_outputs, (X,), (0,), 2, "two")
    assert torch.allclose(grad, 2 * X * v0 + v1)
    j0, j1 = task_for("jacobian").value(two_outputs, (X,), (0,), 0, "two")
    assert torch.equal(j0, torch.diag(2 * X))
    assert torch.equal(j1, torch.ones(1, 4, dtype=F64))
    outs = task_for("fwd").value(two_outputs, (X,), (0,), 0, "two")
    assert [o.shape for o in outs] == [torch.Size([4]), torch.Size([1])]


def test_unused_input_has_a_zero_gradient() -> None:
    def first(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return 2 * x

    (v,) = make_cotangents([X], seed=4)
    gx, gy = task_for("bwd").value(first, (X, Y), (0, 1), 4, "first")
    assert torch.allclose(gx, 2 * v)
    assert torch.equal(gy, torch.zeros(4, dtype=F64))


def test_differentiable_indices() -> None:
    args = (torch.ones(2), torch.ones(2, dtype=torch.int64), 1.5, torch.ones(1, dtype=F64))
    assert differentiable_indices(args, None) == (0, 3)
    assert differentiable_indices(args, (3,)) == (3,)
    for bad in ((1,), (2,), (9,), (-1,)):
        with pytest.raises(ValueError, match=f"argument {bad[0]}"):
            differentiable_indices(args, bad)


def test_jacobian_elements() -> None:
    outs = [torch.zeros(3, 2), torch.zeros(4)]
    args = (torch.zeros(5), 2.0, torch.zeros(2, 2))
    assert jacobian_elements(outs, args, (0, 2)) == 10 * 9


def test_flatten_output_names_who_returned_what() -> None:
    a = torch.ones(1)
    assert flatten_output(a, "f") == [a]
    assert flatten_output((a, a), "f") == [a, a]
    for bad, kind in ((3.0, "float"), ((a, 1.0), "tuple"), ([], "list"), (None, "NoneType")):
        with pytest.raises(OutputError, match=f"my_fn returned {kind}, not a tensor"):
            flatten_output(bad, "my_fn")


def test_to_reference_and_device_args_copy() -> None:
    x32 = torch.tensor([1.5, 2.5])
    idx = torch.tensor([1, 0])
    ref = tasks.to_reference_args((x32, idx, 3.0))
    assert ref[0].dtype == F64 and ref[1].dtype == torch.int64 and ref[2] == 3.0
    dev = tasks.to_device_args((x32, idx, 3.0), "cpu")
    assert torch.equal(dev[0], x32) and dev[0].data_ptr() != x32.data_ptr()
    dev[0].add_(1)
    assert torch.equal(x32, torch.tensor([1.5, 2.5]))


def test_unknown_task() -> None:
    with pytest.raises(ValueError, match="unknown task 'grad'"):
        tasks.task_for("grad")


# -- Task.prepare: what is timed -----------------------------------------------------------

def test_prepared_inference_runs_in_inference_mode() -> None:
    prepared = task_for("inference").prepare(square, (X,), (0,), 0, "square")
    with prepared.context():
        assert torch.is_inference_mode_enabled()
        out = prepared.timed()
    assert torch.equal(out, X * X)


def test_prepared_fwd_builds_the_graph_each_call() -> None:
    prepared = task_for("fwd").prepare(square, (X,), (0,), 0, "square")
    with prepared.context():
        out = prepared.timed()
    assert out.requires_grad and out.grad_fn is not None
    assert torch.equal(out.detach(), X * X)


def test_prepared_bwd_repeats_the_same_vjp_without_rerunning_the_forward() -> None:
    calls = []

    def counted(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return x * x

    prepared = task_for("bwd").prepare(counted, (X,), (0,), 9, "counted")
    assert len(calls) == 1  # the graph is built in prep, outside timing
    (v,) = make_cotangents([X], seed=9)
    with prepared.context():
        (first,) = prepared.timed()
        (second,) = prepared.timed()  # retain_graph: repeatable
    assert len(calls) == 1
    assert torch.allclose(first, 2 * X * v)
    assert torch.equal(first, second)
    (checked,) = task_for("bwd").value(square, (X,), (0,), 9, "square")
    assert torch.equal(first, checked)  # what is timed is what is checked


@pytest.mark.parametrize("name", names.TASKS)
def test_what_is_timed_is_what_is_checked(name: str) -> None:
    args = (X, Y, 3.0)
    prepared = task_for(name).prepare(product, args, (0, 1), 6, "product")
    with prepared.context():
        timed = flatten_output(prepared.timed(), "product")
    checked = task_for(name).value(product, args, (0, 1), 6, "product")
    assert len(timed) == len(checked) > 0
    assert all(torch.equal(t, c) for t, c in zip(timed, checked))


def test_prepared_jacobian_matches_the_checked_value() -> None:
    prepared = task_for("jacobian").prepare(square, (X,), (0,), 0, "square")
    with prepared.context():
        (jac,) = prepared.timed()
    assert torch.equal(jac, torch.diag(2 * X))
