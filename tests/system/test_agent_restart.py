"""The run restarts the agent processes it started when they die: a run whose only evaluator and only planner are
killed (SIGKILL) mid-run finishes with its results; a run whose evaluator cannot start again stops, within
seconds, with an error that names the role, how its process ended and the end of its log."""
from __future__ import annotations

import json
import signal

import psutil
import pytest

from tests.system.runkit import (SLOW_GEMM, agents_of, finish, launch, processes_mentioning, query, summary,
                                 wait_for, write_config)

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def _start(tmp_path):
    kernel = tmp_path / "slow.c"
    kernel.write_text(SLOW_GEMM)    # seconds of CPU: the evaluator is certainly holding it when killed
    # check_start off: the starting kernel is evaluated by the evaluator agent, not in the coordinator
    cfg = write_config(tmp_path / "cfg.toml", iterations=2, beam=1, plans=2, codes=1, check_start=False)
    run = tmp_path / "run"
    proc = launch("run", "--config", str(cfg), "--kernel", str(kernel), "--evaluators", "1", "--out", str(run))

    def evaluator_at_work():
        rows = query(run, "SELECT a.agent FROM attempts a JOIN jobs j ON j.id = a.job_id "
                          "WHERE j.kind = 'eval' AND a.finished IS NULL")
        pids = {int(agent.rsplit(":", 1)[1]) for (agent,) in rows}
        return [p for p in agents_of(proc.pid, "evaluator") if p.pid in pids and p.children(recursive=True)]

    [evaluator] = wait_for(evaluator_at_work, timeout=90, what="the evaluator at work")
    return proc, run, evaluator


def _events(run, name: str) -> list[dict]:
    lines = (run / "logs" / "coordinator.log").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == name]


def test_a_killed_evaluator_and_planner_are_restarted_and_the_run_finishes(tmp_path):
    proc, run, evaluator = _start(tmp_path)
    [planner] = agents_of(proc.pid, "planner")     # no plan asked yet: the first comes after this evaluation
    evaluator.send_signal(signal.SIGKILL)
    planner.send_signal(signal.SIGKILL)
    out = finish(proc, timeout=180)
    assert proc.returncode == 0, out
    s = summary(run)
    assert s["lost_jobs"] == 0 and s["requeued_jobs"] >= 1, s
    assert s["best_id"] and query(run, "SELECT COUNT(*) FROM jobs WHERE kind = 'plan'")[0][0] >= 2
    restarted = {(e["role"], e["ended"]) for e in _events(run, "agent_restarted")}
    assert restarted == {("evaluator", "signal SIGKILL"), ("planner", "signal SIGKILL")}, restarted
    for e in _events(run, "agent_restarted"):
        assert e["restarts"] == 1 and "restarted by the run (restart 1)" in open(e["log"]).read()
    # the restarted agents did the rest of the work, and ended with the run
    agents = {agent for (agent,) in query(run, "SELECT agent FROM attempts WHERE outcome = 'ok'")}
    for e in _events(run, "agent_restarted"):
        assert any(agent.endswith(f":{e['pid']}") for agent in agents), (e, agents)
    assert not processes_mentioning(str(run / "secret"))


def _all_connected(proc) -> bool:
    """Every agent process the run started is connected to the bus, so each has read the run's secret (under load
    one may still be starting when the evaluator is already at work)."""
    launched = [p for role in ("planner", "coder", "repairer", "evaluator") for p in agents_of(proc.pid, role)]

    def connected(p: psutil.Process) -> bool:
        try:
            return any(c.status == psutil.CONN_ESTABLISHED for c in p.net_connections(kind="tcp"))
        except psutil.Error:
            return False
    return bool(launched) and all(connected(p) for p in launched)


def test_an_evaluator_that_cannot_start_again_stops_the_run_with_its_log(tmp_path):
    proc, run, evaluator = _start(tmp_path)
    wait_for(lambda: _all_connected(proc), timeout=60, what="every agent connected")
    (run / "secret").write_text("not a secret\n")    # what a restarted worker reads first: it will exit at once
    evaluator.send_signal(signal.SIGKILL)
    out = finish(proc, timeout=120)
    assert proc.returncode == 2, out
    assert "the run stopped: the local evaluator agent ended (exit status 2) after 3 restarts" in out, out
    assert "no other agent serves the evaluator role" in out
    assert f"the last lines of its log {run / 'logs' / 'evaluator-0.log'}" in out
    assert "is not a hex string" in out            # the worker's own error, from the end of its log
    assert f"--resume {run}" in out
    # the evaluator's slot: another agent that restarts meanwhile (a slow host can make one reconnect) reads the
    # same spoiled file and ends the same way, which is not what this test is about
    ended = [e["ended"] for e in _events(run, "agent_restarted") if e["role"] == "evaluator"]
    assert ended == ["signal SIGKILL", "exit status 2", "exit status 2"], ended
    assert [e["ended"] for e in _events(run, "agent_given_up") if e["role"] == "evaluator"] == ["exit status 2"]
    assert not processes_mentioning(str(run / "secret"))
