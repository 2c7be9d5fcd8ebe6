"""The history store: a folder of results files kept in build order, and its SQLite index.

    STORE/
      builds/<label>-<sha256 prefix>.json   copies of the results files added (the truth)
      links/<the same name>                 the base side of the `ab` run that made that
                                            build, when it was added as an `ab` folder
      index.sqlite                          what queries need, rebuilt from both at will
      index.sqlite-lock                     held shared while the store is open, exclusive
                                            while its index is made or rebuilt

The results files stay the source of truth: `rebuild_index` recreates the index from them
alone, and an incremental `add_builds` leaves exactly the index a rebuild would make. This
module is the only writer of a store; it reads results files only through
`results.files.load_results`.

Builds are kept in order per machine class: by the committer date of the code under test
(`git_commit_date`, recorded by `run-benchmarks`) when the file carries one, else by the
date of the run; builds of one commit by run date; then by label.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import math
import os
import re
import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from kscperf.errors import CellStatus, KscperfError
import kscperf.history.journal as journal
import kscperf.history.links as links
from kscperf.history.folder import (BUILDS_DIR, INDEX_NAME, LOCK_TIMEOUT_S, MACHINE_SUFFIX,
                                    StoreLock, make_store_folder)
from kscperf.history.series import (
    SERIES_KINDS, Series, SeriesKey, SeriesPoint, StoredBuild, assemble_series, detectable_effect,
    environment_of, source_of, floats_json, machine_class_of, machine_scores_of, point_rows,
    summarize_samples)
from kscperf.names import Kind
from kscperf.results.files import LoadedResults, load_results

__all__ = ["HistoryStore", "open_store", "rebuild_index"]

# Bumped whenever the index's tables or what they hold change; an index of another version
# is rebuilt (7: links of every kind, not only run time; 8: kscperf's own version and code
# digest in the environment; 9: what each night's `ab` said of each link).
_SCHEMA_VERSION = 10


_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE builds (
    id INTEGER PRIMARY KEY,
    file TEXT NOT NULL UNIQUE,          -- relative to the store
    sha256 TEXT NOT NULL UNIQUE,
    label TEXT NOT NULL,
    machine_class TEXT NOT NULL,
    git_commit TEXT NOT NULL,
    git_dirty INTEGER NOT NULL,
    commit_date TEXT NOT NULL,
    run_date TEXT NOT NULL,
    order_key TEXT NOT NULL,
    environment TEXT NOT NULL,          -- JSON object of metadata.ENVIRONMENT_KEYS
    machine_scores TEXT,                -- JSON list: machine_scores_of(); NULL when unknown
    source TEXT NOT NULL,               -- JSON object: series.source_of()
    UNIQUE (machine_class, label)
);
CREATE TABLE series (
    id INTEGER PRIMARY KEY,
    machine_class TEXT NOT NULL,
    kind TEXT NOT NULL,
    benchmark TEXT NOT NULL,
    model TEXT NOT NULL, tool TEXT NOT NULL, task TEXT NOT NULL, config TEXT NOT NULL,
    UNIQUE (machine_class, kind, benchmark)
);
CREATE TABLE points (
    series_id INTEGER NOT NULL REFERENCES series(id),
    build_id INTEGER NOT NULL REFERENCES builds(id),
    status TEXT NOT NULL,
    samples TEXT NOT NULL,              -- JSON list: per-process medians (or values)
    median REAL,                        -- the central value, samples.central_value
    spread REAL,
    speedup REAL,                       -- over pt, samples.speedup_over_reference
    fate INTEGER NOT NULL,              -- 1: a cell's fate, standing for configs not reached
    odd INTEGER NOT NULL,               -- processes timed in another machine state
    detectable_se REAL,                 -- stats.detectable_spread_of_runs of the samples
    detectable_df REAL,
    PRIMARY KEY (series_id, build_id)
) WITHOUT ROWID;
""" + links.LINKS_SCHEMA + journal.JOURNAL_SCHEMA


def _real(value: float) -> float | None:
    # SQLite keeps NaN as NULL; say so explicitly.
    return value if math.isfinite(value) else None


