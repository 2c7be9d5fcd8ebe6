"""The layering rules of the design: only `kscperf/worker/` imports torch, the package has no
import cycle, and benchmark definitions (shipped and test fixtures) never import kscperf."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runner_testing import BENCH_DEFS, FIXTURES

PACKAGE = Path(__file__).resolve().parent.parent / "kscperf"
WORKER = PACKAGE / "worker"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PARENT_MODULES = sorted(p for p in PACKAGE.rglob("*.py") if WORKER not in p.parents)


def test_the_layout_puts_every_torch_import_under_worker() -> None:
    # Static, over every module, lazy imports and TYPE_CHECKING blocks included: no list to
    # keep up to date. The worker package is the only place torch may be imported.
    assert len(PARENT_MODULES) > 20
    offending = {_module_name(p): sorted(m for m in imported_modules(p)
                                         if m.split(".")[0] == "torch"
                                         or m.split(".")[:2] == ["kscperf", "worker"])
                 for p in PARENT_MODULES}
    assert not {k: v for k, v in offending.items() if v}


def test_the_worker_package_imports_torch_and_is_the_only_one() -> None:
    worker_modules = sorted(WORKER.glob("*.py"))
    assert any("torch" in imported_modules(p) for p in worker_modules)


@pytest.mark.integration
def test_the_public_surface_leaves_torch_unloaded() -> None:
    code = ("import sys, kscperf, kscperf.api, kscperf.cli\n"
            + "".join(f"import {_module_name(p)}\n" for p in PARENT_MODULES
                      if p.name != "__main__.py")
            + "sys.exit('imported torch' if 'torch' in sys.modules else None)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr.strip()


def _package_import_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for imported in imported_modules(path):
            # `from kscperf import x` names the module kscperf.x when there is one.
            if imported in modules and imported != "kscperf":
                targets.add(imported)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.update(f"{node.module}.{a.name}" for a in node.names
                               if f"{node.module}.{a.name}" in modules)
        graph[name] = targets - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_package_has_no_import_cycle() -> None:
    # Every import counts, lazy and TYPE_CHECKING ones too: a cycle hidden in a function
    # body is still a cycle of responsibilities.
    graph = _package_import_graph()
    assert "kscperf.worker.cell" in graph["kscperf.worker.server"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_check_would_catch_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def imported_modules(path: Path) -> set[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError:
        return set()  # a fixture that is broken on purpose cannot import anything
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            found.update(a.value for a in node.args if isinstance(a, ast.Constant)
                         and isinstance(a.value, str))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module"):
            found.update(a.value for a in node.args if isinstance(a, ast.Constant)
                         and isinstance(a.value, str))
    return found


DEFINITION_FILES = (sorted(BENCH_DEFS.glob("*.py")) + sorted(FIXTURES.rglob("*.py"))
                    + sorted((BENCH_DEFS.parent / "tools" / "models").glob("*.py")))


def test_there_are_definitions_to_check() -> None:
    assert len(list(BENCH_DEFS.glob("*.py"))) >= 4
    assert (FIXTURES / "defs" / "toy.py") in DEFINITION_FILES


@pytest.mark.parametrize("path", DEFINITION_FILES,
                         ids=[str(p.relative_to(BENCH_DEFS.parent)) for p in DEFINITION_FILES])
def test_definitions_never_import_kscperf(path: Path) -> None:
    offending = {m for m in imported_modules(path) if m.split(".")[0] == "kscperf"}
    assert not offending, f"{path} imports {sorted(offending)}"


def test_the_ast_check_would_catch_it(tmp_path: Path) -> None:
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text("def f():\n    from kscperf.spec import TASKS\n"
                      "    return __import__('kscperf')\n")
    assert {"kscperf.spec", "kscperf"} <= imported_modules(sneaky)


# The import direction between stages: CONTRIBUTING.md's table "Which stage may import which"
# is the rule, read from there so that the picture and the check cannot drift apart.
_STAGE_ROW = re.compile(r"^\| `(\w+)` \|(.*?)\|(.*?)\|$", re.MULTILINE)
MAX_VOCABULARY_MODULES = 5


def stage_table(text: str) -> tuple[dict[str, str], dict[str, set[str]]]:
    """(where each stage lives: a folder `kscperf/x/` or a top-level module `kscperf/x.py`,
    mapped to its stage; the stages each stage may import) from CONTRIBUTING's table."""
    section = text.split("### Which stage may import which", 1)[1].split("\n### ", 1)[0]
    places: dict[str, str] = {}
    allowed: dict[str, set[str]] = {}
    for stage, modules, imports in _STAGE_ROW.findall(section):
        for place in re.findall(r"`(kscperf/[\w/]*(?:\.py)?)`", modules):
            places[place] = stage
        allowed[stage] = set(re.findall(r"`(\w+)`", imports))
    return places, allowed


def stage_of(module: str, places: dict[str, str]) -> str | None:
    """The stage of a dotted module name by the table's places, None when none holds it."""
    parts = module.split(".")
    if len(parts) >= 2 and f"kscperf/{parts[1]}/" in places:  # in a stage folder, or its own
        return places[f"kscperf/{parts[1]}/"]
    name = "__init__" if len(parts) == 1 else parts[1]
    return places.get(f"kscperf/{name}.py")


