"""The history store (`kscperf.history`, `run-benchmarks history ...`) on synthetic results
files: incremental adds against a full rebuild, refusals that leave the store intact, build
order, machine classes, and the changes found over a store (planted slowdowns, environment
changes, status changes)."""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import synthetic
from kscperf import api, history
from kscperf.errors import CellStatus, KscperfError
from kscperf.views import confirm
from runner_testing import cli, explain, run_benchmarks_command, single_error_line

SMALL: dict[str, Any] = dict(models=("vrelu3",), tools=("pt", "compiled"), tasks=("fwd",),
                             configs=("1024", "16384"), processes=5)


def _build(d: Path, i: int, *, factor: float = 1.0, commit_date: str | None = None,
           machine: float = 1.0, **metadata: Any) -> str:
    """Synthetic build number `i`: run a day apart, commit `c<i>`; `factor` slows down the
    compiled tool, `machine` the whole machine (every value and the canary)."""
    overrides = {"date": f"2024-05-{i + 1:02d}T12:00:00", "git_commit": f"{i:04d}" + "c" * 36}
    if commit_date is not None:
        overrides["git_commit_date"] = commit_date
    overrides.update(metadata)
    return synthetic.write_build(
        str(d / f"b{i}.json"), f"b{i}", seed=100 + i, metadata_overrides=overrides,
        factor=lambda m, t, k, c: factor if t == "compiled" else 1.0,
        machine=lambda *k: machine, **SMALL)


def _state(store: Path) -> tuple[list[tuple[Any, ...]], list[str]]:
    with history.open_store(str(store)) as s:
        return s.index_dump(), sorted(os.listdir(store / history.BUILDS_DIR))


def test_incremental_add_gives_the_same_index_as_a_full_rebuild(tmp_path: Path) -> None:
    files = [_build(tmp_path, i) for i in range(6)]
    random.Random(1).shuffle(files)
    store = tmp_path / "store"
    api.history_add(files[:2], str(store))
    for f in files[2:]:
        api.history_add([f], str(store))
    incremental = _state(store)
    assert api.history_rebuild(str(store)) == 6
    assert _state(store) == incremental
    # The index is disposable: deleted, it comes back from the files alone.
    os.unlink(store / history.INDEX_NAME)
    assert _state(store) == incremental


def test_builds_are_in_commit_order_then_run_order(tmp_path: Path) -> None:
    # Run in another order than committed: b0 ran first but its commit is the newest.
    files = [_build(tmp_path, 0, commit_date="2024-04-10T00:00:00+02:00"),
             _build(tmp_path, 1, commit_date="2024-04-01T00:00:00+00:00"),
             _build(tmp_path, 2, commit_date="2024-04-05T00:00:00Z"),
             _build(tmp_path, 3)]  # no commit date: placed by its run date, 2024-05-04
    api.history_add(files, str(tmp_path / "store"))
    with history.open_store(str(tmp_path / "store")) as s:
        assert [b.label for b in s.builds()] == ["b1", "b2", "b0", "b3"]
        assert [b.position for b in s.builds()] == [0, 1, 2, 3]


def _plain_pyperf(path: Path, source: str) -> None:
    doc = json.loads(Path(source).read_text())
    del doc["kscperf"]
    path.write_text(json.dumps(doc))


def _incomplete(path: Path, source: str) -> None:
    doc = json.loads(Path(source).read_text())
    doc["kscperf"]["complete"] = False
    path.write_text(json.dumps(doc))


_BAD_FILES = {
    "not-json": lambda p, src: p.write_text("this is not JSON\n"),
    "truncated": lambda p, src: p.write_text(Path(src).read_text()[:500]),
    "foreign-json": lambda p, src: p.write_text('{"name": "a package.json"}'),
    "plain-pyperf": _plain_pyperf,
    "incomplete": _incomplete,
    "duplicate": lambda p, src: shutil.copy(src, p),
    "same-label": lambda p, src: Path(_build(p.parent / "again", 0, factor=2.0)).rename(p),
}


