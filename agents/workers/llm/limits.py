"""How many calls to one model an LLM agent makes at once: at most --llm-concurrency, fewer while the provider
pushes back. A 429 halves the number allowed (never below one) and holds it down for the provider's Retry-After;
each call answered without one raises it by one again (additive increase, multiplicative decrease, as TCP does
with a congested link). Before any 429, the rate-limit headers of each answer (OpenAI's x-ratelimit-*,
Anthropic's anthropic-ratelimit-*) say how many requests and tokens are left until the provider's window resets:
no more calls are allowed at once than those would admit, until the reset. The calls of a beam iteration are
independent, so the limit, not the search, decides how many wait on the provider at once."""
from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from autocomp_zmq.agents.workers.llm.specs import MAX_WAIT_S

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Headroom:
    """What a provider's rate-limit headers said was left of its current window."""
    requests: int | None          # requests left (None: not said)
    tokens: int | None            # tokens left (input and output counted together, as OpenAI counts them)
    reset_s: float                # seconds until the window of whichever is the tighter resets


def headroom_of(headers, now: datetime | None = None) -> Headroom | None:
    """The headroom an answer's headers state, None when they state none."""
    get = (lambda name: headers.get(name)) if headers else (lambda name: None)
    found = {}
    for what in ("requests", "tokens"):
        for prefix in ("x-ratelimit", "anthropic-ratelimit"):
            left = _int(get(f"{prefix}-remaining-{what}") if prefix == "x-ratelimit" else get(f"{prefix}-{what}-remaining"))
            if left is not None:
                reset = get(f"{prefix}-reset-{what}") if prefix == "x-ratelimit" else get(f"{prefix}-{what}-reset")
                found[what] = (left, _reset_s(reset, now))
                break
    if not found:
        return None
    resets = [r for _, r in found.values()]
    return Headroom(found.get("requests", (None,))[0], found.get("tokens", (None,))[0], max(resets))


def _int(value) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _reset_s(value, now: datetime | None) -> float:
    """OpenAI writes a duration ("6m0s", "20ms"), Anthropic a time (RFC 3339); 0 when neither."""
    if not value:
        return 0.0
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value.strip():
        return sum(float(n) * _SECONDS[u] for n, u in parts)
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return max(0.0, (at - (now or datetime.now(timezone.utc))).total_seconds())


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

    def observe(self, room: Headroom | None, tokens_per_call: int) -> None:
        """An answer's headers said what is left of the provider's window: allow no more calls at once than it
        admits (a call needs its prompt and its output limit in tokens), and none more until it resets."""
        if room is None:
            return
        fits = [n for n in (room.requests, room.tokens // max(1, tokens_per_call) if room.tokens is not None else None)
                if n is not None]
        if fits and min(fits) < self.allowed:
            self.allowed = max(1, min(fits))
            self._held_until = max(self._held_until, self._clock() + min(room.reset_s, MAX_WAIT_S))

    async def answered(self) -> None:
        """A call went through: one more allowed, up to the ceiling."""
        if self.allowed < self.ceiling and self._clock() >= self._held_until:
            cond = self._cond()
            async with cond:
                self.allowed += 1
                cond.notify_all()
