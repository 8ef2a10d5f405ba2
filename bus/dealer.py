"""Agent side of the bus: one DEALER socket owned by an I/O thread.

The I/O thread performs the HELLO/WELCOME handshake, sends heartbeats even
while the agent's worker threads are busy for minutes, watches the
coordinator's heartbeats, reconnects with exponential backoff and jitter
(until it gives up, below), and re-sends results the coordinator has not
acknowledged yet.
Worker threads only see two calls: next_job() and send_result().

An agent that keeps getting no WELCOME says so (a warning, and last_problem),
naming what its socket's monitor saw (bus/handshake.py): a refused secret, a
CURVE mismatch or key, or nobody there. It gives up (`gave_up`, and the I/O
thread ends) after timing.max_refused refused handshakes in a row, or after
timing.unreachable_s without reaching a coordinator: a run that has ended
leaves its workers nothing to wait for.
"""
from __future__ import annotations

import itertools
import queue
import random
import threading
import time

import structlog
import zmq

from autocomp_zmq.bus import gate
from autocomp_zmq.bus.auth import Signer
from autocomp_zmq.bus.handshake import LinkWatch
from autocomp_zmq.bus.limits import RejectLog, recv_bounded
from autocomp_zmq.bus.timing import BusTiming
from autocomp_zmq.bus.wire import Codec, Message
from autocomp_zmq.protocols.control import Control, Disconnect, Error, Heartbeat, Hello, Result, Welcome
from autocomp_zmq.protocols.envelope import (MAX_BODY_BYTES, MAX_FRAME_BYTES, MAX_FRAMES, MAX_MESSAGE_BYTES, MessageType,
                                ProtocolError, encode)

log = structlog.get_logger("bus.dealer")
_ids = itertools.count()


