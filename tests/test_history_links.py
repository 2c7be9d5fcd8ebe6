"""Lockstep links in the history store (`kscperf.history.links`): adding an `ab` folder,
refusals that write nothing, links rebuilt from the stored files, the step policy on links
(a step the drifting levels cannot see, an environment event across environments), the
chained timeline, and a `history add` killed with SIGKILL at named points and at random
moments. The `ab` folders are synthetic results files with the metadata `ab` writes; the
nightly examples (tests/test_examples.py) add real ones."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import synthetic
from kscperf import api, history
from kscperf.history import changes, journal, links
from kscperf.stats import changepoints, core as stats
from runner_testing import cli, explain, run_benchmarks_command, single_error_line

SMALL: dict[str, Any] = dict(models=("vrelu3",), tools=("pt", "compiled"), tasks=("fwd",),
                             configs=("1024", "16384"), processes=3)


def _metadata(i: int, **overrides: Any) -> dict[str, Any]:
    md = {"date": f"2024-05-{i + 1:02d}T12:00:00", "git_commit": f"{i:04d}" + "c" * 36}
    md.update(overrides)
    return md


def _plain(d: Path, i: int) -> str:
    return synthetic.write_build(str(d / f"b{i}.json"), f"b{i}", seed=100 + i,
                                 metadata_overrides=_metadata(i), **SMALL)


def _ab_folder(d: Path, base: int, new: int, *, factor: float = 1.0, seed: int = 0,
               drift: float = 1.0, new_metadata: dict[str, Any] | None = None,
               base_label: str | None = None, processes: int = 3) -> str:
    """The folder `ab` would write for build `base` against build `new`: `factor` slows the
    new build's compiled tool; `drift` is how much slower the machine ran during this `ab`
    run than usual, and its processes differ from each other by up to 1.5x, alike on both
    sides (as lockstep turns make them)."""
    per_process = [1.0, 1.5, 0.8, 1.2, 1.1]
    return synthetic.write_ab_folder(
        str(d / f"ab-{new}"), base_label or f"b{base}", f"b{new}", seed=seed,
        base_metadata=_metadata(new), new_metadata={**_metadata(new), **(new_metadata or {})},
        new_factor=lambda m, t, k, c: factor if t == "compiled" else 1.0,
        machine=lambda m, t, k, p: drift * per_process[p % len(per_process)],
        **{**SMALL, "processes": processes})


def _state(store: Path) -> tuple[list[tuple[Any, ...]], list[str]]:
    with history.open_store(str(store)) as s:
        dump = s.index_dump()
    names = sorted(os.listdir(store / history.BUILDS_DIR))
    if (store / links.LINKS_DIR).is_dir():
        names += [f"links/{n}" for n in sorted(os.listdir(store / links.LINKS_DIR))]
    return dump, names


def _rebuilt_dump(store: Path, scratch: Path) -> list[tuple[Any, ...]]:
    """The index a rebuild makes from a copy of the store's files."""
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(store, scratch)
    os.unlink(scratch / history.INDEX_NAME)
    with history.rebuild_index(str(scratch)) as s:
        return s.index_dump()


def test_an_ab_folder_adds_the_new_build_and_a_link_the_index_rebuilds(tmp_path: Path) -> None:
    store = tmp_path / "store"
    api.history_add([_plain(tmp_path, 0)], str(store))
    added = api.history_add([_ab_folder(tmp_path, 0, 1, factor=1.1)], str(store))
    assert [b.label for b in added] == ["b1"]
    with history.open_store(str(store)) as s:
        (b0, b1) = s.builds()
        found = s.links(b1.machine_class)
    # A link per benchmark and kind: a series without one would be judged on levels from
    # separate runs.
    with history.open_store(str(store)) as s:
        series = {(str(x.key.kind), x.key.benchmark) for x in s.series(b1.machine_class)}
    assert set(found) == series
    assert {k for k, _ in found} >= {"time", "compile", "prep"}
    compiled = found[("time", "vrelu3/compiled/fwd/1024")][b1.id]
    assert (compiled.base_id, compiled.new_id, compiled.method) == (b0.id, b1.id, "pairs")
    assert compiled.n_pairs == 3 and compiled.low < compiled.ratio < compiled.high
    assert 1.08 < compiled.ratio < 1.12 and compiled.p_value < 0.01
    assert 0.98 < found[("time", "vrelu3/pt/fwd/1024")][b1.id].ratio < 1.02
    assert (store / links.LINKS_DIR / os.path.basename(b1.file)).is_file()
    assert _rebuilt_dump(store, tmp_path / "copy") == _state(store)[0]
    os.unlink(store / history.INDEX_NAME)  # the index comes back from the files alone
    assert _state(store)[0] == _rebuilt_dump(store, tmp_path / "copy")


