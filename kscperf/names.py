"""The names of things in results: tasks, tools, cells and benchmarks.

The tool-name grammar (built-in tools, the `_cuda` and `_transfer` twins) and the only place
that builds or parses `model/tool/task` (a cell) and
`model/tool/task/config[:kind]` (a benchmark). Benchmark kinds:

    model/tool/task/config           run time, seconds per call
    model/tool/task:compile          compile time of the cell, one value per process
    model/tool/task/config:prep      prep time of one config, one value per process

Imports nothing else of kscperf, and never torch.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TASKS", "BUILTIN_TOOLS", "EAGER_TOOLS", "CUDA_SUFFIX", "TRANSFER_SUFFIX",
           "MANUAL_CUDA_TOOL", "split_device", "KIND_SUFFIXES", "BenchmarkName", "cell_name", "benchmark_name",
           "compile_name", "prep_name", "parse_benchmark_name"]

TASKS = ("inference", "fwd", "bwd", "jacobian")

BUILTIN_TOOLS = ("pt", "ptnice", "ts", "compiled")
# Built-ins that never need torch.compile's machinery (plug-ins might).
EAGER_TOOLS = ("pt", "ptnice", "ts")
CUDA_SUFFIX = "_cuda"
# A model's CUDA tool measured with its host-to-device copies: `<tool>_transfer`.
TRANSFER_SUFFIX = "_transfer"
MANUAL_CUDA_TOOL = "manual_cuda"


def split_device(tool: str) -> tuple[str, str]:
    """`pt_cuda` -> ("pt", "cuda"); `pt` -> ("pt", "cpu")."""
    if tool.endswith(CUDA_SUFFIX):
        return tool[: -len(CUDA_SUFFIX)], "cuda"
    return tool, "cpu"

# The suffix of each non-time kind, as it appears after the `:` of a benchmark name.
KIND_SUFFIXES = {"compile": ":compile", "prep": ":prep", "peak_rss": ":peak_rss",
                 "peak_cuda": ":peak_cuda"}


def cell_name(model: str, tool: str, task: str) -> str:
    """`model/tool/task`: one cell, the unit of process isolation."""
    return f"{model}/{tool}/{task}"


def benchmark_name(model: str, tool: str, task: str, config: str, kind: str = "time") -> str:
    """`model/tool/task/config` for run time, with `:kind` appended for any other kind.
    A compile time belongs to the cell, not to a config: `compile_name` names it."""
    if kind == "compile":
        raise ValueError("a compile time has no config; use compile_name")
    base = f"{cell_name(model, tool, task)}/{config}"
    return base if kind == "time" else base + KIND_SUFFIXES[kind]


def compile_name(model: str, tool: str, task: str) -> str:
    """`model/tool/task:compile`: a cell's compile time."""
    return cell_name(model, tool, task) + KIND_SUFFIXES["compile"]


def prep_name(model: str, tool: str, task: str, config: str) -> str:
    """`model/tool/task/config:prep`: one config's prep time."""
    return benchmark_name(model, tool, task, config, "prep")


@dataclass(frozen=True)
class BenchmarkName:
    """The parts of a parsed benchmark name; `config` is None for a compile time."""

    model: str
    tool: str
    task: str
    config: str | None
    kind: str = "time"

    @property
    def cell(self) -> str:
        """`model/tool/task`: the cell the benchmark belongs to."""
        return cell_name(self.model, self.tool, self.task)


def parse_benchmark_name(name: str) -> BenchmarkName | None:
    """The parts of `name`, or None when it is not a kscperf benchmark name (a plain
    pyperf file may hold any names). A model name never holds `/`; a config name may."""
    base, kind = name, "time"
    for k, suffix in KIND_SUFFIXES.items():
        if name.endswith(suffix):
            base, kind = name[: -len(suffix)], k
            break
    parts = base.split("/", 3)
    if kind == "compile":
        if len(parts) != 3 or not all(parts):
            return None
        return BenchmarkName(parts[0], parts[1], parts[2], None, kind)
    if len(parts) != 4 or not all(parts):
        return None
    return BenchmarkName(parts[0], parts[1], parts[2], parts[3], kind)
