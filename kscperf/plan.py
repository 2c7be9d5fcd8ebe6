"""Cells from models × tools × tasks: name validation, filters, shards and rounds.

Planning never imports torch or a definition module: models come from `definitions.scan_models`
(static) and plug-in tool names from entry points and options, unimported.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from kscperf.definitions import ModelDef
from kscperf.errors import KscperfError
from kscperf.names import TASKS, cell_name
from kscperf.tools import BUILTIN_TOOLS, CUDA_SUFFIX, split_device

__all__ = ["PlannedCell", "all_tool_names", "resolve_tools", "resolve_tasks", "plan_cells",
           "parse_shard", "shard_cells", "plan_rounds"]


@dataclass(frozen=True)
class PlannedCell:
    """One MODEL×TOOL×TASK to run; `skip_reason` set when it is known not to run here."""

    model: ModelDef
    tool: str
    task: str
    skip_reason: str | None = None

    @property
    def name(self) -> str:
        return cell_name(self.model.name, self.tool, self.task)


def all_tool_names(plugin_names: list[str]) -> list[str]:
    """Every tool, CPU tools first: the built-ins, the plug-ins, then their CUDA twins."""
    base = list(BUILTIN_TOOLS) + [p for p in plugin_names if p not in BUILTIN_TOOLS]
    return base + [t + CUDA_SUFFIX for t in base]


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


def resolve_tools(requested: str | None, plugin_names: list[str]) -> list[str]:
    """The tools named in a comma list, in the order given (default: all); KscperfError for
    an unknown one."""
    known = all_tool_names(plugin_names)
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
    any of `patterns` (all when none). Without an NVIDIA driver, CUDA cells are planned as
    skipped so that no process is spent on them."""
    cells = []
    for model in models:
        for tool in tools:
            for task in tasks:
                name = cell_name(model.name, tool, task)
                if patterns and not any(p in name for p in patterns):
                    continue
                skip = None
                if split_device(tool)[1] == "cuda" and not cuda_present:
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


def shard_cells(cells: list[PlannedCell], index: int, count: int) -> list[PlannedCell]:
    """The cells of shard `index` of `count`, chosen by a stable hash of the cell's name, so
    that identical machines running different shards never overlap or miss a cell."""
    return [c for c in cells if zlib.crc32(c.name.encode()) % count == index - 1]


def plan_rounds(cells: list[PlannedCell], processes: int) -> list[tuple[int, PlannedCell]]:
    """(process index, cell) in run order: every cell once per round, `processes` rounds, so
    that drift over time spreads evenly over tools and models."""
    return [(p, c) for p in range(processes) for c in cells]
