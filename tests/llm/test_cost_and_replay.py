"""Sampling and money in whole runs against a local server that speaks the OpenAI wire format: the paper's
N x K samples are separate calls, --max-cost is a hard ceiling with a reasoning model, a model without a price
stops a capped run before anything starts, and --replay reproduces a recorded run without a network call."""
from __future__ import annotations

import json
import re

import pytest

from tests.llm.fake_servers import FakeLLM, Lost, Reply, smart_answer
from tests.system.runkit import finish, launch, query, summary, write_config

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def test_n_plans_and_k_codes_are_independent_calls(tmp_path):
    fake = FakeLLM()
    model = f"openai-compat@{fake.url}/v1:m"
    try:
        cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=2, codes=3, model=[model],
                           temperature=1.0)
        run = tmp_path / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--out", str(run)))
        made = len(fake.requests)
        finish(launch("run", "--resume", str(run)))            # a finished run replays every answer
    finally:
        fake.close()
    roles = [("planner" if "# Your role: planner" in r["body"]["messages"][1]["content"] else "coder")
             for r in fake.requests]
    assert roles.count("planner") == 2 and roles.count("coder") == 6, out
    assert made == len(fake.requests) == 8
    assert all(r["body"]["temperature"] == 1.0 for r in fake.requests)
    assert sorted(query(run, "SELECT role, COUNT(*) FROM model_calls GROUP BY role")) == [("coder", 6),
                                                                                         ("planner", 2)]


def capped_run(tmp_path, fake: FakeLLM, *flags: str) -> tuple[str, object, str]:
    """A search with the fake's model priced at $1/$4 per million tokens ($0.1 cached) under --max-cost 0.5, then
    the fake closed: (model spec, run directory, output)."""
    try:
        model = f"openai-compat@{fake.url}/v1:thinker"
        prices = tmp_path / "prices.toml"
        prices.write_text(f'["{model}"]\ninput = 1.0\noutput = 4.0\ncached_input = 0.1\n')
        cfg = write_config(tmp_path / "cfg.toml", iterations=4, beam=2, plans=3, codes=2, patience=5, model=[model])
        run = tmp_path / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--max-cost", "0.5", "--max-tokens",
                            "8000", *flags, "--prices", str(prices), "--out", str(run)))
    finally:
        fake.close()
    return model, run, out


def test_a_reasoning_model_never_spends_past_the_cap(tmp_path):
    # a reasoning model: every answer carries 6,000 reasoning tokens, billed as output; the server counts
    # prompt tokens from the text and caches prompt prefixes as OpenAI does
    fake = FakeLLM(usage=None, delay_s=0.3,
                   script=lambda prompt, n: (200, {}, Reply(smart_answer(prompt), reasoning_tokens=6000)))
    model, run, out = capped_run(tmp_path, fake)
    s = summary(run)
    assert "cost cap of $0.50 reached" in s["stop_reason"], out
    n, spent, reasoning, cached = query(run, "SELECT COUNT(*), SUM(cost), SUM(tokens_reasoning), SUM(tokens_cached) "
                                             "FROM model_calls")[0]
    assert n == len(fake.requests) and n > 6          # it waited for calls in flight instead of stopping early
    assert spent <= 0.5 and s["cost_usd"] == pytest.approx(spent, abs=1e-5) and reasoning == 6000 * n and cached > 0
    assert sum(s["cost_by_model"][model].values()) == pytest.approx(spent, abs=1e-5)
    assert (run / "best.c").exists() and s["speedup"] >= 1   # everything found so far is kept


