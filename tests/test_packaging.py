"""pyproject.toml lists every package of the source tree: its packages are listed by hand,
so a subpackage left off is missing from a non-editable install (`pip install .`), which an
editable one hides. The nightly workflow installs each build that way."""

from __future__ import annotations

import tomllib

from runner_testing import ROOT


def test_every_package_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for top in ("kscperf", "kscperf_onnx") for p in (ROOT / top).rglob("__init__.py")}
    assert found <= listed, f"pyproject.toml does not list {sorted(found - listed)}"
