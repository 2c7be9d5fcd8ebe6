"""Tests of counting instructions with Callgrind (`kscperf.worker.instructions`, and
`run --instructions` through `kscperf.orchestrator.counting`): the dump's parsing, the
refusal outside Valgrind, a real `ab --instructions` that counts both builds in two
processes each under Valgrind (skipped, with the reason, where `valgrind` is not
installed), a run on a machine without valgrind, and how compare reads counts from real
results files."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
import torch

from kscperf import api
from kscperf.errors import CellStatus, KscperfError
from kscperf.names import Kind
from kscperf.orchestrator.counting import CALLGRIND_ISA, not_counted_reason
from kscperf.plan.cells import PlannedCell
from kscperf.results.files import load_results, write_results
from kscperf.results.samples import build_samples
from kscperf.spec import CellResult, ConfigResult
from kscperf.views.formatting import comparison_criteria, format_comparison
from kscperf.worker.instructions import UNKNOWN_CODE, CallgrindError, callgrind_count, \
    callgrind_functions, count_calls
from runner_testing import DEFS, FIXTURES, QUICK, cli

WORK = FIXTURES / "work" / "work.py"

_DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 19618
cmd:  python t.py 100
part: 1

positions: line
events: Ir
summary: 3025461


totals: 3025461
"""


def test_a_dump_gives_its_instruction_count_and_a_bad_one_says_what_is_wrong() -> None:
    assert callgrind_count(_DUMP, "d") == 3025461
    with pytest.raises(CallgrindError, match="d has no summary line"):
        callgrind_count(_DUMP.split("summary")[0], "d")
    with pytest.raises(CallgrindError, match="not a Callgrind dump of instructions"):
        callgrind_count(_DUMP.replace("events: Ir", "events: Dr"), "d")


# Compressed names, a call (whose inclusive cost is the callee's, not the caller's), position
# compression, and code without a symbol.
_FUNCTIONS_DUMP = """# callgrind format
version: 1
positions: line
events: Ir
summary: 1500

ob=(1) /lib/libtorch_cpu.so
fl=(1) ???
fn=(1) at::native::sin_kernel(at::TensorIteratorBase&)
0 600
+2 100
cfl=(1)
cfn=(2) Sleef_sinf8_u10
calls=4 0
0 500
fn=(2)
0 500
fn=(3) 0x0000000004f5a1c0
* 150
fn=(4) 0x0000000004f5a2d0
0 150
fn=(5) _PyEval_EvalFrameDefault'2
0 40
fn=(6) _PyEval_EvalFrameDefault
0 10
"""


def test_a_dump_gives_each_function_its_own_instructions_not_its_callees() -> None:
    assert callgrind_functions(_FUNCTIONS_DUMP) == {
        "at::native::sin_kernel(at::TensorIteratorBase&)": 700, "Sleef_sinf8_u10": 500,
        UNKNOWN_CODE: 300, "_PyEval_EvalFrameDefault": 50}