@pytest.mark.integration
@pytest.mark.parametrize("case", ["base not stored", "not an ab folder", "two runs"])
def test_a_bad_ab_folder_is_refused_in_one_line_and_nothing_is_written(
        tmp_path: Path, case: str) -> None:
    store = tmp_path / "store"
    api.history_add([_plain(tmp_path, 0)], str(store))
    before = _state(store)
    if case == "base not stored":
        folder = _ab_folder(tmp_path, 0, 1, base_label="b-gone")
        expected = "'b-gone', which the store"
    elif case == "not an ab folder":
        folder = str(tmp_path / "plain")
        os.mkdir(folder)
        _plain(Path(folder), 1)
        expected = "is not a folder written by run-benchmarks ab"
    else:
        folder = _ab_folder(tmp_path, 0, 1)
        other = _ab_folder(tmp_path, 0, 2)
        os.replace(os.path.join(other, "b2.json"), os.path.join(folder, "b2.json"))
        expected = "is not a folder written by run-benchmarks ab"
    proc = cli("history", "add", folder, "--store", store)
    assert proc.returncode == 2, explain(proc)
    assert expected in single_error_line(proc)
    assert _state(store) == before


def _drifting_history(tmp_path: Path, *, step_at: int, builds: int = 8) -> Path:
    """b0 alone, then b1... each in lockstep with the one before, the machine 1.0x or 1.35x
    slow per night at random; the compiled tool 20 % slower from `step_at` on. Six pairs a
    link: every link of every series is a test of the false discovery control, and with
    three pairs (2 degrees of freedom) no single night could pass it."""
    store = tmp_path / "store"
    api.history_add([_plain(tmp_path, 0)], str(store))
    rng = random.Random(7)
    drift = [1.0] + [rng.choice((1.0, 1.35)) for _ in range(builds)]
    for n in range(1, builds):
        factor = 1.2 if n == step_at else 1.0  # the link measures n against n-1
        api.history_add([_ab_folder(tmp_path, n - 1, n, factor=factor, seed=10 * n,
                                    drift=drift[n], processes=6)], str(store))
    return store


def test_a_link_finds_the_step_at_its_build_and_the_machine_blames_no_one(
        tmp_path: Path) -> None:
    store = _drifting_history(tmp_path, step_at=4)
    changes = api.history_changes(str(store))
    described = sorted((c.kind, c.key.kind, c.key.benchmark, c.before.label, c.after.label)
                       for c in changes)
    assert described == [("slower", "time", f"vrelu3/compiled/fwd/{c}", "b3", "b4")
                         for c in ("1024", "16384")], described
    assert all(c.change.detail == links.LINK_DETAIL for c in changes)


