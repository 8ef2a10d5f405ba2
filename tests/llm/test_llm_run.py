"""A whole run whose planner and coder are LLM agents talking to a local server
that speaks the OpenAI wire format: two models, ensembled."""
from __future__ import annotations

import re

import pytest

from tests.llm.fake_servers import FakeLLM
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


def test_missing_key_stops_before_any_work(tmp_path):
    run = tmp_path / "run"
    proc = launch("run", "--problem", "gemm-256x256x256", "--model", "anthropic:claude-test", "--out", str(run),
                  env={"ANTHROPIC_API_KEY": ""})
    out = finish(proc)
    assert proc.returncode == 2 and "ANTHROPIC_API_KEY" in out and not run.exists()
