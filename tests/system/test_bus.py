"""The transport with real sockets on 127.0.0.1: handshake and acks, a fuzz of
more than 10,000 hostile frames, forged coordinators, reconnection with
re-sent results, liveness of a killed agent process, CurveZMQ."""
from __future__ import annotations

import os
import random
import signal
import gc
import secrets
import time

import msgpack
import msgspec
import pytest
import zmq

from autocomp_zmq.bus.auth import SecretError, Signer, create_secret, load_secret
from autocomp_zmq.bus.curve import create_server_keys
from autocomp_zmq.bus.dealer import Dealer
from autocomp_zmq.bus.gate import authenticate_client
from autocomp_zmq.bus.router import Router
from autocomp_zmq.bus.timing import BusTiming
from autocomp_zmq.bus.wire import Codec
from autocomp_zmq.protocols.control import CONTROL, Ack, Cancel, Disconnect, Error, Heartbeat, Hello, Job, Result, Welcome
from autocomp_zmq.protocols.envelope import PROTOCOL, MessageType, encode
from tests.system.runkit import launch, wait_for

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]
FAST = BusTiming(heartbeat_s=0.05, suspect_after=3, dead_after=6, reconnect_min_s=0.05, reconnect_max_s=0.2,
                 handshake_timeout_s=0.5)
HELLO = Hello(role="evaluator", impl="test", models=[], target="t", capacity=2, host="test-host", pid=os.getpid())


def raw(obj) -> msgspec.Raw:
    """Anything, as the opaque payload a Job or Result carries."""
    return msgspec.Raw(encode(obj))


def job(i: int) -> Job:
    return Job(job_id=f"job-{i}", kind="eval", attempt=1, lease_s=5, payload=raw({"i": i}))


def pump(router: Router, seconds: float) -> list:
    events, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        events += router.poll(0.01)
    return events


def wait_event(router: Router, kind: str, timeout: float = 10):
    return wait_events(router, (kind,), timeout)[kind]


def wait_events(router: Router, kinds: tuple[str, ...], timeout: float = 10) -> dict:
    """The first event of each kind, however the router batches them (one poll may return several)."""
    found, deadline = {}, time.monotonic() + timeout
    while time.monotonic() < deadline and len(found) < len(kinds):
        for ev in router.poll(0.02):
            if ev.kind in kinds:
                found.setdefault(ev.kind, ev)
    missing = [k for k in kinds if k not in found]
    if missing:
        raise AssertionError(f"no {' or '.join(missing)} event within {timeout} s")
    return found


@pytest.fixture
def pair():
    key = secrets.token_bytes(32)
    router = Router(["tcp://127.0.0.1:*"], key, "test-run", FAST)
    dealer = Dealer(router.endpoints[0], key, HELLO, FAST).start()
    peer = wait_event(router, "joined").peer
    yield key, router, dealer, peer
    dealer.close()
    router.close()


def test_job_result_ack_round_trip(pair):
    key, router, dealer, peer = pair
    assert dealer.connected.wait(2) and dealer.welcome.run_id == "test-run"
    router.send(peer, job(1))
    got = wait_for(lambda: dealer.next_job(timeout=0.05), timeout=5, what="job")
    assert msgspec.msgpack.decode(got.body.payload) == {"i": 1}
    dealer.send_result(Result(job_id="job-1", kind="eval", attempt=1, ok=True, payload=raw({"r": 2})))
    ev = wait_event(router, "message")
    assert ev.message.type is MessageType.RESULT and msgspec.msgpack.decode(ev.message.body.payload) == {"r": 2}
    router.send(peer, Ack(job_id="job-1"))
    wait_for(lambda: not dealer._unacked, timeout=5, what="the ack to clear the result")


