"""--max-cost stops a run with calls in flight counted; --replay reproduces a
recorded run from its store without a single network call."""
from __future__ import annotations

import pytest

from tests.llm.fake_servers import FakeLLM
from tests.system.runkit import finish, launch, query, summary, write_config

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def test_cost_cap_counts_calls_in_flight_and_stops_cleanly(tmp_path):
    # Every call costs exactly what the coordinator assumes for a call it has not seen yet (12k in, 4k out
    # tokens at $1 per million each: $0.016), and answers slowly, so several are in flight at once.
    fake = FakeLLM(delay_s=0.5, usage=(12_000, 4_000))
    try:
        model = f"openai-compat@{fake.url}/v1:priced"
        prices = tmp_path / "prices.toml"
        prices.write_text(f'["{model}"]\ninput = 1.0\noutput = 1.0\n')
        cfg = write_config(tmp_path / "cfg.toml", iterations=3, beam=2, plans=2, codes=1, model=[model])
        run = tmp_path / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--max-cost", "0.05",
                            "--out", str(run), env={"AUTOCOMP_PRICES": str(prices)}))
    finally:
        fake.close()
    s = summary(run)
    assert "cost cap of $0.05 reached" in s["stop_reason"], out
    calls = query(run, "SELECT COUNT(*), SUM(cost) FROM model_calls")[0]
    assert calls[0] == len(fake.requests) == 3       # a 4th call would have crossed the cap with 3 in flight
    assert s["cost_usd"] == pytest.approx(calls[1]) and s["cost_usd"] <= 0.05
    assert (run / "best.c").exists() and s["speedup"] >= 1   # everything found so far is kept


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
