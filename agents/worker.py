"""The job loop every worker role shares.

A worker connects one DEALER to the coordinator, says HELLO with its role,
implementation, models and capacity, and runs `capacity` threads that take
jobs, call the implementation and send results. Any exception becomes a
failed RESULT with the message, never a dead agent. A local worker started
with parent_pid exits when that process (the coordinator) is gone.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from typing import Any, Protocol

import structlog

from bus.dealer import Dealer
from bus.timing import BusTiming
from protocols.envelope import MessageType
from protocols.jobs import validate_request, validate_result
from protocols.schema import ProtocolError

log = structlog.get_logger("agents.worker")


class JobFailed(Exception):
    """A job that failed after doing billable work: the calls are still reported."""

    def __init__(self, message: str, calls: list[dict] | None = None) -> None:
        super().__init__(message)
        self.calls = calls or []


class Implementation(Protocol):
    name: str
    models: list[str]

    def handle(self, kind: str, payload: dict) -> dict: ...


def call_record(model: str, payload: dict, started: float, outcome: str = "ok", **extra: Any) -> dict:
    """What a model call costs, for the run store (offline implementations cost nothing)."""
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    return {"model": model, "prompt_hash": digest, "tokens_in": 0, "tokens_out": 0, "cost": 0.0,
            "latency": time.monotonic() - started, "outcome": outcome, **extra}


def serve(role: str, impl: Implementation, connect: str, key: bytes, *, capacity: int = 1,
          target: str | None = None, timing: BusTiming = BusTiming(), curve_server_key: bytes | None = None,
          parent_pid: int | None = None) -> int:
    hello = {"role": role, "impl": impl.name, "models": list(impl.models), "capacity": capacity}
    if target:
        hello["target"] = target
    dealer = Dealer(connect, key, hello, timing, curve_server_key=curve_server_key).start()
    stop = threading.Event()
    threads = [threading.Thread(target=_job_loop, args=(dealer, impl, stop), daemon=True, name=f"{role}-{i}")
               for i in range(capacity)]
    for t in threads:
        t.start()
    log.info("worker_started", role=role, impl=impl.name, connect=connect, capacity=capacity)
    try:
        while not dealer.finished.is_set() and any(t.is_alive() for t in threads):
            if parent_pid and not _alive(parent_pid):
                log.info("parent_gone", parent_pid=parent_pid)
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    stop.set()
    dealer.close()
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
            if dealer.finished.is_set():
                dealer.jobs.put(None)  # let sibling threads see the end too
                return
            continue
        if msg.type is not MessageType.JOB:
            continue
        body = msg.body
        reply: dict[str, Any] = {"job_id": body["job_id"], "kind": body["kind"], "attempt": body["attempt"]}
        started = time.monotonic()
        try:
            validate_request(body["kind"], body["payload"])
            payload = impl.handle(body["kind"], body["payload"])
            validate_result(body["kind"], payload)
            reply.update(ok=True, payload=payload)
        except ProtocolError as exc:
            reply.update(ok=False, error=f"malformed job or result: {exc}")
        except JobFailed as exc:
            reply.update(ok=False, error=str(exc)[:60000], payload={"calls": exc.calls})
        except Exception as exc:  # noqa: BLE001 - an implementation failure is a result, not a crash
            reply.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:60000])
        reply["elapsed_s"] = time.monotonic() - started
        dealer.send_result(reply)
