"""The llm implementation against local servers speaking the providers' wire formats, through the real SDKs:
answers, usage as the providers report it, truncation, refusals, retries, failures, strict parsing."""
from __future__ import annotations

import time

import msgspec
import pytest

from autocomp_zmq.agents.workers.llm.agent import LLMAgent
from autocomp_zmq.agents.workers.llm.preflight import check_endpoints
from autocomp_zmq.agents.workers.llm.providers import CallOptions
from autocomp_zmq.agents.workers.llm.specs import SpecError, check_keys, parse_spec
from autocomp_zmq.agents.workers.worker import JobFailed
from autocomp_zmq.protocols.jobs import CodeRequest, PlanRequest
from tests.llm.fake_servers import HWLOOP, FakeLLM, Lost, Reply

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]
PROBLEM = {"target": "gemmini-sim", "name": "gemm-256x256x256", "family": "gemm", "dims": {"I": 256, "J": 256, "K": 256},
           "description": "int8 GEMM"}
PARENT = {"id": "p", "code": "void solution() {}", "latency": 606328, "feedback_text": "Latency: 606,328 cycles."}
MENU = [{"id": "loop-ws", "title": "Use the hardware loop", "description": "d"},
        {"id": "tile-sizes", "title": "Change tile sizes", "description": "d"}]
FAST = CallOptions(timeout_s=5, max_retries=2, backoff_s=0.05)
PLAN = "OPTION: tile-sizes\nPLAN:\nDouble the I tile and keep the B panel resident in bank 2."


def plan_job(model):
    return msgspec.convert({"problem": PROBLEM, "parent": PARENT, "menu": MENU, "model": model, "iteration": 1,
                            "iterations": 3, "seed": 1}, PlanRequest)


def code_job(model):
    return msgspec.convert({"problem": PROBLEM, "parent": PARENT, "model": model, "seed": 1,
                            "plan": {"text": "use the loop", "option_id": "loop-ws"}}, CodeRequest)


@pytest.fixture
def fake():
    server = FakeLLM()
    yield server
    server.close()


