"""The command line's argument types: the `type=` callables of `kscperf.cli`'s parser, each
turning a bad value into argparse's one-line usage error that names it."""

from __future__ import annotations

import argparse
import os
from typing import Any, Callable

__all__ = ["positive_int", "non_negative_int", "positive_float", "cpu_list", "env_assignment"]


def _number(convert: Callable[[str], Any], noun: str, valid: Callable[[Any], bool],
            rule: str) -> Callable[[str], Any]:
    """An argparse type: `convert` the text, which must be `valid`; else say `rule`."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        if not valid(value):
            raise argparse.ArgumentTypeError(f"{text!r} {rule}")
        return value

    return parse


positive_int = _number(int, "a whole number", lambda v: v >= 1, "must be at least 1")
non_negative_int = _number(int, "a whole number", lambda v: v >= 0, "must not be negative")
positive_float = _number(float, "a number", lambda v: v > 0, "must be above 0")


def cpu_list(text: str) -> tuple[int, ...]:
    """CPUs like `0-3,6`, each available to this process."""
    cpus: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.partition("-")
            cpus += range(int(low), int(high or low) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a CPU list like 0-3,6") from None
    available = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(cpus)
    missing = sorted(set(cpus) - set(available))
    if not cpus or missing:
        raise argparse.ArgumentTypeError(f"CPUs {missing} are not available to this process")
    return tuple(sorted(set(cpus)))


def env_assignment(text: str) -> tuple[str, str]:
    """`NAME=VALUE`, NAME a valid environment variable name."""
    name, sep, value = text.partition("=")
    if not sep or not name or not name.replace("_", "a").isalnum() or name[0].isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value
