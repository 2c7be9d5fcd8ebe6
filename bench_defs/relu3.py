"""vrelu3: the "ReLU cubed" activation applied elementwise.

    relu3(x) = 0          for x < 0
             = x^3 / 3    for 0 <= x < 1
             = x - 2/3    for x >= 1

relu3 is C^1: both neighbouring pieces agree in value and slope at 0 and at 1, so its
derivative is 0, x^2 and 1 on the three pieces.

Besides the PyTorch versions it defines two tools of its own, in Knossos's convention:
`vrelu3_embedded_cpp()` (tool `embedded_cpp`), a hand-written C++ forward and backward built
with torch.utils.cpp_extension.load_inline, and `vrelu3_cuda_init()` (tools `manual_cuda`
and `manual_cuda_transfer`), the same as a CUDA kernel. Calling either builds the extension
with g++ (nvcc), which is the tool's compile time; each also reports that build apart
from loading the built module, as figures of its own (`compile_figures`).

A benchmark definition in kscperf's plain naming convention: imports torch, never kscperf.
"""

from collections.abc import Iterator
from typing import Any

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


# -- tools of its own: hand-written C++ and CUDA ------------------------------------------

# relu3 and its derivative for one element, shared by the C++ and the CUDA source. Written
# without branches (as vrelu3_pytorch) so that the compiler vectorizes the loop: with
# c = clamp(x, 0, 1), relu3 = c^3 / 3 + max(x - 1, 0) and relu3' = c^2, which is 1 from
# x = 1 on, as in vrelu3_pytorch.
_RELU3_ELEMENT = r"""
template <typename T> inline T relu3_clamp(T x) {
  return x < T(0) ? T(0) : (x > T(1) ? T(1) : x);
}
template <typename T> inline T relu3_value(T x) {
  T c = relu3_clamp(x);
  T tail = x - T(1);
  return c * c * c * (T(1) / T(3)) + (tail > T(0) ? tail : T(0));
}
template <typename T> inline T relu3_slope(T x) {
  T c = relu3_clamp(x);
  return c * c;
}
"""

_CPP_SOURCE = _RELU3_ELEMENT + r"""
#include <ATen/Parallel.h>

// One plain loop per direction, split over threads: each inlines its element function, so
// the compiler vectorizes it.
torch::Tensor relu3_forward(torch::Tensor x) {
  auto xs = x.contiguous();
  auto out = torch::empty_like(xs);
  AT_DISPATCH_FLOATING_TYPES(xs.scalar_type(), "relu3_forward", [&] {
    const scalar_t* in = xs.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    at::parallel_for(0, xs.numel(), 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) o[i] = relu3_value(in[i]);
    });
  });
  return out;
}

torch::Tensor relu3_backward(torch::Tensor grad, torch::Tensor x) {
  auto xs = x.contiguous();
  auto gs = grad.contiguous();
  auto out = torch::empty_like(xs);
  AT_DISPATCH_FLOATING_TYPES(xs.scalar_type(), "relu3_backward", [&] {
    const scalar_t* in = xs.data_ptr<scalar_t>();
    const scalar_t* g = gs.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    at::parallel_for(0, xs.numel(), 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) o[i] = g[i] * relu3_slope(in[i]);
    });
  });
  return out;
}
"""

_CUDA_SOURCE = r"""
#include <torch/extension.h>
""" + _RELU3_ELEMENT.replace("inline", "__device__ inline") + r"""
template <typename T>
__global__ void relu3_forward_kernel(const T* x, T* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = relu3_value(x[i]);
}

template <typename T>
__global__ void relu3_backward_kernel(const T* g, const T* x, T* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = g[i] * relu3_slope(x[i]);
}

torch::Tensor relu3_forward(torch::Tensor x) {
  auto xs = x.contiguous();
  auto out = torch::empty_like(xs);
  int64_t n = xs.numel();
  AT_DISPATCH_FLOATING_TYPES(xs.scalar_type(), "relu3_forward", [&] {
    relu3_forward_kernel<scalar_t><<<(n + 255) / 256, 256>>>(
        xs.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n);
  });
  return out;
}

torch::Tensor relu3_backward(torch::Tensor grad, torch::Tensor x) {
  auto xs = x.contiguous();
  auto gs = grad.contiguous();
  auto out = torch::empty_like(xs);
  int64_t n = xs.numel();
  AT_DISPATCH_FLOATING_TYPES(xs.scalar_type(), "relu3_backward", [&] {
    relu3_backward_kernel<scalar_t><<<(n + 255) / 256, 256>>>(
        gs.data_ptr<scalar_t>(), xs.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n);
  });
  return out;
}
"""

_DECLARATIONS = """
torch::Tensor relu3_forward(torch::Tensor x);
torch::Tensor relu3_backward(torch::Tensor grad, torch::Tensor x);
"""


def _relu3_function(extension: Any) -> type[torch.autograd.Function]:
    """An autograd.Function whose forward and backward are the extension's."""

    class Relu3(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x)
            return extension.relu3_forward(x)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            return extension.relu3_backward(grad, x)

    return Relu3


def _load_inline_timed(**options: Any) -> tuple[Any, dict[str, tuple[float, str]]]:
    """torch.utils.cpp_extension.load_inline(**options), and its figures for the harness:
    the build (g++ through ninja; a no-op check when the extensions cache is warm) apart
    from loading the built module. The load is timed around torch's own loader; a torch
    without it gets one figure for both."""
    import time

    import torch.utils.cpp_extension as cpp_extension

    loader = getattr(cpp_extension, "_import_module_from_library", None)
    load_s: list[float] = []

    def timed_loader(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return loader(*args, **kwargs)  # type: ignore[misc]
        finally:
            load_s.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    if loader is not None:
        cpp_extension._import_module_from_library = timed_loader
    try:
        extension = cpp_extension.load_inline(**options)
    finally:
        if loader is not None:
            cpp_extension._import_module_from_library = loader
    total_s = time.perf_counter() - t0
    if not load_s:
        return extension, {"build_and_load_s": (total_s, "s")}
    return extension, {"build_s": (total_s - sum(load_s), "s"), "load_s": (sum(load_s), "s")}


def vrelu3_embedded_cpp() -> type[torch.autograd.Function]:
    extension, figures = _load_inline_timed(name="kscperf_vrelu3_cpp", cpp_sources=[_CPP_SOURCE],
                            functions=["relu3_forward", "relu3_backward"],
                            # at::parallel_for splits the loop over threads only under
                            # OpenMP. Without -fno-trapping-math g++ keeps the selects as
                            # branches (a comparison might trap), which random signs
                            # mispredict: 20x slower than the vectorized loop.
                            extra_cflags=["-O3", "-fno-trapping-math", "-fopenmp"],
                            extra_ldflags=["-fopenmp"])
    function = _relu3_function(extension)
    function.compile_figures = figures  # type: ignore[attr-defined]
    return function


def vrelu3_cuda_init() -> type[torch.autograd.Function]:
    extension, figures = _load_inline_timed(name="kscperf_vrelu3_cuda",
                                            cpp_sources=[_DECLARATIONS],
                                            cuda_sources=[_CUDA_SOURCE],
                                            functions=["relu3_forward", "relu3_backward"],
                                            extra_cuda_cflags=["-O3"])
    function = _relu3_function(extension)
    function.compile_figures = figures  # type: ignore[attr-defined]
    return function