@pytest.fixture
def anthropic_env(fake, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return "anthropic:claude-test"


def compat(fake, name="m"):
    return f"openai-compat@{fake.url}/v1:{name}"


def test_plan_and_code_through_the_openai_wire_format(fake):
    agent = LLMAgent([compat(fake)], call_options=FAST)
    plan = agent.handle("plan", plan_job(compat(fake)))
    assert plan.plan.option_id == "loop-ws" and "gemmini_loop_ws" in plan.plan.text
    code = agent.handle("code", code_job(compat(fake)))
    assert code.code == HWLOOP
    call = code.calls[0]
    assert call.tokens_in == 1000 and call.tokens_out == 200 and len(call.prompt_hash) == 64
    assert call.answer.startswith("Here is the kernel") and "# Your role: implementer" in call.prompt
    system, user = fake.requests[0]["body"]["messages"]
    # the stable reference first (what providers cache), what varies after it
    assert system["role"] == "system" and "# Machine and programming reference" in system["content"]
    assert system["content"] == fake.requests[1]["body"]["messages"][0]["content"]   # plan and code share it
    for part in ("606,328 cycles", "1. loop-ws: Use the hardware loop", "step 1 of 3"):
        assert part in user["content"]
    assert fake.requests[1]["body"]["max_tokens"] == 16000   # compat servers get max_tokens: half of 32000 first


def test_anthropic_caches_the_prefix_and_reports_cache_tokens(anthropic_env, fake):
    fake.usage = None
    agent = LLMAgent([anthropic_env], call_options=FAST)
    first = agent.handle("code", code_job(anthropic_env)).calls[0]
    second = agent.handle("plan", plan_job(anthropic_env)).calls[0]
    server = fake
    body = server.requests[0]["body"]
    assert server.requests[0]["path"].endswith("/v1/messages")
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"} and "temperature" not in body
    assert first.tokens_cache_write > 10_000 and first.tokens_cached == 0
    assert second.tokens_cached == first.tokens_cache_write and second.tokens_cache_write == 0
    assert second.tokens_in > second.tokens_cached     # tokens_in counts every prompt token


def test_openai_usage_details_reach_the_call(fake):
    fake.usage = None
    fake.script = lambda prompt, n: (200, {}, Reply(PLAN, reasoning_tokens=700, thinking="let me think"))
    agent = LLMAgent([compat(fake)], call_options=FAST)
    first = agent.handle("plan", plan_job(compat(fake))).calls[0]
    second = agent.handle("plan", plan_job(compat(fake))).calls[0]
    assert first.tokens_reasoning == 700 and first.tokens_out > 700 and first.reasoning == "let me think"
    assert first.tokens_cached == 0 and second.tokens_cached >= 10_000 and second.finish == "stop"


def test_openai_proper_gets_max_completion_tokens_and_a_cache_key(fake, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url + "/v1")
    opts = CallOptions(timeout_s=5, max_retries=0, openai_api="chat")
    LLMAgent(["openai:gpt-test"], call_options=opts).handle("plan", plan_job("openai:gpt-test"))
    body = fake.requests[0]["body"]
    assert fake.requests[0]["path"].endswith("/chat/completions")
    assert body["max_completion_tokens"] == 16000 and "max_tokens" not in body and len(body["prompt_cache_key"]) == 32


def test_openai_reasoning_models_go_through_the_responses_api_with_their_reasoning_summary(fake, monkeypatch):
    """Before, OpenAI's reasoning models were called through Chat Completions, which return no reasoning summary
    (about 80% of their output tokens in a replay of published runs were reasoning)."""
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url + "/v1")
    fake.usage = None
    answers = iter([Reply(PLAN[:40], finish="length", reasoning_tokens=3000, thinking="first pass"),
                    Reply(PLAN, reasoning_tokens=5000, thinking="Weighed tile sizes against the bank limit.")])
    fake.script = lambda prompt, n: (200, {}, next(answers))
    out = LLMAgent(["openai:gpt-5-test"], call_options=FAST).handle("plan", plan_job("openai:gpt-5-test"))
    assert [r["path"] for r in fake.requests] == ["/v1/responses"] * 2
    body = fake.requests[0]["body"]
    assert body["max_output_tokens"] == 16000 and body["reasoning"] == {"summary": "auto"} and body["store"] is False
    assert "# Machine and programming reference" in body["instructions"] and len(body["prompt_cache_key"]) == 32
    first, second = out.calls
    assert first.finish == "length" and second.max_tokens == 32000     # cut off: asked again with the whole limit
    assert second.reasoning == "Weighed tile sizes against the bank limit." and second.tokens_reasoning == 5000
    assert out.plan.option_id == "tile-sizes" and second.tokens_out == 5000 + len(PLAN) // 4 + (len(PLAN) % 4 > 0)


def test_a_truncated_answer_is_asked_again_with_the_whole_limit(fake):
    fake.script = lambda prompt, n: (200, {}, Reply("OPTION: tile-sizes\nPLAN:\nDoub", finish="length") if n == 1
                                     else Reply(PLAN))
    out = LLMAgent([compat(fake)], call_options=CallOptions(timeout_s=5, max_retries=0, max_tokens=8000)).handle(
        "plan", plan_job(compat(fake)))
    assert out.plan.option_id == "tile-sizes" and [c.max_tokens for c in out.calls] == [4000, 8000]
    assert out.calls[0].outcome.startswith("truncated") and out.calls[0].finish == "length"
    assert [r["body"]["max_tokens"] for r in fake.requests] == [4000, 8000]


def test_an_answer_truncated_twice_is_a_failure_named_truncated(fake):
    fake.script = lambda prompt, n: (200, {}, Reply("```c\nvoid solution(", finish="length", reasoning_tokens=3000))
    with pytest.raises(JobFailed, match="truncated: .* cut off at the 8,000-token output limit .*reasoning") as info:
        LLMAgent([compat(fake)], call_options=CallOptions(timeout_s=5, max_retries=0, max_tokens=8000)).handle(
            "code", code_job(compat(fake)))
    assert len(info.value.calls) == 2 and info.value.calls[-1].outcome == "truncated"


