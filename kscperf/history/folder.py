"""A history store's folder: the names in it (`builds/`, the index, the lock, a copy's machine
class), making a new one, its lock, and removing one that holds no build. What the index
holds is `store`'s.

The lock (`LOCK_NAME`, `flock`) is held shared by every open store and exclusive while the
index is made or replaced, so any number of `history add` may start at once on a new store
or an existing one: the index is made once and the others wait for it, and no add writes
into an index that another process is about to replace (SQLite reports that as "disk I/O
error" or "readonly database", and its rows would be lost).
"""

from __future__ import annotations

import fcntl
import os
import time

from kscperf.errors import KscperfError
from kscperf.history.links import LINKS_DIR

__all__ = ["INDEX_NAME", "BUILDS_DIR", "LOCK_NAME", "MACHINE_SUFFIX", "LOCK_TIMEOUT_S",
           "StoreLock", "make_store_folder", "remove_empty_store"]

INDEX_NAME = "index.sqlite"
BUILDS_DIR = "builds"
LOCK_NAME = INDEX_NAME + "-lock"
# Beside a store's copy of a file added with --machine CLASS: that class.
MACHINE_SUFFIX = ".machine"
# Seconds an add waits for another process (the index's write lock, or the store's lock
# while its index is rebuilt) before giving up: adds of one store from several jobs queue
# rather than fail.
LOCK_TIMEOUT_S = 300.0


class StoreLock:
    """The store's lock file (`LOCK_NAME`), taken shared or exclusive with `flock`; a store
    on a medium this process cannot write has none (it cannot race with our writes)."""

    def __init__(self, root: str) -> None:
        self._path = os.path.join(root, LOCK_NAME)
        self._fd: int | None = None

    def take(self, mode: int) -> None:
        """Wait up to the lock timeout for `mode` (fcntl.LOCK_SH or LOCK_EX); KscperfError
        when another process holds the store longer. Re-taking converts the lock."""
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            if self._fd is None and not self._open():
                return
            if self._try(mode):
                return
            if self._fd is None:
                continue  # the file was removed and made anew while we waited for it
            if time.monotonic() > deadline:
                raise KscperfError(
                    f"the store {os.path.dirname(self._path)} is held by another process "
                    f"for more than {LOCK_TIMEOUT_S:.0f} s (its index is being rebuilt, or "
                    "read while a rebuild waits); try again when it is done.")
            time.sleep(0.02)

    def try_exclusive(self) -> bool:
        """Take the lock exclusive if no other process holds it; False otherwise."""
        if self._fd is None and not self._open():
            return False
        return self._try(fcntl.LOCK_EX)

    def _try(self, mode: int) -> bool:
        """One attempt at `mode` without waiting: True when held; False when another
        process holds the lock, or when the file was replaced meanwhile (then let go)."""
        assert self._fd is not None
        try:
            fcntl.flock(self._fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            if os.stat(self._path).st_ino == os.fstat(self._fd).st_ino:
                return True
        except FileNotFoundError:
            pass
        self.release()
        return False

    def release(self) -> None:
        """Let go of the lock (closing the file releases it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> bool:
        try:
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return False  # a read-only store: nothing here can replace its index
        return True


def make_store_folder(root: str) -> None:
    """Make the folder of a new store, or refuse one that holds anything but a store in the
    making (another process's lock, index or builds/)."""
    if os.path.exists(root) and (not os.path.isdir(root) or any(
            name not in (BUILDS_DIR, LINKS_DIR) and not name.startswith(INDEX_NAME)
            for name in os.listdir(root))):
        raise KscperfError(f"{root} exists and is not a history store; choose an empty "
                           "or new folder for --store.")
    try:
        os.makedirs(os.path.join(root, BUILDS_DIR), exist_ok=True)
    except OSError as exc:
        raise KscperfError(f"cannot create the store {root}: {exc.strerror or exc}.") \
            from None


def remove_empty_store(root: str) -> None:
    """Remove the store `root` if it holds no build (only what `open_store(create=True)`
    made: an empty `builds/` and an index); a store with any file of its own is left as
    it is."""
    builds_dir = os.path.join(root, BUILDS_DIR)
    links_dir = os.path.join(root, LINKS_DIR)
    lock = StoreLock(root)
    if not lock.try_exclusive():
        return  # another process has it open (it may be about to add the first build)
    try:
        if os.listdir(builds_dir) or (os.path.isdir(links_dir) and os.listdir(links_dir)):
            return
        os.rmdir(builds_dir)
        if os.path.isdir(links_dir):
            os.rmdir(links_dir)
        for name in os.listdir(root):
            if name == INDEX_NAME or name.startswith(INDEX_NAME + "-"):  # journal, lock
                os.unlink(os.path.join(root, name))
        os.rmdir(root)
    except OSError:
        pass  # anything else there is not ours to remove
    finally:
        lock.release()
