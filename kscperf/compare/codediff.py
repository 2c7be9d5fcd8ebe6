"""What a compiler generated, BASE against NEW: each compiled graph's kernels and the unified
diff of its code (`code_diffs`), and each cell's kernel count (`generated_kernels`), from
the code `--explain`'s instrumented compiles kept (`kscperf.spec.OpProfile.code`).

The code of a cell is that of the first process whose profiles carry code, config by
config in run order, each graph once (a later config that compiles the same graph again
adds nothing). Graphs are matched by their place in that order. The numbers a process
gives its graphs in compile order (`graph_3_`, `AOT ID: ['3_inference']`) are replaced by
`N` before the diff, since they count what the process compiled before; kernel and buffer
numbers are kept (they follow the code). The kernel lists name each kernel without its
number, as the op diff matches them (`explain.normalised_op`). Pure text: no statistics.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Iterable

from kscperf.compare.explain import normalised_op
from kscperf.names import cell_name
from kscperf.spec import CellResult

__all__ = ["GraphDiff", "CodeDiff", "kernels_in", "cell_graphs", "generated_kernels",
           "code_diffs"]

# How Inductor's wrapper module defines each kernel it generated, C++ or Triton:
# `cpp_fused_add_0 = async_compile.cpp_pybinding(...)`, `triton_poi_... = async_compile.triton(`.
_KERNEL_DEFINITION = re.compile(r"^(\w+) = async_compile\.\w+\(", re.MULTILINE)

_PROCESS_NUMBERS = (re.compile(r"graph_\d+_"), "graph_N_"), \
    (re.compile(r"(AOT ID: \['?)\d+_"), r"\1N_")

_Cell = tuple[str, str, str]


def _comparable(code: str) -> str:
    for pattern, replacement in _PROCESS_NUMBERS:
        code = pattern.sub(replacement, code)
    return code


def kernels_in(code: str) -> tuple[str, ...]:
    """The kernels a graph's generated module defines, in its order, without numbers."""
    return tuple(normalised_op(name) for name in _KERNEL_DEFINITION.findall(code))


@dataclass(frozen=True)
class GraphDiff:
    """One compiled graph (`graph`, 1 for the first the cell compiled), its kernels in each
    build (empty for a build without that graph) and the unified diff of its code ("" when
    the code is the same)."""

    graph: int
    kernels_base: tuple[str, ...]
    kernels_new: tuple[str, ...]
    diff: str

    @property
    def changed(self) -> bool:
        """Whether the graph's code differs between the builds."""
        return bool(self.diff)


@dataclass(frozen=True)
class CodeDiff:
    """The generated code of one cell (model, tool, task), BASE against NEW, graph by
    graph, with each build's kernel count over its graphs."""

    model: str
    tool: str
    task: str
    graphs: tuple[GraphDiff, ...]

    @property
    def cell(self) -> str:
        return cell_name(self.model, self.tool, self.task)

    @property
    def kernels_base(self) -> int:
        return sum(len(g.kernels_base) for g in self.graphs)

    @property
    def kernels_new(self) -> int:
        return sum(len(g.kernels_new) for g in self.graphs)

    @property
    def changed(self) -> bool:
        """Whether any graph's code differs, or one build has a graph the other lacks."""
        return any(g.changed for g in self.graphs)


def cell_graphs(runs: Iterable[CellResult]) -> dict[_Cell, tuple[str, ...]]:
    """Each cell's generated graphs, as the module docstring says; cells without kept code
    are left out."""
    found: dict[_Cell, tuple[str, ...]] = {}
    for run in runs:
        key = (run.model, run.tool, run.task)
        if key in found:
            continue
        graphs: list[str] = []
        for config in run.configs:
            for code in config.op_profile.code if config.op_profile else ():
                if code not in graphs:
                    graphs.append(code)
        if graphs:
            found[key] = tuple(graphs)
    return found


def generated_kernels(runs: Iterable[CellResult]) -> dict[_Cell, int]:
    """Each cell's number of generated kernels, over its graphs (cells with kept code)."""
    return {key: sum(len(kernels_in(code)) for code in graphs)
            for key, graphs in cell_graphs(runs).items()}


def code_diffs(base_runs: Iterable[CellResult],
               new_runs: Iterable[CellResult]) -> tuple[CodeDiff, ...]:
    """One `CodeDiff` per cell whose code both builds kept, in BASE's order."""
    base, new = cell_graphs(base_runs), cell_graphs(new_runs)
    out = []
    for key, base_graphs in base.items():
        if key not in new:
            continue
        new_graphs = new[key]
        graphs = []
        for i in range(max(len(base_graphs), len(new_graphs))):
            b = _comparable(base_graphs[i]) if i < len(base_graphs) else ""
            n = _comparable(new_graphs[i]) if i < len(new_graphs) else ""
            diff = "".join(difflib.unified_diff(
                b.splitlines(keepends=True), n.splitlines(keepends=True),
                fromfile=f"base graph {i + 1}", tofile=f"new graph {i + 1}"))
            graphs.append(GraphDiff(i + 1, kernels_in(b), kernels_in(n), diff))
        out.append(CodeDiff(*key, graphs=tuple(graphs)))
    return tuple(out)
