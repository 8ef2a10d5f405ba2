"""The job loop every worker role shares.

A worker connects one DEALER to the coordinator, says HELLO with its role,
implementation, models and capacity, and runs `capacity` threads that take
jobs, call the implementation and send results. Any exception becomes a
failed RESULT with the message, never a dead agent. A local worker started
with parent_pid exits when that process (the coordinator) is gone; any worker
exits when the coordinator says the run is over, and gives up (GaveUp) when
its handshakes keep being refused or no coordinator answers (bus/dealer.py).
"""
from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from typing import Protocol

import structlog

from autocomp_zmq.bus.dealer import Dealer
from autocomp_zmq.bus.timing import BusTiming
from autocomp_zmq.protocols.control import NO_PAYLOAD, Hello, Job, Result
from autocomp_zmq.protocols.envelope import ProtocolError, encode
from autocomp_zmq.protocols.jobs import RESULTS, Answer, Failure, ModelCall, Request, decode_request, decode_result, raw

log = structlog.get_logger("agents.worker")


class JobFailed(Exception):
    """A job that failed after doing billable work: the calls are still reported."""

    def __init__(self, message: str, calls: list[ModelCall] | None = None, retry: bool = False) -> None:
        super().__init__(message)
        self.calls = calls or []
        self.retry = retry


class GaveUp(RuntimeError):
    """The worker stopped trying to reach its coordinator; the message says why, in one line."""


class Implementation(Protocol):
    name: str
    models: list[str]

    def handle(self, kind: str, request: Request) -> Answer: ...


def call_record(model: str, request: Request, started: float, outcome: str = "ok") -> ModelCall:
    """What an offline model call costs, for the run store: nothing, but it is counted."""
    return ModelCall(model=model, prompt_hash=hashlib.sha256(encode(request)).hexdigest(),
                     latency=time.monotonic() - started, outcome=outcome)


def serve(role: str, impl: Implementation, connect: str, key: bytes, *, capacity: int = 1,
          target: str | None = None, timing: BusTiming = BusTiming(), curve_server_key: bytes | None = None,
          parent_pid: int | None = None) -> int:
    hello = Hello(role=role, impl=impl.name, models=list(impl.models), capacity=capacity,
                  host=socket.gethostname(), pid=os.getpid(), target=target or None)
    dealer = Dealer(connect, key, hello, timing, curve_server_key=curve_server_key).start()
    stop = threading.Event()
    threads = [threading.Thread(target=_job_loop, args=(dealer, impl, stop), daemon=True, name=f"{role}-{i}")
               for i in range(capacity)]
    for t in threads:
        t.start()
    log.info("worker_started", role=role, impl=impl.name, connect=connect, capacity=capacity)
    try:
        while not dealer.finished.is_set() and not dealer.gave_up and any(t.is_alive() for t in threads):
            if parent_pid and not _alive(parent_pid):
                log.info("parent_gone", parent_pid=parent_pid)
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    stop.set()
    dealer.close()
    if dealer.gave_up:
        raise GaveUp(dealer.gave_up)
    return 0


def _alive(pid: int) -> bool:
    if os.getppid() != pid:   # reparented: the coordinator that started us is gone
        return False
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _job_loop(dealer: Dealer, impl: Implementation, stop: threading.Event) -> None:
    while not stop.is_set():
        msg = dealer.next_job(timeout=0.2)
        if msg is None:
            if dealer.finished.is_set() or dealer.gave_up:
                dealer.jobs.put(None)  # let sibling threads see the end too
                return
            continue
        if isinstance(msg.body, Job):
            dealer.send_result(run_job(impl, msg.body))


def run_job(impl: Implementation, job: Job) -> Result:
    """Decode the request into its type, run it, check the answer's type; every failure is a result."""
    started = time.monotonic()
    ok, payload, error = False, NO_PAYLOAD, None
    try:
        answer = impl.handle(job.kind, decode_request(job.kind, job.payload))
        if not isinstance(answer, RESULTS[job.kind]):
            raise ProtocolError(f"{impl.name} answered a {job.kind} job with a {type(answer).__name__}")
        payload = raw(answer)
        decode_result(job.kind, payload)     # the limits a Struct's constructor does not check
        ok = True
    except ProtocolError as exc:
        error, payload = f"malformed job or result: {exc}", NO_PAYLOAD
    except JobFailed as exc:
        error, payload = str(exc)[:60000], raw(Failure(calls=exc.calls, retry=exc.retry))
    except Exception as exc:  # noqa: BLE001 - an implementation failure is a result, not a crash
        error = f"{type(exc).__name__}: {exc}"[:60000]
    return Result(job_id=job.job_id, kind=job.kind, attempt=job.attempt, ok=ok, payload=payload, error=error,
                  elapsed_s=time.monotonic() - started)