def test_a_link_across_environments_is_an_environment_event_never_a_regression(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    api.history_add([_plain(tmp_path, 0)], str(store))
    api.history_add([_ab_folder(tmp_path, 0, 1, factor=1.3,
                                new_metadata={"torch_version": "2.14.0"})], str(store))
    changes = api.history_changes(str(store))
    assert sorted(c.kind for c in changes) == ["ab-only", "ab-only", "environment"]
    (environment,) = [c for c in changes if c.kind == "environment"]
    assert "torch_version 2.13.0 -> 2.14.0" in environment.detail
    assert not any(c.is_regression for c in changes)
    # What the night's ab said (compiled 1.3x slower) is listed, with why it is no step.
    for c in changes:
        if c.kind == "ab-only":
            assert c.key.tool == "compiled" and c.ab_verdict == "slower"
            assert "crosses an environment change (torch_version 2.13.0 -> 2.14.0)" in c.differs


def _series(n: int) -> history.Series:
    builds = [history.StoredBuild(i, f"b{i}", f"b{i}.json", "m", "", False, "", "", {}, None, i)
              for i in range(n)]
    key = history.SeriesKey("m", "time", "x/pt/fwd/1", "x", "pt", "fwd", "1")
    return history.Series(key, tuple(history.SeriesPoint(b, "ok", (1.0,), 1.0, 0.0, None)
                                     for b in builds))


def _link(base: int, new: int, ratio: float, se_log: float = 0.01,
          environment: str = "") -> links.Link:
    spread = 1.96 * se_log
    return links.Link(base, new, ratio, ratio * math.exp(-spread), ratio * math.exp(spread),
                      0.001, se_log, 3, "pairs", environment)


def test_the_chained_timeline_multiplies_links_and_its_interval_grows() -> None:
    series = _series(6)
    # No link into build 3: a new chain starts there; the link into 5 crosses environments.
    by_new = {1: _link(0, 1, 1.10), 2: _link(1, 2, 1.0), 4: _link(3, 4, 0.9),
              5: _link(4, 5, 1.2, environment="torch_version a -> b")}
    chains = links.chained_timeline(series, by_new)
    assert [[p.position for p in c] for c in chains] == [[0, 1, 2], [3, 4]]
    first = chains[0]
    assert [round(p.level, 6) for p in first] == [1.0, 1.1, 1.1]
    widths = [p.high / p.low for p in first]
    assert widths[0] == 1.0 < widths[1] < widths[2]
    assert all(p.low <= p.level <= p.high for c in chains for p in c)


def test_link_changes_leave_small_and_status_changing_links_alone() -> None:
    series = _series(4)
    points = list(series.points)
    points[3] = history.SeriesPoint(points[3].build, "incorrect", (1.0,), 1.0, 0.0, None)
    series = history.Series(series.key, tuple(points))
    by_new = {1: _link(0, 1, 1.03), 2: _link(1, 2, 0.8), 3: _link(2, 3, 1.5)}
    changes, covered = links.link_changes(series, by_new, min_effect=0.05)
    assert set(covered) == {1, 2, 3}
    assert [(c.kind, c.before, c.after) for c in changes] == [("faster", 1, 2)]


def test_a_link_is_a_step_by_the_rule_of_the_levels_steps() -> None:
    series = _series(12)
    # Six quiet nights, then five significant links (p 0.001): 2 % is a real change below
    # the minimum effect; 7 % and 30 % are steps; 4.9 % with se 1 % comes within half a
    # standard error of 5 %; 4.5 % measured to 0.1 % is shown to be below it.
    quiet = {b: _link(b - 1, b, r) for b, r in zip(range(1, 7),
                                                   (1.001, 0.999, 1.002, 0.998, 1.0, 1.001))}
    tested = {7: _link(6, 7, 1.02), 8: _link(7, 8, 1.07), 9: _link(8, 9, 1.30),
              10: _link(9, 10, 1.049), 11: _link(10, 11, 1.045, se_log=0.001)}
    changes, _ = links.link_changes(series, {**quiet, **tested}, min_effect=0.05)
    assert [c.after for c in changes] == [8, 9, 10]
    for c in changes:
        estimate = stats.RatioEstimate(c.ratio, c.low, c.high, c.p_value, 0.01, 2.0, "pairs",
                                       3, 3)
        assert changepoints.step_direction(estimate, min_effect=0.05) == 1


# ---- killed adds ------------------------------------------------------------------------

def _add_command(store: Path, path: str) -> list[str]:
    return [*run_benchmarks_command(), "history", "add", path, "--store", str(store)]


def _check_after_kill(store: Path, scratch: Path, must_hold: list[str]) -> list[str]:
    """The store opens, equals its rebuild and holds every build reported added; return its
    labels."""
    dump, _ = _state(store)
    assert dump == _rebuilt_dump(store, scratch)
    with history.open_store(str(store)) as s:
        labels = [b.label for b in s.builds()]
    assert set(must_hold) <= set(labels), labels
    return labels


@pytest.mark.integration
@pytest.mark.parametrize("point", ["copied", "committed", "renamed-one", "renamed"])
def test_an_add_killed_at_a_named_point_leaves_a_store_equal_to_its_rebuild(
        tmp_path: Path, point: str) -> None:
    store = tmp_path / "store"
    api.history_add([_plain(tmp_path, 0)], str(store))
    folder = _ab_folder(tmp_path, 0, 1)
    proc = subprocess.run(_add_command(store, folder), capture_output=True, text=True,
                          env={**os.environ, journal.KILL_AT_VARIABLE: point})
    assert proc.returncode == -signal.SIGKILL, explain(proc)
    labels = _check_after_kill(store, tmp_path / "copy", ["b0"])
    # Killed before its commit the add never happened; after it, the open finished it.
    assert labels == (["b0"] if point == "copied" else ["b0", "b1"])
    if point == "copied":
        assert any(".adding-" in n for n in os.listdir(store / history.BUILDS_DIR))
        api.history_add([folder], str(store))  # the retry succeeds and cleans up
    leftovers = [n for d in (history.BUILDS_DIR, links.LINKS_DIR)
                 for n in os.listdir(store / d) if not n.endswith(".json")]
    assert leftovers == []
    assert _check_after_kill(store, tmp_path / "copy", ["b0", "b1"]) == ["b0", "b1"]


@pytest.mark.integration
def test_adds_killed_at_random_moments_never_break_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    api.history_add([_plain(tmp_path, 0)], str(store))
    started = time.monotonic()
    api.history_add([_ab_folder(tmp_path, 0, 1)], str(store))
    one_add_s = time.monotonic() - started + 1.5  # plus the command's start
    rng = random.Random(2)
    held = ["b0", "b1"]
    for n in range(2, 8):
        folder = _ab_folder(tmp_path, n - 1, n, seed=n)
        proc = subprocess.Popen(_add_command(store, folder), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.2, one_add_s))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        if proc.returncode == 0:
            held.append(f"b{n}")  # reported added before the kill came
        held = _check_after_kill(store, tmp_path / "copy", held)
        if f"b{n}" not in held:  # the next add of the same folder succeeds
            api.history_add([folder], str(store))
            held = _check_after_kill(store, tmp_path / "copy", [*held, f"b{n}"])
    assert held == [f"b{n}" for n in range(8)]
    leftovers = [n for d in (history.BUILDS_DIR, links.LINKS_DIR)
                 for n in os.listdir(store / d) if not n.endswith(".json")]
    assert leftovers == []


