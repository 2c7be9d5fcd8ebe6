"""The compiler caches a worker uses: fresh and empty for `--compile-cache cold`, or the
kept per-installation folder of torch extensions for warm runs."""

from __future__ import annotations

import os
import sys
import tempfile
import zlib

import torch

__all__ = ["cold_compiler_caches", "warm_extensions_dir"]


def cold_compiler_caches() -> str:
    """A fresh, empty folder for every compiler cache (inductor, triton, torch extensions),
    set in this process's environment, so that every compile is a true cold compile; the
    caller removes it."""
    cache = tempfile.mkdtemp(prefix="kscperf-cold-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    # Model tools build C++/CUDA extensions there: a cold build is a true g++ build.
    os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(cache, "torch_extensions")
    return cache


def warm_extensions_dir() -> str:
    """The kept torch-extensions folder of this Python and torch installation."""
    # Kept between runs, per user, and apart for each Python and torch installation, so
    # that two builds under test (say, the two Pythons of `ab`) never reuse or overwrite
    # each other's extensions.
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    install = zlib.crc32(f"{sys.executable}:{os.path.dirname(torch.__file__)}".encode())
    key = (f"py{sys.version_info.major}.{sys.version_info.minor}-torch{torch.__version__}-"
           f"{install:08x}")
    return os.path.join(cache_home, "kscperf", "torch_extensions", key)
