"""Every try of a model call is a recorded event with what it may have cost, through the real SDKs against a local
server that bills what it generates: the SDKs retry nothing by themselves; 429, 5xx, 529 and refused connections
are tried again after the provider's Retry-After or a backoff, each try recorded as not billed; an answer lost after
the request was sent (a read timeout, a reset mid-answer, a malformed or usage-less 200) is recorded once, priced at
its worst case (never below what the server billed), and handed back for the coordinator to send again."""
from __future__ import annotations

import socket
import time

import pytest

from autocomp_zmq.agents.workers.llm.agent import LLMAgent
from autocomp_zmq.agents.workers.llm.pricing import PriceBook, cost_functions, read_prices
from autocomp_zmq.agents.workers.llm.providers import CallOptions
from autocomp_zmq.agents.workers.worker import JobFailed
from tests.llm.fake_servers import FakeLLM, Lost
from tests.llm.test_llm_agent import PLAN, compat, plan_job

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]
OPTS = CallOptions(timeout_s=1.0, max_retries=3, backoff_s=0.05, max_tokens=8000)


@pytest.fixture
def fake():
    server = FakeLLM(usage=None)
    yield server
    server.close()


def test_rate_limits_and_overloads_are_waited_out_and_recorded_as_not_billed(fake, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    answers = {1: (529, {}, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
               2: (429, {"retry-after-ms": "400"}, {"type": "error", "error": {"type": "rate_limit_error",
                                                                                "message": "slow down"}})}
    fake.script = lambda prompt, n: answers.get(n, (200, {}, PLAN))
    t0 = time.monotonic()
    out = LLMAgent(["anthropic:claude-test"], call_options=OPTS).handle("plan", plan_job("anthropic:claude-test"))
    assert time.monotonic() - t0 >= 0.4                       # the provider's own wait, honoured
    assert [c.billing for c in out.calls] == ["none", "none", "reported"] and len(fake.requests) == 3
    assert out.calls[0].outcome.startswith("overloaded (529): not billed, tried again after")
    assert out.calls[1].outcome == "rate limited (429): not billed, tried again after 0.4 s"
    assert out.calls[2].outcome == "ok" and len(fake.billed) == 1


@pytest.mark.parametrize("how", ["timeout", "reset", "malformed", "no-usage"])
def test_an_answer_lost_after_sending_is_recorded_once_at_its_worst_case(fake, how, tmp_path):
    """Before, the SDK tried again by itself after a timeout or a reset (the lost try left no record, no cost), and
    a malformed 200 was stored as a $0.00 call."""
    fake.script = lambda prompt, n: (200, {}, Lost(how, PLAN, seconds=2.0))
    model = compat(fake)
    with pytest.raises(JobFailed, match="the job is sent again if the cost cap allows") as info:
        LLMAgent([model], call_options=OPTS).handle("plan", plan_job(model))
    assert len(fake.requests) == 1 and len(fake.billed) == 1   # one try: nobody else retried it unseen
    [call] = info.value.calls
    assert info.value.retry and call.billing == "unknown" and call.outcome.startswith("lost: ")
    assert call.tokens_out == 4000 and call.tokens_in >= len(call.prefix) + len(call.prompt)
    prices = tmp_path / "prices.toml"
    prices.write_text(f'["{model}"]\ninput = 1.0\noutput = 4.0\ncached_input = 0.1\n')
    call_cost, _ = cost_functions(PriceBook(read_prices(prices)), 8000)
    _, _, tin, tout, cached, _ = fake.billed[0]
    billed = ((tin - cached) * 1.0 + cached * 0.1 + tout * 4.0) / 1e6
    assert call_cost(call) >= billed > 0                       # the cap counts at least what the server billed


def test_a_refused_connection_is_tried_again_and_never_billed():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]           # nothing listens there once closed
    model = f"openai-compat@http://127.0.0.1:{port}/v1:m"
    with pytest.raises(JobFailed, match="could not connect .* after 3 retries") as info:
        LLMAgent([model], call_options=OPTS).handle("plan", plan_job(model))
    assert [c.billing for c in info.value.calls] == ["none"] * 4 and not info.value.retry


@pytest.mark.parametrize("how", ["reset", "malformed"])
def test_a_streamed_anthropic_answer_cut_short_is_lost_not_taken_as_answered(fake, monkeypatch, how):
    """Before, a stream that ended before the message did was read as a complete, empty answer billed at the few
    tokens its first event reported."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    fake.script = lambda prompt, n: (200, {}, Lost(how, PLAN))
    with pytest.raises(JobFailed, match="the job is sent again") as info:
        LLMAgent(["anthropic:claude-test"], call_options=OPTS).handle("plan", plan_job("anthropic:claude-test"))
    [call] = info.value.calls
    assert info.value.retry and call.billing == "unknown" and call.tokens_out == 4000 and len(fake.billed) == 1
