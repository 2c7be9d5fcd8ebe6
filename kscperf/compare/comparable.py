"""Whether two results files may be compared, and how their builds were run: the two
builds of one lockstep `ab` run (values paired), of one `ab --until-resolved` run (judged
by confidence sequences), or separate runs; and the one refusal of files from different
machine classes, torch versions, profiles or instruction counters
(`metadata.COMPARABLE_KEYS`). Used by `builds` and by the report; produces no text for
people beyond the refusal's one line."""

from __future__ import annotations

from kscperf.errors import KscperfError
from kscperf.results.files import LoadedResults
from kscperf.results.metadata import COMPARABLE_KEYS

__all__ = ["is_lockstep_pair", "is_sequential_pair", "check_comparable",
           "refuse_incomparable"]


def is_lockstep_pair(base: LoadedResults, new: LoadedResults) -> bool:
    """Whether the two files are the two builds of one `run-benchmarks ab` run, whose
    workers took turns: their run-time values are then compared pair by pair."""
    ids = base.metadata.get("lockstep_id"), new.metadata.get("lockstep_id")
    return bool(ids[0]) and ids[0] == ids[1] and base.has_kscperf and new.has_kscperf \
        and base.build != new.build


def is_sequential_pair(base: LoadedResults, new: LoadedResults) -> bool:
    """Whether the two files are the builds of one `ab --until-resolved` run, which looked
    after every pair: their run times are then judged by confidence sequences."""
    return is_lockstep_pair(base, new) and all(
        r.metadata.get("lockstep_stopping") == "until-resolved" for r in (base, new))


def check_comparable(base: LoadedResults, new: LoadedResults) -> list[str]:
    """The reasons why timings of `base` and `new` cannot be compared: one phrase per kind
    of difference (machines, CPUs, GPUs, torch versions, profiles), naming both values.
    Empty when comparable. Metadata missing on either side (a plain pyperf file has no
    torch version) is not a difference; nor are torch versions between the two builds of
    one lockstep run, which may be exactly what it compares."""
    by_what: dict[str, list[str]] = {}
    lockstep = is_lockstep_pair(base, new)
    for key, what in COMPARABLE_KEYS:  # (key, what differs), with why in metadata.py
        if lockstep and key == "torch_version":
            continue
        b, n = base.metadata.get(key), new.metadata.get(key)
        if b is None or n is None or b == n:
            continue
        by_what.setdefault(what, []).append(f"{key} {b!r} in BASE, {n!r} in NEW")
    return [f"different {what} ({', '.join(parts)})" for what, parts in by_what.items()]


def refuse_incomparable(base: LoadedResults, new: LoadedResults, *, force: bool = False,
                        what: str = "compare") -> list[str]:
    """The differences of `check_comparable`, which are ignored with `force`; without it,
    any of them raises the one KscperfError that names both files and the differences
    (`what` is the verb: "compare", "report")."""
    differences = check_comparable(base, new)
    if differences and not force:
        raise KscperfError(
            f"refusing to {what} {base.path} (BASE) with {new.path} (NEW): "
            f"{'; '.join(differences)}; timings are only comparable on one machine class "
            f"with one torch and one profile, pass --force to {what} them anyway.")
    return differences
