"""The transport before authentication, with real sockets on 127.0.0.1: the
coordinator's memory under oversized messages (Router in a child process,
RSS measured with psutil), a flood of hostile messages counted by a fixed
set of reasons with rate-limited warnings naming the peer, and agents with
a wrong secret or CURVE server key (or of another version) that say so, on both ends, and give up."""
from __future__ import annotations

import json
import os
import random
import re
import secrets
import socket
import struct
import subprocess
import sys
import threading
import time

import msgpack
import msgspec
import psutil
import pytest
import structlog
import zmq

from autocomp_zmq.bus.auth import Signer, create_secret
from autocomp_zmq.bus.curve import create_server_keys
from autocomp_zmq.bus.dealer import Dealer
from autocomp_zmq.bus.router import Router
from autocomp_zmq.bus.timing import BusTiming
from autocomp_zmq.bus.wire import Codec
from autocomp_zmq.protocols.control import Heartbeat, Hello, Job, Result
from autocomp_zmq.protocols.envelope import MAX_BODY_BYTES, MAX_FRAME_BYTES, PROTOCOL, encode
from tests.system.runkit import ROOT, kill_tree, launch, wait_for

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]
FAST = BusTiming(heartbeat_s=0.05, suspect_after=3, dead_after=6, reconnect_min_s=0.05, reconnect_max_s=0.2,
                 handshake_timeout_s=0.5)
HELLO = Hello(role="evaluator", impl="test", models=[], target="t", capacity=2, host="test-host", pid=os.getpid())
MB, MiB = 1000 * 1000, 1024 * 1024


def authenticate(sock: zmq.Socket, key: bytes) -> None:
    """Give a raw socket the credentials of a peer that knows the run secret (passes the gate)."""
    from autocomp_zmq.bus.gate import authenticate_client
    authenticate_client(sock, key)


def polled(router: Router, pred):
    """A condition for wait_for that keeps the router's event loop turning while it waits."""
    def check():
        router.poll(0.02)
        return pred()
    return check


# -- 1. memory before authentication -------------------------------------------------------------------
# the Router child of the memory benchmark: it reports its endpoint, then each change of its rejection count
from bench.bench_bus_memory import CHILD  # noqa: E402


class RouterChild:
    """A coordinator's Router in its own process, so that its RSS is its own."""

    def __init__(self, key: bytes) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(ROOT), key.hex()], cwd=ROOT, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.endpoint = json.loads(self.proc.stdout.readline())["endpoint"]
        self.ps = psutil.Process(self.proc.pid)
        self.rejected = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith('{"rejected"'):
                self.rejected.set()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def attack_growth(frames: list, key_known: bool) -> int:
    """Peak RSS growth of a fresh Router child while one message made of `frames` reaches it."""
    key = secrets.token_bytes(32)
    child = RouterChild(key)
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 0)
    if key_known:
        authenticate(sock, key)
    # the connection closed (refused at the handshake, or a frame over MAXMSGSIZE) also ends the attack
    monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                                      | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
    stop, peak = threading.Event(), [0]
    try:
        time.sleep(0.3)                      # not synchronisation: lets the child settle for the baseline
        before = min(child.ps.memory_info().rss for _ in range(5))
        peak[0] = before

        def sample() -> None:
            while not stop.is_set():
                try:
                    peak[0] = max(peak[0], child.ps.memory_info().rss)
                except psutil.NoSuchProcess:      # the child was stopped before the sampler saw `stop`
                    return
                time.sleep(0.005)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        sock.connect(child.endpoint)
        for f in frames[:-1]:                 # zero-copy: the attacker need not hold a copy of its gigabyte
            sock.send(f, zmq.SNDMORE, copy=False)
        sock.send(frames[-1], copy=False)
        wait_for(lambda: child.rejected.is_set() or monitor.poll(0), timeout=90, every=0.01,
                 what="the coordinator to reject the message or drop the connection")
        deadline = time.monotonic() + 1.0     # keep sampling: whatever was buffered would show by now
        while time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.proc.poll() is None, "the coordinator died"
        return peak[0] - before
    finally:
        stop.set()
        # monitor off first: libzmq's I/O thread sends monitor events blocking, and would wait
        # forever for a monitor socket closed while the connection shuts down
        sock.disable_monitor()
        monitor.close()
        sock.close()
        child.close()