def upward_imports(graph: dict[str, set[str]], places: dict[str, str],
                   allowed: dict[str, set[str]]) -> list[str]:
    """Every import of `graph` from one stage into another that the table does not allow,
    as 'importer -> imported (stage -> stage)'."""
    found = []
    for importer, imported in sorted(graph.items()):
        source = stage_of(importer, places)
        for target in sorted(imported):
            destination = stage_of(target, places)
            if source != destination and destination not in allowed.get(source or "", set()):
                found.append(f"{importer} -> {target} ({source} -> {destination})")
    return found


def _stage_table_of_contributing() -> tuple[dict[str, str], dict[str, set[str]]]:
    return stage_table((PACKAGE.parent / "CONTRIBUTING.md").read_text(encoding="utf-8"))


def test_every_module_belongs_to_a_stage_of_the_table() -> None:
    places, allowed = _stage_table_of_contributing()
    assert {"surface", "vocabulary", "worker", "orchestrator", "views"} <= set(allowed)
    unplaced = sorted(m for m in _package_import_graph() if stage_of(m, places) is None)
    assert unplaced == []
    # The top of the package: the entry points and a few shared vocabulary modules, no more.
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == sorted(Path(p).name for p, s in places.items()
                         if s in ("surface", "vocabulary"))
    assert sum(s == "vocabulary" for s in places.values()) <= MAX_VOCABULARY_MODULES


def test_no_import_runs_against_the_allowed_direction() -> None:
    places, allowed = _stage_table_of_contributing()
    assert upward_imports(_package_import_graph(), places, allowed) == []


def test_the_stage_table_itself_has_no_cycle_and_no_stage_imports_the_worker() -> None:
    _, allowed = _stage_table_of_contributing()
    assert _cycle({stage: targets - {stage} for stage, targets in allowed.items()}) is None
    assert not [stage for stage, targets in allowed.items() if "worker" in targets]
    assert set().union(*allowed.values()) <= set(allowed)


def test_the_direction_check_would_catch_an_upward_import() -> None:
    places, allowed = _stage_table_of_contributing()
    graph = _package_import_graph()
    graph["kscperf.stats.core"] = graph["kscperf.stats.core"] | {"kscperf.views.formatting"}
    graph["kscperf.names"] = graph["kscperf.names"] | {"kscperf.plan.cells"}
    assert upward_imports(graph, places, allowed) == [
        "kscperf.names -> kscperf.plan.cells (vocabulary -> plan)",
        "kscperf.stats.core -> kscperf.views.formatting (stats -> views)"]


def docstring_imports(docstring: str, vocabulary: set[str]) -> set[str] | None:
    """The stages a stage folder's docstring says it may import (its "May import:" sentence:
    "the vocabulary", or a vocabulary module by name, and each `kscperf.<stage>`), or None
    when it has no such sentence."""
    if "May import" not in docstring:
        return None
    sentence = docstring.split("May import", 1)[1].split(".\n", 1)[0].split(". ", 1)[0]
    said = {"vocabulary" if name in vocabulary else name
            for name in re.findall(r"`kscperf\.(\w+)`", sentence)}
    return said | ({"vocabulary"} if "the vocabulary" in sentence else set())


def test_each_stage_folder_says_what_it_owns_and_may_import() -> None:
    places, allowed = _stage_table_of_contributing()
    folders = {place: PACKAGE.parent / place for place in places if place.endswith("/")}
    assert len(folders) >= 8
    vocabulary = {Path(p).stem for p, s in places.items() if s == "vocabulary"}
    said = {place: docstring_imports(ast.get_docstring(ast.parse(
        (folder / "__init__.py").read_text(encoding="utf-8"))) or "", vocabulary)
        for place, folder in folders.items()}
    assert {p: s for p, s in said.items() if s != allowed[places[p]]} == {}


def test_the_docstring_reading_would_catch_a_stage_it_leaves_out() -> None:
    text = "Owns this.\n\nMay import: the vocabulary, `kscperf.plan` and `kscperf.stats`. Never x."
    assert docstring_imports(text, {"errors"}) == {"vocabulary", "plan", "stats"}
    assert docstring_imports("May import: `kscperf.errors`.", {"errors"}) == {"vocabulary"}
    assert docstring_imports("Owns this; imports what it likes.", {"errors"}) is None


def test_the_package_never_imports_the_validation_logic_or_the_tests() -> None:
    # validation/ and tests/ sit beside the package and import it; the other way round
    # would make an installed kscperf need a checkout.
    offending = {_module_name(p): sorted(m for m in imported_modules(p)
                                         if m.split(".")[0] in ("validation", "tests",
                                                                "synthetic", "runner_testing"))
                 for p in PACKAGE.rglob("*.py")}
    assert not {k: v for k, v in offending.items() if v}


@pytest.mark.integration
def test_the_command_line_starts_without_the_history_store() -> None:
    # `list` lays out compile panels, whose view imports one submodule of the history
    # (compilehistory); the package's re-exports must not bring the store, its links and the
    # change policy with it (about 20 ms of every command's start-up).
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "kscperf", "list",
                           str(FIXTURES / "defs" / "toy.py")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert "kscperf.history.compilehistory" in imported
    assert not imported & {"kscperf.history.store", "kscperf.history.changes"}


def test_every_name_the_history_package_re_exports_resolves() -> None:
    from kscperf import history
    missing = [name for name in history.__all__ if not hasattr(history, name)]
    assert missing == [] and len(history.__all__) >= 20
    with pytest.raises(AttributeError):
        getattr(history, "no_such_name")
