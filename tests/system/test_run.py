"""Whole runs with real processes: the offline optimization, agent and
coordinator crashes, a remote worker over TCP, and an agent that never
answers."""
from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time

import pytest

from autocomp_zmq.bus.auth import load_secret
from autocomp_zmq.bus.dealer import Dealer
from autocomp_zmq.bus.timing import BusTiming
from autocomp_zmq.protocols.control import Hello
from tests.system.runkit import (SLOW_GEMM, agents_of, endpoint_of, finish, launch, processes_mentioning, query,
                                 stored, summary, wait_for, write_config)

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def test_offline_run_improves_the_naive_kernel(tmp_path):
    cfg = write_config(tmp_path / "cfg.toml")
    out = finish(launch("run", "--config", str(cfg), "--evaluators", "2", "--out", str(tmp_path / "run")))
    speedup = float(re.search(r"Speedup: ([0-9.]+)x", out).group(1))
    assert speedup > 1.5, out
    run = tmp_path / "run"
    assert (run / "best.c").read_text().startswith("// autocomp-schedule:")
    s = summary(run)
    assert s["speedup"] == pytest.approx(speedup, rel=0.01)
    # one evaluation per distinct kernel: candidates with the same code (from different parents) share it
    assert query(run, "SELECT COUNT(DISTINCT job_id) FROM evals")[0][0] == s["evaluations"]
    assert query(run, "SELECT COUNT(*) FROM evals")[0][0] == query(run, "SELECT COUNT(*) FROM candidates")[0][0]
    assert query(run, "SELECT COUNT(*) FROM model_calls WHERE model = 'heuristic'")[0][0] > 0
    assert oct((run / "secret").stat().st_mode & 0o777) == "0o600"
    # private by default: kernels, prompts and answers are the owner's only
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in [run, run / "logs", run / "run.db", run / "best.json",
                                                               *(run / "logs").iterdir()]}
    assert set(modes.values()) <= {"0o700", "0o600"} and modes["run"] == "0o700", modes


def test_a_run_that_makes_no_repairs_starts_no_repairer(tmp_path):
    """Before, every run started a repairer per model kind, which imported everything and sat idle when
    --max-repairs 0 made sure no repair job would come."""
    cfg = write_config(tmp_path / "cfg.toml", iterations=1)
    out = finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--max-repairs", "0",
                        "--out", str(tmp_path / "run")))
    logs = sorted(p.name.split("-")[0] for p in (tmp_path / "run" / "logs").glob("*.log"))
    assert "Speedup:" in out and "repairer" not in logs and {"planner", "coder", "evaluator"} <= set(logs), logs


def test_killed_evaluator_job_is_requeued_and_completed(tmp_path):
    kernel = tmp_path / "slow.c"
    kernel.write_text(SLOW_GEMM)   # ~1 s of CPU per input set: long enough to kill mid-job
    # check_start off: the slow starting kernel is then evaluated by an evaluator agent, not in the coordinator
    cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1, check_start=False)
    proc = launch("run", "--config", str(cfg), "--evaluators", "2", "--kernel", str(kernel),
                  "--out", str(tmp_path / "run"), env={"AWS_SECRET_ACCESS_KEY": "aws", "MY_DB_PASSWORD": "db",
                                                       "SOMETHING_ELSE": "x"})
    run = tmp_path / "run"

    def holder_of_the_slow_job():
        # the store says which evaluator holds the (multi-second) job; its sandbox children say it is at work
        rows = query(run, "SELECT a.agent FROM attempts a JOIN jobs j ON j.id = a.job_id "
                          "WHERE j.kind = 'eval' AND a.finished IS NULL")
        pids = {int(agent.rsplit(":", 1)[1]) for (agent,) in rows}
        return [p for p in agents_of(proc.pid, "evaluator") if p.pid in pids and p.children(recursive=True)]

    victim = wait_for(holder_of_the_slow_job, timeout=60, what="an evaluator running the slow job")[0]
    seen = victim.environ()          # an allowlist, not a denylist by name: no credential of any name
    assert "PATH" in seen and not {"AWS_SECRET_ACCESS_KEY", "MY_DB_PASSWORD", "SOMETHING_ELSE"} & set(seen)
    victim.send_signal(signal.SIGKILL)
    out = finish(proc)
    assert proc.returncode == 0, out
    s = summary(run)
    assert s["requeued_jobs"] >= 1 and s["lost_jobs"] == 0
    lost = query(run, "SELECT job_id FROM attempts WHERE outcome LIKE 'lost: agent % died'")
    assert lost, query(run, "SELECT * FROM attempts")
    redone = query(run, "SELECT outcome FROM attempts WHERE job_id = ? AND outcome = 'ok'", lost[0][0])
    assert redone, "the requeued job was not completed by another evaluator"
    base = query(run, "SELECT correct FROM evals e JOIN candidates c ON c.id = e.candidate_id "
                      "WHERE c.origin = 'initial'")
    assert base == [(1,)]


