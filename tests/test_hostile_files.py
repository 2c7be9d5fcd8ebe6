"""Hostile results files, read through the real `run-benchmarks` by every reader: `compare`
(the file as BASE and as NEW), `report` and `merge`.

Each hostile file gets exit status 2 and one `run-benchmarks: error:` line that names the
file (and, for a bad time, the benchmark): never a traceback, never an output file. What the
tests pin down:

- Nesting: 100,000 `[` or `{"a":` make json raise RecursionError; that, and any file nesting
  lists or objects more than 64 levels deep (a results file nests eight), is refused as the
  file is read, so nothing after the parse (repr, Jinja, comparisons) walks it.
- Size: no limit. 30 MB of junk and 30 MB of JSON that is not a results file are refused
  like small ones. A valid file padded to 30 MB (a 30 MB metadata string, or tens of
  thousands of benchmarks) is big, not hostile: it loads, in seconds. The pyperf part is read
  by kscperf itself because `pyperf.BenchmarkSuite.loads` compares each benchmark's name with
  every earlier one and took minutes (hours for small benchmarks) on such a file; the
  commands' timeout is the guard against that coming back.
- Times: pyperf refuses zero, negative and NaN run values (with a message naming no
  benchmark) and lets infinity through. kscperf refuses all four in pyperf's values, naming
  the benchmark. In the `kscperf` section (raw values, warmups, prep_s, compile_s) zero is a
  time: the worker records a compile time of 0.0 for a warm cache, the writer leaves values
  <= 0 out of pyperf's benchmarks and the statistics ignore them; negative and non-finite
  times are refused, naming the benchmark.
- Names carrying HTML are legal: `compare` prints them as text (control characters escaped,
  HTML escaped in markdown) and `report` escapes them everywhere, the SVG figures included.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

import kscperf
import synthetic
from runner_testing import cli, explain, single_error_line

pytestmark = pytest.mark.integration

MB30 = 30 * 2**20
EVIL_MODEL = "<script>alert(1)</script>"
EVIL_TOOL = "<img src=x onerror=alert(2)>\x1b[31m"
EVIL_CONFIG = "<script>alert(3)</script>"


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc).encode()  # NaN and Infinity as Python's json writes them


def _first_time_bench(doc: dict[str, Any]) -> dict[str, Any]:
    return next(b for b in doc["benchmarks"] if ":" not in b["metadata"]["name"])


def _pyperf_value(value: float) -> Callable[[dict[str, Any]], bytes]:
    def build(doc: dict[str, Any]) -> bytes:
        _first_time_bench(doc)["runs"][0]["values"][1] = value
        return _dumps(doc)
    return build


def _kscperf_config(field: str, value: Any) -> Callable[[dict[str, Any]], bytes]:
    def build(doc: dict[str, Any]) -> bytes:
        config = doc["kscperf"]["runs"][0]["configs"][0]
        if field == "values":
            config["values"][3] = value
        else:
            config[field] = value
        return _dumps(doc)
    return build


def _kscperf_compile(value: float) -> Callable[[dict[str, Any]], bytes]:
    def build(doc: dict[str, Any]) -> bytes:
        next(r for r in doc["kscperf"]["runs"] if r["compile_s"])["compile_s"] = value
        return _dumps(doc)
    return build


def _cells_prep(value: float) -> Callable[[dict[str, Any]], bytes]:
    def build(doc: dict[str, Any]) -> bytes:
        doc["kscperf"]["cells"][0]["prep_s"][0] = value
        return _dumps(doc)
    return build


def _deep_inside(doc: dict[str, Any]) -> bytes:
    # Parses (json's limit is near 1,000 levels) but is far deeper than any results file.
    doc["kscperf"]["metadata"]["note"] = json.loads("[" * 500 + "]" * 500)
    return _dumps(doc)


def _huge_integer(doc: dict[str, Any]) -> bytes:
    return _dumps(doc).replace(b'"seed": 0', b'"seed": 1' + b"0" * 5000, 1)


def _junk_30mb(doc: dict[str, Any]) -> bytes:
    return (b"this is not JSON at all; " * (MB30 // 25 + 1))[:MB30]


def _random_30mb(doc: dict[str, Any]) -> bytes:
    return b"{" + random.Random(0).randbytes(MB30)


def _list_30mb(doc: dict[str, Any]) -> bytes:
    return b"[" + b"0," * (MB30 // 2) + b"0]"


def _pyperf_shaped_30mb(doc: dict[str, Any]) -> bytes:
    return b'{"version": "1.0", "benchmarks": ["' + b"x" * MB30 + b'"]}'


# kind -> (what turns the good file's document into the hostile file, what the line says)
HOSTILE: dict[str, tuple[Callable[[dict[str, Any]], bytes], tuple[str, ...]]] = {
    "deep-arrays": (lambda doc: b"[" * 100_000, ("more than 64 levels deep",)),
    "deep-objects": (lambda doc: b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
                     ("more than 64 levels deep",)),
    "deep-inside-a-results-file": (_deep_inside, ("more than 64 levels deep",)),
    "junk-30mb": (_junk_30mb, ("not valid JSON",)),
    "random-bytes-30mb": (_random_30mb, ("not",)),
    "json-list-30mb": (_list_30mb, ("not a pyperf or kscperf results file",)),
    "pyperf-shaped-30mb": (_pyperf_shaped_30mb,
                           ("not a valid pyperf results file", "benchmark number 1")),
    "huge-integer": (_huge_integer, ("integer of thousands of digits",)),
    "pyperf-nan": (_pyperf_value(float("nan")), ("'vrelu3/pt/fwd/1024'", "nan")),
    "pyperf-infinity": (_pyperf_value(float("inf")), ("'vrelu3/pt/fwd/1024'", "inf")),
    "pyperf-negative": (_pyperf_value(-0.25), ("'vrelu3/pt/fwd/1024'", "-0.25")),
    "pyperf-zero": (_pyperf_value(0.0), ("'vrelu3/pt/fwd/1024'", "0.0", "above zero")),
    "kscperf-value-nan": (_kscperf_config("values", float("nan")),
                          ("'vrelu3/pt/fwd/1024'", "nan", "kscperf values")),
    "kscperf-value-negative": (_kscperf_config("values", -1e-3),
                               ("'vrelu3/pt/fwd/1024'", "-0.001", "kscperf values")),
    "kscperf-prep-negative": (_kscperf_config("prep_s", -2.0),
                              ("'vrelu3/pt/fwd/1024:prep'", "-2.0", "prep_s")),
    "kscperf-prep-infinity": (_kscperf_config("prep_s", float("inf")),
                              ("'vrelu3/pt/fwd/1024:prep'", "inf", "prep_s")),
    "kscperf-compile-nan": (_kscperf_compile(float("nan")),
                            ("'vrelu3/compiled/fwd:compile'", "nan", "compile_s")),
    "kscperf-compile-negative": (_kscperf_compile(-1.0),
                                 ("'vrelu3/compiled/fwd:compile'", "-1.0", "compile_s")),
    "kscperf-cells-prep-nan": (_cells_prep(float("nan")),
                               ("'vrelu3/pt/fwd/1024:prep'", "nan", "prep_s")),
    "kscperf-loops-not-a-number": (_kscperf_config("loops", "many"),
                                   ("malformed 'kscperf' section", "'vrelu3/pt/fwd'",
                                    "loops")),
}

READERS: dict[str, Callable[[Path, Path, Path], list[str | Path]]] = {
    "compare-as-base": lambda bad, good, out: ["compare", bad, good],
    "compare-as-new": lambda bad, good, out: ["compare", good, bad],
    "report": lambda bad, good, out: ["report", bad, "-o", out / "report.html"],
    "merge": lambda bad, good, out: ["merge", bad, good, "-o", out / "merged.json"],
}


@pytest.fixture(scope="module")
def good_doc(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("good") / "good.json"
    synthetic.write_build(str(path), "good", seed=1)
    return path, json.loads(path.read_text())


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory: pytest.TempPathFactory,
                  good_doc: tuple[Path, dict[str, Any]]) -> dict[str, Path]:
    """Every hostile file, written once: the 30 MB ones are what takes time."""
    d = tmp_path_factory.mktemp("hostile")
    out = {}
    for kind, (build, _) in HOSTILE.items():
        path = d / f"{kind}.json"
        path.write_bytes(build(copy.deepcopy(good_doc[1])))
        out[kind] = path
    return out


def _refused(proc: subprocess.CompletedProcess[str], culprit: Path) -> str:
    line = single_error_line(proc)
    assert str(culprit) in line, explain(proc)
    return line


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind", HOSTILE)
def test_every_reader_refuses_a_hostile_file_in_one_line(
        kind: str, reader: str, hostile_files: dict[str, Path],
        good_doc: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    bad, good = hostile_files[kind], good_doc[0]
    out = tmp_path / "out"
    out.mkdir()
    line = _refused(cli(*READERS[reader](bad, good, out), timeout=120), bad)
    for expected in HOSTILE[kind][1]:
        assert expected in line, line
    assert os.listdir(out) == [], "a refused command wrote something"


def _padded_metadata(doc: dict[str, Any]) -> dict[str, Any]:
    doc["kscperf"]["metadata"]["note"] = "x" * MB30
    return doc


def _many_benchmarks(doc: dict[str, Any]) -> dict[str, Any]:
    # Copies of the file's own pyperf benchmarks under other names, to 30 MB: about 50,000.
    originals = doc["benchmarks"]
    copies = MB30 // len(json.dumps(originals)) + 1
    doc["benchmarks"] = [
        dict(b, metadata=dict(b["metadata"], name=f"copy{i}-{b['metadata']['name']}"))
        for i in range(copies) for b in originals]
    return doc


@pytest.mark.parametrize("pad", [_padded_metadata, _many_benchmarks])
def test_a_valid_file_padded_to_30mb_is_read(pad: Callable[[dict[str, Any]], dict[str, Any]],
                                              good_doc: tuple[Path, dict[str, Any]],
                                              tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps(pad(copy.deepcopy(good_doc[1]))))
    assert path.stat().st_size >= MB30
    # A quadratic reader takes minutes here; the timeout makes that a failure.
    proc = cli("compare", good_doc[0], path, "--format", "json", timeout=60)
    assert proc.returncode == 0, explain(proc)
    assert proc.stderr == ""


def test_zero_times_in_the_kscperf_section_are_read(good_doc: tuple[Path, dict[str, Any]],
                                                    tmp_path: Path) -> None:
    doc = copy.deepcopy(good_doc[1])
    compiled = next(r for r in doc["kscperf"]["runs"] if r["compile_s"])
    compiled["compile_s"] = 0.0
    first = doc["kscperf"]["runs"][0]
    config = first["configs"][0]
    config["values"][0], config["prep_s"] = 0.0, 0.0
    path = tmp_path / "zeros.json"
    path.write_text(json.dumps(doc))
    proc = cli("compare", good_doc[0], path, "--format", "json")
    assert proc.returncode == 0, explain(proc)
    # Every row still has a finite ratio: a zero is never divided by.
    assert all(math.isfinite(row["ratio"]) for row in json.loads(proc.stdout)["benchmarks"])
    # And the zeros read as zeros, not as missing times.
    loaded = kscperf.load(str(path))

    def run_of(raw: dict[str, Any]) -> Any:
        return next(r for r in loaded.runs if (r.model, r.tool, r.task, r.process_index) == (
            raw["model"], raw["tool"], raw["task"], raw["process_index"]))

    assert run_of(compiled).compile_s == 0.0
    read = next(c for c in run_of(first).configs if c.config == config["config"])
    assert read.values[0] == 0.0 and read.prep_s == 0.0
    assert read.values[1:] == tuple(config["values"][1:])


@pytest.fixture(scope="module")
def evil_builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("evil")
    names: dict[str, Any] = dict(models=(EVIL_MODEL, "vrelu3"), tools=("pt", EVIL_TOOL),
                                 configs=("1024", EVIL_CONFIG))
    return (Path(synthetic.write_build(str(d / "one.json"), "<b>one</b>", seed=1, **names)),
            Path(synthetic.write_build(str(d / "two.json"), "<i>two</i>", seed=2, **names)))


def test_compare_prints_html_names_as_text(evil_builds: tuple[Path, Path]) -> None:
    table = cli("compare", *evil_builds)
    assert table.returncode == 0 and table.stderr == "", explain(table)
    assert f"{EVIL_MODEL}/pt/fwd/{EVIL_CONFIG}" in table.stdout
    assert "\x1b" not in table.stdout and "<img src=x onerror=alert(2)>\\x1b[31m" in table.stdout
    markdown = cli("compare", *evil_builds, "--format", "markdown")
    assert markdown.returncode == 0 and markdown.stderr == "", explain(markdown)
    assert "<script" not in markdown.stdout and "<img" not in markdown.stdout
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markdown.stdout
    assert "\x1b" not in markdown.stdout


def test_report_escapes_html_names(evil_builds: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = cli("report", *evil_builds, "-o", out)
    assert proc.returncode == 0 and proc.stderr == "", explain(proc)
    html = out.read_text()
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert "\x1b" not in html
    for escaped in ("&lt;script&gt;alert(1)&lt;/script&gt;",
                    "&lt;script&gt;alert(3)&lt;/script&gt;",
                    "&lt;img src=x onerror=alert(2)&gt;", "&lt;b&gt;one&lt;/b&gt;"):
        assert escaped in html, escaped
    # Inside the SVG figures too, where matplotlib wrote the names.
    svgs = " ".join(html.split("<svg")[1:])
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svgs