def test_a_link_is_held_to_the_scatter_of_its_series_links() -> None:
    # Six nights of one series whose links, each tight, scatter by about 8 % from night to
    # night (a single-shot kind such as prep on a busy machine): a tight 1.10 there is
    # within that scatter, and no step; in a series whose links agree, it is one.
    scattered = {1: _link(0, 1, 1.08, 0.005), 2: _link(1, 2, 0.92, 0.005),
                 3: _link(2, 3, 1.10, 0.005), 4: _link(3, 4, 0.93, 0.005),
                 5: _link(4, 5, 1.06, 0.005)}
    assert links.link_scatter(list(scattered.values())) > 0.05
    changes, _ = links.link_changes(_series(6), scattered, min_effect=0.05)
    assert changes == []
    agreeing = {1: _link(0, 1, 1.004, 0.005), 2: _link(1, 2, 0.997, 0.005),
                3: _link(2, 3, 1.10, 0.005), 4: _link(3, 4, 1.002, 0.005),
                5: _link(4, 5, 0.999, 0.005)}
    assert links.link_scatter(list(agreeing.values())) < 0.01
    changes, _ = links.link_changes(_series(6), agreeing, min_effect=0.05)
    assert [(c.kind, c.after) for c in changes] == [("slower", 3)]
    # Too few links to estimate a scatter: each link is held to its own interval.
    assert math.isnan(links.link_scatter(list(agreeing.values())[:4]))


def test_a_link_with_an_unbounded_interval_starts_a_new_chain() -> None:
    # Stored with se 1e9 (`insert_links`): exp of its interval would overflow.
    unbounded = links.Link(1, 2, 1.05, 0.0, math.inf, 1.0, 1e9, 1, "values", "")
    chains = links.chained_timeline(_series(4), {1: _link(0, 1, 1.1), 2: unbounded,
                                                 3: _link(2, 3, 1.0)})
    assert [[p.position for p in c] for c in chains] == [[0, 1], [2, 3]]


