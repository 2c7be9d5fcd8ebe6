"""Cells from models × tools × tasks: name validation, filters, shards and rounds.

Planning never imports torch or a definition module: models (and the tools they define for
themselves) come from `definitions.scan_models` (static) and plug-in tool names from entry
points and options, unimported.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Mapping

from kscperf.errors import KscperfError
from kscperf.names import BUILTIN_TOOLS, CUDA_SUFFIX, EAGER_TOOLS, TASKS, cell_name, split_device
from kscperf.plan.definitions import ModelDef
from kscperf.spec import CellResult

__all__ = ["PlannedCell", "all_tool_names", "resolve_tools", "resolve_tasks", "plan_cells",
           "parse_shard", "static_cost_s", "measured_costs_s", "expected_costs_s",
           "assign_shards", "shard_cells", "plan_fingerprint", "plan_rounds"]


@dataclass(frozen=True)
class PlannedCell:
    """One MODEL×TOOL×TASK to run; `skip_reason` set when it is known not to run here;
    `configs` names the only configs to run (empty: every config)."""

    model: ModelDef
    tool: str
    task: str
    skip_reason: str | None = None
    configs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return cell_name(self.model.name, self.tool, self.task)


def all_tool_names(plugin_names: list[str], model_tool_names: list[str] | None = None
                   ) -> list[str]:
    """Every tool: the built-ins, the plug-ins, the tools that models define for
    themselves, then the CUDA twins of the built-ins and plug-ins."""
    base = list(BUILTIN_TOOLS) + [p for p in plugin_names if p not in BUILTIN_TOOLS]
    own = [t for t in dict.fromkeys(model_tool_names or []) if t not in base]
    return base + own + [t + CUDA_SUFFIX for t in base]


def _chosen(requested: str, known: list[str], kind: str, hint: str = "") -> list[str]:
    """The names of a comma list, each checked against `known`; KscperfError naming the
    option (`--tools`, `--tasks`) for an unknown name or an empty list."""
    chosen = [part.strip() for part in requested.split(",") if part.strip()]
    for name in chosen:
        if name not in known:
            raise KscperfError(f"unknown {kind} {name!r} in --{kind}s; known {kind}s: "
                               f"{', '.join(known)}{hint}.")
    if not chosen:
        raise KscperfError(f"--{kind}s names no {kind}.")
    return chosen


def resolve_tools(requested: str | None, plugin_names: list[str],
                  model_tool_names: list[str] | None = None) -> list[str]:
    """The tools named in a comma list, in the order given (default: all); KscperfError for
    an unknown one."""
    known = all_tool_names(plugin_names, model_tool_names)
    if requested is None:
        return known
    hint = " (plug-ins register more with --tool-plugin)"
    return list(dict.fromkeys(_chosen(requested, known, "tool", hint)))


def resolve_tasks(requested: str | None) -> list[str]:
    """The tasks named in a comma list, in the design's order (default: all); KscperfError
    for an unknown one."""
    if requested is None:
        return list(TASKS)
    chosen = _chosen(requested, list(TASKS), "task")
    return [t for t in TASKS if t in chosen]


def plan_cells(models: list[ModelDef], tools: list[str], tasks: list[str],
               patterns: list[str] | None = None, cuda_present: bool = True) -> list[PlannedCell]:
    """Cells in model, tool, task order, keeping those whose `model/tool/task` name contains
    any of `patterns` (all when none). A tool that a model defines for itself gets cells of
    that model only (and, for that model, replaces a plug-in of the same name). Without an
    NVIDIA driver, CUDA cells are planned as skipped so that no process is spent on them."""
    owned = {t for m in models for t in m.tool_names}
    cells = []
    for model in models:
        own = {t.name: t for t in model.tools}
        for tool in tools:
            if tool in owned and tool not in own:
                continue
            needs_cuda = own[tool].cuda if tool in own else split_device(tool)[1] == "cuda"
            for task in tasks:
                name = cell_name(model.name, tool, task)
                if patterns and not any(p in name for p in patterns):
                    continue
                skip = None
                if needs_cuda and not cuda_present:
                    skip = "no NVIDIA GPU driver found on this machine"
                cells.append(PlannedCell(model, tool, task, skip))
    return cells


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` (1-based) -> (I, N); KscperfError when malformed."""
    try:
        i_text, n_text = text.split("/")
        i, n = int(i_text), int(n_text)
    except ValueError:
        raise KscperfError(f"--shard {text!r} must look like I/N, e.g. 2/4.") from None
    if not (n >= 1 and 1 <= i <= n):
        raise KscperfError(f"--shard {text!r}: I must be between 1 and N.")
    return i, n


