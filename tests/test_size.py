"""The size rules of CONTRIBUTING.md, checked statically over the whole package and over
`validation/` (the validation scripts' logic): no module over 600 lines, no function over 60
lines, except a declarative argparse builder (a function annotated to return
`argparse.ArgumentParser`: a list of options reads best whole).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kscperf"
VALIDATION = ROOT / "validation"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60



def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py")) + sorted(VALIDATION.rglob("*.py"))


def _name(path: Path) -> str:
    # The package's modules by their path in it (the ids as they were); validation's by
    # their path in the repository.
    if path.is_relative_to(PACKAGE):
        return path.relative_to(PACKAGE).as_posix()
    if path.is_relative_to(VALIDATION):
        return path.relative_to(ROOT).as_posix()
    return path.name


def _is_argparse_builder(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return fn.returns is not None and ast.unparse(fn.returns) == "argparse.ArgumentParser"


def violations(path: Path) -> list[str]:
    """What in the module at `path` breaks the size rules, one phrase each."""
    text = path.read_text(encoding="utf-8")
    found = []
    lines = len(text.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{_name(path)} has {lines} lines (at most {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                not _is_argparse_builder(node):
            assert node.end_lineno is not None
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{_name(path)}:{node.lineno} {node.name} has {length} lines "
                             f"(at most {MAX_FUNCTION_LINES})")
    return found


@pytest.mark.parametrize("path", modules(),
                         ids=_name)
def test_module_keeps_the_size_rules(path: Path) -> None:
    assert violations(path) == []


def test_the_rules_catch_a_long_function_and_a_long_module(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    long_function = tmp_path / "long.py"
    long_function.write_text(f"def f() -> None:\n{body}\n")
    builder = tmp_path / "builder.py"
    builder.write_text(f"import argparse\n\n\ndef p() -> argparse.ArgumentParser:\n{body}\n")
    long_module = tmp_path / "module.py"
    long_module.write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert violations(long_function) == [f"long.py:1 f has {MAX_FUNCTION_LINES + 1} lines "
                                         f"(at most {MAX_FUNCTION_LINES})"]
    assert violations(builder) == []
    assert violations(long_module) == [f"module.py has {MAX_MODULE_LINES + 1} lines "
                                       f"(at most {MAX_MODULE_LINES})"]


def test_both_trees_are_checked() -> None:
    names = [_name(p) for p in modules()]
    assert "api.py" in names and "stats/core.py" in names
    assert "validation/detection.py" in names and "validation/truth_check.py" in names
