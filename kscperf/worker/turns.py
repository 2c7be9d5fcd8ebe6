"""A worker's side of the turn-taking protocol of `run-benchmarks ab` (`Turns`): wait for the
turn, hand it over after each timed warmup or value, and agree with the partner on each
config's loops. The orchestrator's side, which makes the FIFOs, is
`kscperf.orchestrator.lockstep.TurnPipes`; the bytes are the worker contract's (`spec.TURN`,
`spec.PARTNER_ENDED`, `spec.LOOPS`). Plain files and bytes; no torch.
"""

from __future__ import annotations

import json
import os
import select

from kscperf.spec import LOOPS, TURN

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
        # config -> loops the partner calibrated and shared, for this side to time with.
        self.partner_loops: dict[str, int] = {}

    def take(self) -> None:
        """Wait for the turn, keeping the loops the partner shares meanwhile; once the partner
        has ended, or after `wait_s`, go on alone."""
        while not self.alone:
            ready, _, _ = select.select([self._mine], [], [], self._wait_s)
            word = os.read(self._mine, 1) if ready else b""
            if word == LOOPS:
                size = int.from_bytes(os.read(self._mine, 2), "big")
                config, loops = json.loads(os.read(self._mine, size))
                self.partner_loops[config] = loops
                continue
            self.alone = word != TURN
            return

    def share_loops(self, config: str, loops: int) -> None:
        """Tell the partner the loops this side calibrated for `config`, before this side's
        first value of it. The side that reaches a config first calibrates it (the one with
        the first turn, unless it lacks the config), and the other times it with the same
        loops: both builds then amortise the same per-value costs (the partner ran just
        before each value). Loops calibrated apart made identical builds differ by 2-5 % for
        a whole run (docs/method.md, "The same loops on both sides")."""
        payload = json.dumps([config, loops]).encode()
        message = LOOPS + len(payload).to_bytes(2, "big") + payload
        # Only a write of at most PIPE_BUF bytes is whole when the partner reads it, and never
        # interleaved with the orchestrator's word: a longer config name is calibrated by each.
        if not self.alone and len(message) <= select.PIPE_BUF:
            os.write(self._partner, message)

    def after_value(self) -> None:
        """After each timed warmup or value: give the turn to the partner and wait for it to
        come back."""
        if self.alone:
            self.unpaired_values += 1
            return
        os.write(self._partner, TURN)
        self.take()
