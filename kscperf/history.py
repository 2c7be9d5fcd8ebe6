"""The history store: a folder of results files kept in build order, and its SQLite index.

    STORE/
      builds/<label>-<sha256 prefix>.json   copies of the results files added (the truth)
      index.sqlite                          what queries need, rebuilt from builds/ at will

The results files stay the source of truth: `rebuild_index` recreates the index from them
alone, and an incremental `add_builds` leaves exactly the index a rebuild would make. This
module is the only writer of a store; it reads results files only through
`results.load_results`.

Builds are kept in order per machine class: by the committer date of the code under test
(`git_commit_date`, recorded by `run-benchmarks`) when the file carries one, else by the
date of the run; builds of one commit by run date; then by label.

A **series** is one benchmark, one kind (`time`, `compile`, `prep`, `memory`,
`cuda_memory`) and one machine class. Per build and series the index holds the per-process
values the change-point test uses (per-process medians for run time), their median and
spread (MAD), the cell status, and what the minimum detectable effect is computed from
(`stats.detectable_spread_of_runs`; scipy's quantiles wait until it is read); per build it
holds the environment fingerprint (torch, CUDA, driver, CPU, GPU, Python, profile) and the
canary scores of the machine. Change points are found by `kscperf.changepoints` over these
series (`find_changes`), split only by the environment: a change of the machine's speed is
an event, and a step it could explain is the machine's, not the build's; nothing here
prints or renders.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import math
import os
import re
import sqlite3
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from kscperf import machine, stats
from kscperf.errors import BAD_STATUSES, CellStatus, KscperfError
from kscperf.names import cell_name, compile_name, prep_name
from kscperf.fileio import write_bytes_atomic, write_text_atomic
from kscperf.results import CellSummary, LoadedResults, load_results

__all__ = [
    "INDEX_NAME",
    "BUILDS_DIR",
    "SERIES_KINDS",
    "StoredBuild",
    "SeriesKey",
    "SeriesPoint",
    "Series",
    "HistoryChange",
    "HistoryStore",
    "open_store",
    "machine_class_of",
    "environment_of",
    "find_changes",
]

INDEX_NAME = "index.sqlite"
BUILDS_DIR = "builds"
SERIES_KINDS = ("time", "compile", "prep", "memory", "cuda_memory")
# Bumped whenever the index's tables change; an index of another version is rebuilt.
_SCHEMA_VERSION = 3

# The metadata that makes a build's environment: a change of any of them inside a series is
# an environment event, never a regression of the build. The machine class itself (the
# host) is not among them: another host is another series.
_ENVIRONMENT_KEYS = (
    "torch_version", "cuda_version", "cudnn_version", "triton_version", "gpu_driver",
    "gpu_name", "cpu_model_name", "cpu_count", "python_version", "profile", "processes",
    "values", "warmups", "min_time", "compile_cache", "isolation",
)
# The detail of the environment event between consecutive builds whose canaries say the
# machine changed speed (`machine.ShiftState` CHANGED, as `compare` decides it), or of a
# step such a change could explain. The machine's speed never splits a series.
MACHINE_SPEED_DETAIL = "machine speed"
# Beside a store's copy of a file added with --machine CLASS: that class.
MACHINE_SUFFIX = ".machine"

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
    environment TEXT NOT NULL,          -- JSON object of _ENVIRONMENT_KEYS
    machine_scores TEXT,                -- JSON list: _machine_scores(); NULL when unknown
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
    median REAL,
    spread REAL,
    detectable_se REAL,                 -- stats.detectable_spread_of_runs of the samples
    detectable_df REAL,
    PRIMARY KEY (series_id, build_id)
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class StoredBuild:
    """One build of the store. `file` is the path of its results file in the store;
    `position` its place among the builds of its machine class (0 the oldest)."""

    id: int
    label: str
    file: str
    machine_class: str
    git_commit: str
    git_dirty: bool
    commit_date: str
    run_date: str
    environment: dict[str, str]
    # The canary scores of the run's processes in their usual machine state (None for a
    # file without a canary).
    machine_scores: tuple[float, ...] | None
    position: int = 0

    @property
    def short_commit(self) -> str:
        """The first 12 hex digits of the commit, "" when the file carries none."""
        return self.git_commit[:12]


@dataclass(frozen=True)
class SeriesKey:
    """What names one series. `config` is "" for a compile time (it belongs to the cell)."""

    machine_class: str
    kind: str
    benchmark: str
    model: str
    tool: str
    task: str
    config: str

    @property
    def cell(self) -> str:
        """`model/tool/task`."""
        return cell_name(self.model, self.tool, self.task)


@dataclass(frozen=True)
class SeriesPoint:
    """One build of one series: status "missing" (and no samples) where the build has no
    such benchmark."""

    build: StoredBuild
    status: str
    samples: tuple[float, ...]
    median: float
    spread: float
    min_detectable: float | None


@dataclass(frozen=True)
class Series:
    """One series over every build of its machine class from its first appearance on."""

    key: SeriesKey
    points: tuple[SeriesPoint, ...]


@dataclass(frozen=True)
class HistoryChange:
    """A change found in one series: `change` is the `kscperf.changepoints.Change`, whose
    `before`/`after` index the series' points; `before` and `after` are those builds, with
    the series' status in each. `detail` says what changed for an environment event (the
    metadata that differ between the two builds, or "machine speed")."""

    key: SeriesKey
    change: Any
    before: StoredBuild
    after: StoredBuild
    before_status: str
    after_status: str
    detail: str = ""

    @property
    def kind(self) -> str:
        """`slower`, `faster`, `environment` or `status`."""
        return str(self.change.kind)

    @property
    def is_regression(self) -> bool:
        """Slower, or a status that went from good to bad (incorrect, failed, missing...)."""
        if self.kind == "slower":
            return True
        return self.kind == "status" and _is_bad(self.after_status) and not _is_bad(
            self.before_status)


def _is_bad(status: str) -> bool:
    # As in `compare`: a benchmark that went missing is not a regression; one that fails is.
    return status in {s.value for s in BAD_STATUSES}


def _floats_json(values: Sequence[float]) -> str:
    """`values` as the index stores them: JSON, six significant digits."""
    return json.dumps([float(f"{v:.6g}") for v in values])


def _machine_scores(loaded: LoadedResults) -> list[float] | None:
    """The canary scores of the run's processes in their usual machine state, or None when
    the file has no canary. A shift between consecutive builds is an environment event
    ("machine speed"), so a slow machine is never blamed on a build."""
    speed = machine.machine_speed(loaded.runs)
    return None if speed is None else machine.usual_scores(speed)


def machine_class_of(loaded: LoadedResults, machine: str | None = None) -> str:
    """The machine class of a build: `machine` when given, else the file's `machine_class`
    metadata, else its host (the sorted hosts of merged shards)."""
    for value in (machine, loaded.metadata.get("machine_class"), loaded.metadata.get("hostname"),
                  loaded.metadata.get("merged_hostnames")):
        if value:
            return str(value)
    return "unknown"


def environment_of(loaded: LoadedResults) -> dict[str, str]:
    """The environment fingerprint of a build: the `_ENVIRONMENT_KEYS` it records, as text."""
    return {k: str(loaded.metadata[k]) for k in _ENVIRONMENT_KEYS if k in loaded.metadata}


# --------------------------------------------------------------------------------------
# Rows from one results file
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _PointRow:
    kind: str
    benchmark: str
    model: str
    tool: str
    task: str
    config: str
    status: str
    samples: tuple[float, ...]


def _memory_samples(loaded: LoadedResults) -> dict[tuple[str, str, str, str, str], list[float]]:
    """Per-process peak memory per (kind, model, tool, task, config)."""
    out: dict[tuple[str, str, str, str, str], list[float]] = {}
    for r in loaded.runs:
        for c in r.configs:
            for kind, value in (("memory", c.peak_rss_bytes), ("cuda_memory", c.peak_cuda_bytes)):
                if value:
                    out.setdefault((kind, r.model, r.tool, r.task, c.config), []).append(
                        float(value))
    return out


def _config_rows(loaded: LoadedResults, c: CellSummary,
                 memory: dict[tuple[str, str, str, str, str], list[float]]) -> list[_PointRow]:
    assert c.config is not None
    base = f"{cell_name(c.model, c.tool, c.task)}/{c.config}"
    status = c.status.value
    # Statuses are judged on run time; another kind measured is "ok" as a measurement (an
    # incorrect config still has its prep time), so one status change is reported once.
    measured = "ok"
    times = stats.process_medians(loaded.runs_values.get(base, []))
    prep = [v for run in loaded.runs_values.get(prep_name(c.model, c.tool, c.task, c.config), [])
            for v in run]
    rows = [_PointRow("time", base, c.model, c.tool, c.task, c.config, status, tuple(times))]
    if prep:
        rows.append(_PointRow("prep", base, c.model, c.tool, c.task, c.config, measured,
                              tuple(prep)))
    for kind in ("memory", "cuda_memory"):
        values = memory.get((kind, c.model, c.tool, c.task, c.config))
        if values is None:
            peak = c.peak_rss_bytes if kind == "memory" else c.peak_cuda_bytes
            values = [float(peak)] if peak else []
        if values:
            rows.append(_PointRow(kind, base, c.model, c.tool, c.task, c.config, measured,
                                  tuple(values)))
    return rows


def _point_rows(loaded: LoadedResults) -> list[_PointRow]:
    """Every series point of one build: run time, prep and memory per config, compile per
    cell. A config that never ran (its cell ended before it) has no point; the cell's status
    is kept as its compile point (no samples), and the run-time series shows the cell's
    status there (`_assemble`)."""
    memory = _memory_samples(loaded)
    rows: list[_PointRow] = []
    cell_status: dict[tuple[str, str, str], CellStatus] = {}
    for c in loaded.cells:
        key = (c.model, c.tool, c.task)
        if c.config is None:
            cell_status[key] = c.status
            continue
        rows.extend(_config_rows(loaded, c, memory))
        # The cell's own fate (config None) wins over its configs' when the file has one.
        cell_status.setdefault(key, c.status)
    for (model, tool, task), status in cell_status.items():
        compile_s = [v for run in loaded.runs_values.get(compile_name(model, tool, task), [])
                     for v in run]
        if compile_s:
            rows.append(_PointRow("compile", cell_name(model, tool, task), model, tool, task,
                                  "", "ok", tuple(compile_s)))
        elif status is not CellStatus.OK:
            rows.append(_PointRow("compile", cell_name(model, tool, task), model, tool, task,
                                  "", status.value, ()))
    return rows


def _summary(samples: Sequence[float]) -> tuple[float | None, float | None, float | None,
                                               float | None]:
    """(median, spread, and the standard error and degrees of freedom of the minimum
    detectable effect) of one point's samples. The effect itself needs scipy's t quantiles,
    whose import alone costs more than adding a build; it is computed as the index is read."""
    if not samples:
        return None, None, None, None
    se, df = stats.detectable_spread_of_runs([[v] for v in samples])
    return (statistics.median(samples), stats.median_abs_dev(samples),
            se if math.isfinite(se) else None, df if math.isfinite(df) else None)


# --------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------

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

    def __init__(self, root: str, connection: sqlite3.Connection) -> None:
        self.root = root
        self._db = connection

    def close(self) -> None:
        """Close the index."""
        self._db.close()

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
            seen = {sha: f for sha, f in self._db.execute("SELECT sha256, file FROM builds")}
            labels = {(m, lab): f for m, lab, f in
                      self._db.execute("SELECT machine_class, label, file FROM builds")}
            given: dict[str, str] = {}
            # One file at a time, in one transaction: a refusal rolls back the rows and the
            # copies made so far, and memory holds one results file, not all of them.
            for path in paths:
                _refuse_given_twice(path, given)
                c = self._check_candidate(path, machine, allow_incomplete, seen, labels)
                stored = _stored_name(c.loaded.build, c.sha256)
                ids.append(self._insert_or_refuse(c, stored, path))
                target = os.path.join(self.root, BUILDS_DIR, stored)
                if machine:
                    pending.append((_pending_name(target + MACHINE_SUFFIX),
                                    target + MACHINE_SUFFIX))
                    write_text_atomic(pending[-1][0], machine + "\n",
                                      "the store's machine class")
                pending.append((_pending_name(target), target))
                write_bytes_atomic(pending[-1][0], c.raw, "the store's copy")
            self._commit(paths)
        except BaseException:
            self._db.rollback()
            for temporary, _ in pending:
                _remove_quietly(temporary)
            raise
        for temporary, final in pending:
            try:
                os.replace(temporary, final)
            except OSError as exc:
                raise KscperfError(f"cannot name the store's copy {final}: "
                                   f"{exc.strerror or exc}; run-benchmarks history rebuild "
                                   f"--store {self.root} indexes the files it holds.") from None
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
        scores = _machine_scores(c.loaded)
        cursor = self._db.execute(
            "INSERT INTO builds (file, sha256, label, machine_class, git_commit, git_dirty, "
            "commit_date, run_date, order_key, environment, machine_scores) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (f"{BUILDS_DIR}/{stored}", c.sha256, c.loaded.build, c.machine_class,
             str(md.get("git_commit") or ""), int(bool(md.get("git_dirty"))), commit_date,
             run_date, _order_key(commit_date, run_date, c.loaded.build),
             json.dumps(environment_of(c.loaded), sort_keys=True),
             None if scores is None else _floats_json(scores)))
        build_id = int(cursor.lastrowid or 0)
        series_ids = {(k, b): i for i, k, b in self._db.execute(
            "SELECT id, kind, benchmark FROM series WHERE machine_class = ?", (c.machine_class,))}
        points = []
        for row in _point_rows(c.loaded):
            series_id = series_ids.get((row.kind, row.benchmark))
            if series_id is None:
                series_id = int(self._db.execute(
                    "INSERT INTO series (machine_class, kind, benchmark, model, tool, task, "
                    "config) VALUES (?,?,?,?,?,?,?)",
                    (c.machine_class, row.kind, row.benchmark, row.model, row.tool, row.task,
                     row.config)).lastrowid or 0)
                series_ids[(row.kind, row.benchmark)] = series_id
            points.append((series_id, build_id, row.status,
                           _floats_json(row.samples),
                           *_summary(row.samples)))
        self._db.executemany("INSERT INTO points VALUES (?,?,?,?,?,?,?,?)", points)
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

    # ---- reading -----------------------------------------------------------------------

    def builds(self, machine_class: str | None = None) -> list[StoredBuild]:
        """The builds, oldest first within each machine class (classes in name order)."""
        query = ("SELECT id, label, file, machine_class, git_commit, git_dirty, commit_date, "
                 "run_date, environment, machine_scores FROM builds")
        args: tuple[str, ...] = ()
        if machine_class is not None:
            query += " WHERE machine_class = ?"
            args = (machine_class,)
        rows = self._db.execute(query + " ORDER BY machine_class, order_key", args).fetchall()
        out: list[StoredBuild] = []
        position: dict[str, int] = {}
        for (id_, label, file, cls, commit, dirty, cdate, rdate, env, scores) in rows:
            out.append(StoredBuild(id_, label, os.path.join(self.root, file), cls, commit,
                                   bool(dirty), cdate, rdate, json.loads(env),
                                   None if scores is None else tuple(json.loads(scores)),
                                   position.get(cls, 0)))
            position[cls] = position.get(cls, 0) + 1
        return out

    def machine_classes(self) -> list[str]:
        """The machine classes of the store, by name."""
        return [r[0] for r in self._db.execute(
            "SELECT DISTINCT machine_class FROM builds ORDER BY machine_class")]

    def series(self, machine_class: str | None = None,
               kinds: Iterable[str] | None = None) -> Iterator[Series]:
        """Every series (of `machine_class`, of `kinds`), each over the builds of its class
        from its first point on, builds absent from it shown as status "missing"."""
        builds = self.builds(machine_class)
        by_class: dict[str, list[StoredBuild]] = {}
        for b in builds:
            by_class.setdefault(b.machine_class, []).append(b)
        wanted = set(kinds) if kinds is not None else set(SERIES_KINDS)
        for cls, class_builds in by_class.items():
            by_id = {b.id: b for b in class_builds}
            yield from self._class_series(cls, class_builds, by_id, wanted)

    def _class_series(self, cls: str, class_builds: list[StoredBuild],
                      by_id: dict[int, StoredBuild], wanted: set[str]) -> Iterator[Series]:
        rows = self._db.execute(
            "SELECT s.id, s.kind, s.benchmark, s.model, s.tool, s.task, s.config, p.build_id, "
            "p.status, p.samples, p.median, p.spread, p.detectable_se, p.detectable_df "
            "FROM series s "
            "JOIN points p ON p.series_id = s.id WHERE s.machine_class = ? ORDER BY s.id",
            (cls,))
        fates = self._cell_fates(cls)
        current: int | None = None
        key: SeriesKey | None = None
        found: dict[int, SeriesPoint] = {}
        for (sid, kind, bench, model, tool, task, config, bid, status, samples, median,
             spread, se, df) in rows:
            if sid != current:
                if key is not None and key.kind in wanted:
                    yield _assemble(key, found, class_builds, fates)
                current, found = sid, {}
                key = SeriesKey(cls, kind, bench, model, tool, task, config)
            if kind in wanted:
                found[bid] = SeriesPoint(by_id[bid], status, tuple(json.loads(samples)),
                                         median if median is not None else math.nan,
                                         spread if spread is not None else math.nan,
                                         _detectable(se, df))
        if key is not None and key.kind in wanted:
            yield _assemble(key, found, class_builds, fates)

    def _cell_fates(self, cls: str) -> dict[tuple[int, str, str, str], str]:
        """(build id, model, tool, task) -> the status of a cell that ended badly before any
        compile value (its compile point carries the cell's status and no samples)."""
        return {(bid, model, tool, task): status for bid, model, tool, task, status in
                self._db.execute(
                    "SELECT p.build_id, s.model, s.tool, s.task, p.status FROM series s "
                    "JOIN points p ON p.series_id = s.id WHERE s.machine_class = ? AND "
                    "s.kind = 'compile' AND p.status != 'ok' AND p.samples = '[]'", (cls,))}

    def index_dump(self) -> list[tuple[Any, ...]]:
        """The index's content without its row ids, in a fixed order: what an incremental
        add and a full rebuild must agree on."""
        rows = self._db.execute(
            "SELECT b.label, b.file, b.sha256, b.machine_class, b.git_commit, b.git_dirty, "
            "b.commit_date, b.run_date, b.order_key, b.environment, b.machine_scores, s.kind, "
            "s.benchmark, s.model, s.tool, s.task, s.config, p.status, p.samples, p.median, "
            "p.spread, p.detectable_se, p.detectable_df FROM points p "
            "JOIN builds b ON b.id = p.build_id "
            "JOIN series s ON s.id = p.series_id").fetchall()
        return sorted(rows, key=repr)


def _detectable(se: float | None, df: float | None) -> float | None:
    if se is None or df is None:
        return None
    mde = stats.min_detectable_effect(se, df)
    return mde if math.isfinite(mde) else None


def _assemble(key: SeriesKey, found: dict[int, SeriesPoint], class_builds: list[StoredBuild],
              fates: dict[tuple[int, str, str, str], str]) -> Series:
    """The series from its points, a build without one shown as "missing"; in the run-time
    series, a config that never ran because its cell ended before it (a crash at import)
    shows the cell's status instead, so a cell that stops running is a regression. The
    other kinds stay "missing": the run-time series reports what happened once."""
    first = min(found[bid].build.position for bid in found) if found else 0
    points = []
    for b in class_builds[first:]:
        point = found.get(b.id)
        if point is None:
            status = fates.get((b.id, key.model, key.tool, key.task), "missing") \
                if key.kind == "time" else "missing"
            point = SeriesPoint(b, status, (), math.nan, math.nan, None)
        points.append(point)
    return Series(key, tuple(points))


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


def _pending_name(target: str) -> str:
    # Not ending in .json: a rebuild never reads a copy whose add did not commit.
    return f"{target}.adding-{os.getpid()}"


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# Seconds a connection waits for another process's write lock before giving up: adds of
# one store from several jobs queue rather than fail.
_LOCK_TIMEOUT_S = 300.0


def _connect(index: str) -> sqlite3.Connection:
    db = sqlite3.connect(index, isolation_level="DEFERRED", timeout=_LOCK_TIMEOUT_S)
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
    KscperfError for a folder that is not a store (unless `create` and it is empty)."""
    index = os.path.join(root, INDEX_NAME)
    builds_dir = os.path.join(root, BUILDS_DIR)
    if not os.path.isdir(builds_dir):
        if not create:
            raise KscperfError(f"{root} is not a history store (no {BUILDS_DIR}/ folder); "
                               "create one with run-benchmarks history add FILE --store "
                               f"{root}.")
        if os.path.exists(root) and (not os.path.isdir(root) or os.listdir(root)):
            raise KscperfError(f"{root} exists and is not a history store; choose an empty "
                               "or new folder for --store.")
        try:
            os.makedirs(builds_dir, exist_ok=True)
        except OSError as exc:
            raise KscperfError(f"cannot create the store {root}: {exc.strerror or exc}.") \
                from None
    if not os.path.exists(index) or _schema_version(index) != _SCHEMA_VERSION:
        return rebuild_index(root)
    return HistoryStore(root, _connect(index))


def remove_empty_store(root: str) -> None:
    """Remove the store `root` if it holds no build (only what `open_store(create=True)`
    made: an empty `builds/` and an index); a store with any file of its own is left as
    it is."""
    builds_dir = os.path.join(root, BUILDS_DIR)
    try:
        if os.listdir(builds_dir):
            return
        os.rmdir(builds_dir)
        for name in os.listdir(root):
            if name == INDEX_NAME or name.startswith(INDEX_NAME + "-"):  # its journal too
                os.unlink(os.path.join(root, name))
        os.rmdir(root)
    except OSError:
        pass  # anything else there is not ours to remove


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
    raise KscperfError naming them, and the old index is kept."""
    index = os.path.join(root, INDEX_NAME)
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
    return HistoryStore(root, _connect(index))


def _given_class(path: str) -> str | None:
    """The machine class given with --machine when the file was added (kept beside the
    byte-identical copy, so a rebuild finds it), or None."""
    try:
        with open(path + MACHINE_SUFFIX, encoding="utf-8") as fp:
            return fp.read().strip() or None
    except OSError:
        return None


# --------------------------------------------------------------------------------------
# Changes
# --------------------------------------------------------------------------------------

def _speed_shifts(builds: Sequence[StoredBuild]) -> set[tuple[int, int]]:
    """(before id, after id) of every pair of consecutive builds of one class, both with
    canary scores, whose machines differ as `compare` would say "machine changed"."""
    shifts: set[tuple[int, int]] = set()
    for before, after in zip(builds, builds[1:]):
        if before.machine_scores and after.machine_scores and machine.compare_canary_scores(
                before.machine_scores, after.machine_scores).shifted:
            shifts.add((before.id, after.id))
    return shifts


def _environment_marks(builds: Sequence[StoredBuild]) -> dict[int, tuple[str, str]]:
    """Per build id of one class: (environment fingerprint; the environment as text, only
    the keys that vary in the class). The machine's speed is not part of it: a slower or
    faster machine must not split a series, or a regression that came with it would be
    hidden (see `_machine_explained`)."""
    varying = sorted({k for b in builds for k in b.environment
                      if len({c.environment.get(k) for c in builds}) > 1})
    marks: dict[int, tuple[str, str]] = {}
    for b in builds:
        fingerprint = json.dumps(b.environment, sort_keys=True)
        text = ", ".join(f"{k} {b.environment.get(k, '-')}" for k in varying)
        marks[b.id] = (hashlib.sha1(fingerprint.encode()).hexdigest()[:12], text)
    return marks


def _environment_difference(before: StoredBuild, after: StoredBuild) -> str:
    """What differs between the environments of two builds, for people."""
    keys = sorted(set(before.environment) | set(after.environment))
    changed = [f"{k} {before.environment.get(k, '-')} -> {after.environment.get(k, '-')}"
               for k in keys if before.environment.get(k) != after.environment.get(k)]
    return "; ".join(changed)


def build_points(series: Series, marks: dict[int, tuple[str, str]]) -> list[Any]:
    """The `changepoints.BuildPoint`s of one series, with environment marks."""
    from kscperf.changepoints import BuildPoint

    return [BuildPoint(samples=p.samples, status=p.status, environment=marks[p.build.id][0],
                       environment_detail=marks[p.build.id][1], min_detectable=p.min_detectable)
            for p in series.points]


def find_changes(store: HistoryStore, *, min_effect: float = stats.DEFAULT_MIN_EFFECT,
                 series: Sequence[Series] | None = None,
                 per_series_environment: bool = False) -> list[HistoryChange]:
    """Every change of every series of the store (or of `series`), found by
    `changepoints.detect_series` with the false discovery rate controlled across all of
    them; in order: machine class, then the build where it happened (newest first),
    regressions first. An environment change is one entry per machine class and pair of
    builds, whose key names every series it touched ("all N series", kind "*"), unless
    `per_series_environment` (one per series, to mark each timeline).

    The machine's speed never splits a series. Consecutive builds whose canaries say the
    machine changed speed are an environment event with detail `MACHINE_SPEED_DETAIL`; and a
    slower or faster step of run, compile or prep time that a change of the machine's speed
    between its two builds could explain (`compare.machine_could_explain`, as `compare`
    judges a row) is not listed as a step: the machine-speed event of that pair of builds
    is listed instead, so no build is blamed for the machine."""
    from kscperf import changepoints

    all_series = list(series) if series is not None else list(store.series())
    marks: dict[int, tuple[str, str]] = {}
    shifts: dict[str, set[tuple[int, int]]] = {}
    for cls in {s.key.machine_class for s in all_series}:
        class_builds = store.builds(cls)
        marks.update(_environment_marks(class_builds))
        shifts[cls] = _speed_shifts(class_builds)
    found = {i: changepoints.detect_series(build_points(s, marks), min_effect=min_effect)
             for i, s in enumerate(all_series)}
    kept = changepoints.control_fdr(found)
    out: list[HistoryChange] = []
    for i, changes in kept.items():
        s = all_series[i]
        out.extend(_series_changes(s, changes, shifts[s.key.machine_class], min_effect))
    if not per_series_environment:
        out = _one_environment_entry(out)
    out.sort(key=lambda c: (c.key.machine_class, -c.after.position, not c.is_regression,
                            c.kind, c.key.benchmark, c.key.kind))
    return out


# The kinds a machine's speed scales; memory is not one of them.
_MACHINE_TIMED_KINDS = ("time", "compile", "prep")


def _series_changes(s: Series, changes: Sequence[Any], shifts: set[tuple[int, int]],
                    min_effect: float) -> list[HistoryChange]:
    """The `HistoryChange`s of one series from its kept `changepoints.Change`s and the
    machine-speed shifts of its class (pairs of build ids)."""
    from kscperf import changepoints

    speed_pairs = {(i - 1, i) for i in range(1, len(s.points))
                   if (s.points[i - 1].build.id, s.points[i].build.id) in shifts}
    out: list[HistoryChange] = []
    for ch in changes:
        if _machine_explained(s, ch, min_effect):
            speed_pairs.add((ch.before, ch.after))
            continue
        # A compile, prep or memory value comes and goes with the run (an eager tool's
        # compile time is only recorded when its first call was measurably slow): its gaps
        # are not status changes; the run-time series of the config reports what happened.
        if ch.kind == "status" and s.key.kind != "time" and "missing" in (
                s.points[ch.before].status, s.points[ch.after].status):
            continue
        speed = ch.kind == "environment" and (ch.before, ch.after) in speed_pairs
        if speed:
            speed_pairs.discard((ch.before, ch.after))
        out.append(_history_change(s, ch, speed))
    for before, after in sorted(speed_pairs):
        event = changepoints.Change("environment", before, after, None, None, None, None,
                                    MACHINE_SPEED_DETAIL)
        out.append(_history_change(s, event, True))
    return out


def _machine_explained(s: Series, ch: Any, min_effect: float) -> bool:
    """Whether a change of the machine's speed between the two builds of step `ch` could
    explain it, as `compare` decides for a row: then it is the machine's, not the build's."""
    from kscperf import compare

    if not ch.is_step or s.key.kind not in _MACHINE_TIMED_KINDS or ch.low is None \
            or ch.high is None:
        return False
    before = s.points[ch.before].build.machine_scores
    after = s.points[ch.after].build.machine_scores
    if not before or not after:
        return False
    shift = machine.compare_canary_scores(before, after)
    direction = 1 if ch.kind == "slower" else -1
    threshold = ch.min_effect if ch.min_effect is not None else min_effect
    return shift.could_have_shifted and compare.machine_could_explain(
        ch.low, ch.high, direction, shift, threshold)


def _one_environment_entry(changes: list[HistoryChange]) -> list[HistoryChange]:
    """`changes` with the environment events of one class and pair of builds merged."""
    merged: dict[tuple[str, int, int], list[HistoryChange]] = {}
    rest = []
    for c in changes:
        if c.kind == "environment":
            merged.setdefault((c.key.machine_class, c.before.id, c.after.id), []).append(c)
        else:
            rest.append(c)
    for (cls, _, _), events in merged.items():
        key = SeriesKey(cls, "*", f"all {len(events)} series", "*", "*", "*", "*")
        rest.append(dataclasses.replace(events[0], key=key))
    return rest


def _history_change(s: Series, ch: Any, machine_speed: bool = False) -> HistoryChange:
    before, after = s.points[ch.before], s.points[ch.after]
    detail = ""
    if ch.kind == "environment":
        parts = [_environment_difference(before.build, after.build)]
        parts += [MACHINE_SPEED_DETAIL] if machine_speed else []
        detail = "; ".join(p for p in parts if p)
    return HistoryChange(s.key, ch, before.build, after.build, before.status, after.status,
                         detail)


# --------------------------------------------------------------------------------------
# What follows a change: the commands that confirm it
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConfirmCommands:
    """Shell commands that confirm one change: `compare` of the two builds' files, `ab` of
    the two environments (where both still exist), and a `git bisect run` recipe (empty
    where either build has no commit, or both have the same one)."""

    compare: str
    ab: str
    bisect: str


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# The bisect run's size: enough processes for the machine-speed canary to give an interval
# (with one process a side every verdict would be "machine-shift"), few values for speed.
_BISECT_PROCESSES = 3
_BISECT_VALUES = 5
_BISECT_OUTPUT = "/tmp/kscperf-bisect.json"


def confirm_commands(change: HistoryChange) -> ConfirmCommands:
    """The commands that confirm `change` (see `ConfirmCommands`). The stored files are
    named by absolute paths, so the commands work from any folder (the bisect runs in the
    repository under test)."""
    key = change.key
    cell = _quote(key.cell)
    before = _quote(os.path.abspath(change.before.file))
    after = _quote(os.path.abspath(change.after.file))
    compare = f"run-benchmarks compare {before} {after}"
    ab = (f"run-benchmarks ab -k {cell} --base-python BEFORE/bin/python "
          f"--new-python AFTER/bin/python")
    bisect = ""
    # Reruns of one commit have nothing to bisect: their difference is not in the code.
    if change.before.git_commit and change.after.git_commit and \
            change.before.git_commit != change.after.git_commit:
        bisect = (f"git bisect start {change.after.short_commit} {change.before.short_commit} "
                  f"&& git bisect run sh -c {_quote(_bisect_test(cell, before))}")
    return ConfirmCommands(compare, ab, bisect)


def _bisect_test(cell: str, before: str) -> str:
    """The shell test of one commit for `git bisect run`: exit 1 only when `compare` finds
    a regression against the build before the change; anything else that fails (the
    install, the run, a refused comparison) is 125, "cannot test this commit", so a broken
    commit is skipped rather than blamed. The run is another size than the stored build's,
    so the comparison is forced; the canary still accounts for the machine's speed."""
    out = _BISECT_OUTPUT
    return (f"rm -f {out}; pip install -q . || exit 125; "
            f"run-benchmarks run -k {cell} --processes {_BISECT_PROCESSES} "
            f"--values {_BISECT_VALUES} -o {out} -q; [ -s {out} ] || exit 125; "
            f"run-benchmarks compare {before} {out} --force --fail-on-regression "
            "|| { rc=$?; [ $rc = 1 ] && exit 1 || exit 125; }")


@dataclass(frozen=True)
class HistoryCheck:
    """What `history check` found: the newest build of each machine class, every change, and
    the regressions the newest builds opened (the check fails when there are any)."""

    newest: tuple[StoredBuild, ...]
    changes: tuple[HistoryChange, ...]
    opened: tuple[HistoryChange, ...]
    # Count regressions of the compile panel (a new graph break), `compilehistory`'s.
    compile_opened: tuple[Any, ...] = ()

    @property
    def failed(self) -> bool:
        """Whether the newest build of any machine class opened a regression."""
        return bool(self.opened) or bool(self.compile_opened)


def check_newest(store: HistoryStore, *,
                 min_effect: float = stats.DEFAULT_MIN_EFFECT) -> HistoryCheck:
    """The changes of the store, and the regressions whose first build after the change is
    the newest build of its machine class."""
    builds = store.builds()
    newest: dict[str, StoredBuild] = {}
    for b in builds:
        newest[b.machine_class] = b  # builds() is oldest first within a class
    changes = find_changes(store, min_effect=min_effect)
    opened = [c for c in changes if c.is_regression and c.after.id == newest[
        c.key.machine_class].id]
    return HistoryCheck(tuple(newest.values()), tuple(changes), tuple(opened))
