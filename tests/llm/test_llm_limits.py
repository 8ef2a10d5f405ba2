"""The per-model call limit of the LLM agent (agents/workers/llm/limits.py): never more calls at once than allowed, halved
by a 429 and held down for its Retry-After, raised again one answered call at a time up to the ceiling.
In process, but asyncio's loop opens a socket pair, so the system tier runs it."""
from __future__ import annotations

import asyncio

import pytest

from autocomp_zmq.agents.workers.llm.limits import AdaptiveLimit

pytestmark = pytest.mark.system      # an asyncio loop opens a socket pair: not the fast tier's


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_never_more_calls_at_once_than_allowed():
    limit, peak = AdaptiveLimit(3), []

    async def call():
        async with limit:
            peak.append(limit.running)
            await asyncio.sleep(0.01)

    async def main():
        await asyncio.gather(*(call() for _ in range(20)))

    asyncio.run(main())
    assert max(peak) == 3 and limit.running == 0


def test_a_429_halves_the_limit_until_its_retry_after_then_it_climbs_back():
    clock = Clock()
    limit = AdaptiveLimit(16, clock=clock)

    async def main():
        limit.rate_limited(retry_after=5.0)
        assert limit.allowed == 8
        limit.rate_limited()
        assert limit.allowed == 4
        await limit.answered()
        assert limit.allowed == 4              # held down while the provider's wait lasts
        clock.now = 5.0
        for _ in range(20):
            await limit.answered()
        assert limit.allowed == 16             # one per answered call, never above the ceiling
        for _ in range(10):
            limit.rate_limited()
        assert limit.allowed == 1              # never below one call

    asyncio.run(main())


def test_a_raised_limit_lets_waiting_calls_start():
    limit, started = AdaptiveLimit(2), []
    limit.rate_limited()                       # 1 allowed

    async def call(i):
        async with limit:
            started.append(i)
            await asyncio.sleep(0.05)

    async def main():
        tasks = [asyncio.create_task(call(i)) for i in range(3)]
        await asyncio.sleep(0.01)
        assert len(started) == 1
        await limit.answered()                 # 2 allowed: a waiting call starts at once
        await asyncio.sleep(0.01)
        assert len(started) == 2
        await asyncio.gather(*tasks)

    asyncio.run(main())


def test_a_limit_of_less_than_one_call_is_refused():
    with pytest.raises(ValueError):
        AdaptiveLimit(0)


def test_rate_limit_headers_of_both_providers_are_read():
    from datetime import datetime, timezone

    from autocomp_zmq.agents.workers.llm.limits import Headroom, headroom_of
    openai = {"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "1m30s",
              "x-ratelimit-remaining-tokens": "9000", "x-ratelimit-reset-tokens": "250ms"}
    assert headroom_of(openai) == Headroom(3, 9000, 90.0)
    now = datetime(2026, 11, 28, 12, 0, 0, tzinfo=timezone.utc)
    anthropic = {"anthropic-ratelimit-requests-remaining": "7", "anthropic-ratelimit-requests-reset":
                 "2026-11-28T12:00:20Z", "anthropic-ratelimit-tokens-remaining": "nonsense"}
    assert headroom_of(anthropic, now) == Headroom(7, None, 20.0)
    assert headroom_of({}) is None and headroom_of({"x-ratelimit-remaining-requests": "many"}) is None


def test_headroom_lowers_the_limit_until_the_window_resets():
    from autocomp_zmq.agents.workers.llm.limits import Headroom
    clock = Clock()
    limit = AdaptiveLimit(64, clock=clock)
    limit.observe(Headroom(requests=500, tokens=None, reset_s=1.0), tokens_per_call=10_000)
    assert limit.allowed == 64                        # plenty left: nothing changes
    limit.observe(Headroom(requests=None, tokens=45_000, reset_s=5.0), tokens_per_call=10_000)
    assert limit.allowed == 4                         # four calls' tokens left in the window

    async def answered_at(t):
        clock.now = t
        await limit.answered()
    asyncio.run(answered_at(4.0))
    assert limit.allowed == 4                         # held down until the window resets
    asyncio.run(answered_at(5.5))
    assert limit.allowed == 5                         # then raised one answered call at a time
    limit.observe(Headroom(requests=0, tokens=None, reset_s=1e9), tokens_per_call=1)
    assert limit.allowed == 1                         # never below one
