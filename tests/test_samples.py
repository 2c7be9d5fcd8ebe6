"""The one record of what a build measured (`kscperf.results.samples`), and that every view reads
it: the same central value and speedup in the terminal table, the report, `compare` and
the dashboard; one kind vocabulary in both JSON outputs; old stores still load."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import synthetic
from kscperf import api, history
from kscperf.stats import core as stats
from kscperf.compare.builds import compare_builds
from kscperf.names import Kind, benchmark_name, compile_name
from kscperf.results.files import load_results
from kscperf.results.samples import build_samples, central_value, summarize_build
from kscperf.views import formatting
from kscperf.views.dashboard import build_views
from kscperf.views.report import build_report_view
from runner_testing import cli, explain

REPO = Path(__file__).resolve().parent.parent
SMALL: dict[str, Any] = dict(models=("vrelu3",), tools=("pt", "compiled"), tasks=("fwd",),
                             configs=("1024", "16384"), processes=5)
NAME = "vrelu3/compiled/fwd/16384"


def _build(d: Path, i: int, **kwargs: Any) -> str:
    # A wide process effect: the pooled median and the median of process medians differ.
    return synthetic.write_build(
        str(d / f"b{i}.json"), f"b{i}", seed=300 + i, process_sd=0.2,
        metadata_overrides={"date": f"2024-05-{i + 1:02d}T12:00:00",
                            "git_commit": f"{i:04d}" + "c" * 36}, **dict(SMALL, **kwargs))


def _stored(tmp_path: Path, files: list[str]) -> tuple[Any, Any]:
    """The run-time series of NAME and the dashboard's views, from a store of `files`."""
    store = str(tmp_path / "store")
    api.history_add(files, store)
    with history.open_store(store) as s:
        series = next(x for x in s.series() if x.key.benchmark == NAME
                      and x.key.kind is Kind.TIME)
        return series, build_views(s, generated="now")


def test_the_record_holds_each_kind_with_its_rules(tmp_path: Path) -> None:
    # Four processes whose values do not overlap: the pooled median falls between two of
    # them, away from the median of their medians.
    loaded = load_results(_build(tmp_path, 0, processes=4))
    build = build_samples(loaded)
    time = build.benchmarks[NAME]
    assert time.kind is Kind.TIME and len(time.runs) == 4 and sorted(time.by_process or {}) == [
        0, 1, 2, 3]
    # The central value is the pooled median, pyperf's, not the median of process medians.
    pooled = sorted(loaded.benchmarks[NAME])
    assert time.central == central_value(time.runs) == (pooled[19] + pooled[20]) / 2
    medians = sorted(time.process_medians)
    assert not math.isclose(time.central, (medians[1] + medians[2]) / 2, rel_tol=1e-3)
    ref = build.benchmarks["vrelu3/pt/fwd/16384"]
    assert build.speedup(time) == ref.central / time.central
    rss = build.benchmarks[benchmark_name("vrelu3", "compiled", "fwd", "16384", Kind.PEAK_RSS)]
    assert rss.runs == ((400 * 2**20 + 16384 * 8.0,),) * 4  # one peak per process
    assert build.benchmarks[compile_name("vrelu3", "compiled", "fwd")].status == "ok"


def test_the_same_build_shows_the_same_number_everywhere(tmp_path: Path) -> None:
    files = [_build(tmp_path, i) for i in range(2)]
    base, new = (load_results(f) for f in files)
    record = build_samples(new)
    central, speedup = record.benchmarks[NAME].central, record.speedup(record.benchmarks[NAME])
    assert math.isfinite(central) and speedup > 1
    time_text, speedup_text = formatting.format_seconds(central), f"{speedup:.2f}x"

    # The terminal table at the end of a run.
    table = formatting.format_run_table(*summarize_build(new))
    line = next(x for x in table.splitlines() if x.startswith("vrelu3") and "16384" in x)
    assert f"{time_text} " in line and f"({speedup_text})" in line
    # The report.
    rows = build_report_view([base, new]).models[0].rows
    row = next(r for r in rows if r.tool == "compiled" and r.config == "16384")
    assert (row.time, row.speedup) == (time_text, speedup_text)
    # compare shows the levels its test compares, whose ratio is the ratio it shows
    # (docs/method.md, "One statistic"): the geometric mean of the process medians.
    compared = compare_builds(base, new).row(NAME)
    assert compared is not None and compared.method == "processes"
    assert compared.new_value == stats.process_level(record.benchmarks[NAME].runs)
    assert math.isclose(compared.new_value / compared.base_value, compared.ratio, rel_tol=1e-12)
    # The dashboard, from a store of both builds.
    series, pages = _stored(tmp_path, files)
    assert series.points[-1].median == central and series.points[-1].speedup == speedup
    summary = next(r for r in pages.index.summary if r.tool == "compiled")
    geomean = math.sqrt(speedup * record.speedup(record.benchmarks["vrelu3/compiled/fwd/1024"]))
    assert summary.speedup.latest == formatting.format_ratio(geomean)
    page = next(v for v in pages.benchmarks.values() if v.benchmark == NAME)
    assert page.sections[0].builds[0].values[0].startswith(time_text + " ")  # newest first


def _memory_history(tmp_path: Path) -> list[str]:
    # 100 MiB more from b6 on.
    return [_build(tmp_path, i, rss_bytes=(500 if i >= 6 else 400) * 2**20)
            for i in range(12)]


