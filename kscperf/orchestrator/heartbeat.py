"""Progress while a worker runs: every `HEARTBEAT_S` seconds, the phase and config the worker
last noted in its phase file (`outcome.read_phase`), so that a cell that compiles or times
for minutes is never silent. Never imports torch and never prints."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from kscperf.orchestrator.outcome import read_phase
from kscperf.plan.cells import PlannedCell

__all__ = ["HEARTBEAT_S", "Running", "OnRunning", "Beat", "watching", "eta_while_running"]

# The bound: a line at least every 10 s while a cell runs.
HEARTBEAT_S = 10.0


@dataclass(frozen=True)
class Running:
    """One heartbeat of the running worker: its place in the plan (`done` workers before
    it of `total`), its phase, config and the config's place ("2 of 3"), how long it has
    run, and the ETA that counts it."""

    done: int
    total: int
    cell: PlannedCell
    process_index: int
    phase: str
    config: str
    position: str
    running_s: float
    eta_s: float | None


OnRunning = Callable[[Running], None]
# (phase, config, position, seconds running), from the watching thread.
Beat = Callable[[str, str, str, float], None]


def eta_while_running(elapsed_before_s: float, done: int, total: int,
                      running_s: float) -> float:
    """The seconds left when `done` workers took `elapsed_before_s` and the next one has run
    `running_s` so far: the running one counts as done at the mean it makes, so a long cell
    raises the estimate while it runs instead of all at once when it ends."""
    mean = (elapsed_before_s + running_s) / (done + 1)
    return mean * max(0, total - done - 1)


@contextlib.contextmanager
def watching(result_path: str, beat: Beat | None,
             every_s: float = HEARTBEAT_S) -> Iterator[None]:
    """Within the block, `beat` is called every `every_s` seconds with what the worker of
    `result_path` last noted; nothing when `beat` is None."""
    if beat is None:
        yield
        return
    stop = threading.Event()
    t0 = time.perf_counter()

    def run() -> None:
        while not stop.wait(every_s):
            beat(*read_phase(result_path), time.perf_counter() - t0)

    thread = threading.Thread(target=run, name="kscperf-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
