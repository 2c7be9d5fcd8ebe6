"""vrelu3: the "ReLU cubed" activation applied elementwise.

    relu3(x) = 0          for x < 0
             = x^3 / 3    for 0 <= x < 1
             = x - 2/3    for x >= 1

relu3 is C^1: both neighbouring pieces agree in value and slope at 0 and at 1, so its
derivative is 0, x^2 and 1 on the three pieces.

A benchmark definition in kscperf's plain naming convention: imports torch, never kscperf.
"""

from collections.abc import Iterator

import torch


def vrelu3_bench_configs() -> Iterator[torch.Tensor]:
    for n in (16, 65025, 1048576):
        yield torch.randn(n)


def vrelu3_pytorch(x: torch.Tensor) -> torch.Tensor:
    # The clamped cubic covers [0, 1] and the relu adds the slope-1 tail beyond 1. At x = 1
    # exactly, clamp passes its gradient (its bounds are inclusive) while relu does not
    # (its gradient at 0 is 0), so relu3'(1) = 1, not 2.
    return x.clamp(0.0, 1.0).pow(3) / 3.0 + torch.relu(x - 1.0)


def _relu3_scalar(x: torch.Tensor) -> torch.Tensor:
    # Written for one element; vrelu3_pytorch_nice maps it over the vector.
    return torch.where(x < 0.0, 0.0, torch.where(x < 1.0, x**3 / 3.0, x - 2.0 / 3.0))


def vrelu3_pytorch_nice(x: torch.Tensor) -> torch.Tensor:
    return torch.vmap(_relu3_scalar)(x)


def vrelu3(x: torch.Tensor) -> torch.Tensor:
    zero = torch.zeros_like(x)
    cubic = x * x * x / 3.0
    linear = x - 2.0 / 3.0
    return torch.where(x < 0.0, zero, torch.where(x < 1.0, cubic, linear))
