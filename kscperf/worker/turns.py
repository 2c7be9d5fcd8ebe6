"""A worker's side of the turn-taking protocol of `run-benchmarks ab` (`Turns`): wait for the
turn, hand it over after each timed warmup or value. The orchestrator's side, which makes the
FIFOs, is `kscperf.orchestrator.lockstep.TurnPipes`; the bytes are the worker contract's
(`spec.TURN`, `spec.PARTNER_ENDED`). Plain files and bytes; no torch.
"""

from __future__ import annotations

import os
import select

from kscperf.spec import TURN

__all__ = ["Turns"]


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