def test_a_ten_percent_link_of_a_three_pair_history_is_listed(tmp_path: Path) -> None:
    # Twelve nights, each a plain `ab` at the default profile (3 process pairs a link), the
    # compiled tool 10 % slower from night 5 on: every other link of its series lies within
    # about 1.5 %; its own test gives p about 0.01 (2 degrees of freedom).
    store = tmp_path / "store"
    api.history_add([_plain(tmp_path, 0)], str(store))
    for n in range(1, 12):
        api.history_add([_ab_folder(tmp_path, n - 1, n, factor=1.1 if n == 5 else 1.0,
                                    seed=10 * n, processes=3)], str(store))
    changes = api.history_changes(str(store))
    steps = sorted((c.kind, c.key.benchmark, c.before.label, c.after.label)
                   for c in changes if c.kind in ("slower", "faster"))
    assert steps == [("slower", f"vrelu3/compiled/fwd/{c}", "b4", "b5")
                     for c in ("1024", "16384")], changes



def test_a_change_the_nights_ab_called_and_the_history_does_not_list_says_why(
        tmp_path: Path) -> None:
    # Each night the compiled tool's link is tight, but the nights scatter by about 8 %
    # (a machine whose state differs night to night, alike for both sides of one night's
    # pairs but not alike across nights): ab calls several of them, the history, holding
    # each to its series' scatter, lists none, and says so for each.
    store = tmp_path / "store"
    api.history_add([_plain(tmp_path, 0)], str(store))
    factors = [1.08, 0.92, 1.10, 0.93, 1.06, 0.95, 1.09, 0.91, 1.07]
    for n, factor in enumerate(factors, start=1):
        api.history_add([_ab_folder(tmp_path, n - 1, n, factor=factor, seed=10 * n)],
                        str(store))
    changes = api.history_changes(str(store))
    assert not [c for c in changes if c.kind in ("slower", "faster")], changes
    unlisted = [c for c in changes if c.kind == "ab-only"]
    assert len(unlisted) >= 4
    for c in unlisted:
        assert c.key.tool == "compiled" and c.ab_verdict in ("slower", "faster")
        assert c.ab_q is not None and c.ab_q < 0.05
        assert "held to its series' scatter of links" in c.differs, c.differs
        assert not c.is_regression
    # The reason is in the table, the JSON and the benchmark's dashboard page.
    table = cli("history", "changes", "--store", str(store))
    assert table.returncode == 0, explain(table)
    assert "not listed: ab said" in table.stdout
    listed = json.loads(cli("history", "changes", "--store", str(store), "--format",
                            "json").stdout)
    entries = [e for e in listed if e["change"] == "ab-only"]
    assert len(entries) == len(unlisted)
    assert all(e["ab_verdict"] in ("slower", "faster") and e["differs"] for e in entries)
    site = Path(api.build_dashboard(str(store), str(tmp_path / "site"))).parent
    pages = [p.read_text() for p in site.rglob("*.html") if "compiled" in p.name]
    assert any("not listed: ab said" in page for page in pages), sorted(
        p.name for p in site.rglob("*.html"))


def test_a_nights_links_are_one_family_however_long_the_history() -> None:
    # One step (p 1e-4) on night 150 of 300, in one of 6 series: as one family of the
    # store's 1,794 links it would need q < 0.05, i.e. p < 0.05 / 1,794; as one of the 6
    # links of its night, p < 0.05 / 6 is enough. A quiet night changes nothing.
    builds = 300
    all_series = [history.Series(
        history.SeriesKey("m", "time", f"x/pt/fwd/{k}", "x", "pt", "fwd", str(k)),
        _series(builds).points) for k in range(6)]
    found: dict[int, list[Any]] = {k: [] for k in range(6)}
    found[2] = [changepoints.Change("slower", 149, 150, 1.1, 1.05, 1.15, 1e-4,
                                    links.LINK_DETAIL)]
    linked = {k: range(1, builds) for k in range(6)}
    kept, families = changes.control_families(all_series, found, linked)
    assert [(c.after, round(c.q_value, 6)) for c in kept[2]] == [(150, 6e-4)]
    assert families[("m", all_series[2].points[150].build.id)] == 6
    # The levels' family: every series of the store, one test each.
    assert families[("levels",)] == 6