def test_coordinator_kill_and_resume_reaches_the_same_beam(tmp_path):
    cfg = write_config(tmp_path / "cfg.toml", iterations=4, beam=2, plans=2, codes=2, patience=4)
    finish(launch("run", "--config", str(cfg), "--evaluators", "2", "--out", str(tmp_path / "a")))
    expected = summary(tmp_path / "a")

    run_b = tmp_path / "b"
    proc = launch("run", "--config", str(cfg), "--evaluators", "2", "--out", str(run_b))
    half = max(2, expected["evaluations"] // 2)
    wait_for(lambda: (query(run_b, "SELECT COUNT(*) FROM evals") or [(0,)])[0][0] >= half,
             timeout=120, what=f"{half} evaluations")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not query(run_b, "SELECT value FROM meta WHERE key = 'summary'"), "killed too late: the run had finished"
    # agents started by the dead coordinator notice and exit
    wait_for(lambda: not processes_mentioning(str(run_b / "secret")), timeout=30, what="orphaned agents to exit")

    out = finish(launch("run", "--resume", str(run_b), "--evaluators", "2"))
    resumed = summary(run_b)
    assert resumed["replayed_results"] > 0, out
    assert resumed["best_id"] == expected["best_id"]
    assert resumed["best_latency"] == expected["best_latency"]
    assert resumed["beam"] == expected["beam"]
    # counted from the store: the sessions before the kill count too, as in the uninterrupted run
    assert resumed["noop_proposals"] == expected["noop_proposals"]


def test_remote_worker_joins_over_tcp(tmp_path):
    cfg = write_config(tmp_path / "cfg.toml", iterations=2)
    run = tmp_path / "run"
    proc = launch("run", "--config", str(cfg), "--evaluators", "0", "--bind", "tcp://127.0.0.1:*",
                  "--out", str(run))
    endpoint = endpoint_of(run)           # the port the run bound, not one guessed beforehand
    assert endpoint.startswith("tcp://127.0.0.1:") and not endpoint.endswith(":*")
    worker = launch("worker", "--role", "evaluator", "--connect", endpoint,
                    "--secret-file", str(run / "secret"), "--target", "gemmini-sim")
    out = finish(proc)
    assert proc.returncode == 0, out
    assert "Speedup:" in out
    worker_out = finish(worker, timeout=30)   # told to disconnect when the run ends
    assert worker.returncode == 0, worker_out
    agents = {row[0] for row in query(run, "SELECT agent FROM attempts a JOIN jobs j ON j.id = a.job_id "
                                           "WHERE j.kind = 'eval'")}
    assert len(agents) == 1 and f":{worker.pid}" in agents.pop()


def test_an_evaluation_that_outlives_its_lease_fails_instead_of_hanging_the_next_evaluator(tmp_path):
    """An evaluator that is alive but never answers (a kernel that hung it) holds the starting kernel's
    evaluation past its 8 s lease: the job comes back as a timeout verdict, it is not sent on to the
    healthy evaluator waiting beside it, and the run ends. (The lease leaves the healthy evaluator time to
    connect on a loaded machine: one that connects after the run has ended never learns that it did.)"""
    cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1, eval_lease_s=8)
    run = tmp_path / "run"
    proc = launch("run", "--config", str(cfg), "--evaluators", "0", "--bind", "tcp://127.0.0.1:*",
                  "--out", str(run))
    endpoint = endpoint_of(run)
    silent = Dealer(endpoint, load_secret(run / "secret"),
                    Hello(role="evaluator", impl="silent", models=[], target="gemmini-sim", capacity=1,
                          host=socket.gethostname(), pid=os.getpid()),
                    BusTiming(heartbeat_s=0.1)).start()
    try:
        got = wait_for(lambda: silent.next_job(timeout=0.1), timeout=60, what="a job for the silent agent")
        assert got.body.kind == "eval"
        worker = launch("worker", "--role", "evaluator", "--connect", endpoint,
                        "--secret-file", str(run / "secret"))
        out = finish(proc)
        finish(worker, timeout=30)
    finally:
        silent.close()
    assert "initial kernel is not correct" in out and "within its lease" in out, out
    s = summary(run)
    assert s["requeued_jobs"] == 0 and s["lost_jobs"] == 0
    expired = query(run, "SELECT job_id, agent FROM attempts WHERE outcome LIKE 'lost: lease of 8 s expired%'")
    assert len(expired) == 1 and "silent" in expired[0][1]
    job = expired[0][0]
    assert query(run, "SELECT COUNT(*) FROM attempts WHERE job_id = ?", job) == [(1,)]   # never sent on
    state, ok = query(run, "SELECT state, ok FROM jobs WHERE id = ?", job)[0]
    assert state == "done" and ok == 1 and stored(run, job)["error_kind"] == "timeout"
