"""Tests of kscperf.plan.definitions: finding models statically, finding definition files,
importing a definition module by path and resolving a model's functions and extras."""

from __future__ import annotations

import os
import textwrap
import types
from pathlib import Path

import pytest

from kscperf.plan.definitions import (DefinitionError, find_definition_files,
                                 import_definition_module, resolve_model, scan_models)
from kscperf.errors import KscperfError

from runner_testing import DEFS


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def module(name: str, **attrs: object) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__file__ = f"/defs/{name}.py"
    for key, value in attrs.items():
        setattr(mod, key, value)
    return mod


def identity(x: object) -> object:
    return x


def configs() -> list[int]:
    return [1, 2]


# -- scan_models ---------------------------------------------------------------------------

def test_scan_finds_function_defs_assignments_and_imports(tmp_path: Path) -> None:
    path = write(tmp_path / "m.py", """
        import torch
        from helpers import imp_pytorch
        from helpers import make_configs as imp_bench_configs
        import helpers as asg_pytorch_nice

        def fun_bench_configs():
            yield torch.ones(2)

        def fun_pytorch(x):
            return x

        def fun_pytorch_nice(x):
            return x

        def fun(x):
            return x

        asg_bench_configs = fun_bench_configs
        asg_pytorch: object = fun_pytorch
        asg_timeout = 12.5

        def _helper_pytorch(x):  # a helper with the suffix in a module with models: no problem
            return x
    """)
    models, problems = scan_models([str(path)])
    assert problems == []
    by_name = {m.name: m for m in models}
    assert sorted(by_name) == ["asg", "fun", "imp"]
    assert all(m.module_path == str(path) for m in models)
    fun, asg, imp = by_name["fun"], by_name["asg"], by_name["imp"]
    assert (fun.has_nice, fun.has_source, fun.timeout_s) == (True, True, None)
    assert (asg.has_nice, asg.has_source, asg.timeout_s) == (True, False, 12.5)
    assert (imp.has_nice, imp.has_source) == (False, False)


