"""Provider-native ways of paying less or waiting less, against a local server speaking each wire format through the
real SDKs: OpenAI's service tiers (asked for, and priced at the tier the answer reports), both providers' Batch APIs
(half price: one batch per window of calls, looked at until it ends, a request it did not run tried again unbilled),
and the rate-limit headers that lower how many calls go out at once before any 429."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from autocomp_zmq.agents.workers.llm.agent import LLMAgent
from autocomp_zmq.agents.workers.llm.pricing import PriceBook, cost_functions
from autocomp_zmq.agents.workers.llm.providers import CallOptions
from autocomp_zmq.agents.workers.worker import JobFailed
from tests.llm.fake_servers import FakeLLM, smart_answer
from tests.llm.test_llm_agent import PLAN, code_job, plan_job
from tests.system.runkit import finish, launch, query, summary, write_config

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]
BATCH = CallOptions(timeout_s=5, max_retries=2, backoff_s=0.05, batch_window_s=0.3, batch_poll_s=0.05)
GPT5, SONNET = "openai:gpt-5", "anthropic:claude-sonnet-4-5"


@pytest.fixture
def fake(monkeypatch):
    server = FakeLLM(script=lambda prompt, n: (200, {}, PLAN if "# Your role: planner" in prompt
                                               else smart_answer(prompt)))
    for var, value in (("OPENAI_BASE_URL", f"{server.url}/v1"), ("OPENAI_API_KEY", "k"),
                       ("ANTHROPIC_BASE_URL", server.url), ("ANTHROPIC_API_KEY", "k")):
        monkeypatch.setenv(var, value)
    yield server
    server.close()


def priced(book: PriceBook, calls) -> float:
    call_cost, _ = cost_functions(book, 32000)
    return sum(call_cost(c) for c in calls)


@pytest.mark.parametrize("asked, served", [("default", "default"), ("flex", "flex"), ("auto", "priority")])
def test_openai_calls_ask_for_the_service_tier_and_are_priced_at_the_one_reported(fake, asked, served):
    fake.auto_tier = "priority"          # a project whose own setting is the priority tier
    calls = LLMAgent([GPT5], CallOptions(timeout_s=5, service_tier=asked)).handle("plan", plan_job(GPT5)).calls
    assert fake.requests[0]["body"]["service_tier"] == asked
    tier = "" if served == "default" else served
    assert calls[0].tier == tier
    book = PriceBook(service_tier=asked)
    standard = priced(PriceBook(), [type(calls[0])(**{**calls[0].to_dict(), "tier": ""})])
    assert priced(book, calls) == pytest.approx(standard * {"default": 1, "flex": 0.5, "priority": 2}[served])
    # the cap's worst case holds at every tier the call could have been billed at
    worst = book.worst_case(book_spec := __import__("autocomp_zmq.agents.workers.llm.specs", fromlist=["x"]).parse_spec(GPT5),
                            calls[0].tokens_in, calls[0].tokens_out)
    assert worst >= priced(book, calls) and book.tiers(book_spec) == {"default": ("",), "flex": ("flex",),
                                                                     "auto": ("", "priority")}[asked]


@pytest.mark.parametrize("model", [GPT5, SONNET])
def test_calls_made_together_go_in_one_batch_at_half_price(fake, model):
    fake.batches.polls = 2               # in progress for two looks, then ended
    agent = LLMAgent([model], BATCH)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda job: agent.handle(*job), [("plan", plan_job(model))] * 3
                                + [("code", code_job(model))]))
    assert len(fake.batches.batches) == 1 and max(fake.batches.looks.values()) >= 3   # looked at until it ended
    assert [r.plan.option_id for r in results[:3]] == ["tile-sizes"] * 3 and "gemmini_loop_ws" in results[3].code
    calls = [r.calls[0] for r in results]
    assert all(c.tier == "batch" and c.outcome == "ok" and c.tokens_in >= 1000 for c in calls)
    assert [api for api, *_ in fake.billed] == [model.split(":")[0] + "-batch"] * 4
    standard = priced(PriceBook(), [type(c)(**{**c.to_dict(), "tier": ""}) for c in calls])
    assert priced(PriceBook(batch=True), calls) == pytest.approx(standard / 2)


@pytest.mark.parametrize("model", [GPT5, SONNET])
def test_a_request_the_batch_did_not_run_is_sent_again_unbilled(fake, model):
    fake.batches.expire = {"call-1"}     # the first batch expires before its only request runs
    done = LLMAgent([model], BATCH).handle("plan", plan_job(model))
    first, second = done.calls
    assert first.billing == "none" and "before this request ran" in first.outcome and "tried again" in first.outcome
    assert second.outcome == "ok" and second.tier == "batch" and len(fake.batches.batches) == 2
    assert len(fake.billed) == 1


@pytest.mark.parametrize("model", [GPT5, SONNET])
def test_a_request_the_batch_refused_fails_its_job_unbilled(fake, model):
    fake.script = lambda prompt, n: (400, {}, {"type": "error", "error": {"type": "invalid_request_error",
                                                                        "message": "prompt is too long"}})
    with pytest.raises(JobFailed, match="prompt is too long") as info:
        LLMAgent([model], BATCH).handle("plan", plan_job(model))
    assert [c.billing for c in info.value.calls] == ["none"] and not fake.billed


def test_rate_limit_headers_lower_the_calls_at_once_before_any_429(fake):
    headers = {"x-ratelimit-remaining-requests": "2", "x-ratelimit-reset-requests": "6m0s",
               "x-ratelimit-remaining-tokens": "1000000", "x-ratelimit-reset-tokens": "1s"}
    fake.script = lambda prompt, n: (200, headers, PLAN)
    agent = LLMAgent([GPT5], CallOptions(timeout_s=5, concurrency=64))
    agent.handle("plan", plan_job(GPT5))
    assert agent._limits[GPT5].allowed == 2          # two requests left in the window: two at once at most


def test_a_whole_run_through_the_anthropic_batch_api_costs_what_the_server_billed(tmp_path):
    fake = FakeLLM(usage=None)
    fake.batches.polls = 0
    try:
        cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=2, codes=1, model=[SONNET])
        run = tmp_path / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--out", str(run), "--max-cost", "5",
                            "--batch-window-s", "0.5",
                            env={"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "test-key"}))
    finally:
        fake.close()
    assert summary(run)["speedup"] > 5, out
    assert fake.billed and all(api == "anthropic-batch" for api, *_ in fake.billed)
    # Claude Sonnet 4.5 at half its price: $1.50 input, $7.50 output, cache reads $0.15 and writes $1.875 per million
    bill = sum((tin - read - written) * 1.5 + read * 0.15 + written * 1.875 + tout * 7.5
               for _, _, tin, tout, read, written in fake.billed) / 1e6
    assert summary(run)["cost_usd"] == pytest.approx(bill, abs=1e-6)
    assert {row[0] for row in query(run, "SELECT tier FROM model_calls")} == {"batch"}
    shown = finish(launch("show", str(run), "--calls"))
    assert "(batch)" in shown