def test_a_link_is_tested_with_its_pairs_and_its_series_scatter_pooled() -> None:
    link = _link(0, 1, 1.10, se_log=0.003)  # 3 pairs that agreed: 2 degrees of freedom
    est = links.tested_estimate(link, 0.01, 12)
    sdf = links.scatter_df(12)
    assert sdf == pytest.approx(0.37 * 11)  # under the cap of 6
    assert math.isclose(est.se_log, math.sqrt((2 * 0.003 ** 2 + sdf * 0.01 ** 2) / (2 + sdf)))
    assert est.df == 2 + sdf and est.p_value < 1e-3
    assert links.scatter_df(6) == pytest.approx(0.37 * 5)  # few links lend less
    assert links.scatter_df(365) == links.SCATTER_PRIOR_DF  # a year lends no more than 6
    # Too few links for a scatter: the link's own test.
    own = links.tested_estimate(link, math.nan, 3)
    assert (own.se_log, own.df, own.p_value) == (0.003, 2.0, link.p_value)
    # A single-shot kind: held to the larger of the two, with that one's degrees of freedom.
    shot = links.tested_estimate(link, 0.05, 12, single_shot=True)
    assert (shot.se_log, shot.df) == (0.05, pytest.approx(0.37 * 11))


def test_a_single_shot_step_must_persist_in_the_levels() -> None:
    def series(levels: list[float]) -> history.Series:
        base = _series(len(levels))
        return history.Series(base.key, tuple(
            history.SeriesPoint(p.build, "ok", (v,), v, 0.0, None)
            for p, v in zip(base.points, levels)))

    step = math.log(1.3)
    assert links.persists(series([1, 1, 1, 1.3, 1.3, 1.3, 1.3]), 3, step) is True
    # One night's new side offset (a blip) or an offset base side (no move): not a step.
    assert links.persists(series([1, 1, 1, 1.3, 1, 1, 1]), 3, step) is False
    assert links.persists(series([1, 1, 1, 1, 1, 1, 1]), 3, step) is False
    # Too few builds after it: the next builds will say.
    assert links.persists(series([1, 1, 1, 1, 1.3, 1.3]), 4, step) is None


def test_where_ab_ran_at_another_minimum_effect_the_history_says_so(tmp_path: Path) -> None:
    # The nights' ab ran at a 2 % minimum effect and called the compiled tool 3.5 % slower;
    # the store, at 5 %, lists no step there, and says both minimum effects beside it.
    store = tmp_path / "store"
    api.history_add([_plain(tmp_path, 0)], str(store))
    for n in range(1, 8):
        api.history_add([_ab_folder(tmp_path, n - 1, n, factor=1.035 if n == 4 else 1.0,
                                    seed=10 * n, processes=8,
                                    new_metadata={"lockstep_min_effect": 0.02})], str(store))
    changes = api.history_changes(str(store))
    assert not [c for c in changes if c.kind in ("slower", "faster")], changes
    unlisted = [c for c in changes if c.kind == "ab-only" and c.key.kind == "time"]
    assert sorted(c.key.benchmark for c in unlisted) == [
        f"vrelu3/compiled/fwd/{c}" for c in ("1024", "16384")], unlisted
    assert all(c.after.label == "b4" and c.ab_min_effect == 0.02 for c in unlisted)
    assert all("ab ran at a minimum effect of 0.02, the history at 0.05" in c.differs
               for c in unlisted)


def test_a_night_whose_prep_could_not_be_tested_adds_without_a_prep_link(
        tmp_path: Path) -> None:
    # A plain ab: one zygote a side, so its prep rows have no interval (compare tests prep
    # one value per zygote). The folder adds; its run time links, its prep does not.
    store = tmp_path / "store"
    api.history_add([_plain(tmp_path, 0)], str(store))
    folder = synthetic.write_ab_folder(
        str(tmp_path / "ab-1"), "b0", "b1", seed=3, base_metadata=_metadata(1),
        new_metadata=_metadata(1), zygote=lambda *k: "one-zygote", **SMALL)
    proc = cli("history", "add", folder, "--store", str(store))
    assert proc.returncode == 0, explain(proc)
    with history.open_store(str(store)) as s:
        kinds = {kind for kind, _ in s.links("perf1")}
    assert "time" in kinds and "prep" not in kinds and "compile" not in kinds
