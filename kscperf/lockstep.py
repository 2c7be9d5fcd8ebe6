"""The turn-taking protocol of `run-benchmarks ab`: two workers, one per build, time one
value each in turn, so that both builds meet the same state of the machine.

Both sides live here: `TurnPipes` (the orchestrator's: two FIFOs per pair, the first turn,
the word that a partner has ended) and `Turns` (a worker's: wait for the turn, hand it over
after each timed warmup or value). Plain files and bytes; no torch.
"""

from __future__ import annotations

import os
import select

__all__ = ["TURN", "PARTNER_ENDED", "TurnPipes", "Turns"]

# The turn itself, and the orchestrator's word that the partner's process has ended.
TURN = b"t"
PARTNER_ENDED = b"e"


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


class Turns:
    """A worker's side of a lockstep pair: it runs only while it holds the turn."""

    def __init__(self, mine: str, partner: str, wait_s: float | None) -> None:
        # O_RDWR: opening a FIFO so never blocks, and the orchestrator holds both ends open.
        self._mine = os.open(mine, os.O_RDWR)
        self._partner = os.open(partner, os.O_RDWR)
        self._wait_s = wait_s
        self.alone = False
        # Warmups and values timed while the partner did not alternate: after it ended, or
        # after it kept the turn past wait_s.
        self.unpaired_values = 0

    def take(self) -> None:
        """Wait for the turn; once the partner has ended, or after `wait_s`, go on alone."""
        if self.alone:
            return
        ready, _, _ = select.select([self._mine], [], [], self._wait_s)
        if not ready or os.read(self._mine, 1) != TURN:
            self.alone = True

    def after_value(self) -> None:
        """After each timed warmup or value: give the turn to the partner and wait for it to
        come back."""
        if self.alone:
            self.unpaired_values += 1
            return
        os.write(self._partner, TURN)
        self.take()
