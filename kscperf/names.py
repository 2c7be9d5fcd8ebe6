"""The names of things in results: tasks, tools, cells and benchmarks.

The tool-name grammar (built-in tools, the `_cuda` and `_transfer` twins) and the only place
that builds or parses `model/tool/task` (a cell) and
`model/tool/task/config[:kind]` (a benchmark). Benchmark kinds:

    model/tool/task/config           run time, seconds per call
    model/tool/task:compile          compile time of the cell, one value per process
    model/tool/task/config:prep      prep time of one config, one value per process
    model/tool/task/config:instructions  instructions per call of one config, one value
                                         per counting process (docs/method.md, "Counting
                                         instructions")

Imports nothing else of kscperf, and never torch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["TASKS", "BUILTIN_TOOLS", "EAGER_TOOLS", "CUDA_SUFFIX", "TRANSFER_SUFFIX",
           "MANUAL_CUDA_TOOL", "split_device", "Kind", "BenchmarkName", "cell_name",
           "benchmark_name", "compile_name", "prep_name", "parse_benchmark_name"]

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


class Kind(enum.StrEnum):
    """What a benchmark measures: the one vocabulary of compare, history, report and
    dashboard (and of their JSON outputs). Declared in display order."""

    TIME = "time"
    COMPILE = "compile"
    PREP = "prep"
    PEAK_RSS = "peak_rss"
    PEAK_CUDA = "peak_cuda"
    INSTRUCTIONS = "instructions"

    @property
    def suffix(self) -> str:
        """What follows the config in a benchmark name: "" for run time, else `:kind`."""
        return "" if self is Kind.TIME else f":{self.value}"

    @property
    def unit(self) -> str:
        """pyperf's unit name of its values: "byte" for memory, "integer" for instruction
        counts, else "second"."""
        if self is Kind.INSTRUCTIONS:
            return "integer"
        return "byte" if self in (Kind.PEAK_RSS, Kind.PEAK_CUDA) else "second"

    @property
    def is_timed(self) -> bool:
        """Whether its values are times, which a change of the machine's speed moves."""
        return self.unit == "second"

    @property
    def is_single_shot(self) -> bool:
        """Whether a process measures it once (compile, prep, memory), not value by value:
        its processes share one night's state, so their spread says little of the next."""
        return self is not Kind.TIME

    def title(self) -> str:
        """Its name for people: "run time", "peak RSS"... (not `str.title`: a kind is
        shown by this name, never title-cased)."""
        return _KIND_TITLES[self]


_KIND_TITLES = {Kind.TIME: "run time", Kind.COMPILE: "compile time", Kind.PREP: "prep time",
                Kind.PEAK_RSS: "peak RSS", Kind.PEAK_CUDA: "peak CUDA memory",
                Kind.INSTRUCTIONS: "instructions"}


def cell_name(model: str, tool: str, task: str) -> str:
    """`model/tool/task`: one cell, the unit of process isolation."""
    return f"{model}/{tool}/{task}"


def benchmark_name(model: str, tool: str, task: str, config: str,
                   kind: Kind = Kind.TIME) -> str:
    """`model/tool/task/config` for run time, with `:kind` appended for any other kind.
    A compile time belongs to the cell, not to a config: `compile_name` names it."""
    kind = Kind(kind)
    if kind is Kind.COMPILE:
        raise ValueError("a compile time has no config; use compile_name")
    return f"{cell_name(model, tool, task)}/{config}{kind.suffix}"


def compile_name(model: str, tool: str, task: str) -> str:
    """`model/tool/task:compile`: a cell's compile time."""
    return cell_name(model, tool, task) + Kind.COMPILE.suffix


def prep_name(model: str, tool: str, task: str, config: str) -> str:
    """`model/tool/task/config:prep`: one config's prep time."""
    return benchmark_name(model, tool, task, config, Kind.PREP)


@dataclass(frozen=True)
class BenchmarkName:
    """The parts of a parsed benchmark name; `config` is None for a compile time."""

    model: str
    tool: str
    task: str
    config: str | None
    kind: Kind = Kind.TIME

    @property
    def cell(self) -> str:
        """`model/tool/task`: the cell the benchmark belongs to."""
        return cell_name(self.model, self.tool, self.task)


def parse_benchmark_name(name: str) -> BenchmarkName | None:
    """The parts of `name`, or None when it is not a kscperf benchmark name (a plain
    pyperf file may hold any names). A model name never holds `/`; a config name may."""
    base, kind = name, Kind.TIME
    for k in Kind:
        if k.suffix and name.endswith(k.suffix):
            base, kind = name[: -len(k.suffix)], k
            break
    parts = base.split("/", 3)
    if kind is Kind.COMPILE:
        if len(parts) != 3 or not all(parts):
            return None
        return BenchmarkName(parts[0], parts[1], parts[2], None, kind)
    if len(parts) != 4 or not all(parts):
        return None
    return BenchmarkName(parts[0], parts[1], parts[2], parts[3], kind)
