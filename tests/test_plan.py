"""Tests of kscperf.plan.cells: tool and task names, -k filters, CUDA cells without a driver,
shards and rounds. No torch, no definition module is imported."""

from __future__ import annotations

import itertools

import pytest

from kscperf.errors import KscperfError
from kscperf.plan.definitions import ModelDef
from kscperf.plan.cells import (PlannedCell, all_tool_names, assign_shards, expected_costs_s,
                          parse_shard, plan_cells, plan_fingerprint, plan_rounds, resolve_tasks,
                          resolve_tools, shard_cells)

MODELS = [ModelDef(name, f"/defs/{name}.py", has_nice=True, has_source=True)
          for name in ("vrelu3", "vgelu", "sqrl", "gmm")]
ALL_TASKS = ["inference", "fwd", "bwd", "jacobian"]


def names(cells: list[PlannedCell]) -> list[str]:
    return [c.name for c in cells]


def test_all_tools_built_ins_then_plugins_then_cuda_twins() -> None:
    assert all_tool_names(["knossos", "pt"]) == [
        "pt", "ptnice", "ts", "compiled", "knossos",
        "pt_cuda", "ptnice_cuda", "ts_cuda", "compiled_cuda", "knossos_cuda"]


def test_resolve_tools_default_is_all_and_keeps_order_without_duplicates() -> None:
    assert resolve_tools(None, ["knossos"]) == all_tool_names(["knossos"])
    assert resolve_tools(" ts, pt ,ts,knossos_cuda", ["knossos"]) == ["ts", "pt", "knossos_cuda"]


@pytest.mark.parametrize("requested, culprit", [("pt,nope", "'nope'"), ("PT", "'PT'"),
                                                ("knossos", "'knossos'")])
def test_unknown_tool_names_the_culprit_and_the_known_ones(requested: str, culprit: str) -> None:
    with pytest.raises(KscperfError) as info:
        resolve_tools(requested, [])
    message = str(info.value)
    assert f"unknown tool {culprit} in --tools" in message
    assert "pt, ptnice, ts, compiled" in message
    assert "--tool-plugin" in message
    assert "\n" not in message


def test_empty_tool_and_task_lists_are_errors() -> None:
    with pytest.raises(KscperfError, match="--tools names no tool"):
        resolve_tools(" , ", [])
    with pytest.raises(KscperfError, match="--tasks names no task"):
        resolve_tasks(",")


def test_resolve_tasks_default_and_canonical_order() -> None:
    assert resolve_tasks(None) == ALL_TASKS
    assert resolve_tasks("jacobian, inference,bwd") == ["inference", "bwd", "jacobian"]


def test_unknown_task_names_the_culprit() -> None:
    with pytest.raises(KscperfError) as info:
        resolve_tasks("fwd,backward")
    assert str(info.value) == ("unknown task 'backward' in --tasks; known tasks: "
                               "inference, fwd, bwd, jacobian.")


def test_plan_cells_order_model_tool_task() -> None:
    cells = plan_cells(MODELS[:2], ["pt", "ts"], ["fwd", "bwd"])
    assert names(cells) == [
        "vrelu3/pt/fwd", "vrelu3/pt/bwd", "vrelu3/ts/fwd", "vrelu3/ts/bwd",
        "vgelu/pt/fwd", "vgelu/pt/bwd", "vgelu/ts/fwd", "vgelu/ts/bwd"]
    assert all(c.skip_reason is None for c in cells)
    assert cells[0].model is MODELS[0]


def test_patterns_keep_cells_whose_name_contains_any() -> None:
    cells = plan_cells(MODELS, ["pt", "ptnice", "ts"], ALL_TASKS,
                       patterns=["vrelu3/pt/", "sqrl/ts/bwd"])
    # "vrelu3/pt/" matches pt but not ptnice; "sqrl/ts/bwd" also matches vsqrl if there were one
    assert names(cells) == ["vrelu3/pt/inference", "vrelu3/pt/fwd", "vrelu3/pt/bwd",
                            "vrelu3/pt/jacobian", "sqrl/ts/bwd"]
    assert plan_cells(MODELS, ["pt"], ALL_TASKS, patterns=["nothing"]) == []
    assert len(plan_cells(MODELS, ["pt"], ALL_TASKS, patterns=[])) == 16


def test_cuda_cells_are_skipped_without_a_driver() -> None:
    cells = plan_cells(MODELS[:1], ["pt", "pt_cuda", "compiled_cuda"], ["bwd"],
                       cuda_present=False)
    reasons = {c.name: c.skip_reason for c in cells}
    assert reasons["vrelu3/pt/bwd"] is None
    assert reasons["vrelu3/pt_cuda/bwd"] == "no NVIDIA GPU driver found on this machine"
    assert reasons["vrelu3/compiled_cuda/bwd"] == "no NVIDIA GPU driver found on this machine"
    with_gpu = plan_cells(MODELS[:1], ["pt", "pt_cuda"], ["bwd"], cuda_present=True)
    assert [c.skip_reason for c in with_gpu] == [None, None]


