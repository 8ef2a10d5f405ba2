"""A whole run whose planner and coder are LLM agents talking to a local server
that speaks the OpenAI wire format: two models, ensembled."""
from __future__ import annotations

import re

import pytest

from tests.llm.fake_servers import FakeLLM, smart_answer
from tests.system.runkit import finish, launch, query, summary, write_config

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def test_full_search_with_two_scripted_models(tmp_path):
    fake = FakeLLM()
    try:
        a, b = (f"openai-compat@{fake.url}/v1:model-{x}" for x in "ab")
        cfg = write_config(tmp_path / "cfg.toml", iterations=2, beam=2, plans=2, codes=1, model=[a, b],
                           code_model=[a, b])
        run = tmp_path / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "2", "--out", str(run)))
    finally:
        fake.close()
    assert float(re.search(r"Speedup: ([0-9.]+)x", out).group(1)) > 5, out   # the scripted code is the FSM kernel
    calls = query(run, "SELECT role, model, tokens_in, tokens_out, outcome FROM model_calls")
    assert {(role, model) for role, model, *_ in calls} >= {("planner", a), ("planner", b), ("coder", a), ("coder", b)}
    assert all(tin == 1000 and tout == 200 and outcome.startswith("ok") for *_, tin, tout, outcome in calls)
    assert {r["model"] for r in fake.requests} == {"model-a", "model-b"}
    assert summary(run)["evaluations"] >= 2


def test_full_search_through_the_anthropic_wire_format(tmp_path):
    fake = FakeLLM()
    try:
        model = "anthropic:claude-test"
        cfg = write_config(tmp_path / "cfg.toml", iterations=2, beam=2, plans=2, codes=1, model=[model])
        run = tmp_path / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "2", "--out", str(run),
                            env={"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "test-key"}))
    finally:
        fake.close()
    assert float(re.search(r"Speedup: ([0-9.]+)x", out).group(1)) > 5, out
    assert fake.requests and all(r["path"].endswith("/v1/messages") for r in fake.requests)
    roles = {row[0] for row in query(run, "SELECT role FROM model_calls WHERE model = ?", model)}
    assert roles >= {"planner", "coder"}


def test_full_search_through_the_gemini_wire_format(tmp_path):
    fake = FakeLLM(models=["gemini-2.5-flash"])
    try:
        model = "gemini:gemini-2.5-flash"
        cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=2, codes=1, model=[model])
        run = tmp_path / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--out", str(run), "--max-cost", "5",
                            env={"GOOGLE_GEMINI_BASE_URL": fake.url, "GEMINI_API_KEY": "test-key"}))
    finally:
        fake.close()
    assert float(re.search(r"Speedup: ([0-9.]+)x", out).group(1)) > 5, out   # priced by genai-prices under a cap
    assert all(r["path"].endswith(":generateContent") for r in fake.requests if r["path"] != "/v1/models")
    assert {row[0] for row in query(run, "SELECT role FROM model_calls WHERE model = ? AND cost > 0", model)} \
        >= {"planner", "coder"}


def test_missing_key_stops_before_any_work(tmp_path):
    run = tmp_path / "run"
    proc = launch("run", "--problem", "gemm-256x256x256", "--model", "anthropic:claude-test", "--out", str(run),
                  env={"ANTHROPIC_API_KEY": ""})
    out = finish(proc)
    assert proc.returncode == 2 and "ANTHROPIC_API_KEY" in out and not run.exists()


def test_plans_in_prose_and_free_text_reach_the_coder_whole_and_show_counts_them(tmp_path):
    """Before, a plan naming its option only in prose, or none, was discarded after it was paid for, and the prose
    before a "Plan" heading was cut."""
    shapes = ["Selected optimization: 1) {title}\n\nWhat's inefficient now\n- the diagnosis, kept whole\n\nPlan\n"
              "Hand the whole GEMM to gemmini_loop_ws in blocks that fit half the scratchpad.",
              "A new idea, outside the menu: hand the whole GEMM to gemmini_loop_ws in blocks that fit half the "
              "scratchpad; the diagnosis, kept whole."]

    def script(prompt, n):
        if "# Your role: planner" not in prompt:
            return 200, {}, smart_answer(prompt)
        menu = prompt.split("## Options offered in this step", 1)[1]
        title = re.search(r"^1\. [\w.-]+: (.+)$", menu, re.M).group(1)
        return 200, {}, shapes[n % 2].format(title=title)

    fake = FakeLLM(script=script)
    try:
        model = f"openai-compat@{fake.url}/v1:m"
        cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=4, codes=1, model=[model])
        run = tmp_path / "run"
        finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--out", str(run)))
        coder_prompts = [r["body"]["messages"][1]["content"] for r in fake.requests
                         if "# Your role: implementer" in r["body"]["messages"][1]["content"]]
        shown = finish(launch("show", str(run)))
    finally:
        fake.close()
    assert len(coder_prompts) == 4 and all("the diagnosis, kept whole" in p for p in coder_prompts)
    assert sum("menu option: none named; the plan is free text" in p for p in coder_prompts) == 2
    assert summary(run)["plan_choices"] == {model: {"prose": 2, "free text": 2}}
    assert "How the models' plans named their option" in shown and "free text" in shown, shown
