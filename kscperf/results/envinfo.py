"""Machine, library, git and kscperf metadata, without torch: `machine_info()`,
`library_versions()`, `git_info()` and `kscperf_source()` (a digest of kscperf's own code),
for the orchestrator's build metadata and the workers' cell metadata. Torch's own facts are
the worker's (`kscperf.worker.torchinfo`).
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["machine_info", "library_versions", "git_info", "kscperf_source",
           "cuda_driver_present", "now_iso"]


def now_iso(timespec: str = "seconds") -> str:
    """The local time now, ISO 8601, to `timespec` (as `datetime.isoformat` takes it)."""
    return datetime.datetime.now().isoformat(timespec=timespec)


def _cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fp:
            for line in fp:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _transparent_hugepage_mode() -> str:
    # The kernel's choice among always/madvise/never, shown in brackets: with "never",
    # THP_MEM_ALLOC_ENABLE asks for huge pages in vain.
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="ascii") as fp:
            found = re.search(r"\[(\w+)\]", fp.read())
    except OSError:
        return "unknown"
    return found.group(1) if found else "unknown"


def machine_info() -> dict[str, Any]:
    """Host facts that identify a machine class (pyperf's key names where it has them)."""
    try:
        affinity = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = []
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cpu_model_name": _cpu_model_name(),
        "cpu_count": os.cpu_count() or 1,
        "platform": platform.platform(),
        "python_version": platform.python_version(),
        "python_executable": sys.executable,
        "cpu_affinity": ",".join(map(str, affinity)) if affinity else "unknown",
        "malloc_mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_", "glibc default"),
        "malloc_trim_threshold": os.environ.get("MALLOC_TRIM_THRESHOLD_", "glibc default"),
        "thp_mem_alloc_enable": os.environ.get("THP_MEM_ALLOC_ENABLE", "torch default"),
        "transparent_hugepage": _transparent_hugepage_mode(),
    }
    try:
        import psutil

        info["memory_total_bytes"] = int(psutil.virtual_memory().total)
    except Exception:  # psutil is optional for this fact
        pass
    return info


_TORCH_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)


def _torch_version(dist: importlib.metadata.Distribution) -> str:
    # What torch.__version__ says (and the workers record), read from its version.py: the
    # wheels on PyPI are named 2.11.0 where torch calls itself 2.11.0+cu130, and one build
    # must not carry two torch versions.
    try:
        text = Path(str(dist.locate_file("torch/version.py"))).read_text(encoding="utf-8")
    except OSError:
        text = ""
    found = _TORCH_VERSION.search(text)
    return found.group(1) if found else dist.version


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries that shape the numbers, read without importing
    (torch's as `torch.__version__` gives it)."""
    versions = {}
    for name, key in (("torch", "torch_version"), ("triton", "triton_version"),
                      ("pyperf", "pyperf_version"), ("numpy", "numpy_version")):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        versions[key] = _torch_version(dist) if name == "torch" else dist.version
    return versions


def kscperf_source() -> str:
    """A digest of this kscperf's own modules (`sha256:` and 16 hex digits), the same for
    every copy of one source and different after any edit: its version alone is the same for
    every commit. A history marks a change of it as an environment event."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()[:16]


def cuda_driver_present() -> bool:
    """Whether an NVIDIA driver is loaded, judged without importing torch."""
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def git_info(path: str) -> dict[str, Any]:
    """The commit, its committer date (ISO 8601, which orders builds in a history store),
    the dirty flag and the top folder of the git work tree holding `path`, or {} outside
    one."""
    try:
        commit = subprocess.run(["git", "-C", path, "log", "-1", "--format=%H %cI"],
                                capture_output=True, text=True, timeout=10)
        if commit.returncode != 0 or not commit.stdout.strip():
            return {}
        sha, _, commit_date = commit.stdout.strip().partition(" ")
        status = subprocess.run(["git", "-C", path, "status", "--porcelain",
                                 "--untracked-files=no"], capture_output=True, text=True,
                                timeout=30)
        top = subprocess.run(["git", "-C", path, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=10)
        return {"git_commit": sha, "git_commit_date": commit_date,
                "git_dirty": bool(status.stdout.strip()), "git_toplevel": top.stdout.strip()}
    except (OSError, subprocess.SubprocessError):
        return {}
