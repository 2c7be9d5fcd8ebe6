"""The orchestrator's side of the turn-taking protocol of `run-benchmarks ab`: two workers,
one per build, time one value each in turn, so that both builds meet the same state of the
machine.

`TurnPipes`: two FIFOs per pair, the first turn, the word that a partner has ended. The
bytes on the wire are the worker contract's (`spec.TURN`, `spec.PARTNER_ENDED`); a worker's
side is `kscperf.worker.turns.Turns`. Plain files and bytes; no torch.
"""

from __future__ import annotations

import os

from kscperf.spec import PARTNER_ENDED, TURN

__all__ = ["TurnPipes"]


class TurnPipes:
    """The two FIFOs of one lockstep pair (side 0's and side 1's), made at `stem + .turnI`.

    Opened read-write here for the pair's whole life: no open() by a worker ever blocks, and
    a worker that dies cannot leave its partner's reads at end of file."""

    def __init__(self, stem: str) -> None:
        self.paths = (stem + ".turn0", stem + ".turn1")
        for path in self.paths:
            os.mkfifo(path, 0o600)
        self._fds = [os.open(path, os.O_RDWR) for path in self.paths]

    def worker_turns(self, side: int) -> tuple[str, str]:
        """(this side's FIFO, its partner's), as a worker's spec names them."""
        return self.paths[side], self.paths[1 - side]

    def give_turn(self, side: int) -> None:
        """Hand the first turn to `side`."""
        os.write(self._fds[side], TURN)

    def partner_ended(self, side: int) -> None:
        """Tell the partner of `side` that `side`'s worker has ended: it goes on alone."""
        os.write(self._fds[1 - side], PARTNER_ENDED)

    def close(self) -> None:
        """Close this side's ends of both FIFOs (the files go with their folder)."""
        for fd in self._fds:
            os.close(fd)
