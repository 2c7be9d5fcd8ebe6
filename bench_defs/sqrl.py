"""sqrl ("squared leaky relu", a capsule-sized tensor to a scalar) and vsqrl (sqrl over a batch).

For a tensor x with N elements:

    y = sum(x)
    t = -0.125 * x     if y < 0
        0.5 * x^2      otherwise
    sqrl(x) = mean(sin(t) * t)

The branch on y is piecewise constant, so no gradient flows through y:
d sqrl / dx_i = (sin t_i + t_i cos t_i) * dt_i/dx_i / N, with dt/dx = -0.125 or x_i.

vsqrl(X)[b] = sqrl(X[b]) for X of shape (B, M, N); the result has shape (B,).

A benchmark definition in kscperf's plain naming convention: imports torch, never kscperf.
"""

from collections.abc import Iterator

import torch


def sqrl_bench_configs() -> Iterator[torch.Tensor]:
    yield torch.randn(4, 4)
    yield torch.randn(16, 16)


def sqrl_pytorch(x: torch.Tensor) -> torch.Tensor:
    # `where` rather than `if` computes both branches, but needs no host round trip to
    # read y, and is what torch.func.vmap can batch (vsqrl_pytorch_nice maps this).
    t = torch.where(x.sum() < 0.0, -0.125 * x, 0.5 * x * x)
    return (torch.sin(t) * t).mean()


def sqrl_pytorch_nice(x: torch.Tensor) -> torch.Tensor:
    y = torch.sum(x)
    if y < 0.0:
        t = -0.125 * x
    else:
        t = 0.5 * x**2
    return torch.mean(torch.sin(t) * t)


def sqrl(x: torch.Tensor) -> torch.Tensor:
    y = torch.sum(x)
    if y < 0.0:
        t = -0.125 * x
    else:
        t = 0.5 * x * x
    return torch.mean(torch.sin(t) * t)


def vsqrl_bench_configs() -> Iterator[torch.Tensor]:
    yield torch.randn(10, 4, 4)
    yield torch.randn(1000, 4, 4)
    yield torch.randn(1000, 16, 16)


def vsqrl_pytorch(x: torch.Tensor) -> torch.Tensor:
    flat = x.reshape(x.shape[0], -1)
    negative = flat.sum(dim=1, keepdim=True) < 0.0
    t = torch.where(negative, -0.125 * flat, 0.5 * flat * flat)
    return (torch.sin(t) * t).mean(dim=1)


def vsqrl_pytorch_nice(x: torch.Tensor) -> torch.Tensor:
    return torch.func.vmap(sqrl_pytorch)(x)


def vsqrl(x: torch.Tensor) -> torch.Tensor:
    y = torch.sum(x, dim=(-2, -1), keepdim=True)
    t = torch.where(y < 0.0, -0.125 * x, 0.5 * x * x)
    return torch.mean(torch.sin(t) * t, dim=(-2, -1))
