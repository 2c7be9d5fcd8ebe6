"""Test-session hooks: tests marked `needs_cuda` are skipped, with the reason, where torch
sees no CUDA device (tools/gpu-check runs them on a machine that has one); tests marked
`slow` are `integration` tests too, so that the fast lane `-m "not integration"` leaves out
both."""

from __future__ import annotations

import pytest


def _cuda_missing() -> str:
    """Why CUDA tests cannot run here ("" when they can)."""
    import torch

    if torch.cuda.is_available():
        return ""
    build = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU build"
    return f"needs a CUDA device; torch {torch.__version__} ({build}) sees none"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.integration)
    cuda_items = [item for item in items if item.get_closest_marker("needs_cuda")]
    # torch is imported only when a CUDA test was collected.
    reason = _cuda_missing() if cuda_items else ""
    for item in cuda_items if reason else ():
        item.add_marker(pytest.mark.skip(reason=reason))
