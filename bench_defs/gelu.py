"""vgelu: the exact (erf) GELU activation applied elementwise.

    gelu(x)  = 0.5 * x * (1 + erf(x / sqrt 2))
    gelu'(x) = 0.5 * (1 + erf(x / sqrt 2)) + x * exp(-x^2 / 2) / sqrt(2 pi)

A benchmark definition in kscperf's plain naming convention: imports torch, never kscperf.
"""

import math
from collections.abc import Iterator

import torch


def vgelu_bench_configs() -> Iterator[torch.Tensor]:
    for n in (16, 65025, 1048576):
        yield torch.randn(n)


def vgelu_pytorch(x: torch.Tensor) -> torch.Tensor:
    # approximate="none" is the erf form, not the tanh approximation.
    return torch.nn.functional.gelu(x, approximate="none")


def vgelu_pytorch_nice(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def vgelu(x: torch.Tensor) -> torch.Tensor:
    # TorchScript cannot read a module-level float, so 1/sqrt(2) is spelled out.
    return 0.5 * x * (1.0 + torch.erf(x * 0.7071067811865476))
