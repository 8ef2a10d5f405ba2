"""The supervisor of a run's local agent processes (agents/run/supervisor.py): the restart limit, how an end is
told, which roles are left unserved (fast, no process); and, with real short-lived processes (system), restarts
within the limit, a slot given up past it with the end of its log, and no restart once stopping began.
tests/system/test_agent_restart.py kills the agents of real runs."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from autocomp_zmq.agents.run.supervisor import (Launch, RestartLimit, Supervisor, how_it_ended, log_tail,
                                                may_restart)
from autocomp_zmq.bus.transport import Peer


def test_a_slot_may_restart_until_the_limit_is_reached_within_the_window():
    limit = RestartLimit(restarts=3, window_s=300)
    assert may_restart([], 0.0, limit)
    assert may_restart([10.0, 20.0], 30.0, limit)
    assert not may_restart([10.0, 20.0, 30.0], 40.0, limit)
    # restarts older than the window no longer count
    assert may_restart([10.0, 20.0, 30.0], 310.0, limit)
    assert not may_restart([10.0, 20.0, 30.0], 309.9, limit)
    assert not may_restart([], 0.0, RestartLimit(restarts=0))


def test_how_a_process_ended_is_said_with_the_signal_name():
    assert how_it_ended(0) == "exit status 0"
    assert how_it_ended(2) == "exit status 2"
    assert how_it_ended(-9) == "signal SIGKILL"
    assert how_it_ended(-11) == "signal SIGSEGV"
    assert how_it_ended(-200) == "signal 200"


def test_the_tail_of_a_log_is_its_last_lines_whatever_its_bytes(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(100)) + b"\xff bad byte\n")
    tail = log_tail(log, lines=3)
    assert tail == "line 98\nline 99\n\ufffd bad byte"
    assert "cannot read" in log_tail(tmp_path / "missing.log")


def _peer(role, impl="heuristic", models=(), target=None, pid=1, host="elsewhere", state="alive") -> Peer:
    return Peer(identity=b"x", sender="x", role=role, impl=impl, models=list(models), target=target, capacity=1,
                host=host, pid=pid, joined=0.0, last_seen=0.0, state=state)


def _slot(role, tmp_path, impl="heuristic", models=(), target=None, given_up=None) -> Launch:
    log = tmp_path / f"{role}.log"
    log.write_text("starting\nTraceback (most recent call last):\nMemoryError\n")
    return Launch(role, ["true"], {}, log, impl=None if role == "evaluator" else impl, models=tuple(models),
                  target=target, given_up=given_up)


def test_a_role_whose_slots_were_all_given_up_stops_the_run_with_the_end_of_the_log(tmp_path):
    dead = _slot("evaluator", tmp_path, target="gemmini-sim", given_up="signal SIGSEGV")
    dead.restarted_at = [1.0, 2.0, 3.0]
    failed = Supervisor([dead]).poll([])
    assert failed.startswith("the local evaluator agent ended (signal SIGSEGV) after 3 restarts (at most 3 within "
                             "300 s), and no other agent serves the evaluator role")
    assert failed.endswith(f"its log {dead.log_path}:\nstarting\nTraceback (most recent call last):\nMemoryError")


def test_a_role_is_served_while_another_slot_or_a_live_agent_elsewhere_offers_it(tmp_path):
    given_up = _slot("planner", tmp_path, given_up="exit status 1")
    assert Supervisor([given_up, _slot("planner", tmp_path)]).poll([]) is None   # a sibling slot still runs
    assert Supervisor([given_up]).poll([_peer("planner")]) is None               # a worker on another host
    host = socket.gethostname()
    # an agent of another implementation, another role, a dead one, or the given-up process itself: none serve
    for peer in (_peer("planner", impl="other"), _peer("coder"), _peer("planner", state="dead")):
        assert Supervisor([given_up]).poll([peer]) is not None, peer
    llm = _slot("coder", tmp_path, impl="llm", models=("openai:a", "openai:b"), given_up="signal SIGKILL")
    assert Supervisor([llm]).poll([_peer("coder", impl="llm", models=["openai:a"])]) is not None
    assert Supervisor([llm]).poll([_peer("coder", impl="llm", models=["openai:a", "openai:b", "x"])]) is None
    ev = _slot("evaluator", tmp_path, target="gemmini-sim", given_up="signal SIGKILL")
    assert Supervisor([ev]).poll([_peer("evaluator", impl="sim", target="gemmini-sim", host=host)]) is None
    assert Supervisor([ev]).poll([_peer("evaluator", impl="sim", target="cuda")]) is not None


def _python(tmp_path, name: str, code: str) -> Launch:
    return Launch("planner", [sys.executable, "-c", code], {}, tmp_path / f"{name}.log", impl="heuristic")


def _wait_all(sup: Supervisor) -> None:
    for p in sup.processes():
        p.wait(timeout=30)


@pytest.mark.system
def test_a_process_that_keeps_dying_is_restarted_up_to_the_limit_then_given_up(tmp_path):
    now = [0.0]
    sup = Supervisor([_python(tmp_path, "crash", "import sys; print('boom', flush=True); sys.exit(3)")],
                     RestartLimit(restarts=2, window_s=60), clock=lambda: now[0]).start()
    pids = []
    for t in (1.0, 2.0, 3.0):
        _wait_all(sup)
        pids.append(sup.processes()[0].pid)
        now[0] = t
        failed = sup.poll([])
    [slot] = sup.launches
    assert slot.restarted_at == [1.0, 2.0] and slot.given_up == "exit status 3" and len(set(pids)) == 3
    text = slot.log_path.read_text()
    assert text.count("boom") == 3 and text.count("the process ended (exit status 3); restarted by the run") == 2
    assert "restart 2" in text and "restart 3" not in text
    assert "planner (heuristic) agent ended (exit status 3) after 2 restarts (at most 2 within 60 s)" in failed
    assert failed.endswith("boom")
    assert sup.poll([]) == failed and sup.processes()[0].pid == pids[-1]    # given up: never started again


@pytest.mark.system
def test_restarts_older_than_the_window_do_not_count(tmp_path):
    now = [0.0]
    sup = Supervisor([_python(tmp_path, "crash", "raise SystemExit(1)")], RestartLimit(restarts=1, window_s=10),
                     clock=lambda: now[0]).start()
    for t in (1.0, 12.0, 23.0):
        _wait_all(sup)
        now[0] = t
        assert sup.poll([]) is None
    assert sup.launches[0].restarted_at == [1.0, 12.0, 23.0]
    sup.stop(grace_s=0)


@pytest.mark.system
def test_nothing_is_restarted_once_stopping_began_and_stop_ends_restarted_processes(tmp_path):
    sleeper = "import time; time.sleep(60)"
    sup = Supervisor([_python(tmp_path, "a", sleeper), _python(tmp_path, "b", sleeper)]).start()
    first = sup.processes()[0]
    first.kill()
    first.wait(timeout=30)
    assert sup.poll([]) is None
    restarted = sup.processes()[0]
    assert restarted.pid != first.pid and restarted.poll() is None
    sup.stop(grace_s=0)
    assert all(p.poll() is not None for p in sup.processes())
    assert sup.poll([]) is None and sup.processes()[0] is restarted     # a stopping supervisor restarts nothing
    assert isinstance(restarted, subprocess.Popen)