class Dealer:
    def __init__(self, connect: str, key: bytes, hello: Hello, timing: BusTiming = BusTiming(),
                 curve_server_key: bytes | None = None, ctx: zmq.Context | None = None) -> None:
        self.ctx = ctx or zmq.Context.instance()
        self.connect_to = connect
        self.timing = timing
        self.curve_server_key = curve_server_key
        self._key = key
        self.hello = hello
        name = f"{hello.role}-{hello.host}-{hello.pid}-{next(_ids)}"
        self.codec = Codec(Signer(key), name)
        self.jobs: queue.Queue[Message | None] = queue.Queue()
        self.connected = threading.Event()
        self.finished = threading.Event()          # coordinator said DISCONNECT
        self.reconnects = 0
        self.failed_handshakes = 0                 # in a row; a WELCOME resets it
        self.refused = 0                           # of them, those the coordinator's end refused
        self.last_problem: str | None = None       # why this agent cannot join, while it cannot
        self.gave_up: str | None = None            # why it stopped trying (then the I/O thread ends)
        self._reached = time.monotonic()           # when a coordinator last answered (or the agent started)
        self._last_warned = float("-inf")
        self._rejects = RejectLog(log, timing.warn_interval_s)
        self._outbox: queue.Queue[Control] = queue.Queue()
        self.welcome: Welcome | None = None
        self._unacked: dict[str, Result] = {}      # job_id -> RESULT not acknowledged yet
        self._stop = threading.Event()
        # unique per dealer for the life of the process: an id() is reused by the next object at the same
        # address while the closed socket's inproc name is still being released (ZeroMQ closes asynchronously)
        self._wake_addr = f"inproc://dealer-wake-{next(_ids)}"
        self._wake_pull = self.ctx.socket(zmq.PULL)
        self._wake_pull.bind(self._wake_addr)
        self._local = threading.local()
        self._pushers: list[zmq.Socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="bus-io", daemon=True)

    # -- API for worker threads ----------------------------------------------------
    def start(self) -> "Dealer":
        self._thread.start()
        return self

    def next_job(self, timeout: float | None = None) -> Message | None:
        """The next JOB/CANCEL message; None once the run is over or on timeout."""
        try:
            return self.jobs.get(timeout=timeout)
        except queue.Empty:
            return None

    def send_result(self, body: Result) -> None:
        self._outbox.put(body)
        self._wake()

    @property
    def rejected(self) -> int:
        """Messages from the coordinator's side refused so far."""
        return sum(self._rejects.counts.values())

    def close(self, reason: str = "agent stopping") -> None:
        if self._thread.is_alive():
            self._outbox.put(Disconnect(reason=reason))
            self._wake()
            self._stop.set()
            self._thread.join(timeout=2)
        with self._lock:
            for s in self._pushers:
                s.close(linger=0)
        self._wake_pull.close(linger=0)

    def _wake(self) -> None:
        push = getattr(self._local, "push", None)
        if push is None:
            push = self._local.push = self.ctx.socket(zmq.PUSH)
            push.setsockopt(zmq.LINGER, 0)
            push.connect(self._wake_addr)
            with self._lock:
                self._pushers.append(push)
        push.send(b"", zmq.NOBLOCK)

    # -- I/O thread -------------------------------------------------------------------
    def _run(self) -> None:
        backoff = self.timing.reconnect_min_s
        while not self._stop.is_set():
            sock, watch = self._socket()
            reason = "handshake"
            if self._handshake(sock, watch):
                backoff = self.timing.reconnect_min_s
                self.failed_handshakes, self.refused, self.last_problem = 0, 0, None
                self.connected.set()
                reason = self._serve(sock)
                self.connected.clear()
                self._reached = time.monotonic()
            elif not self._stop.is_set():
                self._no_welcome(watch)
                reason = "gave up" if self.gave_up else "handshake"
            watch.close()
            sock.close(linger=None if reason in ("stop", "disconnect") else 0)
            if reason in ("disconnect", "stop", "gave up"):
                break
            self.reconnects += 1
            delay = backoff * random.uniform(0.5, 1.0)
            log.info("reconnecting", to=self.connect_to, reason=reason, delay_s=round(delay, 2))
            self._stop.wait(delay)
            backoff = min(backoff * 2, self.timing.reconnect_max_s)
        self.jobs.put(None)

    def _no_welcome(self, watch: LinkWatch) -> None:
        self.failed_handshakes += 1
        now = time.monotonic()
        why = watch.read()
        if why is None and watch.handshaken:    # admitted, but HELLO went unanswered
            why = "the coordinator did not answer this worker's HELLO (another version of autocomp?)"
        if why is not None:
            self.refused += 1
            self._reached = now                 # something answered: this is not an absent coordinator
        if why is not None and self.refused >= self.timing.max_refused:
            self.gave_up = (f"gave up on {self.connect_to} after {self.refused} refused handshakes in a row: {why}")
        elif why is None and now - self._reached >= self.timing.unreachable_s:
            self.gave_up = (f"gave up on {self.connect_to}: no coordinator answered for "
                            f"{now - self._reached:.0f} s (" + (f"{watch.dropped}; " if watch.dropped else "") +
                            "its run may have ended; --unreachable-s sets how long a worker waits)")
        if self.gave_up:             # said once, by whoever runs the agent (agents/workers/worker.py GaveUp)
            self.last_problem = self.gave_up
            return
        if self.failed_handshakes < self.timing.warn_after_failed_handshakes and why is None:
            return
        silence = watch.dropped or ("something listens there but did not finish the ZeroMQ handshake (a busy or "
                                    "stopped coordinator?)" if watch.connected else "nothing answers there (no "
                                    "coordinator yet, or its run has ended)")
        self.last_problem = f"no welcome from {self.connect_to} after {self.failed_handshakes} attempts: {why or silence}"
        if now - self._last_warned >= self.timing.warn_interval_s:
            self._last_warned = now
            log.warning("no_welcome", problem=self.last_problem, attempts=self.failed_handshakes)

    def _socket(self) -> tuple[zmq.Socket, LinkWatch]:
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 500)        # flush a final RESULT/DISCONNECT on close (set before connecting)
        sock.setsockopt(zmq.IMMEDIATE, 1)       # queue nothing for a peer that is not connected
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES)
        sock.setsockopt(zmq.TCP_KEEPALIVE, 1)
        gate.authenticate_client(sock, self._key, self.curve_server_key)   # what the coordinator's gate asks
        watch = LinkWatch(sock, curve=self.curve_server_key is not None)   # before connecting: every event
        sock.connect(self.connect_to)
        return sock, watch

    def _send(self, sock: zmq.Socket, body: Control) -> bool:
        try:
            sock.send_multipart(self.codec.encode(body), zmq.NOBLOCK)
            return True
        except ProtocolError as exc:
            log.error("unsendable", type=body.type.value, error=str(exc)[:200])
            return False
        except zmq.ZMQError:
            return False

    @staticmethod
    def _fit(body: Result) -> Result:
        """A result too large for one message becomes a failed result: sent as it is, it would be
        refused (or the link dropped) and re-sent on every reconnect, forever."""
        size = len(encode(body))
        if size <= MAX_BODY_BYTES:
            return body
        log.error("result_too_large", job_id=body.job_id, bytes=size, limit=MAX_BODY_BYTES)
        return Result(job_id=body.job_id, kind=body.kind, attempt=body.attempt, ok=False,
                      error=f"result too large to send: {size} bytes packed, the limit is {MAX_BODY_BYTES}")

    def _recv(self, sock: zmq.Socket) -> Message | None:
        got = recv_bounded(sock, MAX_FRAMES, MAX_MESSAGE_BYTES)
        if got is None:
            return None
        rejected = Message(MessageType.ERROR, "", Error(code="rejected"))
        if got.reason:
            self._rejects.add(got.reason, got.peer)
            return rejected
        try:
            msg = self.codec.decode(got.frames)
        except ProtocolError as exc:
            self._rejects.add(getattr(exc, "reason", "bad_body"), got.peer, str(exc))
            return rejected
        if not msg.sender.startswith("coordinator:"):
            self._rejects.add("not_coordinator", got.peer, msg.sender[:80])
            return rejected
        return msg

    def _handshake(self, sock: zmq.Socket, watch: LinkWatch) -> bool:
        deadline = time.monotonic() + self.timing.handshake_timeout_s
        sent = False
        # a refusal ends the attempt at once: libzmq does not retry a connection refused for its mechanism
        while not self._stop.is_set() and time.monotonic() < deadline and watch.read() is None:
            if not sent:
                sent = self._send(sock, self.hello)
            if sock.poll(50):
                while (msg := self._recv(sock)) is not None:
                    if msg.type is MessageType.WELCOME:
                        self.welcome = msg.body
                        return True
        return False

    def _serve(self, sock: zmq.Socket) -> str:
        hb = self.welcome.heartbeat_s
        dead_s = hb * self.welcome.dead_after
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(self._wake_pull, zmq.POLLIN)
        last_heard = now = time.monotonic()
        next_hb = now + hb
        for body in list(self._unacked.values()):   # results the previous coordinator link lost
            self._send(sock, body)
        while True:
            ready = dict(poller.poll(max(0.0, next_hb - time.monotonic()) * 1000))
            now = time.monotonic()
            if sock in ready:
                while (msg := self._recv(sock)) is not None:
                    if msg.sender:
                        last_heard = now
                    if msg.type in (MessageType.JOB, MessageType.CANCEL):
                        self.jobs.put(msg)
                    elif msg.type is MessageType.ACK:
                        self._unacked.pop(msg.body.job_id, None)
                    elif msg.type is MessageType.DISCONNECT:
                        self.finished.set()
                        self._send(sock, Disconnect(reason="acknowledged"))  # close handshake
                        return "disconnect"
                    elif msg.type is MessageType.ERROR and msg.body.code == "unknown_peer":
                        return "unknown to coordinator"
            if self._wake_pull in ready:
                while True:
                    try:
                        self._wake_pull.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        break
            while True:
                try:
                    body = self._outbox.get_nowait()
                except queue.Empty:
                    break
                if isinstance(body, Result):
                    body = self._fit(body)
                    self._unacked[body.job_id] = body
                self._send(sock, body)
                if isinstance(body, Disconnect):
                    return "stop"
            if self._stop.is_set():
                return "stop"
            if now >= next_hb:
                self._send(sock, Heartbeat())
                next_hb = now + hb
            if now - last_heard > dead_s:
                return "coordinator silent"
