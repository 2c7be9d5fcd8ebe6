"""A model's configs as every worker generates them (`load_configs`): each config's
arguments under the run's seed, and its name, from the model's `B_config_names` or from the
shape of its first tensor, repeats numbered."""

from __future__ import annotations

import random
from typing import Any

import torch

from kscperf.plan.definitions import DefinitionError, ResolvedModel
from kscperf.worker.failures import reason_for

__all__ = ["load_configs", "as_args"]


def load_configs(model: ResolvedModel, seed: int) -> list[tuple[str, tuple[Any, ...]]]:
    """(name, args) of every config of `model`, generated under `seed` exactly as every
    worker generates them; DefinitionError names the module when the configs are bad."""
    _seed_everything(seed)
    where = f"{model.name}_bench_configs() in {model.module_path}"
    try:
        configs = [as_args(c) for c in model.configs()]
    except Exception as exc:
        raise DefinitionError(f"{where} raised {reason_for(exc)}") from exc
    if not configs:
        raise DefinitionError(f"{where} yielded no configs")
    if model.config_names is not None:
        if len(model.config_names) != len(configs):
            raise DefinitionError(
                f"{model.name}_config_names has {len(model.config_names)} names for "
                f"{len(configs)} configs in {model.module_path}")
        names = list(model.config_names)
    else:
        names = [_default_config_name(c) for c in configs]
    return list(zip(_numbered_repeats(names), configs))


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % 2**32)
    except ImportError:
        pass


def as_args(config: Any) -> tuple[Any, ...]:
    """A config (or what a tool's prep hook returned) as a tuple of arguments."""
    return tuple(config) if isinstance(config, (tuple, list)) else (config,)


def _default_config_name(args: tuple[Any, ...]) -> str:
    for a in args:
        if isinstance(a, torch.Tensor):
            return "x".join(str(d) for d in a.shape) or "scalar"
    return "config"


def _numbered_repeats(names: list[str]) -> list[str]:
    # Benchmark names must be unique: the second `8` becomes `8#2`.
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return unique
