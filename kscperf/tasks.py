"""What each task times and what it checks.

    inference  f(*x) under torch.inference_mode()          checks the output
    fwd        f(*x) with grad-requiring inputs            checks the output
    bwd        torch.autograd.grad(out, inputs, v,         checks the gradient for a seeded
               retain_graph=True) over a graph built once  random cotangent v (never all ones,
               in prep, outside timing                     which hides wrong backward code)
    jacobian   the full Jacobian, forward included:        checks every entry
               one vector-Jacobian product per output
               element (torch.autograd.functional.jacobian, unvectorized, so any tool with a
               backward works, including custom autograd.Functions and compiled graphs)

The same `task_value` computes the checked value for the tool under test and for the float64
reference, so both sides are always computed the same way. Nothing here times anything.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Sequence

import torch

__all__ = [
    "TASKS",
    "OutputError",
    "PreparedTask",
    "flatten_output",
    "differentiable_indices",
    "make_cotangents",
    "to_reference_args",
    "to_device_args",
    "task_value",
    "prepare_task",
    "jacobian_elements",
]

TASKS = ("inference", "fwd", "bwd", "jacobian")


class OutputError(TypeError):
    """A function returned something that is not a tensor or a tuple of tensors."""


def flatten_output(out: Any, who: str) -> list[torch.Tensor]:
    """`out` as a list of tensors; OutputError naming `who` for anything else."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out):
        return list(out)
    raise OutputError(f"{who} returned {type(out).__name__}, not a tensor or tuple of tensors")


def differentiable_indices(args: Sequence[Any], declared: Sequence[int] | None) -> tuple[int, ...]:
    """The declared differentiated argument indices, or every floating-point tensor's."""
    if declared is not None:
        for i in declared:
            if not (0 <= i < len(args) and isinstance(args[i], torch.Tensor)
                    and args[i].is_floating_point()):
                raise ValueError(f"_diff_args names argument {i}, which is not a "
                                 "floating-point tensor")
        return tuple(declared)
    return tuple(i for i, a in enumerate(args)
                 if isinstance(a, torch.Tensor) and a.is_floating_point())


def to_reference_args(args: Sequence[Any]) -> tuple[Any, ...]:
    """Float64 CPU copies of floating-point tensor args; other args unchanged."""
    return tuple(a.detach().to("cpu", torch.float64).clone()
                 if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)


def to_device_args(args: Sequence[Any], device: str) -> tuple[Any, ...]:
    """Fresh copies of tensor args on `device`, so no tool sees another's tensors."""
    return tuple(a.detach().to(device).clone() if isinstance(a, torch.Tensor) else a
                 for a in args)


def make_cotangents(outputs: Sequence[torch.Tensor], seed: int) -> list[torch.Tensor]:
    """Seeded standard-normal cotangents in float64 on the CPU, one per output; the same for
    every tool and process, whatever the global RNG state."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in outputs]


def _with_grad(args: Sequence[Any], diff: Sequence[int]) -> tuple[Any, ...]:
    return tuple(a.detach().requires_grad_(True) if i in diff else a for i, a in enumerate(args))


def _grads(outs: list[torch.Tensor], inputs: list[torch.Tensor],
           cotangents: list[torch.Tensor]) -> list[torch.Tensor]:
    grads = torch.autograd.grad(outs, inputs, cotangents, retain_graph=True, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


def _jacobian(fn: Callable[..., Any], args: tuple[Any, ...], diff: Sequence[int],
              who: str) -> list[torch.Tensor]:
    def of_diff(*diff_args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        full = list(args)
        for i, a in zip(diff, diff_args):
            full[i] = a
        return tuple(flatten_output(fn(*full), who))

    jac = torch.autograd.functional.jacobian(of_diff, tuple(args[i] for i in diff),
                                             vectorize=False)
    return [j for per_output in jac for j in per_output]


def jacobian_elements(outputs: Sequence[torch.Tensor], args: Sequence[Any],
                      diff: Sequence[int]) -> int:
    """How many entries the full Jacobian has."""
    return sum(o.numel() for o in outputs) * sum(args[i].numel() for i in diff)


def task_value(task: str, fn: Callable[..., Any], args: tuple[Any, ...], diff: Sequence[int],
               cotangents_seed: int, who: str) -> list[torch.Tensor]:
    """The value checked for `task`: outputs, gradient for seeded cotangents, or Jacobian."""
    if task == "inference":
        with torch.inference_mode():
            return [o.clone() for o in flatten_output(fn(*args), who)]
    args = _with_grad(args, diff)
    if task == "fwd":
        return [o.detach() for o in flatten_output(fn(*args), who)]
    if task == "bwd":
        outs = flatten_output(fn(*args), who)
        cot = [c.to(o.device, o.dtype) for c, o in
               zip(make_cotangents(outs, cotangents_seed), outs)]
        return [g.detach() for g in _grads(outs, [args[i] for i in diff], cot)]
    if task == "jacobian":
        return [j.detach() for j in _jacobian(fn, args, diff, who)]
    raise ValueError(f"unknown task {task!r}")


@dataclass
class PreparedTask:
    """The timed callable, and the context the timing loop runs in (inference mode or
    grad mode), so that entering it is not timed per call."""

    timed: Callable[[], Any]
    context: Callable[[], ContextManager[Any]]


def prepare_task(task: str, fn: Callable[..., Any], args: tuple[Any, ...], diff: Sequence[int],
                 cotangents_seed: int, who: str) -> PreparedTask:
    """Everything `task` needs before timing (grad flags; for `bwd` the forward graph and the
    cotangents), built outside timing."""
    if task == "inference":
        return PreparedTask(lambda: fn(*args), torch.inference_mode)
    args = _with_grad(args, diff)
    if task == "fwd":
        return PreparedTask(lambda: fn(*args), contextlib.nullcontext)
    if task == "bwd":
        outs = flatten_output(fn(*args), who)
        inputs = [args[i] for i in diff]
        cot = [c.to(o.device, o.dtype) for c, o in
               zip(make_cotangents(outs, cotangents_seed), outs)]
        return PreparedTask(
            lambda: torch.autograd.grad(outs, inputs, cot, retain_graph=True, allow_unused=True),
            contextlib.nullcontext)
    if task == "jacobian":
        return PreparedTask(lambda: _jacobian(fn, args, diff, who), contextlib.nullcontext)
    raise ValueError(f"unknown task {task!r}")