@pytest.mark.integration
@pytest.mark.parametrize("what", sorted(_BAD_FILES))
def test_bad_or_foreign_files_are_refused_with_one_line_and_the_store_is_intact(
        tmp_path: Path, what: str) -> None:
    store = tmp_path / "store"
    first = _build(tmp_path, 0)
    assert cli("history", "add", first, _build(tmp_path, 1), "--store", store).returncode == 0
    before = _state(store)
    (tmp_path / "again").mkdir()
    bad = tmp_path / f"{what}.json"
    _BAD_FILES[what](bad, first)
    # Given with a good file: all or none, so the good one is not added either.
    line = single_error_line(cli("history", "add", _build(tmp_path, 2), bad, "--store", store))
    assert str(bad) in line
    assert _state(store) == before


@pytest.mark.integration
def test_a_store_is_never_made_in_a_folder_that_is_not_one(tmp_path: Path) -> None:
    (tmp_path / "stuff").mkdir()
    (tmp_path / "stuff" / "notes.txt").write_text("mine")
    with pytest.raises(KscperfError, match="not a history store"):
        api.history_add([_build(tmp_path, 0)], str(tmp_path / "stuff"))
    assert os.listdir(tmp_path / "stuff") == ["notes.txt"]
    for command in ("changes", "check", "rebuild"):
        line = single_error_line(cli("history", command, "--store", tmp_path / "nothing"))
        assert "not a history store" in line
    assert not (tmp_path / "nothing").exists()


