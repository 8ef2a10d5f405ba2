"""No job is stranded: runs with one agent of each role in which the only evaluator, or the coordinator, stops
answering for longer than the bus's dead time (SIGSTOP, or a cut TCP link) and then comes back. The job it held is
served again (or its late answer accepted) and the run ends as an uninterrupted run of the same seed does: the same
best kernel, the same beam, the same evaluations."""
from __future__ import annotations

import socket
import threading
import time

import psutil
import pytest

from tests.system.runkit import (SLOW_GEMM, agents_of, endpoint_of, finish, launch, query, summary, wait_for,
                                 write_config)

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

PAUSE_S = 3.0      # the bus's dead time at heartbeat_s 0.1 is 1 s: this pause gets the agent declared dead


def _config(tmp_path):
    kernel = tmp_path / "slow.c"
    kernel.write_text(SLOW_GEMM)    # seconds of CPU: an evaluator is certainly holding it when paused
    # check_start off: the starting kernel is evaluated by the evaluator agent, not in the coordinator
    cfg = write_config(tmp_path / "cfg.toml", iterations=2, beam=1, plans=2, codes=1, check_start=False)
    return ["--config", str(cfg), "--kernel", str(kernel)]


def _outcome(run) -> dict:
    s = summary(run)
    evals = sorted(query(run, "SELECT candidate_id, correct, latency FROM evals"))
    return {"best": (s["best_id"], s["best_latency"]), "beam": s["beam"], "evals": evals}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("uninterrupted")
    proc = launch("run", *_config(tmp), "--evaluators", "1", "--out", str(tmp / "run"))
    out = finish(proc)
    assert proc.returncode == 0, out
    return _outcome(tmp / "run")


def _holding_the_slow_job(run, pid_of_run: int):
    rows = query(run, "SELECT a.agent FROM attempts a JOIN jobs j ON j.id = a.job_id "
                      "WHERE j.kind = 'eval' AND a.finished IS NULL")
    pids = {int(agent.rsplit(":", 1)[1]) for (agent,) in rows}
    return [p for p in agents_of(pid_of_run, "evaluator") if p.pid in pids and p.children(recursive=True)]


def _ends_as_uninterrupted(proc, run, uninterrupted) -> dict:
    out = finish(proc, timeout=150)
    assert proc.returncode == 0, out
    s = summary(run)
    assert s["lost_jobs"] == 0, s
    assert _outcome(run) == uninterrupted
    return s


def test_the_only_evaluator_paused_past_its_dead_time_gets_its_job_back(tmp_path, uninterrupted):
    run = tmp_path / "run"
    proc = launch("run", *_config(tmp_path), "--evaluators", "1", "--out", str(run))
    [evaluator] = wait_for(lambda: _holding_the_slow_job(run, proc.pid), timeout=60, what="the evaluator at work")
    evaluator.suspend()
    time.sleep(PAUSE_S)
    evaluator.resume()
    s = _ends_as_uninterrupted(proc, run, uninterrupted)
    assert s["requeued_jobs"] >= 1, query(run, "SELECT * FROM attempts")
    # the attempt it was declared dead with: lost, or answered late (its result re-sent when it rejoined)
    assert query(run, "SELECT COUNT(*) FROM attempts WHERE outcome LIKE 'lost: agent % died' "
                      "OR outcome LIKE '% (answered after it was lost)'")[0][0] >= 1
    assert query(run, "SELECT COUNT(*) FROM attempts WHERE outcome IS NULL") == [(0,)]     # none left open


def test_the_coordinator_paused_past_the_dead_time_loses_no_job(tmp_path, uninterrupted):
    run = tmp_path / "run"
    proc = launch("run", *_config(tmp_path), "--evaluators", "1", "--out", str(run))
    wait_for(lambda: _holding_the_slow_job(run, proc.pid), timeout=60, what="the evaluator at work")
    coordinator = psutil.Process(proc.pid)      # the run's own process
    coordinator.suspend()
    time.sleep(PAUSE_S)
    coordinator.resume()
    _ends_as_uninterrupted(proc, run, uninterrupted)


class Link:
    """A TCP forwarder between a worker and the coordinator that can be cut (every connection dropped and
    nothing listening, as a link that goes down) and restored on the same port."""

    def __init__(self, to_port: int) -> None:
        self.to_port = to_port
        probe = socket.create_server(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self.restore()

    def restore(self) -> None:
        self._server = socket.create_server(("127.0.0.1", self.port))    # SO_REUSEADDR: the same port again
        threading.Thread(target=self._accept, args=(self._server,), daemon=True).start()

    def cut(self) -> None:
        for s in [self._server, *self._conns]:
            try:
                s.shutdown(socket.SHUT_RDWR)      # wakes the threads blocked on it
            except OSError:
                pass
            s.close()
        with self._lock:
            self._conns.clear()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                near, _ = server.accept()
                far = socket.create_connection(("127.0.0.1", self.to_port))
            except OSError:
                return
            with self._lock:
                self._conns += [near, far]
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def test_a_remote_evaluator_behind_a_cut_link_gets_its_job_back(tmp_path, uninterrupted):
    run = tmp_path / "run"
    proc = launch("run", *_config(tmp_path), "--evaluators", "0", "--bind", "tcp://127.0.0.1:*", "--out", str(run))
    link = Link(int(endpoint_of(run).rsplit(":", 1)[1]))
    worker = launch("worker", "--role", "evaluator", "--connect", f"tcp://127.0.0.1:{link.port}",
                    "--secret-file", str(run / "secret"), "--target", "gemmini-sim", "--heartbeat-s", "0.1")
    try:
        wait_for(lambda: query(run, "SELECT 1 FROM attempts a JOIN jobs j ON j.id = a.job_id "
                                    "WHERE j.kind = 'eval' AND a.finished IS NULL"), timeout=60,
                 what="the remote evaluator at work")
        link.cut()
        time.sleep(PAUSE_S)
        link.restore()
        _ends_as_uninterrupted(proc, run, uninterrupted)
        finish(worker, timeout=30)
    finally:
        link.cut()
        worker.kill()
