"""Why an instruction count changed: the function-by-function diff of two builds' counts
(`explain_counts`), one `CountExplanation` per instructions row whose two builds both kept
their functions (`run --instructions --explain`).

Each counting process kept the functions with the most self instructions per call
(`kscperf.worker.instructions.FUNCTIONS_KEPT`); a function's value in a process is that count,
and 0 in a process that did not keep it. Names are Callgrind's function names, which carry
no file path, so a build's install path never tells two builds' functions apart (as
torch's `CallgrindStats.as_standardized` strips them). A count is not noisy as a time is,
so no test is made: a function `moved` (`more` or `fewer`) when the change of its mean
count beats both `NEGLIGIBLE_SHARE` of the base call's count and the spread of its own
counts across each build's processes (their ranges added); otherwise it is `same`. Its
`share` is its change over the call's measured change. Uses no statistics library and
produces no strings for humans.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable

from kscperf.results.files import LoadedResults

__all__ = ["NEGLIGIBLE_SHARE", "FunctionChange", "CountExplanation", "explain_counts"]

# A function whose count moved by less than this share of the base call's count moved by
# nothing that matters: "same" (0.1 %, a fifth of the count's minimum effect).
NEGLIGIBLE_SHARE = 0.001

_CellConfig = tuple[str, str, str, str]


@dataclass(frozen=True)
class FunctionChange:
    """One function of one instructions benchmark, BASE against NEW: its mean self
    instructions per call in each build (0 where no process kept it), the change, its
    share of the call's measured change, `only_in` ("base", "new" or "") and the verdict
    (`more`, `fewer` or `same`)."""

    function: str
    base: float
    new: float
    delta: float
    share: float
    only_in: str
    verdict: str


@dataclass(frozen=True)
class CountExplanation:
    """The function diff of one instructions benchmark (`name`): the measured change of its
    count per call (NEW less BASE), BASE's count, the processes that kept functions, the
    share of the measured change that the functions that moved add up to, and the
    functions, largest |Δ| first."""

    name: str
    measured_delta: float
    base_count: float
    processes_base: int
    processes_new: int
    explained_share: float
    functions: tuple[FunctionChange, ...]


def _functions(results: LoadedResults) -> dict[_CellConfig, list[dict[str, float]]]:
    """Every counting process's functions of each model/tool/task/config, in run order."""
    found: dict[_CellConfig, list[dict[str, float]]] = {}
    for run in results.instruction_runs:
        for c in run.configs:
            if c.instruction_functions:
                found.setdefault((run.model, run.tool, run.task, c.config), []).append(
                    dict(c.instruction_functions))
    return found


def _spread(values: list[float]) -> float:
    return max(values) - min(values) if values else 0.0


def _explanation(name: str, base: list[dict[str, float]], new: list[dict[str, float]],
                 base_count: float, new_count: float) -> CountExplanation:
    measured = new_count - base_count
    negligible = NEGLIGIBLE_SHARE * base_count
    changes = []
    for function in sorted({f for t in base + new for f in t}):
        b = [t.get(function, 0.0) for t in base]
        n = [t.get(function, 0.0) for t in new]
        delta = statistics.fmean(n) - statistics.fmean(b)
        moved = abs(delta) > max(negligible, _spread(b) + _spread(n))
        only_in = ("new" if not any(function in t for t in base)
                   else "base" if not any(function in t for t in new) else "")
        changes.append(FunctionChange(
            function, statistics.fmean(b), statistics.fmean(n), delta,
            delta / measured if measured else math.nan, only_in,
            ("more" if delta > 0 else "fewer") if moved else "same"))
    changes.sort(key=lambda f: (-abs(f.delta), f.function))
    total = sum(f.delta for f in changes if f.verdict != "same")
    return CountExplanation(name, measured, base_count, len(base), len(new),
                            total / measured if measured else math.nan, tuple(changes))


def explain_counts(base: LoadedResults, new: LoadedResults,
                   rows: Iterable[tuple[str, _CellConfig, float, float]]
                   ) -> tuple[CountExplanation, ...]:
    """The function diff of each given instructions row, (benchmark name, (model, tool,
    task, config), BASE's and NEW's count per call), that both builds kept functions for;
    rows without them on either side are left out."""
    base_functions, new_functions = _functions(base), _functions(new)
    return tuple(_explanation(name, base_functions[key], new_functions[key], b, n)
                 for name, key, b, n in rows
                 if key in base_functions and key in new_functions)