@pytest.mark.parametrize("reply, message", [
    (Reply("I can't help with that.", finish="refusal"), "refusal: the model refused"),
    (Reply(""), "empty"),
])
def test_refusals_and_empty_answers_are_named(fake, reply, message):
    fake.script = lambda prompt, n: (200, {}, reply)
    with pytest.raises(JobFailed, match=message):
        LLMAgent([compat(fake)], call_options=FAST).handle("plan", plan_job(compat(fake)))


def test_anthropic_refusal_and_thinking(anthropic_env, fake):
    fake.script = lambda prompt, n: (200, {}, Reply("", finish="refusal"))
    with pytest.raises(JobFailed, match="refusal"):
        LLMAgent([anthropic_env], call_options=FAST).handle("plan", plan_job(anthropic_env))
    fake.script = lambda prompt, n: (200, {}, Reply(PLAN, thinking="weighing tile sizes"))
    opts = CallOptions(timeout_s=5, max_retries=0, reasoning_effort="medium", temperature=0.3)
    out = LLMAgent([anthropic_env], call_options=opts).handle("plan", plan_job(anthropic_env))
    body = fake.requests[-1]["body"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192} and "temperature" not in body
    assert out.calls[0].reasoning == "weighing tile sizes" and out.plan.option_id == "tile-sizes"


def test_429_with_retry_after_is_retried(fake):
    fake.script = lambda prompt, n: (429, {"retry-after": "1"}, {"error": {"message": "slow down"}}) if n == 1 \
        else (200, {}, PLAN)
    t0 = time.monotonic()
    out = LLMAgent([compat(fake)], call_options=FAST).handle("plan", plan_job(compat(fake)))
    assert out.plan.option_id == "tile-sizes" and len(fake.requests) == 2
    assert time.monotonic() - t0 >= 0.9   # waited as the server asked


def test_500_is_retried_then_gives_up_with_a_recorded_failure(fake):
    fake.script = lambda prompt, n: (500, {}, {"error": {"message": "boom"}})
    with pytest.raises(JobFailed, match="model .* failed: HTTP 500 .* after 2 retries") as info:
        LLMAgent([compat(fake)], call_options=FAST).handle("plan", plan_job(compat(fake)))
    assert len(fake.requests) == 3   # first try + 2 retries, each recorded, none billed
    calls = info.value.calls
    assert [c.billing for c in calls] == ["none"] * 3 and not info.value.retry
    assert [c.outcome.split(":")[0] for c in calls] == ["HTTP 500", "HTTP 500", "error"]


def test_timeout_is_a_recorded_failure(fake):
    fake.delay_s = 2.0
    with pytest.raises(JobFailed, match="read timeout") as info:
        LLMAgent([compat(fake)], call_options=CallOptions(timeout_s=0.5, max_retries=0)).handle(
            "plan", plan_job(compat(fake)))
    assert info.value.retry and info.value.calls[0].billing == "unknown"


@pytest.mark.parametrize("answer, message", [
    (b"{not json", "malformed answer"),
    ("I would restructure the loops but cannot write the code.", "no .*code block"),
    ("```c\nint helper(void) { return 1; }\n```\n", "solution"),
])
def test_unusable_answers_are_failures_never_code(fake, answer, message):
    fake.script = lambda prompt, n: (200, {}, answer)
    with pytest.raises(JobFailed, match=message) as info:
        LLMAgent([compat(fake)], call_options=CallOptions(timeout_s=5, max_retries=0)).handle(
            "code", code_job(compat(fake)))
    assert info.value.calls, "the call is still accounted for"


@pytest.mark.parametrize("answer, option, choice", [
    ("PLAN: do something clever with the loops, keeping B resident", "", "free text"),
    ("OPTION: remove-fences\nPLAN:\nRemove the fences between blocks entirely.", "remove-fences", "off menu"),
    ("Selected optimization: 2) Change tile sizes\n\nGrow the I tile to 64 rows.", "tile-sizes", "prose"),
])
def test_paid_plans_are_kept_however_they_name_their_option(fake, answer, option, choice):
    """Before, a plan without an OPTION line, or naming a valid option not offered in this step, was discarded
    after it was paid for."""
    fake.script = lambda prompt, n: (200, {}, answer)
    out = LLMAgent([compat(fake)], call_options=FAST).handle("plan", plan_job(compat(fake)))
    assert (out.plan.option_id, out.plan.choice) == (option, choice)
    assert "2. tile-sizes: Change tile sizes" in fake.requests[0]["body"]["messages"][1]["content"]   # numbered