BIG = memoryview(bytes(50 * MB))
UNDER = memoryview(bytes(MAX_FRAME_BYTES - 4096))


@pytest.mark.parametrize("frames", [
    pytest.param(lambda: [PROTOCOL, *[BIG] * 20], id="20x50MB"),
    pytest.param(lambda: [PROTOCOL, *[UNDER] * (512 * MiB // len(UNDER) + 1)], id="512MiB-of-frames-under-limit"),
    pytest.param(lambda: [PROTOCOL, b"s" * 32, b"h", bytes(MAX_FRAME_BYTES + MiB)], id="one-oversize-frame"),
])
def test_a_peer_without_the_secret_cannot_grow_coordinator_memory(frames):
    growth = attack_growth(frames(), key_known=False)
    assert growth <= 50 * MiB, f"coordinator RSS grew by {growth / MiB:.0f} MiB"


def test_a_frame_larger_than_any_legitimate_one_drops_even_a_trusted_connection():
    growth = attack_growth([PROTOCOL, *[BIG] * 20], key_known=True)
    assert growth <= 50 * MiB, f"coordinator RSS grew by {growth / MiB:.0f} MiB"


# -- 2. hostile floods: bounded counter, rate-limited warnings naming the peer ---------------------------
def test_hostile_flood_is_counted_by_fixed_reasons_and_warned_about_rarely():
    from autocomp_zmq.bus.limits import REASONS
    key = secrets.token_bytes(32)
    router = Router(["tcp://127.0.0.1:*"], key, "flood", BusTiming(heartbeat_s=0.05, warn_interval_s=60))
    dealer = Dealer(router.endpoints[0], key, HELLO, FAST).start()
    attacker = zmq.Context.instance().socket(zmq.DEALER)
    attacker.setsockopt(zmq.LINGER, 0)
    attacker.setsockopt(zmq.SNDHWM, 0)
    authenticate(attacker, key)              # the worst case: a peer through the gate, e.g. a buggy agent
    attacker.connect(router.endpoints[0])
    rng = random.Random(99)
    good, forger = Codec(Signer(key), "buggy"), Codec(Signer(b"x" * 32), "forger")
    recorded = good.encode(Heartbeat())

    def signed(header: bytes, body: bytes) -> list[bytes]:
        return [PROTOCOL, Signer(key).sign([header, body]), header, body]

    makers = [
        lambda: [rng.randbytes(rng.randint(0, 40)) for _ in range(rng.randint(1, 4))],
        lambda: [rng.randbytes(3), *good.encode(Heartbeat())[1:]],
        lambda: [b"x"] * rng.randint(5, 40),
        lambda: forger.encode(msgspec.structs.replace(HELLO, host="h", pid=1)),
        lambda: signed(rng.randbytes(20), msgpack.packb({})),
        lambda: signed(msgpack.packb({"type": "result", "sender": "b", "inc": 1, "seq": rng.randint(1, 1 << 40)}),
                       msgpack.packb({"job_id": rng.randint(0, 9)})),
        lambda: recorded,
    ]
    sent = 10_000
    try:
        wait_for(polled(router, dealer.connected.is_set), timeout=20, what="the agent")
        with structlog.testing.capture_logs() as logs:
            for i in range(sent):
                attacker.send_multipart(rng.choice(makers)())
                if i % 500 == 0:
                    router.poll(0)
            deadline = time.monotonic() + 60
            while sum(router.rejected.values()) < sent and time.monotonic() < deadline:
                router.poll(0.05)
        counted = router.rejected
        assert sum(counted.values()) >= sent, counted
        assert set(counted) <= set(REASONS), counted
        assert {"too_many_frames", "bad_protocol", "bad_signature", "bad_header", "bad_body"} <= set(counted)
        warnings = [e for e in logs if e["log_level"] == "warning"]
        assert 1 <= len(warnings) <= len(REASONS), warnings
        assert all(w["peer"] == "127.0.0.1" for w in warnings), warnings
        # the genuine agent is still served
        peer = router.alive()[0]
        router.send(peer, Job(job_id="j", kind="eval", attempt=1, lease_s=5, payload=msgspec.Raw(encode({}))))
        assert wait_for(lambda: dealer.next_job(timeout=0.05), timeout=10, what="a job after the flood")
    finally:
        attacker.close()
        dealer.close()
        router.close()


def test_reject_log_summarises_what_it_did_not_print():
    from autocomp_zmq.bus.limits import RejectLog
    now = [100.0]
    with structlog.testing.capture_logs() as logs:
        rejects = RejectLog(structlog.get_logger("test"), interval_s=10, clock=lambda: now[0])
        for _ in range(1000):
            rejects.add("bad_signature", "10.0.0.7")
        now[0] += 5
        rejects.flush()
        assert len(logs) == 1 and logs[0]["count"] == 1 and logs[0]["peer"] == "10.0.0.7"
        now[0] += 6
        rejects.flush()
        assert len(logs) == 2 and logs[1]["count"] == 999
        with pytest.raises(ValueError):
            rejects.add("some text an attacker chose", "10.0.0.7")
    assert rejects.counts == {"bad_signature": 1000}


def test_agent_side_rejects_a_message_with_too_many_frames_and_oversized_results_fail_cleanly():
    key = secrets.token_bytes(32)
    router = Router(["tcp://127.0.0.1:*"], key, "agent-side", FAST)
    dealer = Dealer(router.endpoints[0], key, HELLO, FAST).start()
    try:
        peer = wait_for(lambda: [e.peer for e in router.poll(0.02) if e.kind == "joined"], timeout=20,
                        what="the agent")[0]
        router.sock.send_multipart([peer.identity, *router.codec.encode(Heartbeat()), b"x", b"y"])
        wait_for(polled(router, lambda: dealer.rejected), timeout=10, what="the agent to reject it")
        # a result larger than any message may be: the coordinator gets a failed result, not a dropped link
        dealer.send_result(Result(job_id="j1", kind="eval", attempt=1, ok=True,
                                  payload=msgspec.Raw(encode({"blob": b"x" * (MAX_BODY_BYTES + 1)}))))

        def result():
            return [e.message for e in router.poll(0.02) if e.kind == "message"]
        got = wait_for(result, timeout=20, what="the substituted result")[0]
        assert got.body.job_id == "j1" and got.body.ok is False and "too large" in got.body.error
        assert dealer.connected.is_set() and dealer.reconnects == 0
    finally:
        dealer.close()
        router.close()


# -- 3. every refusal is loud, on both ends, and a refused worker gives up ------------------------------------
LOUD = BusTiming(heartbeat_s=0.05, suspect_after=3, dead_after=6, reconnect_min_s=0.05, reconnect_max_s=0.2,
                 handshake_timeout_s=0.5, warn_after_failed_handshakes=3, warn_interval_s=1.0, max_refused=1000)
SECRET = "refused this worker's run secret"


def refusal_lines(logs: list[dict], reason: str) -> list[dict]:
    return [e for e in logs if e.get("event") == "rejected" and e.get("reason") == reason]


# (the run uses CURVE, the agent's CURVE server key: "right", "wrong" or None, the agent knows the secret,
#  the reason the coordinator logs, what the agent says)
REFUSALS = {
    "wrong-secret-plain": (False, None, False, "bad_credentials", SECRET),
    "wrong-secret-curve": (True, "right", False, "bad_credentials", SECRET),
    "curve-missing": (True, None, True, "needs_curve", "the coordinator uses CURVE: give --curve-server-key"),
    "curve-unexpected": (False, "right", True, "unexpected_mechanism", "the coordinator does not use CURVE"),
    "wrong-server-key": (True, "wrong", True, "wrong_server_key", "a wrong --curve-server-key"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_every_refused_handshake_is_logged_by_the_coordinator_with_reason_and_address(tmp_path, case):
    """Before, libzmq refused a worker without --curve-server-key (or with a wrong one, or with one on a run
    without CURVE) with nothing logged on the coordinator; only a wrong secret was."""
    curve, server_key, knows_secret, reason, says = REFUSALS[case]
    public, secret = create_server_keys(tmp_path / "curve") if curve or server_key else (None, None)
    key = secrets.token_bytes(32)
    router = Router(["tcp://127.0.0.1:*"], key, "loud", LOUD, curve_secret_key=secret if curve else None)
    agent_key = {"right": public, "wrong": create_server_keys(tmp_path / "other")[0], None: None}[server_key]
    started = time.monotonic()
    with structlog.testing.capture_logs() as logs:
        dealer = Dealer(router.endpoints[0], key if knows_secret else secrets.token_bytes(32), HELLO, LOUD,
                        curve_server_key=agent_key).start()
        try:
            problem = wait_for(polled(router, lambda: dealer.last_problem), timeout=30,
                               what="the agent to report the problem")
            assert f"no welcome from {router.endpoints[0]}" in problem and says in problem, problem
            # the peer's address is read from the connection before libzmq closes it: not always in time
            # for one attempt, but for one of the attempts that follow
            wait_for(polled(router, lambda: any(e["peer"] == "127.0.0.1" for e in refusal_lines(logs, reason))),
                     timeout=30, what=f"a {reason} line naming the peer")
            assert not dealer.connected.is_set()
        finally:
            dealer.close()
            router.close()
    lines = refusal_lines(logs, reason)
    assert all(e["log_level"] == "warning" and e["hint"] for e in lines), lines
    elapsed = time.monotonic() - started
    assert len(lines) <= 1 + elapsed / LOUD.warn_interval_s, "one line per interval, not one per attempt"


@pytest.mark.parametrize("curve", [False, True], ids=["plain-run", "curve-run"])
def test_a_peer_of_an_older_version_is_logged_by_the_coordinator(curve, tmp_path):
    """An older version's worker: one without the gate (ZeroMQ's NULL mechanism), refused by libzmq before
    this version's gate, and one through the gate that speaks an older protocol (refused message by message)."""
    public, secret = create_server_keys(tmp_path / "curve") if curve else (None, None)
    key = secrets.token_bytes(32)
    router = Router(["tcp://127.0.0.1:*"], key, "old", LOUD, curve_secret_key=secret)
    ctx = zmq.Context.instance()
    gateless, older = ctx.socket(zmq.DEALER), ctx.socket(zmq.DEALER)
    for sock in (gateless, older):
        sock.setsockopt(zmq.LINGER, 0)
    from autocomp_zmq.bus.gate import authenticate_client
    authenticate_client(older, key, public)
    header, body = b"\x81\xa4type\xa5hello", b"\x80"
    try:
        with structlog.testing.capture_logs() as logs:
            older.connect(router.endpoints[0])
            older.send_multipart([b"AC1", Signer(key).sign([header, body]), header, body])
            wait_for(polled(router, lambda: [e for e in refusal_lines(logs, "bad_protocol") if e["peer"] == "127.0.0.1"]),
                     timeout=20, what="the older protocol's refusal")
            reason = "needs_curve" if curve else "unexpected_mechanism"
            deadline = time.monotonic() + 30
            while not [e for e in refusal_lines(logs, reason) if e["peer"] == "127.0.0.1"]:
                assert time.monotonic() < deadline, f"no {reason} line naming the gateless peer: {logs}"
                gateless.close()              # a new connection each time, as a retrying worker makes
                gateless = ctx.socket(zmq.DEALER)
                gateless.setsockopt(zmq.LINGER, 0)
                gateless.connect(router.endpoints[0])
                router.poll(0.2)
        assert "an older version" in refusal_lines(logs, reason)[0]["hint"]
    finally:
        gateless.close()
        older.close()
        router.close()


def test_an_agent_started_before_its_coordinator_reports_then_clears_the_problem(tmp_path):
    key, endpoint = secrets.token_bytes(32), f"ipc://{tmp_path}/bus"   # ipc: no port to reserve
    dealer = Dealer(endpoint, key, HELLO, LOUD).start()
    router = None
    try:
        assert f"no welcome from {endpoint}" in wait_for(lambda: dealer.last_problem, timeout=30, what="the problem")
        router = Router([endpoint], key, "late", LOUD)
        wait_for(polled(router, dealer.connected.is_set), timeout=30, what="the agent to join")
        assert dealer.last_problem is None
    finally:
        dealer.close()
        if router:
            router.close()


def _worker(*args: str) -> tuple[subprocess.Popen, list[str]]:
    proc = launch("worker", "--role", "evaluator", "--impl", "synthetic", *args)
    lines: list[str] = []

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
    threading.Thread(target=read, daemon=True).start()
    return proc, lines


def test_worker_process_with_a_wrong_secret_gives_up_with_one_line(tmp_path):
    """Before, it said why but retried forever; now it gives up after --max-refused refusals in a row."""
    router = Router(["tcp://127.0.0.1:*"], secrets.token_bytes(32), "cli", BusTiming(heartbeat_s=0.2))
    wrong = tmp_path / "wrong-secret"
    create_secret(wrong)
    proc, lines = _worker("--connect", router.endpoints[0], "--secret-file", str(wrong), "--max-refused", "2")
    try:
        wait_for(polled(router, lambda: proc.poll() is not None), timeout=120,
                 what=f"the worker to give up; it printed {lines[-5:]}")
        assert proc.returncode == 1
        time.sleep(0.2)                        # the reader thread takes the last line
        errors = [ln for ln in lines if ln.startswith("error:")]
        assert errors == [f"error: gave up on {router.endpoints[0]} after 2 refused handshakes in a row: the "
                          f"coordinator's gate {SECRET} (a wrong --secret-file?)\n"], lines
        assert router.rejected.get("bad_credentials", 0) >= 1
    finally:
        kill_tree(proc.pid)
        proc.wait()
        router.close()


def test_worker_process_gives_up_when_no_coordinator_answers(tmp_path):
    """A worker whose run has ended (or that never reaches one) stops after --unreachable-s."""
    with socket.socket() as s:                 # a port with nothing listening on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    secret = tmp_path / "secret"
    create_secret(secret)
    started = time.monotonic()
    proc, lines = _worker("--connect", f"tcp://127.0.0.1:{port}", "--secret-file", str(secret),
                          "--unreachable-s", "1")
    try:
        assert proc.wait(timeout=60) == 1, lines
        time.sleep(0.2)
        assert any(ln.startswith(f"error: gave up on tcp://127.0.0.1:{port}: no coordinator answered for ")
                   for ln in lines), lines
        assert time.monotonic() - started < 30
    finally:
        kill_tree(proc.pid)


def test_a_forwarder_that_accepts_then_closes_is_waited_for_not_taken_for_a_refusal():
    """A worker started before its coordinator, through a forwarder (ssh -L) that accepts each connection and
    closes it while nothing is behind it. Before, each close counted as a refused handshake and the worker gave
    up after --max-refused (15 s); now it waits --unreachable-s, saying what the closes may mean."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept_and_close() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.close()
    threading.Thread(target=accept_and_close, daemon=True).start()
    timing = BusTiming(heartbeat_s=0.05, reconnect_min_s=0.05, reconnect_max_s=0.1, handshake_timeout_s=0.3,
                       warn_after_failed_handshakes=2, max_refused=2, unreachable_s=600)
    dealer = Dealer(f"tcp://127.0.0.1:{port}", secrets.token_bytes(32), HELLO, timing).start()
    try:
        wait_for(lambda: dealer.failed_handshakes >= 6, timeout=60, what="six closed handshakes")
        assert dealer.gave_up is None and dealer.refused == 0
        assert "a forwarder with no coordinator behind it yet" in dealer.last_problem
        assert "give --curve-server-key" in dealer.last_problem
    finally:
        dealer.close()
        listener.close()


class Recorder:
    """A TCP forwarder that keeps every byte the client sent: an eavesdropper's capture of a worker's stream
    (without --curve the link is not encrypted)."""

    def __init__(self, to_port: int) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port, self.to_port, self.sent = self.server.getsockname()[1], to_port, bytearray()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        near, _ = self.server.accept()
        far = socket.create_connection(("127.0.0.1", self.to_port))
        threading.Thread(target=self._pipe, args=(near, far, True), daemon=True).start()
        self._pipe(far, near, False)

    def _pipe(self, a: socket.socket, b: socket.socket, record: bool) -> None:
        try:
            while data := a.recv(65536):
                if record:
                    self.sent += data
                b.sendall(data)
        except OSError:
            pass


def zmtp_capture(stream: bytes) -> tuple[bytes, list[list[bytes]]]:
    """From a captured ZMTP 3 stream (client side): the routing id its handshake announced (b"" if none) and the
    messages it sent, frame by frame."""
    pos, identity, messages, frames = 64, b"", [], []       # past the greeting
    while pos < len(stream):
        flags = stream[pos]
        size, pos = (struct.unpack(">Q", stream[pos + 1:pos + 9])[0], pos + 9) if flags & 2 else (stream[pos + 1], pos + 2)
        body, pos = stream[pos:pos + size], pos + size
        if flags & 4:                                         # a command: its metadata may name an Identity
            found = re.search(rb"\x08Identity(....)", body, re.S)
            if found:
                start = found.end()
                identity = body[start:start + struct.unpack(">I", found.group(1))[0]]
            continue
        frames.append(body)
        if not flags & 1:
            messages.append(frames)
            frames = []
    return identity, messages


def test_a_replayed_worker_stream_cannot_take_over_the_workers_connection():
    """Before, an eavesdropper (no --curve: the link is clear text) replayed a worker's captured messages over a
    connection that announced the worker's routing id (with ROUTER_HANDOVER, it took the worker's place): the
    attacker received the worker's jobs and heartbeats, the worker was declared dead and its jobs requeued. Now
    agents announce no routing id; the replayed HELLO is refused as replayed and binds nothing."""
    key = secrets.token_bytes(32)
    router = Router(["tcp://127.0.0.1:*"], key, "takeover", FAST)
    recorder = Recorder(int(router.endpoints[0].rsplit(":", 1)[1]))
    worker = Dealer(f"tcp://127.0.0.1:{recorder.port}", key, HELLO, FAST).start()
    attacker = zmq.Context.instance().socket(zmq.DEALER)
    attacker.setsockopt(zmq.LINGER, 0)
    try:
        peer = wait_for(polled(router, lambda: next((p for p in router.peers.values() if p.state == "alive"), None)),
                        timeout=30, what="the worker to join")
        wait_for(polled(router, lambda: len(zmtp_capture(bytes(recorder.sent))[1]) >= 3), timeout=10,
                 what="a captured stream")
        identity, messages = zmtp_capture(bytes(recorder.sent))
        from autocomp_zmq.bus.gate import authenticate_client
        authenticate_client(attacker, key, None)              # the PLAIN password, captured in clear
        if identity:
            attacker.setsockopt(zmq.IDENTITY, identity)
        attacker.connect(router.endpoints[0])
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            router.poll(0.02)
        for frames in messages:
            attacker.send_multipart(frames)
        received = []
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            router.poll(0.02)
            while attacker.poll(0):
                received.append(attacker.recv_multipart())
        assert router.rejected.get("replayed", 0) >= 1
        assert received == []                                 # nothing of the worker's reaches the attacker
        assert peer.state == "alive" and [p for p in router.peers.values() if p.state == "alive"] == [peer]
        router.send(peer, Job(job_id="j1", kind="eval", attempt=1, lease_s=5.0, payload=msgspec.Raw(encode({}))))
        got = wait_for(polled(router, lambda: worker.next_job(timeout=0.01)), timeout=10, what="the worker's job")
        assert got.body.job_id == "j1"
    finally:
        attacker.close()
        worker.close()
        router.close()


def test_random_bytes_and_an_oversized_body_are_counted_with_the_peers_address():
    """Before, neither was counted nor logged: libzmq closed the connection of 1 MiB of random bytes before any
    handshake event, and dropped a 9 MiB body (over ZMQ_MAXMSGSIZE) without a word."""
    key = secrets.token_bytes(32)
    router = Router(["tcp://127.0.0.1:*"], key, "counted", LOUD)
    port = int(router.endpoints[0].rsplit(":", 1)[1])
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    try:
        with structlog.testing.capture_logs() as logs:
            def random_bytes_named() -> bool:
                # the peer's address is read from the connection before libzmq closes it: not always in time for
                # one connection (a busy machine), but for one of those that follow
                with socket.create_connection(("127.0.0.1", port)) as raw:
                    try:
                        raw.sendall(random.Random(3).randbytes(1 << 20))
                    except OSError:
                        pass                              # the coordinator's end closes it
                    deadline = time.monotonic() + 1.0
                    while time.monotonic() < deadline:
                        router.poll(0.02)
                return any(e["peer"] == "127.0.0.1" for e in refusal_lines(logs, "handshake_failed"))
            wait_for(random_bytes_named, timeout=60, what="the random bytes counted, naming the peer")
            from autocomp_zmq.bus.gate import authenticate_client
            authenticate_client(dealer, key, None)        # it knows the secret
            dealer.connect(router.endpoints[0])
            dealer.send_multipart([PROTOCOL, b"s" * 32, b"h", os.urandom(9 * MiB)])
            wait_for(polled(router, lambda: router.rejected.get("oversized", 0) >= 1), timeout=20,
                     what="the 9 MiB body counted")
        for reason in ("handshake_failed", "oversized"):
            assert [e for e in refusal_lines(logs, reason) if e["peer"] == "127.0.0.1"], (reason, logs)
    finally:
        dealer.close()
        router.close()