def _float(value: float | None) -> float:
    return value if value is not None else math.nan


@dataclass(frozen=True)
class _Candidate:
    """A results file checked and ready to enter the store."""

    source: str
    loaded: LoadedResults
    sha256: str
    raw: bytes
    machine_class: str


def _order_key(commit_date: str, run_date: str, label: str) -> str:
    # ISO dates sort as text once normalised to UTC; a file without a commit date is placed
    # by its run date.
    return f"{_utc(commit_date or run_date)}|{_utc(run_date)}|{label}"


def _utc(text: str) -> str:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return text
    if moment.tzinfo is None:
        return moment.isoformat()  # a naive time is the machine's local time, kept as is
    return moment.astimezone(datetime.timezone.utc).replace(tzinfo=None).isoformat()


def _stored_name(label: str, sha256: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", label).strip(".")[:60] or "build"
    return f"{safe}-{sha256[:12]}.json"


class HistoryStore:
    """A store folder: the results files under `builds/` and the index. Open it with
    `open_store`; every change happens in one SQLite transaction, so a failed add leaves
    the store as it was."""

    def __init__(self, root: str, connection: sqlite3.Connection,
                 lock: StoreLock | None = None) -> None:
        self.root = root
        self._db = connection
        self._lock = lock

    def close(self) -> None:
        """Close the index and let go of the store's lock."""
        self._db.close()
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writing -----------------------------------------------------------------------

    def _check_candidate(self, path: str, machine: str | None, allow_incomplete: bool,
                         seen: dict[str, str], labels: dict[tuple[str, str], str]) -> _Candidate:
        loaded = load_results(path)
        if not loaded.has_kscperf:
            raise KscperfError(f"{path} is a plain pyperf file, not a kscperf results file; "
                               "the store keeps files written by run-benchmarks.")
        if not loaded.complete and not allow_incomplete:
            raise KscperfError(f"{path} is incomplete (an interrupted run or a partial merge); "
                               f"finish it with run-benchmarks --resume {path}, or pass "
                               "--allow-incomplete.")
        with open(path, "rb") as fp:
            raw = fp.read()
        sha = hashlib.sha256(raw).hexdigest()
        if sha in seen:
            if not seen[sha].startswith(f"{BUILDS_DIR}/"):  # another file of this add
                raise KscperfError(f"{path} is given twice (the same bytes as {seen[sha]}); "
                                   "give each file once.")
            raise KscperfError(f"{path} is already in the store (as {seen[sha]}).")
        machine_class = machine_class_of(loaded, machine)
        key = (machine_class, loaded.build)
        if key in labels:
            raise KscperfError(f"{path} is build {loaded.build!r} of machine class "
                               f"{machine_class!r}, which the store already holds "
                               f"({labels[key]}); label each run apart (run-benchmarks "
                               "--build LABEL).")
        seen[sha] = path
        labels[key] = path
        return _Candidate(path, loaded, sha, raw, machine_class)

    def add_builds(self, paths: Sequence[str], *, machine: str | None = None,
                   allow_incomplete: bool = False) -> list[StoredBuild]:
        """Add the results files `paths` to the store, all or none: each is copied under
        `builds/` and indexed in one transaction. Raises KscperfError naming the file, and
        changes nothing, for a file that is unreadable, not a results file, a plain pyperf
        file, incomplete (unless `allow_incomplete`), given twice, already in the store, or
        a build label the store holds for its machine class. `machine` overrides the
        machine class (default: the host). Concurrent adds to one store wait for each other
        (the index's write lock is held from the first read of what the store holds); a
        copy gets its final name only once the index has committed, so an add killed
        half-way leaves no file a rebuild would read. Returns the builds added."""
        self._begin_writing()
        pending: list[tuple[str, str]] = []  # (temporary name, final name)
        ids: list[int] = []
        try:
            journal.clean_leftovers(self._db, self.root, (BUILDS_DIR, links.LINKS_DIR),
                                    INDEX_NAME)
            seen = {sha: f for sha, f in self._db.execute("SELECT sha256, file FROM builds")}
            labels = {(m, lab): f for m, lab, f in
                      self._db.execute("SELECT machine_class, label, file FROM builds")}
            given: dict[str, str] = {}
            # One file at a time, in one transaction: a refusal rolls back the rows and the
            # copies made so far, and memory holds one results file, not all of them.
            for path in paths:
                _refuse_given_twice(path, given)
                folder = links.read_ab_folder(path) if os.path.isdir(path) else None
                c = self._check_candidate(folder.new_path if folder else path, machine,
                                          allow_incomplete, seen, labels)
                base_id = links.base_build_id(self._db, self.root, folder, c.loaded.build,
                                              c.machine_class, machine) if folder else None
                stored = _stored_name(c.loaded.build, c.sha256)
                ids.append(self._insert_or_refuse(c, stored, path))
                target = os.path.join(self.root, BUILDS_DIR, stored)
                if machine:
                    pending.append((journal.write_pending(
                        target + MACHINE_SUFFIX, (machine + "\n").encode("utf-8"),
                        "the store's machine class"), target + MACHINE_SUFFIX))
                pending.append((journal.write_pending(target, c.raw, "the store's copy"),
                                target))
                if folder is not None and base_id is not None:
                    pending.append(links.stage_link(self._db, self.root, folder, c.loaded,
                                                    c.machine_class, base_id, ids[-1],
                                                    stored))
            journal.record(self._db, self.root, pending)
            journal.crash_point("copied")
            self._commit(paths)
        except BaseException:
            self._db.rollback()
            for temporary, _ in pending:
                _remove_quietly(temporary)
            raise
        journal.crash_point("committed")
        try:
            journal.finish(self._db, self.root)
        except (OSError, sqlite3.Error) as exc:
            raise KscperfError(f"cannot name the store's copies in {self.root}: {exc}; the "
                               "next run-benchmarks history command on the store finishes "
                               "naming them.") from None
        return [b for b in self.builds() if b.id in ids]

    def _begin_writing(self) -> None:
        """Take the index's write lock now, so what the store holds cannot change between
        reading it and adding to it."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise KscperfError(f"cannot add to the store {self.root}: its index is busy or "
                               f"unwritable ({exc}); try again when the other add is "
                               "done.") from None

    def _commit(self, paths: Sequence[str]) -> None:
        try:
            self._db.commit()
        except sqlite3.Error as exc:
            raise KscperfError(f"cannot add {', '.join(paths)} to the store {self.root}: "
                               f"{exc}.") from None

    def _insert_or_refuse(self, c: _Candidate, stored: str, path: str) -> int:
        """`_insert`, with the index's own refusals as one sentence naming the file."""
        try:
            return self._insert(c, stored)
        except sqlite3.IntegrityError:
            raise KscperfError(f"{path} is already in the store {self.root} (the same file "
                               "or build label was added meanwhile).") from None
        except sqlite3.OperationalError as exc:
            raise KscperfError(f"cannot add {path} to the store {self.root}: {exc}.") \
                from None

    def _insert(self, c: _Candidate, stored: str) -> int:
        md = c.loaded.metadata
        commit_date, run_date = str(md.get("git_commit_date") or ""), str(md.get("date") or "")
        scores = machine_scores_of(c.loaded)
        cursor = self._db.execute(
            "INSERT INTO builds (file, sha256, label, machine_class, git_commit, git_dirty, "
            "commit_date, run_date, order_key, environment, machine_scores, source) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (f"{BUILDS_DIR}/{stored}", c.sha256, c.loaded.build, c.machine_class,
             str(md.get("git_commit") or ""), int(bool(md.get("git_dirty"))), commit_date,
             run_date, _order_key(commit_date, run_date, c.loaded.build),
             json.dumps(environment_of(c.loaded), sort_keys=True),
             None if scores is None else floats_json(scores),
             json.dumps(source_of(c.loaded), sort_keys=True)))
        build_id = int(cursor.lastrowid or 0)
        series_ids = {(k, b): i for i, k, b in self._db.execute(
            "SELECT id, kind, benchmark FROM series WHERE machine_class = ?", (c.machine_class,))}
        points = []
        for row in point_rows(c.loaded):
            series_id = series_ids.get((row.kind, row.benchmark))
            if series_id is None:
                series_id = int(self._db.execute(
                    "INSERT INTO series (machine_class, kind, benchmark, model, tool, task, "
                    "config) VALUES (?,?,?,?,?,?,?)",
                    (c.machine_class, row.kind, row.benchmark, row.model, row.tool, row.task,
                     row.config)).lastrowid or 0)
                series_ids[(row.kind, row.benchmark)] = series_id
            _, spread, se, df = summarize_samples(row.samples)
            points.append((series_id, build_id, row.status.value, floats_json(row.samples),
                           _real(row.central), spread, _real(row.speedup), int(row.fate),
                           row.odd_processes, se, df))
        self._db.executemany(
            "INSERT INTO points (series_id, build_id, status, samples, median, spread, speedup, "
            "fate, odd, detectable_se, detectable_df) VALUES (?,?,?,?,?,?,?,?,?,?,?)", points)
        return build_id

    def _index_files(self) -> None:
        """Index every results file under `builds/` (for `rebuild_index`), refusing two
        files of one build with one sentence naming both."""
        builds_dir = os.path.join(self.root, BUILDS_DIR)
        names = sorted(n for n in os.listdir(builds_dir) if n.endswith(".json"))
        by_sha: dict[str, str] = {}
        by_label: dict[tuple[str, str], str] = {}
        for name in names:
            path = os.path.join(builds_dir, name)
            loaded = load_results(path)
            with open(path, "rb") as fp:
                sha = hashlib.sha256(fp.read()).hexdigest()
            machine_class = machine_class_of(loaded, _given_class(path))
            label_key = (machine_class, loaded.build)
            twin = by_sha.get(sha) or by_label.get(label_key)
            if twin is not None:
                raise KscperfError(
                    f"{twin} and {path} are the same build (identical files, or build "
                    f"{loaded.build!r} of machine class {machine_class!r} twice); remove one "
                    "of them from the store and rebuild its index.")
            by_sha[sha], by_label[label_key] = path, path
            self._insert(_Candidate(path, loaded, sha, b"", machine_class), name)
        links.index_stored_links(self._db, self.root, BUILDS_DIR)

    # ---- reading -----------------------------------------------------------------------

    def builds(self, machine_class: str | None = None) -> list[StoredBuild]:
        """The builds, oldest first within each machine class (classes in name order)."""
        query = ("SELECT id, label, file, machine_class, git_commit, git_dirty, commit_date, "
                 "run_date, environment, machine_scores, source FROM builds")
        args: tuple[str, ...] = ()
        if machine_class is not None:
            query += " WHERE machine_class = ?"
            args = (machine_class,)
        rows = self._db.execute(query + " ORDER BY machine_class, order_key", args).fetchall()
        out: list[StoredBuild] = []
        position: dict[str, int] = {}
        for (id_, label, file, cls, commit, dirty, cdate, rdate, env, scores, src) in rows:
            out.append(StoredBuild(id_, label, os.path.join(self.root, file), cls, commit,
                                   bool(dirty), cdate, rdate, json.loads(env),
                                   None if scores is None else tuple(json.loads(scores)),
                                   position.get(cls, 0), json.loads(src)))
            position[cls] = position.get(cls, 0) + 1
        return out

    def machine_classes(self) -> list[str]:
        """The machine classes of the store, by name."""
        return [r[0] for r in self._db.execute(
            "SELECT DISTINCT machine_class FROM builds ORDER BY machine_class")]

    def series(self, machine_class: str | None = None,
               kinds: Iterable[str] | None = None) -> Iterator[Series]:
        """Every series (of `machine_class`, of `kinds`), each over the builds of its class
        from its first point on, builds absent from it shown as status NOT_RUN."""
        builds = self.builds(machine_class)
        by_class: dict[str, list[StoredBuild]] = {}
        for b in builds:
            by_class.setdefault(b.machine_class, []).append(b)
        wanted = {Kind(k) for k in kinds} if kinds is not None else set(SERIES_KINDS)
        for cls, class_builds in by_class.items():
            by_id = {b.id: b for b in class_builds}
            yield from self._class_series(cls, class_builds, by_id, wanted)

    def _class_series(self, cls: str, class_builds: list[StoredBuild],
                      by_id: dict[int, StoredBuild], wanted: set[Kind]) -> Iterator[Series]:
        rows = self._db.execute(
            "SELECT s.id, s.kind, s.benchmark, s.model, s.tool, s.task, s.config, p.build_id, "
            "p.status, p.samples, p.median, p.spread, p.detectable_se, p.detectable_df, p.speedup, p.odd "
            "FROM series s "
            "JOIN points p ON p.series_id = s.id WHERE s.machine_class = ? ORDER BY s.id",
            (cls,))
        fates = self._cell_fates(cls)
        current: int | None = None
        key: SeriesKey | None = None
        found: dict[int, SeriesPoint] = {}
        for (sid, kind, bench, model, tool, task, config, bid, status, samples, median,
             spread, se, df, speedup, odd) in rows:
            if sid != current:
                if key is not None and key.kind in wanted:
                    yield assemble_series(key, found, class_builds, fates)
                current, found = sid, {}
                key = SeriesKey(cls, Kind(kind), bench, model, tool, task, config)
            if kind in wanted:
                found[bid] = SeriesPoint(by_id[bid], CellStatus(status),
                                         tuple(json.loads(samples)), _float(median),
                                         _float(spread), detectable_effect(se, df),
                                         _float(speedup), int(odd))
        if key is not None and key.kind in wanted:
            yield assemble_series(key, found, class_builds, fates)

    def _cell_fates(self, cls: str) -> dict[tuple[int, str, str, str], CellStatus]:
        """(build id, model, tool, task) -> the status of a cell that ended badly before any
        compile value (its compile point is marked `fate`)."""
        return {(bid, model, tool, task): CellStatus(status)
                for bid, model, tool, task, status in self._db.execute(
                    "SELECT p.build_id, s.model, s.tool, s.task, p.status FROM series s "
                    "JOIN points p ON p.series_id = s.id WHERE s.machine_class = ? AND "
                    "p.fate = 1", (cls,))}

    def links(self, machine_class: str) -> dict[tuple[str, str], dict[int, links.Link]]:
        """The lockstep links of one machine class: (kind, benchmark) -> {new build id:
        its link}."""
        return links.class_links(self._db, machine_class)

    def index_dump(self) -> list[tuple[Any, ...]]:
        """The index's content without its row ids, in a fixed order: what an incremental
        add and a full rebuild must agree on."""
        linked = self._db.execute(
            "SELECT b.label, n.label, s.machine_class, s.kind, s.benchmark, l.ratio, l.low, "
            "l.high, l.p_value, l.se_log, l.n_pairs, l.method, l.environment, l.ab_verdict, "
            "l.ab_q, l.ab_min_effect FROM links l "
            "JOIN builds b ON b.id = l.base_id JOIN builds n ON n.id = l.new_id "
            "JOIN series s ON s.id = l.series_id").fetchall()
        rows = self._db.execute(
            "SELECT b.label, b.file, b.sha256, b.machine_class, b.git_commit, b.git_dirty, "
            "b.commit_date, b.run_date, b.order_key, b.environment, b.machine_scores, s.kind, "
            "s.benchmark, s.model, s.tool, s.task, s.config, p.status, p.samples, p.median, "
            "p.spread, p.detectable_se, p.detectable_df FROM points p "
            "JOIN builds b ON b.id = p.build_id "
            "JOIN series s ON s.id = p.series_id").fetchall()
        return sorted(rows + linked, key=repr)