@pytest.mark.integration
def test_a_memory_change_has_one_kind_in_compare_and_history(tmp_path: Path) -> None:
    files = _memory_history(tmp_path)
    compared = cli("compare", files[5], files[6], "--format", "json")
    assert compared.returncode == 0, explain(compared)
    memory_rows = [r for r in json.loads(compared.stdout)["benchmarks"] if r["verdict"] == "slower"]
    assert memory_rows and {r["kind"] for r in memory_rows} == {"peak_rss"}
    store = str(tmp_path / "store")
    added = cli("history", "add", "--store", store, *files)
    assert added.returncode == 0, explain(added)
    changes = cli("history", "changes", "--store", store, "--format", "json")
    assert changes.returncode == 0, explain(changes)
    found = json.loads(changes.stdout)
    found = found["changes"] if isinstance(found, dict) else found
    slower = [c for c in found if c["change"] == "slower"]
    assert slower and {c["kind"] for c in slower} == {"peak_rss"}
    assert {c["after"]["build"] for c in slower} == {"b6"}


@pytest.mark.integration
def test_an_index_of_the_old_schema_rebuilds_itself(tmp_path: Path) -> None:
    # A store written by the code before the kinds were unified (schema 3: kinds memory and
    # cuda_memory, fates found by their empty samples), made by that code itself.
    old = tmp_path / "old"
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "c82920a", "kscperf"],
                             capture_output=True)
    if archive.returncode != 0:
        import pytest

        pytest.skip("this checkout does not hold commit c82920a")
    old.mkdir()
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
    files = [_build(tmp_path, i, cell_status=lambda m, t, k: (
        synthetic.CellStatus.CRASHED if (t, i) == ("compiled", 2) else None)) for i in range(3)]
    store = tmp_path / "store"
    made = subprocess.run(
        [sys.executable, "-c", "import sys; from kscperf import api; "
         "api.history_add(sys.argv[2:], sys.argv[1])", str(store), *files],
        cwd=old, env=dict(os.environ, PYTHONPATH=str(old)), capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    with sqlite3.connect(store / history.INDEX_NAME) as db:
        assert {k for (k,) in db.execute("SELECT DISTINCT kind FROM series")} >= {"memory"}
    with history.open_store(str(store)) as s:
        kinds = {x.key.kind for x in s.series()}
        crashed = next(x for x in s.series() if x.key.benchmark == NAME
                       and x.key.kind is Kind.TIME)
    assert kinds == {Kind.TIME, Kind.COMPILE, Kind.PREP, Kind.PEAK_RSS}
    # The crash before its configs still shows in the run-time series (the fate column).
    assert [p.status for p in crashed.points] == ["ok", "ok", "crashed"]


def test_values_timed_in_another_machine_state_are_marked_everywhere(tmp_path: Path) -> None:
    # Process 0 of every cell ran on a machine 1.5x slower (its canary says so too).
    slow = dict(machine=lambda m, t, k, p: 1.5 if p == 0 else 1.0)
    files = [_build(tmp_path, i, **slow) for i in range(2)]
    new = load_results(files[1])
    record = build_samples(new)
    assert record.benchmarks[NAME].odd_processes == frozenset({0})
    assert record.odd_processes == 2  # one per cell: vrelu3 x (pt, compiled) x fwd
    tools, rows = summarize_build(new, record)
    table = formatting.format_run_table(tools, rows)
    line = next(x for x in table.splitlines() if x.startswith("vrelu3") and "16384" in x)
    assert line.count(f" {formatting.MACHINE_STATE_MARK}") == 2  # pt and compiled
    note = formatting.machine_state_note(4, record.odd_processes)  # 2 configs per cell
    assert note.startswith("~ 4 values include processes timed while the machine was in "
                           "another state (2 processes")
    section = build_report_view([new]).models[0]
    assert {r.machine_mark for r in section.rows} == {formatting.MACHINE_STATE_MARK}
    assert section.machine_note == note
    series, pages = _stored(tmp_path, files)
    assert [p.odd_processes for p in series.points] == [1, 1]
    page = next(v for v in pages.benchmarks.values() if v.benchmark == NAME)
    assert page.sections[0].builds[0].values[0].endswith(f" {formatting.MACHINE_STATE_MARK}")


def test_old_files_go_through_every_view(tmp_path: Path) -> None:
    # Format 1 (no canary), and a file without its raw worker results: the memory fallback
    # takes the cell's peak, and every view still reads the record.
    path = _build(tmp_path, 0, canary=False)
    doc = json.loads(Path(path).read_text())
    doc["kscperf"]["format_version"] = 1
    del doc["kscperf"]["machine_speed"]
    del doc["kscperf"]["runs"]
    Path(path).write_text(json.dumps(doc))
    old = load_results(path)
    record = build_samples(old)
    assert record.machine is None and record.odd_processes == 0
    rss = record.benchmarks[benchmark_name("vrelu3", "compiled", "fwd", "16384", Kind.PEAK_RSS)]
    assert rss.runs == ((400 * 2**20 + 16384 * 8.0,),) and rss.by_process is None
    new = load_results(_build(tmp_path, 1))
    assert compare_builds(old, new).row(NAME) is not None
    assert build_report_view([old, new]).models
    store = str(tmp_path / "store")
    api.history_add([path], store)
    with history.open_store(store) as s:
        kinds = {x.key.kind for x in s.series()}
    assert Kind.PEAK_RSS in kinds and Kind.TIME in kinds
