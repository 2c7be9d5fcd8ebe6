"""The compile panel of one cell in one worker process: what its compiler did, as plain data.

Filled in by the worker (`kscperf.worker.compilepanel` reads torch's own counters and
compilation metrics; a tool adds its own figures), read by the parent (results, compare,
report, history, dashboard) without torch. Every field torch could not tell (an API missing
in that torch version, a tool that is not `torch.compile`) is None: unknown, never zero.

    phases_s          seconds per compile phase (`PHASES`), summed over every frame compiled
                      in the cell: the first compile and each config's recompile
    first_compile_s   seconds of frame compilation in the compile phase (the first config)
    recompile_s       (config, seconds) compiled again while getting that config ready
    frames, graphs    frames dynamo compiled; distinct FX graphs handed to the backend
    graph_breaks      (reason, times seen): each break site once, its reason short
    recompiles        the guard failures that caused each recompile, deduplicated
    timed_recompiles  recompiles caught inside the timed loop (refused there, then compiled
                      outside timing and timed again): "config: reason"
    guards, kernels   guards over the compiled frames; kernels inductor generated
    cache             FX graph and AOT autograd cache hits and misses (`CACHE_COUNTERS`)
    figures           a tool's own named figures, each with its unit (`Figure`)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["PHASES", "COUNTS", "CACHE_COUNTERS", "Figure", "CompilePanel", "figures_from"]

# In the order a compile goes through them. "triton" and "autotune" only happen on a GPU.
PHASES = ("dynamo", "aot_autograd", "inductor", "codegen", "triton", "autotune")
# The exact counts: any increase from one build to the next is a regression.
COUNTS = ("graph_breaks", "recompiles", "graphs")
CACHE_COUNTERS = ("fxgraph_hit", "fxgraph_miss", "aotautograd_hit", "aotautograd_miss")


@dataclass(frozen=True)
class Figure:
    """One named figure a tool reports of its own compile step (`value` in `unit`, such as
    "s" for seconds or "count"); compared between builds like the built-in phases."""

    name: str
    value: float
    unit: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit}

    @classmethod
    def from_dict(cls, d: Any) -> Figure:
        return cls(str(d["name"]), float(d["value"]), str(d["unit"]))


def figures_from(obj: Any, who: str) -> tuple[Figure, ...]:
    """The figures a tool's compile step reports, as its `compile_figures` attribute holds
    them: a mapping of name to (value, unit). TypeError naming `who` for anything else."""
    raw = getattr(obj, "compile_figures", None)
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise TypeError(f"{who}: compile_figures must map a name to (value, unit), "
                        f"not {type(raw).__name__}")
    figures = []
    for name, item in raw.items():
        ok = (isinstance(item, (tuple, list)) and len(item) == 2
              and isinstance(item[0], (int, float)) and not isinstance(item[0], bool)
              and isinstance(item[1], str) and isinstance(name, str) and name)
        if not ok:
            raise TypeError(f"{who}: compile_figures[{name!r}] must be (value, unit), "
                            f"a number and a string, not {item!r}")
        figures.append(Figure(name, float(item[0]), item[1]))
    return tuple(figures)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class CompilePanel:
    """What the compiler did for one cell in one process (see the module docstring)."""

    phases_s: tuple[tuple[str, float | None], ...] = ()
    first_compile_s: float | None = None
    recompile_s: tuple[tuple[str, float], ...] = ()
    frames: int | None = None
    graphs: int | None = None
    graph_breaks: tuple[tuple[str, int], ...] | None = None
    recompiles: tuple[str, ...] | None = None
    timed_recompiles: tuple[str, ...] = ()
    guards: int | None = None
    kernels: int | None = None
    cache: tuple[tuple[str, int | None], ...] = ()
    figures: tuple[Figure, ...] = ()

    def count(self, name: str) -> int | None:
        """One of `COUNTS`: distinct graph breaks, recompiles (each guard failure once) or
        graphs; None when unknown."""
        if name == "graph_breaks":
            return None if self.graph_breaks is None else len(self.graph_breaks)
        if name == "recompiles":
            return None if self.recompiles is None else len(self.recompiles)
        if name == "graphs":
            return self.graphs
        raise ValueError(f"unknown count {name!r}; counts are {', '.join(COUNTS)}")

    def phase_s(self, phase: str) -> float | None:
        """Seconds of one of `PHASES`, None when unknown."""
        return dict(self.phases_s).get(phase)

    @property
    def total_recompile_s(self) -> float:
        """Seconds compiled again for later configs, over all of them."""
        return sum(s for _, s in self.recompile_s)

    @property
    def break_reasons(self) -> tuple[str, ...]:
        """Each graph break's reason, once."""
        return tuple(reason for reason, _ in self.graph_breaks or ())

    def to_dict(self) -> dict[str, Any]:
        return {
            "phases_s": dict(self.phases_s), "first_compile_s": self.first_compile_s,
            "recompile_s": [list(item) for item in self.recompile_s],
            "frames": self.frames, "graphs": self.graphs,
            "graph_breaks": (None if self.graph_breaks is None
                             else [list(item) for item in self.graph_breaks]),
            "recompiles": None if self.recompiles is None else list(self.recompiles),
            "timed_recompiles": list(self.timed_recompiles),
            "guards": self.guards, "kernels": self.kernels, "cache": dict(self.cache),
            "figures": [f.to_dict() for f in self.figures],
        }

    @classmethod
    def from_dict(cls, d: Any) -> CompilePanel:
        """The panel `d` of a results file; KeyError, TypeError or ValueError when it is
        not one."""
        if not isinstance(d, dict):
            raise TypeError(f"a compile panel is an object, not {d!r}")
        breaks = d.get("graph_breaks")
        recompiles = d.get("recompiles")
        return cls(
            phases_s=tuple((str(k), _optional_float(v))
                           for k, v in dict(d.get("phases_s") or {}).items()),
            first_compile_s=_optional_float(d.get("first_compile_s")),
            recompile_s=tuple((str(c), float(s)) for c, s in d.get("recompile_s") or ()),
            frames=_optional_int(d.get("frames")), graphs=_optional_int(d.get("graphs")),
            graph_breaks=None if breaks is None else tuple((str(r), int(n)) for r, n in breaks),
            recompiles=None if recompiles is None else tuple(str(r) for r in recompiles),
            timed_recompiles=tuple(str(r) for r in d.get("timed_recompiles") or ()),
            guards=_optional_int(d.get("guards")), kernels=_optional_int(d.get("kernels")),
            cache=tuple((str(k), _optional_int(v))
                        for k, v in dict(d.get("cache") or {}).items()),
            figures=tuple(Figure.from_dict(f) for f in d.get("figures") or ()))
