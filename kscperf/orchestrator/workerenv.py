"""The environment a worker starts in: this process's variables plus fixed allocator
settings, and, for a build installed in another Python, a path that brings this kscperf
and nothing else of this environment. Also the up-front check that such a Python can run
workers at all. Never imports torch."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

from kscperf.errors import KscperfError

__all__ = ["WORKER_MALLOC_ENV", "worker_environment", "is_this_python", "python_environment",
           "resolve_python"]

# glibc serves large allocations with mmap() below a threshold that it raises by itself as
# the process frees big blocks, so whether a 4 MB tensor costs a thousand page faults per
# call depended on what the process had done before: a 5-10x swing for large-tensor cells
# between processes and against torch.utils.benchmark (tools/truth-check). Fixed thresholds
# make every worker keep and reuse freed memory up to 64 MB blocks, as a long-running
# training process does. And which 4 KiB pages a process got still moved a memory-bound
# config's speed, which a lockstep pair does not cancel: in A/A runs the pair numbers of
# vrelu3/pt/inference/1048576 scattered 8x less once torch put every CPU tensor of 2 MiB and
# more on transparent huge pages (THP_MEM_ALLOC_ENABLE; method.md, "Isolation"; measured by
# tools/truth-check --sections huge-pages). A value the user has set is kept.
WORKER_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(64 * 2**20),
                     "MALLOC_TRIM_THRESHOLD_": str(256 * 2**20),
                     "THP_MEM_ALLOC_ENABLE": "1"}


def worker_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every worker starts with: this process's, plus `WORKER_MALLOC_ENV`
    where the user has not set those variables, plus `extra` (a build's own variables)."""
    return {**WORKER_MALLOC_ENV, **os.environ, **(extra or {})}


def is_this_python(python: str) -> bool:
    """Whether `python` is the interpreter running this process. Compared by path, not by
    what the path resolves to: a virtual environment's python is a link to its base
    interpreter, yet has packages of its own."""
    return os.path.abspath(python) == os.path.abspath(sys.executable)


_kscperf_only_dir: str | None = None


def _kscperf_only_path() -> str:
    """A folder that holds only a link to this kscperf package, for another Python's path:
    the folder this package was installed into would also bring this environment's torch.
    Made once per process, removed at exit."""
    global _kscperf_only_dir
    if _kscperf_only_dir is None:
        _kscperf_only_dir = tempfile.mkdtemp(prefix="kscperf-path-")
        os.symlink(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   os.path.join(_kscperf_only_dir, "kscperf"))
        atexit.register(shutil.rmtree, _kscperf_only_dir, True)
    return _kscperf_only_dir


def python_environment(python: str, extra: dict[str, str] | None = None, *,
                       own_code_only: bool = False) -> dict[str, str]:
    """The extra environment for workers run by `python`: for another Python than this one,
    this kscperf (and nothing else of this environment) first on its path, so that worker
    and orchestrator speak the same protocol whatever that Python has installed; then
    `extra`. With `own_code_only` (a build in lockstep with another), the folder the run
    started in is kept off the workers' path (PYTHONSAFEPATH) and this kscperf is put on it
    for every Python: a package in that folder (the checkout of one build) would otherwise
    shadow each build's own copy, and both builds would time the same code."""
    env = dict(extra or {})
    if own_code_only:
        env["PYTHONSAFEPATH"] = "1"
    if own_code_only or not is_this_python(python):
        rest = env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_kscperf_only_path(), rest) if p)
    return env


def resolve_python(given: str, option: str) -> str:
    """The path of the interpreter `given` (a path, or a name looked up on PATH) that can
    import torch. KscperfError naming `option` (e.g. `--new-python`) when it is not an
    executable file, cannot run, or has no torch."""
    python = shutil.which(given) if os.sep not in given else given
    if not python or not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise KscperfError(f"{option} {given} is not an executable file; give the python of "
                           "the environment that holds that build.")
    if is_this_python(python):
        return python
    try:
        proc = subprocess.run([python, "-c", "import torch"], capture_output=True, text=True,
                              timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KscperfError(f"{option} {python} could not be run: {exc}.") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise KscperfError(f"{option} {python} cannot import torch ({last}); install the "
                           "build under test and torch in that environment.")
    return python
