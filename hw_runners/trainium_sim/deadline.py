"""The evaluation's deadline, checked inside every loop whose work grows with what the kernel issued.

A candidate chooses how many instructions it issues, how many blocks one access touches and how often it
rewrites its outputs, so no stage of judging it (decoding, placing tiles, choosing what to check, replaying,
timing) may run unchecked between two looks at the clock. Each stage makes a Clock and ticks it once per unit
of work (an instruction, or a slice of a large one); a tick costs one monotonic clock read (~50 ns), small
beside the microseconds each unit costs, so every stage stops within one unit of the limit.
"""
from __future__ import annotations

import time


class Clock:
    """One stage's view of the evaluation's deadline (None: no limit, as in the fast tests)."""

    __slots__ = ("deadline", "stage")

    def __init__(self, deadline: float | None, stage: str) -> None:
        self.deadline, self.stage = deadline, stage

    def tick(self, reached: int | None = None) -> None:
        """TimeoutError naming the stage (and how far it got) once the deadline has passed."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            at = f" (stopped at {reached:,})" if reached is not None else ""
            raise TimeoutError(f"{self.stage} exceeded the time limit{at}")
