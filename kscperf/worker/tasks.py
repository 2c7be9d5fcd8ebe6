"""What each task times and what it checks: one small object per task, in `TASK_TABLE`.

    inference  f(*x) under torch.inference_mode()          checks the output
    fwd        f(*x) with grad-requiring inputs            checks the output
    bwd        torch.autograd.grad(out, inputs, v,         checks the gradient for a seeded
               retain_graph=True) over a graph built once  random cotangent v (never all ones,
               in prep, outside timing                     which hides wrong backward code)
    jacobian   the full Jacobian, forward included:        checks every entry
               one vector-Jacobian product per output
               element (torch.autograd.functional.jacobian, unvectorized, so any tool with a
               backward works, including custom autograd.Functions and compiled graphs)

Each task's `prepare` builds the timed callable and `value` computes the checked value, for
the tool under test and for the float64 reference alike, so both sides are always computed the
same way; the checked value is what one call of the timed callable gives (for `bwd`, with a zero
gradient where an input is unused). Nothing here times anything.
"""

from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, ContextManager, Mapping, Sequence

import torch

__all__ = [
    "OutputError",
    "PreparedTask",
    "Task",
    "InferenceTask",
    "FwdTask",
    "BwdTask",
    "JacobianTask",
    "TASK_TABLE",
    "task_for",
    "flatten_output",
    "differentiable_indices",
    "make_cotangents",
    "to_reference_args",
    "to_device_args",
    "jacobian_elements",
]


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


def jacobian_elements(outputs: Sequence[torch.Tensor], args: Sequence[Any],
                      diff: Sequence[int]) -> int:
    """How many entries the full Jacobian has."""
    return sum(o.numel() for o in outputs) * sum(args[i].numel() for i in diff)


def _with_grad(args: Sequence[Any], diff: Sequence[int]) -> tuple[Any, ...]:
    return tuple(a.detach().requires_grad_(True) if i in diff else a for i, a in enumerate(args))


def _cotangents_like(outputs: Sequence[torch.Tensor], seed: int) -> list[torch.Tensor]:
    # Drawn in float64 on the CPU, then cast: every tool and the reference get the same v.
    return [c.to(o.device, o.dtype) for c, o in zip(make_cotangents(outputs, seed), outputs)]


def _vjp_graph(fn: Callable[..., Any], args: tuple[Any, ...], diff: Sequence[int], seed: int,
               who: str) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """(outputs, differentiated inputs, cotangents) of one forward pass in grad mode."""
    args = _with_grad(args, diff)
    outs = flatten_output(fn(*args), who)
    return outs, [args[i] for i in diff], _cotangents_like(outs, seed)


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


@dataclass
class PreparedTask:
    """The timed callable, and the context the timing loop runs in (inference mode or
    grad mode), so that entering it is not timed per call."""

    timed: Callable[[], Any]
    context: Callable[[], ContextManager[Any]]


@dataclass(frozen=True)
class Task(abc.ABC):
    """One task. `prepare` builds, outside timing, what is timed; `value` is what is checked:
    by default one call of the timed callable, inside its context, as a list of tensors."""

    name: str
    checks: str  # what the check calls the value, in reasons and reports
    differentiates: bool = True  # False: needs no floating-point tensor to differentiate

    @abc.abstractmethod
    def prepare(self, fn: Callable[..., Any], args: tuple[Any, ...], diff: Sequence[int],
                cotangent_seed: int, who: str) -> PreparedTask:
        """The timed callable for `fn` at `args` (grad flags set, graphs built) and its
        context; `who` names `fn` in errors."""

    def value(self, fn: Callable[..., Any], args: tuple[Any, ...], diff: Sequence[int],
              cotangent_seed: int, who: str) -> list[torch.Tensor]:
        """The checked value of `fn` at `args`, detached from any graph."""
        prepared = self.prepare(fn, args, diff, cotangent_seed, who)
        with prepared.context():
            return self._as_value(prepared.timed(), who)

    def _as_value(self, timed_result: Any, who: str) -> list[torch.Tensor]:
        return [o.detach() for o in flatten_output(timed_result, who)]


class InferenceTask(Task):
    """f(*x) under torch.inference_mode(); checks the output."""

    def prepare(self, fn: Callable[..., Any], args: tuple[Any, ...], diff: Sequence[int],
                cotangent_seed: int, who: str) -> PreparedTask:
        return PreparedTask(lambda: fn(*args), torch.inference_mode)

    def _as_value(self, timed_result: Any, who: str) -> list[torch.Tensor]:
        return [o.clone() for o in flatten_output(timed_result, who)]


class FwdTask(Task):
    """f(*x) with grad-requiring inputs, so the autograd graph is built; checks the output."""

    def prepare(self, fn: Callable[..., Any], args: tuple[Any, ...], diff: Sequence[int],
                cotangent_seed: int, who: str) -> PreparedTask:
        args = _with_grad(args, diff)
        return PreparedTask(lambda: fn(*args), contextlib.nullcontext)


class BwdTask(Task):
    """The vector-Jacobian product for a seeded cotangent over a graph built in prep;
    checks the gradient (zero for an unused input)."""

    def prepare(self, fn: Callable[..., Any], args: tuple[Any, ...], diff: Sequence[int],
                cotangent_seed: int, who: str) -> PreparedTask:
        outs, inputs, cot = _vjp_graph(fn, args, diff, cotangent_seed, who)
        return PreparedTask(
            lambda: torch.autograd.grad(outs, inputs, cot, retain_graph=True, allow_unused=True),
            contextlib.nullcontext)

    def value(self, fn: Callable[..., Any], args: tuple[Any, ...], diff: Sequence[int],
              cotangent_seed: int, who: str) -> list[torch.Tensor]:
        outs, inputs, cot = _vjp_graph(fn, args, diff, cotangent_seed, who)
        grads = torch.autograd.grad(outs, inputs, cot, retain_graph=True, allow_unused=True)
        return [(torch.zeros_like(x) if g is None else g).detach() for g, x in zip(grads, inputs)]


class JacobianTask(Task):
    """The full Jacobian, forward included; checks every entry."""

    def prepare(self, fn: Callable[..., Any], args: tuple[Any, ...], diff: Sequence[int],
                cotangent_seed: int, who: str) -> PreparedTask:
        args = _with_grad(args, diff)
        return PreparedTask(lambda: _jacobian(fn, args, diff, who), contextlib.nullcontext)

    def _as_value(self, timed_result: Any, who: str) -> list[torch.Tensor]:
        return [j.detach() for j in timed_result]


# Task name -> task, in the order of kscperf.names.TASKS.
TASK_TABLE: Mapping[str, Task] = MappingProxyType({t.name: t for t in (
    InferenceTask("inference", checks="output", differentiates=False),
    FwdTask("fwd", checks="output"),
    BwdTask("bwd", checks="gradient"),
    JacobianTask("jacobian", checks="jacobian"),
)})


def task_for(name: str) -> Task:
    """The task called `name`; ValueError for an unknown name."""
    try:
        return TASK_TABLE[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}") from None
