"""What an exception in a worker becomes: its status and its one-line reason.

Owns telling an out-of-memory error apart from a failure, a tool's `Unsupported` and
`Unavailable`, and where in the user's code an exception was raised.
"""

from __future__ import annotations

import os
import traceback

import torch

from kscperf.errors import CellStatus, describe_exception
from kscperf.worker.tools import Unavailable, Unsupported

__all__ = ["reason_for", "status_for"]


def _where(exc: BaseException) -> str:
    """The innermost frame of a traceback that is not kscperf's or torch's own, if any."""
    frames = traceback.extract_tb(exc.__traceback__)
    # By package folder, not by name: a checkout is often itself called kscperf/.
    own = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
           os.path.dirname(os.path.abspath(torch.__file__ or "")) + os.sep)
    for frame in reversed(frames):
        if not os.path.abspath(frame.filename).startswith(own):
            return f" (at {os.path.basename(frame.filename)}:{frame.lineno} in {frame.name})"
    return ""


def reason_for(exc: BaseException) -> str:
    """`exc` in one line for a result's reason: its type (unless the status says it), its
    message's first line with the user's file:line, and the innermost frame of the
    traceback outside kscperf and torch."""
    # For these the status already says what kind of exception it was.
    typed = not isinstance(exc, (Unsupported, Unavailable))
    return f"{describe_exception(exc, with_type=typed)}{_where(exc)}"


def _is_oom(exc: BaseException) -> bool:
    # CPU allocation failures in torch are plain RuntimeErrors ("DefaultCPUAllocator: can't
    # allocate memory"); CUDA's are torch.OutOfMemoryError.
    text = str(exc).lower()
    return isinstance(exc, (MemoryError, torch.OutOfMemoryError)) or (
        isinstance(exc, RuntimeError)
        and ("out of memory" in text or "can't allocate memory" in text))


def status_for(exc: BaseException) -> CellStatus:
    """The status of a config or cell that `exc` ended."""
    if isinstance(exc, Unsupported):
        return CellStatus.UNSUPPORTED
    if isinstance(exc, Unavailable):
        return CellStatus.SKIPPED
    return CellStatus.OOM if _is_oom(exc) else CellStatus.FAILED