def _refuse_given_twice(path: str, given: dict[str, str]) -> None:
    """Raise KscperfError when `path` names a file already given in this add."""
    try:
        real = os.path.realpath(path)
    except OSError:
        return
    if real in given:
        raise KscperfError(f"{path} is given twice (also as {given[real]}); give each file "
                           "once.")
    given[real] = path


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _connect(index: str) -> sqlite3.Connection:
    db = sqlite3.connect(index, isolation_level="DEFERRED", timeout=LOCK_TIMEOUT_S)
    db.execute("PRAGMA foreign_keys = ON")
    return db


def _create_index(path: str) -> sqlite3.Connection:
    db = _connect(path)
    db.executescript(_SCHEMA)
    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(_SCHEMA_VERSION),))
    db.commit()
    return db


def open_store(root: str, *, create: bool = False) -> HistoryStore:
    """The store in folder `root`. With `create`, a missing store is made (an empty folder
    or none); an index missing or of another version is rebuilt from the files. Raises
    KscperfError for a folder that is not a store (unless `create` and it is empty). Any
    number of processes may open, make and add to one store at once: the index is made once,
    under the store's lock, and the others wait for it."""
    index = os.path.join(root, INDEX_NAME)
    if not os.path.isdir(os.path.join(root, BUILDS_DIR)):
        if not create:
            raise KscperfError(f"{root} is not a history store (no {BUILDS_DIR}/ folder); "
                               "create one with run-benchmarks history add FILE --store "
                               f"{root}.")
        make_store_folder(root)
    lock = StoreLock(root)
    try:
        lock.take(fcntl.LOCK_SH)
        if not _is_current(index):
            lock.take(fcntl.LOCK_EX)
            if not _is_current(index):  # unless another process made it while we waited
                return _rebuild_holding(root, lock)
            lock.take(fcntl.LOCK_SH)
        db = _connect(index)
        _finish_pending(db, root)
        return HistoryStore(root, db, lock)
    except BaseException:
        lock.release()
        raise