@pytest.mark.parametrize("text, expected", [("1/1", (1, 1)), ("2/4", (2, 4)), ("4/4", (4, 4))])
def test_parse_shard(text: str, expected: tuple[int, int]) -> None:
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "a/b", "1-2", "1/2/3", ""])
def test_parse_shard_rejects(text: str) -> None:
    with pytest.raises(KscperfError, match="--shard"):
        parse_shard(text)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 7])
def test_shards_partition_the_cells_exactly(count: int) -> None:
    cells = plan_cells(MODELS, all_tool_names(["knossos"]), ALL_TASKS)
    shards = [shard_cells(cells, i, count) for i in range(1, count + 1)]
    flat = [c.name for shard in shards for c in shard]
    assert sorted(flat) == sorted(names(cells))  # union is everything, nothing twice
    assert len(flat) == len(set(flat))
    for a, b in itertools.combinations(shards, 2):
        assert not set(names(a)) & set(names(b))
    # each shard keeps the plan's order
    for shard in shards:
        assert names(shard) == [n for n in names(cells) if n in set(names(shard))]
    if count > 1:
        assert all(shards), "every shard of this plan should get some of its 160 cells"


def test_shards_are_deterministic_and_a_plan_has_one_fingerprint() -> None:
    cells = plan_cells(MODELS, ["pt", "ts", "compiled"], ALL_TASKS)
    again = plan_cells(MODELS, ["pt", "ts", "compiled"], ALL_TASKS)
    assert names(shard_cells(cells, 2, 3)) == names(shard_cells(again, 2, 3))
    costs = expected_costs_s(cells)
    assert plan_fingerprint(cells, costs) == plan_fingerprint(again, expected_costs_s(again))
    # Another selection, or other costs, is another plan: merge refuses to mix their shards.
    fewer = [c for c in cells if c.tool == "ts"]
    assert plan_fingerprint(fewer, expected_costs_s(fewer)) != plan_fingerprint(cells, costs)
    assert plan_fingerprint(cells, [c * 2 for c in costs]) != plan_fingerprint(cells, costs)


def test_compiled_cells_weigh_more_and_skipped_ones_nothing() -> None:
    cells = plan_cells(MODELS[:1], ["pt", "ts", "compiled", "knossos", "pt_cuda"], ["fwd"],
                       cuda_present=False)
    cost = dict(zip(names(cells), expected_costs_s(cells)))
    assert cost["vrelu3/compiled/fwd"] == cost["vrelu3/knossos/fwd"] > cost["vrelu3/pt/fwd"]
    assert cost["vrelu3/ts/fwd"] == cost["vrelu3/pt/fwd"] > 0
    assert cost["vrelu3/pt_cuda/fwd"] == 0.0


def test_measured_costs_are_used_and_stand_in_for_their_tool() -> None:
    cells = plan_cells(MODELS[:2], ["pt", "compiled"], ["fwd"])
    measured = {"vrelu3/pt/fwd": 0.2, "vrelu3/compiled/fwd": 30.0, "vgelu/pt/fwd": 0.4}
    cost = dict(zip(names(cells), expected_costs_s(cells, measured)))
    assert cost["vrelu3/compiled/fwd"] == 30.0 and cost["vgelu/pt/fwd"] == 0.4
    # not in the file: the median measured cost of its tool, not the static guess
    assert cost["vgelu/compiled/fwd"] == 30.0


def test_costly_cells_are_spread_over_the_shards() -> None:
    cells = plan_cells(MODELS, ["pt", "ptnice", "ts", "compiled"], ALL_TASKS)
    costs = expected_costs_s(cells)
    owner = assign_shards(cells, 3, costs)
    loads = [sum(c for c, k in zip(costs, owner) if k == s) for s in range(3)]
    assert max(loads) <= 1.1 * (sum(loads) / 3)
    compiled = [k for c, k in zip(cells, owner) if c.tool == "compiled"]
    assert sorted(set(compiled)) == [0, 1, 2]


def test_cells_that_cost_nothing_are_dealt_out() -> None:
    cells = plan_cells(MODELS, ["pt_cuda"], ALL_TASKS, cuda_present=False)
    assert [len(shard_cells(cells, i, 4)) for i in range(1, 5)] == [4, 4, 4, 4]


def test_rounds_interleave_every_cell_once_per_process() -> None:
    cells = plan_cells(MODELS[:2], ["pt", "ts"], ["bwd"])
    rounds = plan_rounds(cells, 3)
    assert len(rounds) == 3 * len(cells)
    assert [p for p, _ in rounds] == [0] * 4 + [1] * 4 + [2] * 4
    for p in range(3):
        assert [c.name for q, c in rounds if q == p] == names(cells)
    # never the same cell twice in a row: drift spreads over the whole plan
    assert all(a[1] != b[1] for a, b in zip(rounds, rounds[1:]))
    assert plan_rounds(cells, 1) == [(0, c) for c in cells]
