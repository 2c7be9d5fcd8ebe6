"""Writing files safely: the check before measuring that a path can be written, and atomic
writes (temporary file, fsync unless the file is scratch, rename). Used by the worker,
`results.files`, the store and the renderers alike; imports nothing else of kscperf but errors.
"""

from __future__ import annotations

import os
import tempfile

from kscperf.errors import KscperfError

__all__ = ["check_writable", "write_text_atomic", "write_bytes_atomic"]


def check_writable(path: str, replace: bool, *, resumable: bool = True,
                   other: str = "-o FILE") -> None:
    """Raise KscperfError now, before any measuring, if `path` cannot be written later. The
    message for an existing file offers --replace, --resume when `resumable`, and `other`."""
    if os.path.exists(path) and not replace:
        resume = f", --resume {path} to finish it," if resumable else ""
        raise KscperfError(f"{path} already exists; pass --replace to overwrite it{resume} or "
                           f"choose another {other}.")
    if os.path.isdir(path):
        raise KscperfError(f"{path} is a directory; -o needs a file name.")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".kscperf-probe-")
        try:
            os.write(fd, b" " * 65536)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise KscperfError(f"cannot write results to {path}: {exc.strerror or exc}.") from None


def write_text_atomic(path: str, text: str, what: str, *, durable: bool = True) -> None:
    """Write `text` as UTF-8 to `path` atomically, as `write_bytes_atomic` does."""
    write_bytes_atomic(path, text.encode("utf-8"), what, durable=durable)


def write_bytes_atomic(path: str, raw: bytes, what: str, *, durable: bool = True) -> None:
    """Write `raw` to `path` atomically (a temporary file in the same folder, synced, then
    renamed): a reader sees the old file or the new one, never half of one. The file gets
    the permissions any new file gets under the umask. Raises KscperfError naming `what`
    ("results", "the report") when it cannot be written.

    `durable=False` skips the sync, for scratch files that only a process on this machine
    reads before the run ends (a worker's result): the rename stays atomic for that reader,
    and the sync would cost milliseconds per file on a busy disk."""
    if os.path.isdir(path):
        raise KscperfError(f"{path} is a directory; -o needs a file name.")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".kscperf-", suffix=".tmp")
    except OSError as exc:
        raise KscperfError(f"cannot write {what} to {path}: {exc.strerror or exc}.") from None
    try:
        with os.fdopen(fd, "wb") as fp:
            fp.write(raw)
            fp.flush()
            if durable:
                os.fsync(fp.fileno())
        # mkstemp makes the file readable by its owner only; results and reports are shared.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise KscperfError(f"cannot write {what} to {path}: {exc.strerror or exc}.") from None