def test_scan_does_not_import_the_module(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    path = write(tmp_path / "m.py", f"""
        open({str(marker)!r}, "w").close()
        def a_bench_configs(): return []
        def a_pytorch(x): return x
    """)
    models, _ = scan_models([str(path)])
    assert [m.name for m in models] == ["a"]
    assert not marker.exists()


def test_timeout_is_read_only_from_a_positive_literal(tmp_path: Path) -> None:
    path = write(tmp_path / "m.py", """
        SECONDS = 30
        def a_bench_configs(): return []
        def a_pytorch(x): return x
        a_timeout = SECONDS
        def b_bench_configs(): return []
        def b_pytorch(x): return x
        b_timeout = True
        def c_bench_configs(): return []
        def c_pytorch(x): return x
        c_timeout = -3
        def d_bench_configs(): return []
        def d_pytorch(x): return x
        d_timeout = 7
    """)
    models, _ = scan_models([str(path)])
    assert {m.name: m.timeout_s for m in models} == {"a": None, "b": None, "c": None, "d": 7.0}


def test_configs_without_reference_is_a_problem_naming_module_and_function(
        tmp_path: Path) -> None:
    path = write(tmp_path / "noref.py", """
        def lonely_bench_configs(): return []
        def lonely_pytorch_nice(x): return x
        def fine_bench_configs(): return []
        def fine_pytorch(x): return x
    """)
    models, problems = scan_models([str(path)])
    assert [m.name for m in models] == ["fine"]
    assert len(problems) == 1
    assert problems[0].module_path == str(path)
    assert str(path) in problems[0].message
    assert "lonely_pytorch" in problems[0].message
    assert "lonely_bench_configs" in problems[0].message


def test_reference_without_configs_is_a_problem_naming_module_and_function(
        tmp_path: Path) -> None:
    path = write(tmp_path / "noconfigs.py", """
        def orphan_pytorch(x): return x
        def orphan_pytorch_nice(x): return x
    """)
    models, problems = scan_models([str(path)])
    assert models == []
    assert len(problems) == 1
    assert problems[0].module_path == str(path)
    assert str(path) in problems[0].message
    assert "orphan_bench_configs" in problems[0].message


def test_syntax_error_is_a_problem_and_other_modules_are_still_found(tmp_path: Path) -> None:
    bad = write(tmp_path / "a_bad.py", """
        def x_bench_configs(:
            pass
    """)
    good = write(tmp_path / "b_good.py", """
        def y_bench_configs(): return []
        def y_pytorch(x): return x
    """)
    models, problems = scan_models([str(bad), str(good)])
    assert [(m.name, m.module_path) for m in models] == [("y", str(good))]
    assert len(problems) == 1
    assert problems[0].module_path == str(bad)
    assert f"{bad}:2" in problems[0].message
    assert "syntax error" in problems[0].message


def test_undecodable_module_is_a_problem(tmp_path: Path) -> None:
    bad = tmp_path / "latin.py"
    bad.write_bytes(b"# \xff\xfe\n")
    models, problems = scan_models([str(bad)])
    assert models == []
    assert [p.module_path for p in problems] == [str(bad)]


def test_duplicate_model_names_keep_the_first_module(tmp_path: Path) -> None:
    first = write(tmp_path / "one.py", """
        def dup_bench_configs(): return []
        def dup_pytorch(x): return x
    """)
    second = write(tmp_path / "two.py", """
        def dup_bench_configs(): return []
        def dup_pytorch(x): return x
        def other_bench_configs(): return []
        def other_pytorch(x): return x
    """)
    models, problems = scan_models([str(first), str(second)])
    assert [(m.name, m.module_path) for m in models] == [("dup", str(first)),
                                                         ("other", str(second))]
    assert len(problems) == 1
    assert problems[0].module_path == str(second)
    assert str(first) in problems[0].message and str(second) in problems[0].message
    assert "dup" in problems[0].message


# -- find_definition_files -----------------------------------------------------------------

def test_find_files_and_folders_recursively_sorted_absolute(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rel in ("top/z.py", "top/a.py", "top/sub/m.py", "top/_private.py",
                "top/__pycache__/c.py", "top/.hidden/h.py", "top/notes.txt", "single.py"):
        write(tmp_path / rel, "")
    monkeypatch.chdir(tmp_path)
    found = find_definition_files(["top", "single.py", "top/a.py"])
    assert found == [str(tmp_path / "top/a.py"), str(tmp_path / "top/sub/m.py"),
                     str(tmp_path / "top/z.py"), str(tmp_path / "single.py")]
    assert all(os.path.isabs(f) for f in found)


def test_find_missing_path_is_a_kscperf_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(KscperfError, match="nowhere: no such file or folder"):
        find_definition_files([str(missing)])


def test_find_non_python_file_and_empty_folder_are_kscperf_errors(tmp_path: Path) -> None:
    text = write(tmp_path / "defs.txt", "")
    with pytest.raises(KscperfError, match=r"defs\.txt is not a Python file"):
        find_definition_files([str(text)])
    (tmp_path / "empty").mkdir()
    with pytest.raises(KscperfError, match="empty holds no Python file"):
        find_definition_files([str(tmp_path / "empty")])


# -- import_definition_module --------------------------------------------------------------

def test_import_by_path_can_import_its_neighbours(tmp_path: Path) -> None:
    write(tmp_path / "deep/dir/nb_helpers_for_test.py", "FACTOR = 7\n")
    path = write(tmp_path / "deep/dir/nbmod.py", """
        from nb_helpers_for_test import FACTOR
        def nb_bench_configs(): return [1]
        def nb_pytorch(x): return x * FACTOR
    """)
    mod = import_definition_module(str(path))
    assert mod.nb_pytorch(2) == 14


def test_import_error_names_the_module_and_the_cause(tmp_path: Path) -> None:
    path = write(tmp_path / "raises_on_import.py", "raise RuntimeError('no GPU here')\n")
    with pytest.raises(DefinitionError) as info:
        import_definition_module(str(path))
    assert str(path) in str(info.value)
    assert "RuntimeError: no GPU here" in str(info.value)


# -- resolve_model -------------------------------------------------------------------------

def test_resolve_fixture_module_with_every_extra() -> None:
    mod = import_definition_module(str(DEFS / "extras.py"))
    model = resolve_model(mod, "scaled")
    assert model.config_names == ["small", "large"]
    assert model.diff_args == (0,)
    assert model.tolerances == {"float32": {"rtol": 1e-3, "atol": 1e-4}}
    assert model.skip is not None and model.skip("jacobian", "large")
    assert model.skip("bwd", "large") is None
    assert model.nice is None and model.source is None
    # compilers fall back to the reference when there is neither B nor B_pytorch_nice
    assert model.function_for("source") == ("scaled_pytorch", mod.scaled_pytorch)
    assert model.function_for("nice") is None
    assert model.function_for("pytorch") == ("scaled_pytorch", mod.scaled_pytorch)


def test_function_for_source_prefers_b_then_nice() -> None:
    def nice(x: object) -> object:
        return x

    def src(x: object) -> object:
        return x

    with_nice = resolve_model(module("m1", m_bench_configs=configs, m_pytorch=identity,
                                     m_pytorch_nice=nice), "m")
    assert with_nice.function_for("source") == ("m_pytorch_nice", nice)
    with_src = resolve_model(module("m2", m_bench_configs=configs, m_pytorch=identity,
                                    m_pytorch_nice=nice, m=src), "m")
    assert with_src.function_for("source") == ("m", src)


def test_config_names_may_be_a_function() -> None:
    model = resolve_model(module("m", m_bench_configs=configs, m_pytorch=identity,
                                 m_config_names=lambda: ("a", "b")), "m")
    assert model.config_names == ["a", "b"]


def test_missing_reference_at_import_names_it() -> None:
    with pytest.raises(DefinitionError, match=r"/defs/m\.py has no m_pytorch$"):
        resolve_model(module("m", m_bench_configs=configs), "m")


@pytest.mark.parametrize("attrs, message", [
    ({"m_config_names": ["a", ""]}, "m_config_names must be a list of non-empty strings"),
    ({"m_config_names": "ab"}, "m_config_names must be a list of non-empty strings"),
    ({"m_config_names": [1, 2]}, "m_config_names must be a list of non-empty strings"),
    ({"m_diff_args": ["x"]}, "m_diff_args must be a tuple of argument indices"),
    ({"m_diff_args": 0}, "m_diff_args must be a tuple of argument indices"),
    ({"m_tolerances": [1e-3]}, "m_tolerances must be a dict"),
    ({"m_skip": "jacobian"}, "m_skip is a str, not a function"),
    ({"m_pytorch_nice": 3}, "m_pytorch_nice is a int, not a function"),
    ({"m_bench_configs": [1, 2]}, "m_bench_configs is a list, not a function"),
])
def test_resolve_rejects_malformed_extras(attrs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"m_bench_configs": configs, "m_pytorch": identity}
    base.update(attrs)
    with pytest.raises(DefinitionError) as info:
        resolve_model(module("m", **base), "m")
    assert message in str(info.value)
    assert "/defs/m.py" in str(info.value)