def test_each_machine_class_has_its_own_series(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    api.history_add([_build(tmp_path, 0), _build(tmp_path, 1)], store)
    other = _build(tmp_path, 2, hostname="perf2")
    api.history_add([other], store)
    forced = _build(tmp_path, 3, hostname="perf3")
    api.history_add([forced], store, machine="perf1")  # an identical machine of the class
    with history.open_store(store) as s:
        assert s.machine_classes() == ["perf1", "perf2"]
        assert [b.label for b in s.builds("perf1")] == ["b0", "b1", "b3"]
        series = [x for x in s.series() if x.key.benchmark == "vrelu3/pt/fwd/1024"
                  and x.key.kind == "time"]
        assert sorted((x.key.machine_class, len(x.points)) for x in series) == [
            ("perf1", 3), ("perf2", 1)]
        dump = s.index_dump()
    api.history_rebuild(store)  # the class given with --machine survives a rebuild
    assert _state(Path(store))[0] == dump


def test_series_hold_per_process_medians_statuses_and_missing_builds(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    files = [_build(tmp_path, 0),
             synthetic.write_build(
                 str(tmp_path / "b1.json"), "b1", seed=5,
                 metadata_overrides={"date": "2024-05-02T12:00:00"},
                 status=lambda m, t, k, c: (CellStatus.INCORRECT if (t, c) == ("compiled", "1024")
                                            else CellStatus.OK), **SMALL),
             synthetic.write_build(
                 str(tmp_path / "b2.json"), "b2", seed=6,
                 metadata_overrides={"date": "2024-05-03T12:00:00"},
                 **dict(SMALL, configs=("1024",)))]
    api.history_add(files, store)
    with history.open_store(store) as s:
        by_name = {(x.key.benchmark, x.key.kind): x for x in s.series()}
    compiled = by_name["vrelu3/compiled/fwd/1024", "time"]
    assert [p.status for p in compiled.points] == ["ok", "incorrect", "ok"]
    assert all(len(p.samples) == 5 for p in compiled.points)  # one median per process
    assert compiled.points[0].min_detectable is not None
    gone = by_name["vrelu3/pt/fwd/16384", "time"]
    assert [p.status for p in gone.points] == ["ok", "ok", "not run"]
    assert gone.points[2].samples == ()
    assert {k for _, k in by_name} == {"time", "prep", "peak_rss", "compile"}


# --------------------------------------------------------------------------------------
# Changes over the store (kscperf.stats.changepoints does the statistics)
# --------------------------------------------------------------------------------------

def _history(tmp_path: Path, n: int, **per_build: Any) -> str:
    """A store of `n` builds; `per_build[name](i)` gives build i's keyword `name`."""
    store = str(tmp_path / "store")
    files = [_build(tmp_path, i, **{k: f(i) for k, f in per_build.items()}) for i in range(n)]
    api.history_add(files, store)
    return store


@pytest.mark.integration
def test_a_planted_slowdown_is_found_at_its_build_and_nothing_else(tmp_path: Path) -> None:
    store = _history(tmp_path, 10, factor=lambda i: 1.3 if i >= 5 else 1.0)
    changes = api.history_changes(store)
    timed = [c for c in changes if c.key.kind == "time"]
    assert {c.key.benchmark for c in timed} == {"vrelu3/compiled/fwd/1024",
                                                "vrelu3/compiled/fwd/16384"}, changes
    for c in timed:
        assert (c.kind, c.before.label, c.after.label) == ("slower", "b4", "b5")
        assert c.is_regression and 1.2 < c.change.ratio < 1.4
        assert c.change.low <= c.change.ratio <= c.change.high
    assert all(c.key.tool == "compiled" for c in changes), changes
    proc = cli("history", "changes", "--store", store, "--format", "json")
    assert proc.returncode == 0, explain(proc)
    listed = json.loads(proc.stdout)
    assert {(e["change"], e["before"]["build"], e["after"]["build"]) for e in listed
            if e["kind"] == "time"} == {("slower", "b4", "b5")}
    markdown = cli("history", "changes", "--store", store, "--format", "markdown")
    assert "| slower | vrelu3/compiled/fwd/1024 | time | b4 (0004cccccccc) |" in markdown.stdout


@pytest.mark.integration
def test_an_environment_change_is_an_event_never_a_regression(tmp_path: Path) -> None:
    # The new torch is 30 % slower for the compiled tool: the environment, not build b5.
    store = _history(tmp_path, 10, factor=lambda i: 1.3 if i >= 5 else 1.0,
                     torch_version=lambda i: "2.14.0" if i >= 5 else "2.13.0")
    changes = api.history_changes(store)
    assert changes and not any(c.is_regression for c in changes), changes
    events = [c for c in changes if c.kind == "environment"]
    # One event per machine class and pair of builds, over every series it touched.
    assert len(events) == 1 and (events[0].before.label, events[0].after.label) == ("b4", "b5")
    assert events[0].detail == "torch_version 2.13.0 -> 2.14.0"
    assert events[0].key.benchmark == "all 13 series"
    check = cli("history", "check", "--store", store)
    assert check.returncode == 0, explain(check)


def test_a_new_kscperf_is_an_environment_event_never_a_regression(tmp_path: Path) -> None:
    # From b5 on the harness is another kscperf (its version is the same, its code is not),
    # and the compiled tool times 30 % slower under it: the harness's doing, not b5's.
    store = _history(tmp_path, 10, factor=lambda i: 1.3 if i >= 5 else 1.0,
                     kscperf_source=lambda i: "sha256:" + ("b" if i >= 5 else "a") * 16)
    changes = api.history_changes(store)
    assert changes and not any(c.is_regression for c in changes), changes
    events = [c for c in changes if c.kind == "environment"]
    assert [(e.before.label, e.after.label, e.detail) for e in events] == [
        ("b4", "b5", f"kscperf_source sha256:{'a' * 16} -> sha256:{'b' * 16}")]


@pytest.mark.integration
def test_a_machine_that_changed_speed_is_an_event_never_a_regression(tmp_path: Path) -> None:
    # From b5 on, the whole machine ran 1.4x slower: its canary says so, no build is to blame.
    store = _history(tmp_path, 10, machine=lambda i: 1.4 if i >= 5 else 1.0)
    changes = api.history_changes(store)
    assert not any(c.is_regression for c in changes), changes
    assert [(c.kind, c.before.label, c.after.label, c.detail) for c in changes] == [
        ("environment", "b4", "b5", history.MACHINE_SPEED_DETAIL)]
    with history.open_store(store) as s:
        assert all(b.machine_scores for b in s.builds())
    assert cli("history", "check", "--store", store).returncode == 0


def test_builds_without_a_canary_are_not_a_machine_change(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    files = [_build(tmp_path, i) for i in range(4)]
    old = tmp_path / "old"
    old.mkdir()
    files.append(synthetic.write_build(
        str(old / "b4.json"), "b4", seed=104, canary=False,
        metadata_overrides={"date": "2024-05-05T12:00:00", "git_commit": "0004" + "c" * 36},
        **SMALL))
    api.history_add(files, store)
    assert api.history_changes(store) == []
    with history.open_store(store) as s:
        assert [b.machine_scores is None for b in s.builds()] == [False] * 4 + [True]


@pytest.mark.integration
def test_history_check_fails_when_the_newest_build_opens_a_regression(tmp_path: Path) -> None:
    quiet = _history(tmp_path / "quiet", 8)
    ok = cli("history", "check", "--store", quiet)
    assert ok.returncode == 0, explain(ok)
    assert "No regression opened by the newest build." in ok.stdout
    broken = synthetic.write_build(
        str(tmp_path / "quiet" / "b8.json"), "b8", seed=9, **SMALL,
        metadata_overrides={"date": "2024-05-09T12:00:00", "git_commit": "0008" + "c" * 36},
        status=lambda m, t, k, c: CellStatus.INCORRECT if t == "compiled" else CellStatus.OK)
    api.history_add([broken], quiet)
    failed = cli("history", "check", "--store", quiet)
    assert failed.returncode == 1, explain(failed)
    assert "regression(s) opened by the newest build" in failed.stdout
    assert "status ok -&gt; incorrect" in failed.stdout or "status ok -> incorrect" in \
        failed.stdout
    assert "run-benchmarks compare" in failed.stdout and "run-benchmarks bisect" in failed.stdout


@pytest.mark.integration
def test_a_regression_that_comes_with_a_small_machine_change_is_still_found(
        tmp_path: Path) -> None:
    # b6 is 50 % slower for the compiled tool while the machine is 5 % slower: 5 % cannot
    # explain 50 %, so the step is the build's.
    store = _history(tmp_path, 7, factor=lambda i: 1.5 if i == 6 else 1.0,
                     machine=lambda i: 1.05 if i == 6 else 1.0)
    slower = [c for c in api.history_changes(store) if c.kind == "slower"]
    assert {(c.key.benchmark, c.key.kind, c.after.label) for c in slower} >= {
        ("vrelu3/compiled/fwd/1024", "time", "b6"), ("vrelu3/compiled/fwd/16384", "time", "b6")}
    check = cli("history", "check", "--store", store)
    assert check.returncode == 1, explain(check)


def test_a_wobbling_machine_does_not_hide_a_step(tmp_path: Path) -> None:
    store = _history(tmp_path, 12, factor=lambda i: 1.3 if i >= 6 else 1.0,
                     machine=lambda i: 1.05 if i % 2 else 1.0)
    changes = api.history_changes(store)
    timed = {(c.key.benchmark, c.kind, c.before.label, c.after.label) for c in changes
             if c.key.kind == "time" and c.kind in ("slower", "faster")}
    assert timed == {("vrelu3/compiled/fwd/1024", "slower", "b5", "b6"),
                     ("vrelu3/compiled/fwd/16384", "slower", "b5", "b6")}, changes


@pytest.mark.integration
def test_a_cell_that_crashes_before_its_configs_is_a_regression(tmp_path: Path) -> None:
    store = _history(tmp_path, 6)
    crashed = synthetic.write_build(
        str(tmp_path / "b6.json"), "b6", seed=106, **SMALL,
        metadata_overrides={"date": "2024-05-07T12:00:00", "git_commit": "0006" + "c" * 36},
        cell_status=lambda m, t, k: CellStatus.CRASHED if t == "pt" else None)
    api.history_add([crashed], store)
    with history.open_store(store) as s:
        pt = [x for x in s.series() if x.key.benchmark == "vrelu3/pt/fwd/1024"
              and x.key.kind == "time"]
    assert [p.status for p in pt[0].points][-2:] == ["ok", "crashed"]
    check = cli("history", "check", "--store", store)
    assert check.returncode == 1, explain(check)
    opened = api.history_check(store).opened
    assert {(c.key.benchmark, c.after_status) for c in opened} == {
        ("vrelu3/pt/fwd/1024", "crashed"), ("vrelu3/pt/fwd/16384", "crashed")}, opened


@pytest.mark.integration
def test_two_copies_of_one_build_in_the_store_are_one_line_naming_both(tmp_path: Path) -> None:
    store = _history(tmp_path, 2)
    builds = store + "/" + history.BUILDS_DIR
    stored = sorted(n for n in os.listdir(builds) if n.endswith(".json"))[0]
    shutil.copy(os.path.join(builds, stored), os.path.join(builds, "copy.json"))
    os.unlink(os.path.join(store, history.INDEX_NAME))
    line = single_error_line(cli("history", "changes", "--store", store))
    assert stored in line and "copy.json" in line


@pytest.mark.integration
def test_the_same_file_given_twice_is_refused_and_the_store_is_intact(tmp_path: Path) -> None:
    store = _history(tmp_path, 2)
    before = _state(Path(store))
    # The same file twice in one add: refused, and nothing is left under builds/.
    again = _build(tmp_path, 2)
    line = single_error_line(cli("history", "add", again, again, "--store", store))
    assert "given twice" in line
    assert _state(Path(store)) == before
    assert api.history_rebuild(store) == 2


@pytest.mark.integration
def test_concurrent_adds_of_one_file_add_it_once(tmp_path: Path) -> None:
    store = _history(tmp_path, 2)
    new = _build(tmp_path, 2)
    command = run_benchmarks_command() + ["history", "add", new, "--store", store]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outcomes = sorted((p.wait(timeout=120), p.communicate()) for p in procs)
    assert [rc for rc, _ in outcomes] == [0, 2], outcomes
    _, (_, stderr) = outcomes[1]
    assert "Traceback" not in stderr and len(stderr.splitlines()) == 1, stderr
    assert new in stderr
    dump, files = _state(Path(store))
    assert api.history_rebuild(store) == 3
    assert _state(Path(store)) == (dump, files)
    assert len([f for f in files if f.endswith(".json")]) == 3


@pytest.mark.integration
def test_the_bisect_command_names_the_commits_the_cell_and_where_the_code_came_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _history(tmp_path, 8, factor=lambda i: 1.3 if i >= 5 else 1.0)
    monkeypatch.chdir(tmp_path)
    changes = api.history_changes("store")  # a relative store path
    slower = next(c for c in changes if c.kind == "slower")
    commands = confirm.confirm_commands(slower)
    assert str(tmp_path / "store" / history.BUILDS_DIR) in commands.compare
    # Files that do not say where their code came from: placeholders, and a venv build.
    words = shlex.split(commands.bisect)
    assert words[:9] == ["run-benchmarks", "bisect", "--repo", "REPO", "--good", "0004cccccccc",
                         "--bad", "0005cccccccc", "-k"]
    assert words[9] == slower.key.cell and words[-1] == "PATH"
    assert words[words.index("--python") + 1] == ".venv/bin/python"
    assert "pip install -q --no-deps ." in words[words.index("--build-cmd") + 1]
    # A package read from its checkout: the checkout on the workers' PYTHONPATH.
    read = confirm.bisect_command("a" * 40, "b" * 40, "m/pt/bwd", {
        "git_toplevel": "/src/my repo", "definition_paths": "bench/m.py extra",
        "source_on_pythonpath": 1, "source_python": "/usr/bin/python3"})
    assert shlex.split(read) == [
        "run-benchmarks", "bisect", "--repo", "/src/my repo", "--good", "a" * 12, "--bad",
        "b" * 12, "-k", "m/pt/bwd", "--env", "PYTHONPATH={checkout}", "bench/m.py", "extra"]


@pytest.mark.integration
def test_a_refused_first_add_leaves_no_store_behind(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("this is not JSON\n")
    line = single_error_line(cli("history", "add", bad, "--store", tmp_path / "new"))
    assert str(bad) in line
    assert not (tmp_path / "new").exists()


def test_a_series_too_noisy_to_see_the_minimum_effect_says_so(tmp_path: Path) -> None:
    # The compiled tool's builds scatter by 15 %: ten builds against ten cannot see 5 %.
    rng = random.Random(3)
    scatter = [rng.lognormvariate(0.0, 0.15) for _ in range(14)]
    store = _history(tmp_path, 14, factor=lambda i: scatter[i])
    proc = cli("history", "changes", "--store", store, "--format", "json")
    assert proc.returncode == 0, explain(proc)
    listed = json.loads(proc.stdout)
    blind = {e["benchmark"] for e in listed if e["change"] == "too-noisy" and e["kind"] == "time"}
    assert blind == {"vrelu3/compiled/fwd/1024", "vrelu3/compiled/fwd/16384"}, listed
    assert all(e["detectable_step"] > 0.05 for e in listed if e["change"] == "too-noisy")
    assert all("detectable_step" in e for e in listed)
    with history.open_store(store) as opened:
        sights = history.detectable_steps(opened, list(opened.series(kinds=("time",))))
    quiet = {k.benchmark: v for k, v in sights.items() if k.tool == "pt"}
    assert quiet and all(0 < v < 0.05 for v in quiet.values()), sights
    front = Path(api.build_dashboard(store, str(tmp_path / "site"))).read_text()
    assert "series are too noisy to see a 5% step" in front


@pytest.mark.integration
def test_a_newest_build_timed_through_a_disturbance_waits_and_says_so(tmp_path: Path) -> None:
    # Every process of the newest build ran 1.35-1.62x slow, each by its own amount, and no
    # canary saw it: no step opens, each run-time series says its newest build is unsettled,
    # and the check passes. The next build, back at the usual level, settles it.
    store = _history(tmp_path, 8)
    slow = (1.35, 1.62, 1.48, 1.55, 1.41)
    disturbed = synthetic.write_build(
        str(tmp_path / "b8.json"), "b8", seed=108, canary=False, **SMALL,
        metadata_overrides={"date": "2024-05-09T12:00:00", "git_commit": "0008" + "c" * 36},
        machine=lambda m, t, k, p: slow[p])
    api.history_add([disturbed], store)
    changes = api.history_changes(store)
    timed = [c for c in changes if c.key.kind == "time"]
    assert timed and {c.kind for c in timed} == {history.ChangeKind.UNSETTLED}, changes
    assert {c.after.label for c in timed} == {"b8"}
    assert not any(c.is_regression for c in changes), changes
    listed = json.loads(cli("history", "changes", "--store", store, "--format", "json").stdout)
    assert {e["change"] for e in listed if e["kind"] == "time"} == {"unsettled"}
    check = cli("history", "check", "--store", store)
    assert check.returncode == 0, explain(check)
    api.history_add([_build(tmp_path, 9)], store)
    assert not [c for c in api.history_changes(store) if c.key.kind == "time"]


def _concurrent_adds(files: list[str], store: str, kill_first_at: str | None = None
                     ) -> list[tuple[int, str]]:
    """`history add FILE --store STORE` for every file at once, each its own process, the
    first killed at the named point of its add when `kill_first_at` is given: (exit
    status, stderr) of each, in the order of `files`."""
    procs = []
    for i, path in enumerate(files):
        env = dict(os.environ)
        if i == 0 and kill_first_at:
            env["KSCPERF_HISTORY_KILL_AT"] = kill_first_at
        procs.append(subprocess.Popen(run_benchmarks_command() + ["history", "add", path,
                                                                  "--store", store],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env))
    return [(p.wait(timeout=300), p.communicate()[1]) for p in procs]


def _unlisted_files(store: str) -> list[str]:
    """The files under the store's builds/ that its index does not list (none may exist)."""
    with history.open_store(store) as opened:
        listed = {os.path.basename(b.file) for b in opened.builds()}
    return sorted(set(os.listdir(os.path.join(store, history.BUILDS_DIR))) - listed)


@pytest.mark.integration
def test_nine_adds_at_once_into_a_new_store_all_land(tmp_path: Path) -> None:
    files = [_build(tmp_path, i) for i in range(9)]
    store = str(tmp_path / "new-store")
    outcomes = _concurrent_adds(files, store)
    assert [rc for rc, _ in outcomes] == [0] * 9, outcomes
    assert api.history_rebuild(store) == 9
    assert _unlisted_files(store) == []
    with history.open_store(store) as opened:
        assert [b.label for b in opened.builds()] == [f"b{i}" for i in range(9)]


@pytest.mark.integration
def test_an_add_killed_among_concurrent_ones_leaves_no_file_the_index_does_not_list(
        tmp_path: Path) -> None:
    files = [_build(tmp_path, i) for i in range(6)]
    store = str(tmp_path / "new-store")
    outcomes = _concurrent_adds(files, store, kill_first_at="copied")
    assert outcomes[0][0] == -9 and [rc for rc, _ in outcomes[1:]] == [0] * 5, outcomes
    # The killed add's copy carries a temporary name (never read as a build); the next add
    # removes it, and the killed file can then be added.
    assert all(".adding-" in name for name in _unlisted_files(store))
    assert api.history_add([files[0]], store)
    assert _unlisted_files(store) == []
    assert api.history_rebuild(store) == 6


def test_the_next_add_removes_what_an_add_killed_mid_write_left(tmp_path: Path) -> None:
    # Killed while writing a copy, an add leaves a half-written file under its temporary
    # name (its process gone); a version before 2026-12-04 left the atomic writer's own
    # temporary file instead, which names no process. The next add removes both; a file
    # of an add still running (this process) and the store's builds stay.
    store = str(tmp_path / "store")
    api.history_add([_build(tmp_path, 0)], store)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    builds = os.path.join(store, history.BUILDS_DIR)
    half_written = f"b9.json.adding-{dead.pid}"
    running = f"b8.json.adding-{os.getpid()}"
    for name in (half_written, ".kscperf-k3x_9q.tmp", running):
        with open(os.path.join(builds, name), "wb") as fp:
            fp.write(b'{"version": "1.0", "benchm')
    assert api.history_add([_build(tmp_path, 1)], store)
    assert _unlisted_files(store) == [running]
    with history.open_store(store) as opened:
        assert [b.label for b in opened.builds()] == ["b0", "b1"]


def test_a_store_held_open_is_not_removed_as_empty(tmp_path: Path) -> None:
    # A refused first add removes the store it made, unless another add has it open.
    store = str(tmp_path / "store")
    with history.open_store(store, create=True):
        history.remove_empty_store(store)
        assert os.path.isdir(os.path.join(store, history.BUILDS_DIR))
    history.remove_empty_store(store)
    assert not os.path.exists(store)