def test_a_plan_without_a_description_is_a_failure(fake):
    fake.script = lambda prompt, n: (200, {}, "OPTION: loop-ws\nPLAN:\n")
    with pytest.raises(JobFailed, match="no description"):
        LLMAgent([compat(fake)], call_options=FAST).handle("plan", plan_job(compat(fake)))


def test_specs_and_missing_keys():
    assert parse_spec("openai-compat@http://h:1/v1:llama3:8b").model == "llama3:8b"
    with pytest.raises(SpecError, match="OPENAI_API_KEY"):
        check_keys([parse_spec("openai:gpt-4o")], env={})
    with pytest.raises(SpecError, match="ANTHROPIC_API_KEY"):
        check_keys([parse_spec("anthropic:claude-sonnet-4-5")], env={"OPENAI_API_KEY": "x"})
    check_keys([parse_spec("openai-compat@http://h:1/v1:m"), parse_spec("heuristic")], env={})
    with pytest.raises(SpecError, match="base URL's path"):
        parse_spec("openai-compat@http://h:1:m")
    with pytest.raises(SpecError, match="TOGETHER_KEY"):
        check_keys([parse_spec("openai-compat[TOGETHER_KEY]@https://api.together.xyz/v1:m")], env={})
    with pytest.raises(SpecError, match="not an environment variable name"):
        parse_spec("openai-compat[1 bad]@http://h:1/v1:m")


def test_each_compatible_endpoint_gets_its_own_key(fake, monkeypatch):
    monkeypatch.setenv("FIRST_KEY", "one")
    monkeypatch.setenv("SECOND_KEY", "two")
    a, b = f"openai-compat[FIRST_KEY]@{fake.url}/v1:a", f"openai-compat[SECOND_KEY]@{fake.url}/v1:b"
    agent = LLMAgent([a, b], call_options=FAST)
    agent.handle("plan", plan_job(a))
    agent.handle("plan", plan_job(b))
    assert [r["headers"]["authorization"] for r in fake.requests] == ["Bearer one", "Bearer two"]


def test_preflight_names_a_model_the_server_does_not_list(fake, monkeypatch):
    fake.models = ["qwen3-coder", "llama-3.3"]
    assert check_endpoints([parse_spec(compat(fake, "qwen3-coder"))]) == []
    problems = check_endpoints([parse_spec(compat(fake, "qwen3-cooder"))])
    assert len(problems) == 1 and "does not serve the model 'qwen3-cooder' (it lists qwen3-coder, llama-3.3)" \
        in problems[0]
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    fake.models = ["claude-right"]
    assert check_endpoints([parse_spec("anthropic:claude-right")]) == []
    assert "does not know the model 'claude-wrong'" in check_endpoints([parse_spec("anthropic:claude-wrong")])[0]
    fake.models = None    # a server without the listing is not refused
    assert check_endpoints([parse_spec(compat(fake, "anything"))]) == []


def test_sampling_options_reach_the_wire(fake):
    opts = CallOptions(timeout_s=5, max_retries=0, temperature=0.3, reasoning_effort="low")
    LLMAgent([compat(fake)], call_options=opts).handle("plan", plan_job(compat(fake)))
    body = fake.requests[0]["body"]
    assert body["temperature"] == 0.3 and body["reasoning_effort"] == "low" and body["model"] == "m"


