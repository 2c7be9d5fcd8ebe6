"""The defaults the manual states are the ones the code has: each is read from the docs'
tables and signatures and compared with its one source (the API's signatures, `RunConfig`
and `WorkerSettings`, the argument parser, the timing profiles, `stats.core.DEFAULT_MIN_EFFECT`,
`paths`). A default changed in the code and not in docs/cli.md or docs/api.md fails here.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import kscperf
from kscperf import cli
from kscperf.orchestrator.session import RunConfig
from kscperf.paths import DEFAULT_STORE, RESULTS_DIR
from kscperf.spec import PROFILES
from kscperf.stats.core import DEFAULT_MIN_EFFECT, INSTRUCTIONS_MIN_EFFECT

DOCS = Path(__file__).resolve().parent.parent / "docs"
API_MD = (DOCS / "api.md").read_text(encoding="utf-8")
CLI_MD = (DOCS / "cli.md").read_text(encoding="utf-8")

# Words the docs use for "nothing set": the field is then None or empty.
_UNSET = ("none", "all", "the profile's", "no cap", "not pinned", "this one")


def table_rows(text: str, header: str) -> list[list[str]]:
    """The body rows of the Markdown table whose header row starts with `header`, cells
    stripped."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def stated(text: str) -> Any:
    """A default as the docs write it: `"fork"` or `fork`, 600, 1,000,000, 10 ms, False; the
    marker _UNSET for the words that mean nothing is set."""
    text = text.strip()
    if text.lower().startswith(_UNSET):
        return _UNSET
    text = text.strip("`")
    if text in ("False", "True"):
        return text == "True"
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    number = re.fullmatch(r"([\d,.]+)( ms)?", text)
    if number:
        value = float(number.group(1).replace(",", ""))
        return value / 1000 if number.group(2) else value
    return text


def agrees(doc_value: Any, value: Any) -> bool:
    if doc_value is _UNSET:
        return value is None or value == ()
    return bool(doc_value == value)


def api_signatures() -> list[tuple[str, str, Any]]:
    """(function, keyword, literal default) of every `kscperf.NAME(...)` in the API table."""
    out = []
    for row in table_rows(API_MD, "| function |"):
        m = re.fullmatch(r"`kscperf\.(\w+)\((.*)\)`", row[0])
        assert m, row[0]
        tree = ast.parse(f"def {m.group(1)}({m.group(2)}): pass")
        fn = tree.body[0]
        assert isinstance(fn, ast.FunctionDef)
        args = fn.args
        pairs = list(zip(args.args[len(args.args) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            try:
                out.append((m.group(1), arg.arg, ast.literal_eval(default)))
            except ValueError:
                pass  # Build(label="base"): not a literal, checked by the API tests
    return out


@pytest.mark.parametrize("function, keyword, doc_default", api_signatures())
def test_api_table_defaults_are_the_signatures(function: str, keyword: str,
                                               doc_default: Any) -> None:
    parameter = inspect.signature(getattr(kscperf, function)).parameters[keyword]
    assert parameter.default == doc_default, (function, keyword)


def test_api_signatures_name_the_sources() -> None:
    defaults = {(f, k): d for f, k, d in api_signatures()}
    assert defaults["compare_builds", "min_effect"] == DEFAULT_MIN_EFFECT
    assert defaults["history_check", "store"] == DEFAULT_STORE


def settings_rows() -> list[tuple[str, str]]:
    out = []
    for row in table_rows(API_MD, "| field | option | default |"):
        for name in re.findall(r"`(\w+)`", row[0]):
            out.append((name, row[2]))
    return out


@pytest.mark.parametrize("field, doc_default", settings_rows())
def test_api_settings_table_defaults_are_run_configs(field: str, doc_default: str) -> None:
    assert agrees(stated(doc_default), getattr(RunConfig(), field)), field


def _parser_action(option: str) -> argparse.Action:
    run = cli.build_parser()._subparsers._group_actions[0].choices["run"]  # type: ignore
    return next(a for a in run._actions if option in a.option_strings)


@pytest.mark.parametrize("row", table_rows(CLI_MD, "| option | meaning | default |")[:6],
                         ids=lambda row: row[0])
def test_cli_running_table_defaults_are_the_parsers(row: list[str]) -> None:
    option = row[0].strip("`").split()[0]
    action = _parser_action(option)
    assert agrees(stated(row[2]), action.default), option
    # The parser's default is the run configuration's, not a copy of it.
    assert action.default == getattr(RunConfig(), action.dest)


def test_cli_profile_table_is_the_profiles() -> None:
    rows = table_rows(CLI_MD, "| profile | processes per cell |")
    for row in rows:
        name = row[0].strip("`").lstrip("-")
        profile = PROFILES[name]
        assert [stated(c) for c in row[1:]] == [profile.processes, profile.values,
                                               profile.warmups, profile.min_time], name


def test_cli_prose_defaults() -> None:
    assert f"(default {DEFAULT_MIN_EFFECT:g}, {DEFAULT_MIN_EFFECT:.0%}" in \
        CLI_MD.replace("5 %", "5%")
    assert f"[--min-effect {DEFAULT_MIN_EFFECT:g}]" in CLI_MD
    assert f"[--instructions-min-effect {INSTRUCTIONS_MIN_EFFECT:g}]" in CLI_MD
    assert f"(`run --instructions`; default {INSTRUCTIONS_MIN_EFFECT:g}, " \
           f"{INSTRUCTIONS_MIN_EFFECT:.1%}".replace("%", " %") in CLI_MD
    assert f"`--store DIR` (default `{DEFAULT_STORE}`)" in CLI_MD
    assert f"(default `{RESULTS_DIR}/<build>.json`)" in CLI_MD
    assert f"`{RESULTS_DIR}/ab-<time>`" in CLI_MD