def test_fuzz_of_hostile_frames_is_rejected_without_a_crash(pair):
    key, router, dealer, peer = pair
    rng = random.Random(1234)
    ctx = zmq.Context.instance()
    attacker = ctx.socket(zmq.DEALER)
    attacker.setsockopt(zmq.LINGER, 0)
    attacker.setsockopt(zmq.SNDHWM, 0)
    authenticate_client(attacker, key)             # past the connection gate: the messages themselves are hostile
    attacker.connect(router.endpoints[0])
    good = Codec(Signer(key), "attacker")          # knows the key: an authenticated but buggy peer
    forger = Codec(Signer(b"x" * 32), "forger")      # does not know the key
    legit = Codec(Signer(key), "replayed-agent")
    recorded = [legit.encode(Heartbeat()) for _ in range(20)]
    # one well-formed message of every type, for the forger to sign with the wrong key
    every_type = [HELLO, Welcome(run_id="x", heartbeat_s=1, dead_after=3), Heartbeat(),
                  Job(job_id="x", kind="eval", attempt=1, lease_s=5, payload=raw({})),
                  Result(job_id="x", kind="eval", attempt=1, ok=True), Ack(job_id="x"), Cancel(job_id="x"),
                  Disconnect(), Error(code="x")]
    assert {type(b) for b in every_type} == set(CONTROL.values())

    def garbage():
        return [rng.randbytes(rng.randint(0, 64)) for _ in range(rng.randint(1, 7))]

    def unsigned():
        f = good.encode(Heartbeat())
        return [f[0], b"", *f[2:]]

    def forged():
        return forger.encode(rng.choice(every_type))

    def wrong_version():
        f = good.encode(Heartbeat())
        return [b"AC9", *f[1:]]

    def bad_schema():
        # every body is invalid for every one of these types
        body = rng.choice([[1, 2], {"job_id": 5}, {"role": "x"}, {"job_id": 7, "kind": "eval", "attempt": True,
                                                                  "ok": "yes"}, "str", {}])
        mtype = rng.choice([MessageType.RESULT, MessageType.HELLO, MessageType.ACK])
        header = msgpack.packb({"type": mtype.value, "sender": "attacker", "inc": 1, "seq": rng.randint(1, 1 << 40)})
        payload = msgpack.packb(body)
        return [PROTOCOL, Signer(key).sign([header, payload]), header, payload]

    def bad_header():
        header = rng.choice([msgpack.packb([1, 2]), msgpack.packb({"type": "nope", "sender": "a", "inc": 1, "seq": 1}),
                             msgpack.packb({"type": "heartbeat"}), msgpack.packb({"type": "heartbeat", "sender": 1,
                                                                                  "inc": -1, "seq": 1}),
                             b"\xc1\xc1", msgpack.packb({1: 2})])
        payload = msgpack.packb({})
        return [PROTOCOL, Signer(key).sign([header, payload]), header, payload]

    def ext_type():
        # a msgpack extension type where the receiver decodes a field (a bad body), or in a field it does not
        # know (skipped, as unknown fields are; the message is then refused for coming from an unknown peer)
        evil = msgpack.ExtType(1, b"evil")
        mtype, body = rng.choice([("heartbeat", {"x": evil}), ("ack", {"job_id": evil}),
                                  ("result", {"job_id": "j", "kind": evil, "attempt": 1, "ok": True}),
                                  ("hello", {**msgspec.to_builtins(HELLO), "role": evil})])
        header = msgpack.packb({"type": mtype, "sender": "ext", "inc": 2, "seq": rng.randint(1, 1 << 40)})
        payload = msgpack.packb(body)
        return [PROTOCOL, Signer(key).sign([header, payload]), header, payload]

    makers = [(garbage, 4000), (unsigned, 1000), (forged, 1000), (wrong_version, 500), (bad_schema, 2000),
              (bad_header, 1000), (ext_type, 500)]
    sent = 0
    for make, n in makers:
        for _ in range(n):
            attacker.send_multipart(make())
            sent += 1
            if sent % 500 == 0:
                router.poll(0)
    for frames in recorded:           # genuine once...
        attacker.send_multipart(frames)
    for _ in range(1000):             # ...then replayed
        attacker.send_multipart(rng.choice(recorded))
        sent += 1
    events = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(router.rejected.values()) < sent:
        events += router.poll(0.05)
    assert sent >= 10_000
    assert sum(router.rejected.values()) >= sent, router.rejected
    assert any("replayed" in reason for reason in router.rejected)
    assert "bad_body" in router.rejected, router.rejected          # decoded, and refused by its type
    assert not [e for e in events if e.kind in ("joined", "message")], "a hostile frame got through"
    # oversized frames: the socket option makes libzmq drop the connection, not the coordinator
    big = ctx.socket(zmq.DEALER)
    big.setsockopt(zmq.LINGER, 0)
    authenticate_client(big, key)
    big.connect(router.endpoints[0])
    big.send_multipart([PROTOCOL, b"s" * 32, b"h", b"x" * (65 * 1024 * 1024)])
    pump(router, 0.5)
    # the coordinator still serves its genuine agent
    router.send(peer, job(7))
    got = wait_for(lambda: dealer.next_job(timeout=0.05), timeout=5, what="a job after the fuzz")
    assert got.body.job_id == "job-7"
    attacker.close()
    big.close()


def test_agent_ignores_a_coordinator_without_the_secret():
    impostor = Router(["tcp://127.0.0.1:*"], secrets.token_bytes(32), "impostor", FAST)
    dealer = Dealer(impostor.endpoints[0], secrets.token_bytes(32), HELLO, FAST).start()
    try:
        events = pump(impostor, 1.0)
        assert not [e for e in events if e.kind == "joined"]
        assert not dealer.connected.is_set()
    finally:
        dealer.close()
        impostor.close()