def _finish_pending(db: sqlite3.Connection, root: str) -> None:
    """Finish an add that was killed after its commit (`journal.finish`); a store that
    cannot be written is read as it is."""
    try:
        journal.finish(db, root)
    except (OSError, sqlite3.Error):
        pass


def _is_current(index: str) -> bool:
    """Whether the index exists and is of this version's schema."""
    return os.path.exists(index) and _schema_version(index) == _SCHEMA_VERSION


def _schema_version(index: str) -> int | None:
    try:
        db = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        finally:
            db.close()
        return int(row[0]) if row else None
    except (sqlite3.Error, ValueError):
        return None


def rebuild_index(root: str) -> HistoryStore:
    """Recreate the index of the store `root` from its results files alone, and return the
    store. The new index replaces the old one atomically; a file that cannot be read, or
    two files of one build (the same bytes, or one build label of one machine class),
    raise KscperfError naming them, and the old index is kept. Waits for the other
    processes that have the store open to close it."""
    lock = StoreLock(root)
    try:
        lock.take(fcntl.LOCK_EX)
        return _rebuild_holding(root, lock)
    except BaseException:
        lock.release()
        raise


def _rebuild_holding(root: str, lock: StoreLock) -> HistoryStore:
    """`rebuild_index` for a caller that holds `lock` exclusive; the store returned holds it
    shared."""
    index = os.path.join(root, INDEX_NAME)
    if _is_current(index):
        old = _connect(index)
        _finish_pending(old, root)  # a copy an add committed but had not named yet
        old.close()
    # Per process: two commands rebuilding one store at once must not share a scratch file.
    fresh = f"{index}.rebuild-{os.getpid()}"
    _remove_quietly(fresh)
    db = _create_index(fresh)
    store = HistoryStore(root, db)
    try:
        with db:
            store._index_files()
    except BaseException:
        db.close()
        _remove_quietly(fresh)
        raise
    db.close()
    os.replace(fresh, index)
    lock.take(fcntl.LOCK_SH)
    return HistoryStore(root, _connect(index), lock)


def _given_class(path: str) -> str | None:
    """The machine class given with --machine when the file was added (kept beside the
    byte-identical copy, so a rebuild finds it), or None."""
    try:
        with open(path + MACHINE_SUFFIX, encoding="utf-8") as fp:
            return fp.read().strip() or None
    except OSError:
        return None
