"""Merging the shard files of one build into one results file (`run-benchmarks merge`).

Shards are one measurement cut in pieces across identical machines: the merge refuses files
that are not (other builds, machine classes, torch builds, profiles or plans, overlapping or
missing shards) before anything is written, and writes the union of their worker results
through `results.files.write_results`. What the shards must share is `metadata.MERGE_KEYS`.
"""

from __future__ import annotations

import os
from typing import Any

from kscperf.errors import KscperfError
from kscperf.plan.cells import parse_shard
from kscperf.results.files import LoadedResults, load_results, write_results
from kscperf.results.metadata import MERGE_KEYS, SHARD_ONLY_KEYS

__all__ = ["merge_results"]


def _load_shards(paths: list[str]) -> list[LoadedResults]:
    seen: dict[str, str] = {}
    for p in paths:
        real = os.path.realpath(p)
        if real in seen:
            raise KscperfError(f"{p} is given twice (as {seen[real]} too); the shards would "
                               "overlap, so give each shard once.")
        seen[real] = p
    loaded = [load_results(p) for p in paths]
    for lr in loaded:
        if not lr.has_kscperf:
            raise KscperfError(f"{lr.path} was not written by kscperf, so it cannot be merged.")
    return loaded


def _check_one_build(shards: list[LoadedResults]) -> None:
    first = shards[0]
    for lr in shards[1:]:
        for key, what in MERGE_KEYS:
            mine, theirs = lr.metadata.get(key), first.metadata.get(key)
            if mine != theirs:
                raise KscperfError(
                    f"{lr.path} has {what} {mine!r} where {first.path} has {theirs!r}; only "
                    "shards of one build, machine class, torch version and profile can be "
                    "merged.")


def _check_shard_set(shards: list[LoadedResults], allow_partial: bool) -> dict[str, Any]:
    """That the files are distinct shards of one plan, all of them unless `allow_partial`;
    what the merged file records of them."""
    marks = [lr.metadata.get("shard") for lr in shards]
    if not any(marks):
        return {}
    first = shards[0]
    by_index: dict[int, LoadedResults] = {}
    count = _shard_of(first)[1]
    for lr in shards:
        if not lr.metadata.get("shard"):
            raise KscperfError(f"{lr.path} is not a shard but {first.path} is; merge the "
                               "shards of one sharded run.")
        index, their_count = _shard_of(lr)
        if lr.metadata.get("shard_plan") != first.metadata.get("shard_plan") or (
                their_count != count):
            raise KscperfError(f"{lr.path} is shard {lr.metadata['shard']} of another plan than "
                               f"{first.path} (other paths, selection, shard count or "
                               "--balance file); merge the shards of one plan.")
        if index in by_index:
            raise KscperfError(f"{lr.path} and {by_index[index].path} are both shard "
                               f"{index}/{count}: the shards overlap.")
        by_index[index] = lr
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing and not allow_partial:
        raise KscperfError(f"shard {missing[0]}/{count} is missing (given: "
                           f"{', '.join(f'{i}/{count}' for i in sorted(by_index))}); pass "
                           "--allow-partial to merge without it, marked incomplete.")
    recorded = {"merged_shards": ",".join(map(str, sorted(by_index))) + f"/{count}"}
    if missing:
        recorded["missing_shards"] = ",".join(map(str, missing)) + f"/{count}"
    return recorded


def _shard_of(loaded: LoadedResults) -> tuple[int, int]:
    """(I, N) of a shard's `shard` metadata, read as `--shard` reads it; KscperfError naming
    the file when it is not I/N with 1 <= I <= N."""
    text = str(loaded.metadata.get("shard"))
    try:
        return parse_shard(text)
    except KscperfError:
        raise KscperfError(f"{loaded.path} has a malformed shard {text!r}; it should be I/N "
                           "with I from 1 to N.") from None


def _check_disjoint(shards: list[LoadedResults]) -> None:
    # By process: files holding other processes of one cell add processes, not overlap.
    owner: dict[tuple[str, int], str] = {}
    for lr in shards:
        for key in dict.fromkeys((r.name, r.process_index) for r in lr.runs):
            if key in owner:
                raise KscperfError(f"{lr.path} and {owner[key]} both hold process "
                                   f"{key[1] + 1} of cell {key[0]}: the shards overlap.")
            owner[key] = lr.path


def merge_results(paths: list[str], out: str, allow_partial: bool = False) -> None:
    """Merge the shard files of one build into `out`: one valid results file whose cells are
    the union of theirs. KscperfError, before anything is written, for a file given twice,
    files of different builds, machine classes, torch versions or profiles, shards of
    different plans, overlapping shards, or a missing shard (unless `allow_partial`: the
    merged file is then marked incomplete and records which shards are missing)."""
    if not paths:
        raise KscperfError("merge needs at least one shard file.")
    shards = _load_shards(paths)
    _check_one_build(shards)
    recorded = _check_shard_set(shards, allow_partial)
    _check_disjoint(shards)
    metadata = {k: v for k, v in shards[0].metadata.items() if k not in SHARD_ONLY_KEYS}
    metadata.update(recorded)
    hosts = sorted({str(lr.metadata["hostname"]) for lr in shards if "hostname" in lr.metadata})
    if len(hosts) > 1:
        # Identical machines of one class: no one host stands for the build, and compare
        # then judges the machine class by CPU and GPU alone.
        metadata.pop("hostname", None)
        metadata["merged_hostnames"] = ",".join(hosts)
    complete = all(lr.complete for lr in shards) and "missing_shards" not in recorded
    write_results(out, [r for lr in shards for r in lr.runs], metadata, complete,
                  counts=[r for lr in shards for r in lr.instruction_runs])
