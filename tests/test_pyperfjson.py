"""Tests of kscperf.results.pyperfjson, the one-pass writer of a results file's pyperf half, with
pyperf itself as the oracle: pyperf loads what it writes and dumps it back unchanged, and
`python -m pyperf compare_to` reads two of its files."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path

import pyperf
import pytest

from kscperf.errors import CellStatus
from kscperf.results.files import write_results
from kscperf.results.pyperfjson import pyperf_suite_json
from kscperf.spec import CellResult, ConfigResult

sys.path.insert(0, str(Path(__file__).parent))
import synthetic  # noqa: E402


def pyperf_round_trip(doc: dict) -> dict:
    """`doc` loaded by pyperf and dumped again by it, as JSON types."""
    suite = pyperf.BenchmarkSuite.loads(json.dumps(doc))
    buffer = io.StringIO()
    suite.dump(buffer)
    return json.loads(buffer.getvalue())


def synthetic_runs() -> list[CellResult]:
    runs = synthetic.make_runs(
        seed=5, status=lambda m, t, k, c: CellStatus.INCORRECT if t == "ptnice" and c == "1024"
        else CellStatus.OK)
    # Metadata pyperf would strip or refuse, on runs and on the build.
    return [dataclasses.replace(r, metadata=dict(r.metadata, cpu_model_name=" CPU 9000 ",
                                                 platform="Linux-test"))
            for r in runs]


def test_pyperf_loads_and_dumps_back_what_is_written() -> None:
    md = synthetic.metadata("b1", note=" spaced ", broken="two\nlines", empty="",
                            nan=float("nan"), flag=True)
    doc = pyperf_suite_json(synthetic_runs(), md)
    assert pyperf_round_trip(doc) == doc
    names = [b["runs"][0].get("metadata", {}).get("name") or b.get("metadata", {}).get("name")
             for b in doc["benchmarks"]]
    assert "vrelu3/pt/fwd/1024" in names and "vrelu3/compiled/bwd:compile" in names
    assert len(names) == len(set(names))
    suite = pyperf.BenchmarkSuite.loads(json.dumps(doc))
    assert suite.get_metadata()["cpu_model_name"] == "CPU 9000"  # stripped, as pyperf does
    assert "broken" not in suite.get_metadata() and "nan" not in suite.get_metadata()
    bench = suite.get_benchmark("vrelu3/pt/fwd/1024")
    assert bench.get_nrun() == 3 and len(bench.get_values()) == 30


def test_runs_of_one_benchmark_from_two_hosts_stay_loadable() -> None:
    # pyperf refuses a benchmark whose runs disagree on the host; the key is left out of
    # that benchmark's runs (the kscperf section keeps each run's own).
    first = ConfigResult(config="8", status=CellStatus.OK, values=(1e-4, 1.1e-4), loops=4,
                         warmups=((4, 2e-4),))
    runs = [CellResult(model="m", tool="pt", task="fwd", process_index=i, status=CellStatus.OK,
                       configs=(first,), metadata={"hostname": host, "cpu_count": 2})
            for i, host in enumerate(("perf1", "perf2"))]
    doc = pyperf_suite_json(runs, {"build": "b"})
    suite = pyperf.BenchmarkSuite.loads(json.dumps(doc))
    bench = suite.get_benchmark("m/pt/fwd/8")
    assert bench.get_nrun() == 2 and "hostname" not in bench.get_metadata()
    assert bench.get_metadata()["cpu_count"] == 2
    assert pyperf_round_trip(doc) == doc


def test_no_benchmarks_is_an_empty_suite() -> None:
    skipped = CellResult(model="m", tool="ts", task="fwd", process_index=0,
                         status=CellStatus.UNSUPPORTED)
    assert pyperf_suite_json([skipped], {"build": "b"}) == {"version": "1.0", "benchmarks": []}


@pytest.mark.integration
def test_pyperf_compare_to_reads_two_written_files(tmp_path: Path) -> None:
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    write_results(str(base), synthetic_runs(), synthetic.metadata("base"))
    write_results(str(new), synthetic.make_runs(seed=6, factor=lambda *k: 1.5),
                  synthetic.metadata("new"))
    done = subprocess.run([sys.executable, "-m", "pyperf", "compare_to", str(base), str(new)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines()
               if line.startswith("vrelu3/pt/fwd/1024:"))
    ratio = float(row.rsplit(": ", 1)[1].split("x")[0])
    assert row.endswith("slower") and 1.4 < ratio < 1.6, row
