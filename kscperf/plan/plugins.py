"""Finding third-party compiler plug-ins by name, without importing them.

A plug-in is registered through the entry point group `kscperf.tools` (the entry point's
name is the tool's name) or the option `--tool-plugin [NAME=]module:object`. The parent reads
only the names and targets here; the worker imports and builds them (`kscperf.worker.tools`,
whose docstring states the plug-in interface).
"""

from __future__ import annotations

import importlib.metadata

__all__ = ["ENTRY_POINT_GROUP", "parse_plugin_option", "plugin_tool_names"]

ENTRY_POINT_GROUP = "kscperf.tools"


def parse_plugin_option(option: str) -> tuple[str, str]:
    """`[NAME=]module:object` -> (NAME, "module:object"). Raises ValueError on bad syntax."""
    name, _, target = option.rpartition("=")
    module, sep, obj = target.partition(":")
    if not sep or not module or not obj:
        raise ValueError(f"--tool-plugin {option!r} is not of the form [NAME=]module:object")
    name = name or obj.split(".")[-1]
    if not name.isidentifier():
        raise ValueError(f"--tool-plugin {option!r}: tool name {name!r} is not an identifier")
    return name, target


def plugin_tool_names(options: tuple[str, ...] = ()) -> dict[str, str]:
    """Tool name -> "module:object" for every plug-in, from entry points and `options`,
    without importing any of them."""
    found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    for option in options:
        name, target = parse_plugin_option(option)
        found[name] = target
    return found