def test_under_timeouts_resets_and_malformed_answers_the_cap_holds_against_the_servers_bill(tmp_path):
    """Before, the SDK retried a timed-out or reset call by itself, unrecorded, and a malformed 200 was a $0.00 call:
    a capped run reported $0.42 and "cap reached" while the server billed $1.13."""
    faults = {2: "timeout", 3: "reset", 5: "malformed", 6: "no-usage", 8: "timeout", 10: "reset"}

    def script(prompt, n):
        reply = Reply(smart_answer(prompt), reasoning_tokens=6000)
        return (200, {}, Lost(faults[n], reply, seconds=3.0) if n in faults else reply)

    fake = FakeLLM(usage=None, script=script)
    model, run, out = capped_run(tmp_path, fake, "--call-timeout-s", "1")
    bill = sum((tin - cached) * 1.0 + cached * 0.1 + tout * 4.0 for _, _, tin, tout, cached, _ in fake.billed) / 1e6
    s = summary(run)
    assert "cost cap of $0.50 reached" in s["stop_reason"], out
    lost = query(run, "SELECT COUNT(*), SUM(cost) FROM model_calls WHERE billing = 'unknown'")[0]
    n, spent = query(run, "SELECT COUNT(*), SUM(cost) FROM model_calls")[0]
    made = [f for k, f in faults.items() if k <= len(fake.requests)]
    assert lost[0] == len(made) >= 3 and n == len(fake.requests), (n, len(fake.requests))   # every try, once
    assert bill <= spent <= 0.5 and s["cost_usd"] == pytest.approx(spent, abs=1e-5)
    assert s["model_calls"]["unknown"] == {"calls": len(made), "usd": pytest.approx(lost[1], abs=1e-5)}
    assert "job_sent_again" in out
    shown = finish(launch("show", str(run), "--calls"))
    assert "unknown, up to $" in shown and f"{len(made)} calls lost after the request was sent" in shown, shown
    # every paid try readable, also those that produced nothing: its prompt, and why nothing came of it
    calls = [json.loads(line) for line in finish(launch("show", str(run), "--calls", "--json", "--texts")).split("\n")
             if line.startswith("{")]
    lost_call = next(c for c in calls if c["billing"] == "unknown")
    assert "# Your role" in lost_call["prompt"] and lost_call["prefix"] and lost_call["candidates"] == []
    one = finish(launch("show", str(run), "--call", str(lost_call["n"])))
    assert f"Call {lost_call['n']}:" in one and "no candidate:" in one and "lost: " in one and "# Your role" in one, one
    finish(launch("report", str(run)))
    page = (run / "report.html").read_text()
    assert "Calls that produced no candidate" in page and "up to $" in page and "--call N" in page


def test_a_capped_run_with_an_unpriced_model_stops_before_it_starts(tmp_path):
    fake = FakeLLM()
    model = f"openai-compat@{fake.url}/v1:local-model"
    try:
        run = tmp_path / "run"
        proc = launch("run", "--problem", "gemm-256x256x256", "--model", model, "--max-cost", "1", "--out", str(run))
        out = finish(proc)
    finally:
        fake.close()
    assert proc.returncode == 2 and not run.exists() and not fake.requests
    line = next(ln for ln in out.splitlines() if ln.startswith("error:"))
    assert model in line and "--prices FILE" in line and "has none" in line


def test_a_cap_that_admits_no_call_stops_before_anything_starts_and_says_what_fits(tmp_path):
    """Before, a cap below one job's worst case started the run, made no call and idled before saying so."""
    fake = FakeLLM()
    model = f"openai-compat@{fake.url}/v1:thinker"
    prices = tmp_path / "prices.toml"
    prices.write_text(f'["{model}"]\ninput = 1.25\noutput = 10.0\n')
    try:
        run = tmp_path / "run"
        proc = launch("run", "--problem", "gemm-256x256x256", "--model", model, "--max-cost", "0.3",
                      "--prices", str(prices), "--out", str(run))
        out = finish(proc)
    finally:
        fake.close()
    assert proc.returncode == 2 and not run.exists() and not fake.requests
    line = next(ln for ln in out.splitlines() if ln.startswith("error:"))
    assert "--max-cost $0.30 admits no model call" in line, line
    worst, fits = re.search(r"may cost up to \$([0-9.]+) .*--max-tokens (\d+) fits it", line).groups()
    assert float(worst) > 0.48 and int(fits) < 32000       # its 48,000 output tokens alone cost $0.48


def test_replay_reproduces_a_run_without_network(tmp_path):
    fake = FakeLLM()
    model = f"openai-compat@{fake.url}/v1:m"
    cfg = write_config(tmp_path / "cfg.toml", iterations=2, beam=2, plans=2, codes=1, model=[model])
    try:
        finish(launch("run", "--config", str(cfg), "--evaluators", "2", "--out", str(tmp_path / "recorded")))
    finally:
        fake.close()
    recorded = summary(tmp_path / "recorded")
    calls_made = len(fake.requests)
    replay_cfg = write_config(tmp_path / "replay.toml", iterations=2, beam=2, plans=2, codes=1, model=["replay"])
    out = finish(launch("run", "--config", str(replay_cfg), "--evaluators", "2", "--replay",
                        str(tmp_path / "recorded"), "--out", str(tmp_path / "replayed")))
    replayed = summary(tmp_path / "replayed")
    assert len(fake.requests) == calls_made       # not one request: the server is even closed
    assert replayed["beam"] == recorded["beam"] and replayed["best_latency"] == recorded["best_latency"], out
    outcomes = {row[0] for row in query(tmp_path / "replayed", "SELECT outcome FROM model_calls")}
    assert outcomes == {"replayed"} and replayed["cost_usd"] == 0
