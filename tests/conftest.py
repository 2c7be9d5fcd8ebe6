"""The suite's markers, beyond what pyproject.toml registers: `needs_cuda` tests are skipped,
with the reason, where torch sees no CUDA device; `slow` tests are `integration` tests too,
so that the fast lane `-m "not integration"` leaves out both.

torch is imported only when a collected test needs CUDA, so that a run of torch-free tests
does not pay for it.
"""

from __future__ import annotations

import pytest


def _cuda_missing() -> str:
    """Why CUDA tests cannot run here, or "" when they can."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device on this machine"
    return ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing: str | None = None
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.integration)
        if item.get_closest_marker("needs_cuda") is not None:
            if missing is None:
                missing = _cuda_missing()
            if missing:
                item.add_marker(pytest.mark.skip(reason=missing))
