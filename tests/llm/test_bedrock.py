"""AWS Bedrock (bedrock:MODEL_ID) through boto3's Converse API against a local server speaking its wire format:
answers, prompt caching up to a cache point, prices from genai-prices' AWS table, the product's own retries (boto3's
off), credentials and region checked before anything starts, and a whole run whose cost equals the server's bill."""
from __future__ import annotations

import pytest

from autocomp_zmq.agents.workers.llm.agent import LLMAgent
from autocomp_zmq.agents.workers.llm.pricing import PriceBook, cost_functions
from autocomp_zmq.agents.workers.llm.providers import CallOptions
from autocomp_zmq.agents.workers.llm.specs import SpecError, check_keys, parse_spec
from autocomp_zmq.agents.workers.worker import JobFailed
from tests.llm.fake_servers import FakeLLM, Lost, Reply, smart_answer
from tests.llm.test_llm_agent import PLAN, code_job, plan_job
from tests.system.runkit import finish, launch, summary, write_config

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]
CLAUDE = "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0"
LLAMA = "bedrock:meta.llama3-3-70b-instruct-v1:0"
FAST = CallOptions(timeout_s=3, max_retries=2, backoff_s=0.05)


def aws_env(url: str | None = None) -> dict:
    """Credentials, a region and the endpoint, and nothing boto3 would look for elsewhere (files, instance role)."""
    return {"AWS_ACCESS_KEY_ID": "AKIATEST", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "us-east-1",
            "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
            "AWS_EC2_METADATA_DISABLED": "true", **({"AWS_ENDPOINT_URL_BEDROCK_RUNTIME": url} if url else {})}


@pytest.fixture
def fake(monkeypatch):
    server = FakeLLM(usage=None, script=lambda prompt, n: (200, {}, PLAN if "# Your role: planner" in prompt
                                                           else smart_answer(prompt)))
    for var, value in aws_env(server.url).items():
        monkeypatch.setenv(var, value)
    yield server
    server.close()


def test_plans_and_code_through_converse_with_the_prefix_cached(fake):
    agent = LLMAgent([CLAUDE], FAST)
    plan = agent.handle("plan", plan_job(CLAUDE))
    code = agent.handle("code", code_job(CLAUDE))
    assert plan.plan.option_id == "tile-sizes" and "gemmini_loop_ws" in code.code
    first, second = fake.requests
    assert first["path"].endswith("/converse") and "us.anthropic.claude-sonnet-4-5" in first["path"]
    assert first["body"]["system"][-1] == {"cachePoint": {"type": "default"}}
    assert first["body"]["inferenceConfig"] == {"maxTokens": 16000}
    written, read = plan.calls[0].tokens_cache_write, code.calls[0].tokens_cached
    assert written > 1000 and read == written        # the shared prefix: written once, then read
    call_cost, _ = cost_functions(PriceBook(), 32000)
    # the US regional endpoint's Claude Sonnet 4.5: $3.30 input, $0.33 cache read, $4.125 cache write, $16.50 output
    bill = sum((tin - r - w) * 3.3 + r * 0.33 + w * 4.125 + tout * 16.5 for _, _, tin, tout, r, w in fake.billed) / 1e6
    assert call_cost(plan.calls[0]) + call_cost(code.calls[0]) == pytest.approx(bill)


def test_models_bedrock_does_not_cache_get_no_cache_point(fake):
    LLMAgent([LLAMA], FAST).handle("plan", plan_job(LLAMA))
    assert all("cachePoint" not in block for block in fake.requests[0]["body"]["system"])


def test_throttling_is_retried_unbilled_and_a_reset_is_billing_unknown(fake):
    throttled = {"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    fake.script = lambda prompt, n: ((429, throttled, {"message": "Too many requests, please wait."}) if n == 1
                                     else (200, {}, Lost("reset", Reply(PLAN))))
    with pytest.raises(JobFailed) as info:
        LLMAgent([CLAUDE], FAST).handle("plan", plan_job(CLAUDE))
    throttle, lost = info.value.calls
    assert throttle.billing == "none" and "rate limited (429)" in throttle.outcome
    assert lost.billing == "unknown" and info.value.retry and len(fake.requests) == 2   # boto3 retried nothing


def test_credentials_and_region_are_checked_before_anything_starts(monkeypatch):
    for var, value in aws_env().items():
        monkeypatch.setenv(var, value)
    check_keys([parse_spec(CLAUDE)])
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(SpecError, match="AWS_REGION"):
        check_keys([parse_spec(CLAUDE)])
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    with pytest.raises(SpecError, match="AWS credentials"):
        check_keys([parse_spec(CLAUDE)])


def test_a_whole_run_on_bedrock_costs_what_the_server_billed(tmp_path):
    fake = FakeLLM(usage=None)
    try:
        cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=2, codes=1, model=[CLAUDE])
        run = tmp_path / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--out", str(run), "--max-cost", "5",
                            env=aws_env(fake.url)))
    finally:
        fake.close()
    assert summary(run)["speedup"] > 5, out
    bill = sum((tin - r - w) * 3.3 + r * 0.33 + w * 4.125 + tout * 16.5 for _, _, tin, tout, r, w in fake.billed) / 1e6
    assert fake.billed and summary(run)["cost_usd"] == pytest.approx(bill, abs=1e-6)
