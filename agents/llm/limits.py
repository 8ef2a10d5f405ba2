"""How many calls to one model an LLM agent makes at once: at most --llm-concurrency, fewer while the provider
pushes back. A 429 halves the number allowed (never below one) and holds it down for the provider's Retry-After;
each call answered without one raises it by one again (additive increase, multiplicative decrease, as TCP does
with a congested link). The calls of a beam iteration are independent, so the limit, not the search, decides how
many wait on the provider at once."""
from __future__ import annotations

import asyncio
import time


class AdaptiveLimit:
    """An asyncio semaphore whose size moves between 1 and `ceiling` (use from one event loop)."""

    def __init__(self, ceiling: int, clock=time.monotonic) -> None:
        if ceiling < 1:
            raise ValueError("a concurrency limit is at least 1")
        self.ceiling, self.allowed, self.running = ceiling, ceiling, 0
        self._clock = clock
        self._held_until = 0.0            # no increase before this time (the provider's Retry-After)
        self._changed: asyncio.Condition | None = None

    def _cond(self) -> asyncio.Condition:
        if self._changed is None:         # made on first use, inside the loop that owns it
            self._changed = asyncio.Condition()
        return self._changed

    async def __aenter__(self) -> "AdaptiveLimit":
        cond = self._cond()
        async with cond:
            await cond.wait_for(lambda: self.running < self.allowed)
            self.running += 1
        return self

    async def __aexit__(self, *exc) -> None:
        cond = self._cond()
        async with cond:
            self.running -= 1
            cond.notify_all()

    def rate_limited(self, retry_after: float | None = None) -> None:
        """The provider said 429: allow half as many calls, and none more until its Retry-After has passed."""
        self.allowed = max(1, self.allowed // 2)
        self._held_until = max(self._held_until, self._clock() + (retry_after or 0.0))

    async def answered(self) -> None:
        """A call went through: one more allowed, up to the ceiling."""
        if self.allowed < self.ceiling and self._clock() >= self._held_until:
            cond = self._cond()
            async with cond:
                self.allowed += 1
                cond.notify_all()