def test_an_agent_imports_only_the_sdk_of_its_provider(fake, tmp_path):
    """Before, every LLM agent and the preflight imported both SDKs (about a CPU-second each) whatever they served."""
    import subprocess
    import sys
    script = (f"import sys\nfrom autocomp_zmq.agents.workers.llm.agent import LLMAgent\n"
              f"from autocomp_zmq.agents.workers.llm.preflight import check_endpoints\n"
              f"from autocomp_zmq.agents.workers.llm.specs import parse_spec\n"
              f"assert 'openai' not in sys.modules and 'anthropic' not in sys.modules\n"
              f"LLMAgent(['{compat(fake)}'])\ncheck_endpoints([parse_spec('{compat(fake)}')])\n"
              f"print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "['openai']", done.stdout + done.stderr


def test_a_long_anthropic_answer_streams_past_the_call_timeout(anthropic_env, fake):
    """Before, a whole answer had to arrive within --call-timeout-s: a long one timed out, and was paid for and
    generated again. Streamed, the timeout bounds each wait for the next piece."""
    fake.script = lambda prompt, n: (200, {}, Reply(PLAN, pace_s=0.5))    # 6 events over 3 s, timeout 1 s
    out = LLMAgent([anthropic_env], call_options=CallOptions(timeout_s=1.0, max_retries=0)).handle(
        "plan", plan_job(anthropic_env))
    assert fake.requests[0]["body"]["stream"] is True and len(fake.requests) == 1
    assert out.plan.option_id == "tile-sizes" and out.calls[0].latency > 2 and out.calls[0].tokens_out == 200


@pytest.fixture
def gemini_env(fake, monkeypatch):
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    return "gemini:gemini-2.5-test"


def test_gemini_through_its_own_sdk_with_thought_summaries_and_billed_thinking(gemini_env, fake):
    fake.usage = None
    answers = iter([Reply(PLAN[:30], finish="length", reasoning_tokens=900, thinking="first thoughts"),
                    Reply(PLAN, reasoning_tokens=1200, thinking="Compared tile sizes against bank capacity.")])
    fake.script = lambda prompt, n: (200, {}, next(answers))
    out = LLMAgent([gemini_env], call_options=FAST).handle("plan", plan_job(gemini_env))
    assert all(r["path"].endswith("/models/gemini-2.5-test:generateContent") for r in fake.requests) and len(fake.requests) == 2
    body = fake.requests[0]["body"]
    assert body["generationConfig"]["maxOutputTokens"] == 16000
    thinking = body["generationConfig"]["thinkingConfig"]
    assert thinking.get("includeThoughts", thinking.get("include_thoughts")) is True
    assert "# Machine and programming reference" in body["systemInstruction"]["parts"][0]["text"]
    assert fake.requests[0]["headers"]["x-goog-api-key"] == "test-key"
    first, second = out.calls
    assert first.finish == "length" and second.max_tokens == 32000 and out.plan.option_id == "tile-sizes"
    assert second.reasoning == "Compared tile sizes against bank capacity." and second.tokens_reasoning == 1200
    assert second.tokens_out == 1200 + len(PLAN) // 4 + (len(PLAN) % 4 > 0)   # thinking is billed as output


def test_gemini_rate_limits_are_retried_and_a_lost_answer_counted_at_its_worst_case(gemini_env, fake):
    fake.script = lambda prompt, n: ((429, {"retry-after": "0.2"}, {"error": {"code": 429, "message": "quota",
                                                                               "status": "RESOURCE_EXHAUSTED"}})
                                     if n == 1 else (200, {}, Lost("reset", PLAN)))
    with pytest.raises(JobFailed, match="connection lost mid-answer") as info:
        LLMAgent([gemini_env], call_options=FAST).handle("plan", plan_job(gemini_env))
    assert [c.billing for c in info.value.calls] == ["none", "unknown"] and info.value.retry
    assert info.value.calls[0].outcome.startswith("rate limited (429): not billed, tried again after 0.2 s")


def test_gemini_preflight_names_a_model_the_endpoint_does_not_know(gemini_env, fake):
    fake.models = ["gemini-2.5-test"]
    problems = check_endpoints([parse_spec(gemini_env), parse_spec("gemini:gemini-9-missing")], timeout_s=5)
    assert problems == ["model gemini:gemini-9-missing: the endpoint gemini does not know the model 'gemini-9-missing'"]


def test_long_cache_asks_anthropic_for_the_one_hour_cache_and_openai_for_extended_retention(anthropic_env, fake,
                                                                                            monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url + "/v1")
    opts = CallOptions(timeout_s=5, max_retries=0, long_cache=True)
    for model in (anthropic_env, "openai:gpt-test"):
        LLMAgent([model], call_options=opts).handle("plan", plan_job(model))
    anthropic_body, openai_body = (r["body"] for r in fake.requests)
    assert anthropic_body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert openai_body["prompt_cache_retention"] == "24h" and len(openai_body["prompt_cache_key"]) == 32