def test_reconnect_with_backoff_resends_unacknowledged_results(tmp_path):
    key = secrets.token_bytes(32)
    # the second coordinator binds the first one's address: an IPC path in this test's own directory, which
    # nothing else can take in between (a TCP port closed and bound again can be)
    endpoint = f"ipc://{tmp_path / 'coordinator.sock'}"
    first = Router([endpoint], key, "r1", FAST)
    dealer = Dealer(endpoint, key, HELLO, FAST).start()
    peer = wait_event(first, "joined").peer
    first.send(peer, job(3))
    wait_for(lambda: dealer.next_job(timeout=0.05), timeout=5, what="job")
    first.sock.close(linger=0)            # the coordinator crashes (no DISCONNECT) before acknowledging
    dealer.send_result(Result(job_id="job-3", kind="eval", attempt=1, ok=True, payload=raw({})))
    wait_for(lambda: "job-3" in dealer._unacked, timeout=5, what="the result sent and awaiting its ACK")
    second = Router([endpoint], key, "r2", FAST)
    try:
        ev = wait_events(second, ("joined", "message"), timeout=20)["message"]   # often in one poll
        assert ev.message.body.job_id == "job-3"
        assert dealer.reconnects >= 1
    finally:
        dealer.close()
        second.close()


@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_agent_liveness(tmp_path, how):
    """A frozen agent (SIGSTOP: connected but silent) turns suspect, then dead; a killed one (its
    connection drops) is found dead at the next unroutable send."""
    key_file = tmp_path / "secret"
    key = create_secret(key_file)
    router = Router(["tcp://127.0.0.1:*"], key, "liveness", BusTiming(heartbeat_s=0.1, suspect_after=3, dead_after=8))
    proc = launch("worker", "--role", "evaluator", "--impl", "synthetic", "--connect", router.endpoints[0],
                  "--secret-file", str(key_file), "--heartbeat-s", "0.1")
    try:
        peer = wait_event(router, "joined", timeout=30).peer
        assert peer.pid == proc.pid
        pump(router, 0.5)
        assert peer.state == "alive"      # its heartbeats keep it alive
        os.kill(proc.pid, signal.SIGSTOP if how == "stopped" else signal.SIGKILL)
        t0 = time.monotonic()
        timing = router.timing
        if how == "stopped":
            wait_event(router, "suspect", timeout=10)
            assert peer.state == "suspect"                # silent, not yet dead: the states come in order
            assert time.monotonic() - t0 >= timing.suspect_s - timing.heartbeat_s
        wait_event(router, "dead", timeout=10)
        t_dead = time.monotonic()
        assert peer.state == "dead"
        if how == "stopped":                              # declared dead by silence, after dead_s of it
            assert t_dead - t0 >= timing.dead_s - timing.heartbeat_s
        else:                                             # by a failed send, which backdates last_seen by a
            assert peer.last_seen <= t_dead - timing.dead_s - 0.5   # second more than silence ever would
    finally:
        proc.kill()
        proc.wait()
        router.close()


def test_curve_encrypts_and_plain_clients_cannot_join(tmp_path):
    public, secret = create_server_keys(tmp_path / "curve")
    key = secrets.token_bytes(32)
    router = Router(["tcp://127.0.0.1:*"], key, "curve", FAST, curve_secret_key=secret)
    plain = Dealer(router.endpoints[0], key, HELLO, FAST).start()
    good = Dealer(router.endpoints[0], key, HELLO, FAST, curve_server_key=public).start()
    try:
        joined = [e.peer for e in pump(router, 1.0) if e.kind == "joined"]
        assert len(joined) == 1 and joined[0].sender == good.codec.sender
        assert not plain.connected.is_set()
    finally:
        plain.close()
        good.close()
        router.close()


def test_secret_file_must_be_private(tmp_path):
    path = tmp_path / "secret"
    key = create_secret(path)
    assert oct(path.stat().st_mode & 0o777) == "0o600" and load_secret(path) == key
    with pytest.raises(FileExistsError):
        create_secret(path)
    path.chmod(0o644)
    with pytest.raises(SecretError, match="readable by others"):
        load_secret(path)
    bad = tmp_path / "bad"
    bad.write_text("zz")
    bad.chmod(0o600)
    with pytest.raises(SecretError, match="not a hex"):
        load_secret(bad)
    with pytest.raises(SecretError, match="cannot read"):
        load_secret(tmp_path / "missing")


def test_dealers_made_and_closed_one_after_another_never_collide():
    """Each dealer binds an inproc wake-up socket, whose name ZeroMQ releases asynchronously after close. A
    name taken from id() came back with the next dealer at the freed address and was once 'already in use'
    (a CI failure): every dealer of a process gets a name of its own."""
    names, addresses = [], set()
    for _ in range(300):
        dealer = Dealer("tcp://127.0.0.1:9", secrets.token_bytes(32), HELLO, FAST)
        names.append(dealer._wake_addr)
        addresses.add(id(dealer))
        dealer.close()
        del dealer
        # freed now (its thread object refers back to it): the next one may take its address. The young
        # generations hold it, so collecting them is enough (a full collection took 50 ms each, 27 s in all)
        gc.collect(1)
    assert len(addresses) < len(names) / 2      # addresses did come back: the case that collided
    assert len(set(names)) == len(names)
