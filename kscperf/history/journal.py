"""What makes a store survive a `history add` killed at any point (SIGKILL included).

An add writes its copies under temporary names (not ending in `.json`, so no rebuild reads
them), records each (temporary, final) pair in the index's `pending` table in the same
transaction as the build's rows, commits, then gives each copy its final name and empties
`pending`. Killed before the commit, the index is as it was (SQLite's own journal) and the
copies are leftovers that the next add removes; killed after it, the next open of the store
finishes the renames, so the index always equals its rebuild once the store is open. The
store (`store.py`) is the only caller.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
from typing import Sequence

from kscperf.errors import KscperfError

__all__ = ["JOURNAL_SCHEMA", "KILL_AT_VARIABLE", "write_pending", "record", "finish",
           "clean_leftovers", "crash_point"]

JOURNAL_SCHEMA = """
CREATE TABLE pending (temporary TEXT NOT NULL, final TEXT NOT NULL);  -- relative to the store
"""

# The test hook: `history add` kills itself with SIGKILL at the named point of an add
# (copied, committed, renamed-one, renamed), so a test can stop it exactly there.
KILL_AT_VARIABLE = "KSCPERF_HISTORY_KILL_AT"

_PENDING = re.compile(r"\.(adding|rebuild)-(\d+)(-journal)?$")
# What versions before 2026-12-04 left when killed inside an atomic write of a copy: the
# temporary file of `results.fileio`, which names no process. Only an add writes in the
# store's folders, and only under the write lock that `clean_leftovers` holds.
_OLD_TEMPORARY = re.compile(r"(^|/)\.kscperf-[^/]*\.tmp$")


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL when `KILL_AT_VARIABLE` names the point `name`."""
    if os.environ.get(KILL_AT_VARIABLE) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _pending_name(target: str) -> str:
    return f"{target}.adding-{os.getpid()}"


def write_pending(target: str, raw: bytes, what: str) -> str:
    """Write `raw`, synced, under the temporary name of `target` and return that name: not
    ending in .json, and naming this process, so that a leftover (killed mid-write or before
    the commit) can be told from a copy of an add still running, and `clean_leftovers`
    removes it. The name is temporary already, so no second temporary file is needed.
    Raises KscperfError naming `what` when it cannot be written."""
    temporary = _pending_name(target)
    try:
        with open(temporary, "wb") as fp:
            fp.write(raw)
            fp.flush()
            os.fsync(fp.fileno())
    except OSError as exc:
        raise KscperfError(f"cannot write {what} {temporary}: {exc.strerror or exc}.") from None
    return temporary


def record(db: sqlite3.Connection, root: str, pairs: Sequence[tuple[str, str]]) -> None:
    """Record the (temporary, final) paths of one add in its transaction."""
    db.executemany("INSERT INTO pending VALUES (?, ?)",
                   [(os.path.relpath(t, root), os.path.relpath(f, root)) for t, f in pairs])


def finish(db: sqlite3.Connection, root: str) -> None:
    """Give every committed copy its final name and empty `pending`, in one transaction
    under the index's write lock. A copy already renamed (by another process finishing the
    same add) is fine. Raises OSError or sqlite3.Error when the store cannot be written."""
    if db.execute("SELECT 1 FROM pending LIMIT 1").fetchone() is None:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        rows = db.execute("SELECT temporary, final FROM pending").fetchall()
        for done, (temporary, final) in enumerate(rows):
            if done == 1:
                crash_point("renamed-one")
            try:
                os.replace(os.path.join(root, temporary), os.path.join(root, final))
            except FileNotFoundError:
                if not os.path.exists(os.path.join(root, final)):
                    raise
        crash_point("renamed")
        db.execute("DELETE FROM pending")
        db.commit()
    except BaseException:
        db.rollback()
        raise


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_leftovers(db: sqlite3.Connection, root: str, folders: Sequence[str],
                    index_name: str) -> None:
    """Remove the copies of adds that never committed and the scratch indexes of rebuilds
    that never finished: files with a temporary name whose process is gone and that
    `pending` does not list. Call it holding the index's write lock, so no add is between
    writing its copies and committing them."""
    listed = {t for (t,) in db.execute("SELECT temporary FROM pending")}
    candidates = [(os.path.join(f, n)) for f in folders if os.path.isdir(os.path.join(root, f))
                  for n in os.listdir(os.path.join(root, f))]
    candidates += [n for n in os.listdir(root) if n.startswith(index_name + ".rebuild-")]
    for relative in candidates:
        match = _PENDING.search(relative)
        if _OLD_TEMPORARY.search(relative) is None and (
                match is None or relative in listed or _alive(int(match.group(2)))):
            continue
        try:
            os.unlink(os.path.join(root, relative))
        except OSError:
            pass  # another add removed it first
