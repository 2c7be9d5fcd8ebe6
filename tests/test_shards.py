"""Shards and their merge, end to end with the real command: a sharded run's files merge
into the whole, and merge refuses, with one line and nothing written, a file given twice,
overlapping shards, a missing shard (unless --allow-partial), and files of other builds,
machine classes, profiles or plans.

The shards plan CUDA tools on this machine without a driver: such cells are planned as
skipped and start no worker, so the real sharding and merging run in seconds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from runner_testing import DEFS, cells_of, cli, explain, load_doc, single_error_line

SELECTION = [str(DEFS / "toy.py"), str(DEFS / "seeded.py"), "--tools",
             "pt_cuda,ptnice_cuda,ts_cuda", "--fast", "-q"]

pytestmark = [pytest.mark.integration, pytest.mark.skipif(
    Path("/proc/driver/nvidia/version").exists() or Path("/dev/nvidiactl").exists(),
    reason="with an NVIDIA driver the CUDA cells would run")]


def _run(out: Path, *extra: str) -> Path:
    proc = cli("run", *SELECTION, "--build", "b1", *extra, "-o", out, cwd=out.parent)
    assert proc.returncode == 0, explain(proc)
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("shards")
    files = {"whole": _run(tmp / "whole.json")}
    for i in (1, 2, 3):
        files[f"s{i}"] = _run(tmp / f"s{i}.json", "--shard", f"{i}/3")
    return files


def _edited(src: Path, dst: Path, **metadata: Any) -> Path:
    doc = load_doc(src)
    doc["kscperf"]["metadata"].update(metadata)
    dst.write_text(json.dumps(doc))
    return dst


def _merge(out: Path, *files: Path | str) -> Any:
    return cli("merge", *files, "-o", out, cwd=out.parent)


def test_the_shards_merge_into_the_whole(built: dict[str, Path], tmp_path: Path) -> None:
    shard_cells = [set(cells_of(load_doc(built[f"s{i}"]))) for i in (1, 2, 3)]
    assert all(shard_cells) and sum(map(len, shard_cells)) == len(set().union(*shard_cells))
    proc = _merge(tmp_path / "merged.json", built["s3"], built["s1"], built["s2"])
    assert proc.returncode == 0, explain(proc)
    merged = load_doc(tmp_path / "merged.json")
    assert set(cells_of(merged)) == set(cells_of(load_doc(built["whole"])))
    md = merged["kscperf"]["metadata"]
    assert md["merged_shards"] == "1,2,3/3" and "shard" not in md
    assert merged["kscperf"]["complete"] is True
    recorded = [load_doc(built[f"s{i}"])["kscperf"]["metadata"] for i in (1, 2, 3)]
    assert [r["shard"] for r in recorded] == ["1/3", "2/3", "3/3"]
    assert len({r["shard_plan"] for r in recorded}) == 1
    assert {r["shard_balance"] for r in recorded} == {"static estimate"}
    # compare and report take the merged file like any other
    compared = cli("compare", built["whole"], tmp_path / "merged.json")
    assert compared.returncode == 0, explain(compared)
    reported = cli("report", built["whole"], tmp_path / "merged.json", "-o",
                   tmp_path / "report.html")
    assert reported.returncode == 0, explain(reported)
    assert "toy" in (tmp_path / "report.html").read_text()


def test_a_missing_shard_is_refused_unless_partial_is_allowed(built: dict[str, Path],
                                                              tmp_path: Path) -> None:
    out = tmp_path / "merged.json"
    line = single_error_line(_merge(out, built["s1"], built["s3"]))
    assert "shard 2/3 is missing" in line and "--allow-partial" in line
    assert not out.exists()
    proc = cli("merge", built["s1"], built["s3"], "-o", out, "--allow-partial")
    assert proc.returncode == 0, explain(proc)
    merged = load_doc(out)
    assert merged["kscperf"]["complete"] is False
    assert merged["kscperf"]["metadata"]["missing_shards"] == "2/3"


@pytest.mark.parametrize("case", ["same file twice", "a copy of a shard", "another build",
                                  "another machine class", "another profile",
                                  "another torch", "another plan"])
def test_merge_refuses_what_does_not_fit(built: dict[str, Path], tmp_path: Path,
                                         case: str) -> None:
    s1, s2, s3 = built["s1"], built["s2"], built["s3"]
    other = tmp_path / "other.json"
    files: list[Path]
    if case == "same file twice":
        files, expected = [s1, s2, s3, s1], "is given twice"
    elif case == "a copy of a shard":
        files, expected = [s1, s2, s3, Path(shutil.copy(s2, other))], "both shard 2/3"
    elif case == "another build":
        files, expected = [s1, _edited(s2, other, build="b2"), s3], "has build 'b2'"
    elif case == "another machine class":
        files, expected = [s1, _edited(s2, other, cpu_model_name="Other CPU"), s3], "has CPU"
    elif case == "another profile":
        files, expected = [s1, _edited(s2, other, profile="rigorous"), s3], "has profile"
    elif case == "another torch":
        files, expected = [s1, _edited(s2, other, torch_version="9.9"), s3], "torch version"
    else:
        files, expected = [s1, _run(other, "--shard", "2/3", "--tasks", "fwd"), s3], \
            "of another plan"
    out = tmp_path / "merged.json"
    line = single_error_line(_merge(out, *files))
    assert expected in line, line
    assert not out.exists()


def test_an_existing_output_is_left_untouched(built: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "merged.json"
    out.write_text("keep me")
    line = single_error_line(_merge(out, built["s1"], built["s2"], built["s3"]))
    assert "already exists" in line
    assert out.read_text() == "keep me"


def test_balance_takes_costs_from_an_earlier_file(built: dict[str, Path], tmp_path: Path) -> None:
    out = _run(tmp_path / "b.json", "--shard", "1/2", "--balance", str(built["whole"]))
    md = load_doc(out)["kscperf"]["metadata"]
    assert md["shard_balance"] == "whole.json" and md["shard"] == "1/2"
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({k: v for k, v in load_doc(built["whole"]).items()
                                 if k != "kscperf"}))
    line = single_error_line(cli("run", *SELECTION, "--shard", "1/2", "--balance", plain,
                                 "-o", tmp_path / "c.json", cwd=tmp_path))
    assert "was not written by kscperf" in line


def test_more_shards_than_cells_is_one_line(tmp_path: Path) -> None:
    line = single_error_line(cli("run", str(DEFS / "toy.py"), "--tools", "pt_cuda", "--tasks",
                                 "fwd", "--shard", "2/2", "-o", tmp_path / "x.json",
                                 cwd=tmp_path))
    assert "has no cells" in line


def test_shards_from_several_hosts_merge_without_one_hostname(built: dict[str, Path],
                                                              tmp_path: Path) -> None:
    other_host = _edited(built["s2"], tmp_path / "s2.json", hostname="perf-b")
    out = tmp_path / "merged.json"
    proc = _merge(out, built["s1"], other_host, built["s3"])
    assert proc.returncode == 0, explain(proc)
    md = load_doc(out)["kscperf"]["metadata"]
    assert "hostname" not in md and "perf-b" in md["merged_hostnames"].split(",")
    # compare judges such a build by CPU and GPU, not by the host of its first shard
    compared = cli("compare", built["whole"], out)
    assert compared.returncode == 0, explain(compared)


def test_a_shard_without_a_hostname_still_merges(built: dict[str, Path], tmp_path: Path) -> None:
    doc = load_doc(built["s1"])
    doc.get("metadata", {}).pop("hostname", None)
    doc["kscperf"]["metadata"].pop("hostname", None)
    hostless = tmp_path / "s1.json"
    hostless.write_text(json.dumps(doc))
    other_host = _edited(built["s2"], tmp_path / "s2.json", hostname="perf-b")
    out = tmp_path / "merged.json"
    proc = _merge(out, hostless, other_host, built["s3"])
    assert proc.returncode == 0, explain(proc)
    md = load_doc(out)["kscperf"]["metadata"]
    assert "hostname" not in md and "None" not in md["merged_hostnames"].split(",")


def test_a_shard_out_of_range_is_one_line(built: dict[str, Path], tmp_path: Path) -> None:
    bad = _edited(built["s2"], tmp_path / "s2.json", shard="5/3")
    line = single_error_line(_merge(tmp_path / "merged.json", built["s1"], bad, built["s3"]))
    assert "malformed shard '5/3'" in line