# Seconds one worker process of a cell is expected to take when no earlier results file
# says, by tool: the shipped suite at --fast with a warm compiler cache on a 2-core VM
# (2026-11-30) took 0.2-0.6 s per eager or TorchScript worker and 1.3-11 s per
# torch.compile worker. A plug-in is taken to be a compiler.
_EAGER_COST_S = 0.5
_COMPILER_COST_S = 4.0


def static_cost_s(cell: PlannedCell) -> float:
    """A cell's expected seconds per worker process without measurements: nothing for a
    cell the plan skips, a compiler's cost for compiled tools and plug-ins, else an eager
    tool's."""
    if cell.skip_reason:
        return 0.0
    return _EAGER_COST_S if split_device(cell.tool)[0] in EAGER_TOOLS else _COMPILER_COST_S


def measured_costs_s(runs: Iterable[CellResult]) -> dict[str, float]:
    """Each cell's mean wall seconds per worker process in an earlier build's raw worker
    results (what --balance reads): large configs and slow compilers weigh what they took."""
    walls: dict[str, list[float]] = {}
    for r in runs:
        if r.wall_s is not None:
            walls.setdefault(r.name, []).append(r.wall_s)
    return {name: sum(w) / len(w) for name, w in walls.items()}


def expected_costs_s(cells: list[PlannedCell],
                     measured: Mapping[str, float] | None = None) -> list[float]:
    """Each cell's expected seconds per worker process: measured where `measured` has the
    cell, else the median measured cost of cells of the same tool, else `static_cost_s`."""
    measured = measured or {}
    by_tool: dict[str, list[float]] = {}
    for c in cells:
        if c.name in measured and not c.skip_reason:
            by_tool.setdefault(c.tool, []).append(measured[c.name])
    costs = []
    for c in cells:
        if c.skip_reason:
            costs.append(0.0)
        elif c.name in measured:
            costs.append(measured[c.name])
        elif by_tool.get(c.tool):
            costs.append(sorted(by_tool[c.tool])[len(by_tool[c.tool]) // 2])
        else:
            costs.append(static_cost_s(c))
    return costs


def assign_shards(cells: list[PlannedCell], count: int, costs: list[float]) -> list[int]:
    """The shard (0-based) of each cell: the costliest cell first, each to the shard with
    the least cost so far (then the fewest cells, then the lowest index), so that every cell
    is in exactly one shard and the shards' expected costs are close. Deterministic: identical machines
    given the same plan and costs agree on every cell."""
    loads = [0.0] * count
    sizes = [0] * count
    owner = [0] * len(cells)
    for i in sorted(range(len(cells)), key=lambda i: (-costs[i], cells[i].name)):
        # Cells that cost nothing (skipped by the plan) are dealt out one by one.
        owner[i] = min(range(count), key=lambda k: (loads[k], sizes[k], k))
        loads[owner[i]] += costs[i]
        sizes[owner[i]] += 1
    return owner


def shard_cells(cells: list[PlannedCell], index: int, count: int,
                costs: list[float] | None = None) -> list[PlannedCell]:
    """The cells of shard `index` (1-based) of `count`, in plan order, split by expected
    cost (`costs`, one per cell; default `expected_costs_s(cells)`)."""
    owner = assign_shards(cells, count, costs if costs is not None else expected_costs_s(cells))
    return [c for c, k in zip(cells, owner) if k == index - 1]


def plan_fingerprint(cells: list[PlannedCell], costs: list[float]) -> str:
    """A short hash of the whole plan and its costs: the shards of one plan share it, so a
    merge can tell shards of different plans (other paths, tools, --balance files) apart."""
    text = "\n".join(f"{c.name} {c.skip_reason or ''} {cost!r}" for c, cost in zip(cells, costs))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def plan_rounds(cells: list[PlannedCell], processes: int) -> list[tuple[int, PlannedCell]]:
    """(process index, cell) in run order: every cell once per round, `processes` rounds, so
    that drift over time spreads evenly over tools and models."""
    return [(p, c) for p in range(processes) for c in cells]