def test_counting_outside_valgrind_is_refused_with_a_reason(tmp_path: Path) -> None:
    x = torch.randn(16)
    with pytest.raises(CallgrindError, match="running under valgrind --tool=callgrind"):
        count_calls(lambda: x * 2, contextlib.nullcontext, 5, str(tmp_path / "out"))


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_ab_counts_both_builds_under_callgrind_and_sees_five_percent_more_work(
        tmp_path: Path) -> None:
    # The one Callgrind run of the suite (4 processes, each about 20 s of importing torch
    # under Valgrind): NEW's ptnice makes 63 sin() passes a call where BASE's makes 60.
    proc = cli("ab", WORK, "--tools", "ptnice", "--tasks", "inference", *QUICK,
               "--new-env", "KSCPERF_TEST_NICE_WORK=1.05", "--instructions", "--explain",
               "-o", tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("base", "new"):
        assert f"{label}: instructions: work/ptnice/inference #2 ok" in proc.stderr
    assert "counted once both builds were timed, BASE then NEW" in proc.stderr
    base, new = (load_results(str(tmp_path / f"{label}.json")) for label in ("base", "new"))
    for loaded in (base, new):
        assert loaded.metadata["instructions_method"] == "callgrind"
        assert loaded.metadata["instructions_isa"] == CALLGRIND_ISA["ATEN_CPU_CAPABILITY"]
        assert len(loaded.runs) == 1 and len(loaded.instruction_runs) == 2
        [counted] = build_samples(loaded).of_kind(Kind.INSTRUCTIONS)
        assert counted.name == "work/ptnice/inference/4096:instructions"
        first, second = counted.values
        # 60 or 63 sin() passes over 4,096 floats: millions of instructions a call. With
        # the hash seed pinned, processes have counted the same to the instruction; the
        # issue's bound on the repeats' spread is 0.5 % (docs/validation.md).
        assert first > 1_000_000 and abs(second - first) / first <= 0.005, counted.values
    [row] = [r for r in api.compare_builds(base, new).rows if r.kind is Kind.INSTRUCTIONS]
    assert row.verdict.value == "slower" and 1.04 < row.ratio < 1.06, row
    # --explain: the functions that compute sin() are those whose counts moved.
    assert "Functions of work/ptnice/inference/4096:instructions" in proc.stdout
    [explained] = api.compare_builds(base, new).count_explanations
    moved = [f for f in explained.functions if f.verdict == "more"]
    assert moved and "sin" in moved[0].function.lower(), explained.functions[:5]
    # The timing is its own benchmark beside the counts, and pyperf reads both.
    assert build_samples(new).benchmarks["work/ptnice/inference/4096"].values
    import pyperf
    bench = pyperf.BenchmarkSuite.load(str(tmp_path / "new.json")).get_benchmark(
        "work/ptnice/inference/4096:instructions")
    assert bench.get_unit() == "integer" and bench.get_nrun() == 2


@pytest.mark.integration
def test_without_valgrind_counts_are_skipped_with_the_reason_and_the_timing_stands(
        tmp_path: Path) -> None:
    out = tmp_path / "uncounted.json"
    proc = cli(DEFS / "toy.py", "--tools", "pt", "--tasks", "inference", *QUICK,
               "--instructions", "-o", out, env={"PATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "instructions: toy/pt/inference #1 skipped" in proc.stderr
    loaded = load_results(str(out))
    assert {r.status for r in loaded.instruction_runs} == {CellStatus.SKIPPED}
    assert "valgrind is not installed" in loaded.instruction_runs[0].reason
    assert not list(build_samples(loaded).of_kind(Kind.INSTRUCTIONS))
    assert build_samples(loaded).benchmarks["toy/pt/inference/8"].values


def test_gpu_cells_and_compiled_cells_without_a_warm_cache_are_not_counted() -> None:
    from kscperf.plan.definitions import scan_models

    [model], _ = scan_models([str(DEFS / "toy.py")])
    def reason(tool: str, cache: str = "warm") -> str:
        return not_counted_reason(PlannedCell(model, tool, "inference"), cache)
    assert reason("pt") == reason("ts") == reason("compiled") == ""
    assert "CPU only" in reason("pt_cuda")
    assert "warm compile cache" in reason("compiled", "cold")


@pytest.mark.integration
def test_the_counts_of_an_instruction_run_need_two_processes(tmp_path: Path) -> None:
    proc = cli(DEFS / "toy.py", "--instructions", "--instruction-processes", "1",
               "-o", tmp_path / "x.json")
    assert proc.returncode == 2 and "--instruction-processes must be 2 or more" in proc.stderr
    assert proc.stderr.count("\n") == 1


def _counted(path: Path, per_call: list[float], method: str = "callgrind") -> str:
    """A results file of one build whose counting processes counted `per_call`."""
    counts = [CellResult(model="m", tool="pt", task="fwd", process_index=i,
                         status=CellStatus.OK,
                         configs=(ConfigResult(config="c", status=CellStatus.OK,
                                               instructions=v),))
              for i, v in enumerate(per_call)]
    write_results(str(path), [], {"build": path.stem, "instructions_method": method}, counts=counts)
    return str(path)


def test_compare_calls_a_one_percent_count_change_slower_and_an_equal_count_same(
        tmp_path: Path) -> None:
    base = _counted(tmp_path / "base.json", [1_000_000, 1_000_400, 999_800])
    more = _counted(tmp_path / "more.json", [1_010_100, 1_010_300, 1_009_900])
    again = _counted(tmp_path / "again.json", [1_000_200, 999_900, 1_000_100])
    [row] = api.compare_builds(base, more).rows
    assert row.kind is Kind.INSTRUCTIONS and row.verdict.value == "slower"
    assert abs(row.ratio - 1.01) < 0.001
    [row] = api.compare_builds(base, again).rows
    assert row.verdict.value == "same"
    assert "Instruction counts (run --instructions) need NEW/BASE beyond 0.5%" in \
        comparison_criteria(api.compare_builds(base, more))
    # Time's 5 % minimum effect would have hidden it.
    [row] = api.compare_builds(base, more, instructions_min_effect=0.05).rows
    assert row.verdict.value == "same"


def test_counts_of_two_counters_are_never_compared(tmp_path: Path) -> None:
    base = _counted(tmp_path / "base.json", [1_000_000, 1_000_400])
    other = _counted(tmp_path / "other.json", [1_100_000, 1_100_400], method="perf_event")
    with pytest.raises(KscperfError, match="different instruction counters"):
        api.compare_builds(base, other)
    assert not api.compare_builds(base, other, force=True).rows


def _with_functions(path: Path, functions: list[dict[str, float]]) -> str:
    """A results file of one build whose counting processes kept `functions`."""
    counts = [CellResult(model="m", tool="pt", task="fwd", process_index=i,
                         status=CellStatus.OK,
                         configs=(ConfigResult(config="c", status=CellStatus.OK,
                                               instructions=sum(f.values()),
                                               instruction_functions=tuple(f.items())),))
              for i, f in enumerate(functions)]
    write_results(str(path), [], {"build": path.stem, "instructions_method": "callgrind"},
                  counts=counts)
    return str(path)


def test_compare_explain_names_the_function_whose_count_moved(tmp_path: Path) -> None:
    base = _with_functions(tmp_path / "base.json", [
        {"sin": 600_000, "add": 300_000, "other": 100_000},
        {"sin": 600_100, "add": 300_000, "other": 100_050}])
    new = _with_functions(tmp_path / "new.json", [
        {"sin": 630_000, "add": 300_000, "other": 100_020},
        {"sin": 630_100, "add": 300_010, "other": 100_000}])
    comparison = api.compare_builds(base, new)
    [e] = comparison.count_explanations
    first = e.functions[0]
    assert (first.function, first.verdict) == ("sin", "more")
    assert abs(first.share - 1) < 0.01 and abs(e.explained_share - 1) < 0.01
    assert {f.function: f.verdict for f in e.functions[1:]} == {"add": "same", "other": "same"}
    text = format_comparison(comparison, "table", explain="regressions")
    assert "Functions of m/pt/fwd/c:instructions" in text and "more" in text
    doc = json.loads(format_comparison(comparison, "json", explain="regressions"))
    [row] = doc["benchmarks"]
    assert row["explain"][0]["function"] == "sin" and row["explain"][0]["verdict"] == "more"
    # Files counted without --explain keep no functions: compare says what to do.
    plain = _counted(tmp_path / "plain.json", [1_000_000, 1_000_100])
    more = _counted(tmp_path / "more.json", [1_030_000, 1_030_100])
    assert "count both builds with --instructions --explain" in format_comparison(
        api.compare_builds(plain, more), "table", explain="regressions")
