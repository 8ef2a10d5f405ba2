"""Coordinator side of the bus: one ROUTER socket, a table of peers with
liveness (alive -> suspect -> dead) and credit (jobs in flight vs the
capacity each agent declared in HELLO). Not thread-safe: owned by the
coordinator's event loop, which calls poll() regularly.

Before a message gets here, a peer has passed the connection gate (bus/gate.py)
and each of its frames has fit ZMQ_MAXMSGSIZE; every message is then read
within fixed bounds and checked (bus/wire.py). Refusals (the gate's, libzmq's own
during the handshake: bus/handshake.py, and the messages') are counted by reason
in `rejected` and logged at a bounded rate with the peer's address."""
from __future__ import annotations

import time
from collections import Counter
import structlog
import zmq

from autocomp_zmq.bus import gate
from autocomp_zmq.bus.auth import Signer
from autocomp_zmq.bus.handshake import ConnectionWatch
from autocomp_zmq.bus.limits import RejectLog, recv_bounded
from autocomp_zmq.bus.timing import BusTiming
from autocomp_zmq.bus.transport import Event, Peer, Transport  # noqa: F401  (re-exported)
from autocomp_zmq.bus.wire import Codec
from autocomp_zmq.protocols.control import Control, Disconnect, Error, Heartbeat, Welcome
from autocomp_zmq.protocols.envelope import MAX_FRAME_BYTES, MAX_FRAMES, MAX_MESSAGE_BYTES, MessageType, ProtocolError

log = structlog.get_logger("bus.router")
OVERSIZE_READ = 2


class Router:
    """The ZeroMQ implementation of bus.transport.Transport."""

    def __init__(self, binds: list[str], key: bytes, run_id: str, timing: BusTiming = BusTiming(),
                 curve_secret_key: bytes | None = None, ctx: zmq.Context | None = None) -> None:
        self.ctx = ctx or zmq.Context.instance()
        self.timing = timing
        self.run_id = run_id
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)   # unroutable sends raise instead of vanishing
        # No ROUTER_HANDOVER: a connection never takes over another's routing id. Agents set none (libzmq gives each
        # connection a fresh one); an agent is known by the signed HELLO on its connection, and a HELLO of the same
        # sender on a new connection (a reconnect) supersedes the old one. A replayed stream's HELLO is refused as
        # replayed, so it binds nothing, and a peer that claims a live connection's routing id is refused by libzmq.
        # bounded linger: queued messages get a chance to leave on close, exit never hangs
        self.sock.setsockopt(zmq.LINGER, 500)
        # per frame, checked before libzmq allocates it: a frame far bigger than any legitimate one drops the link
        # (unseen: libzmq says nothing of it); one up to OVERSIZE_READ times the limit is read, refused and counted
        self.sock.setsockopt(zmq.MAXMSGSIZE, OVERSIZE_READ * MAX_FRAME_BYTES)
        self.sock.setsockopt(zmq.SNDHWM, 100_000)
        self.sock.setsockopt(zmq.RCVHWM, 100_000)
        self.sock.setsockopt(zmq.TCP_KEEPALIVE, 1)
        self.sock.setsockopt(zmq.HANDSHAKE_IVL, int(timing.connect_handshake_s * 1000))
        self._rejects = RejectLog(log, timing.warn_interval_s)
        self._zap_domain = gate.guard(self.sock, key, self._rejects, curve_secret_key)   # before binding
        self._watch = ConnectionWatch(self.sock, self._rejects, curve=curve_secret_key is not None)
        self.endpoints = []
        try:
            for b in binds:
                self.sock.bind(b)
                self.endpoints.append(self.sock.getsockopt_string(zmq.LAST_ENDPOINT))
        except zmq.ZMQError:
            self._watch.stop()
            self.sock.close(linger=0)
            gate.release(self.ctx, self._zap_domain)
            raise
        self.codec = Codec(Signer(key), f"coordinator:{run_id}")
        self.peers: dict[bytes, Peer] = {}
        self._connection_of: dict[str, bytes] = {}     # sender -> the routing id its latest HELLO came on
        self._next_heartbeat = 0.0

    @property
    def rejected(self) -> Counter[str]:
        """Messages (and connections, at the gate) refused so far, by bus.limits.REASONS."""
        return self._rejects.counts

    # -- receiving ---------------------------------------------------------------
    def poll(self, timeout_s: float, max_messages: int = 1000) -> list[Event]:
        events: list[Event] = []
        if self.sock.poll(max(0, int(timeout_s * 1000))):
            for _ in range(max_messages):
                got = recv_bounded(self.sock, 1 + MAX_FRAMES, 255 + MAX_MESSAGE_BYTES)   # + the identity
                if got is None:
                    break
                if got.reason:
                    self._rejects.add(got.reason, got.peer)
                else:
                    self._handle(got.frames, got.peer, events)
        self._tick(time.monotonic(), events)
        return events

    def _handle(self, frames: list[bytes], address: str, events: list[Event]) -> None:
        identity = frames[0]
        try:
            msg = self.codec.decode(frames[1:])
        except ProtocolError as exc:
            self._rejects.add(getattr(exc, "reason", "bad_body"), address, str(exc))
            return
        msg.identity = identity
        now = time.monotonic()
        if msg.type is MessageType.HELLO:
            b = msg.body
            for before in {identity, self._connection_of.get(msg.sender)}:
                old = self.peers.get(before) if before else None
                if old and old.state != "dead":    # it introduced itself again (a reconnect): what it held is lost
                    old.state = "dead"
                    events.append(Event("dead", old))
            self._connection_of[msg.sender] = identity
            peer = Peer(identity, msg.sender, b.role, b.impl, list(b.models), b.target, b.capacity, b.host, b.pid,
                        now, now, address=address)
            self.peers[identity] = peer
            self.send(peer, Welcome(run_id=self.run_id, heartbeat_s=self.timing.heartbeat_s,
                                    dead_after=self.timing.dead_after))
            events.append(Event("joined", peer))
            return
        peer = self.peers.get(identity)
        if peer is None or peer.state == "dead" or peer.sender != msg.sender:
            self._rejects.add("unknown_peer", address, msg.type.value)
            self._send_raw(identity, Error(code="unknown_peer", message="say hello first"))
            return
        peer.last_seen = now
        if peer.state == "suspect":
            peer.state = "alive"
        if msg.type is MessageType.HEARTBEAT:
            return
        if msg.type is MessageType.DISCONNECT:
            peer.state = "dead"
            events.append(Event("left", peer, msg))
            return
        events.append(Event("message", peer, msg))

    def _tick(self, now: float, events: list[Event]) -> None:
        self._rejects.flush()
        if now >= self._next_heartbeat:
            self._next_heartbeat = now + self.timing.heartbeat_s
            for peer in self.peers.values():
                if peer.state != "dead":
                    self.send(peer, Heartbeat())
        for peer in self.peers.values():
            silent = now - peer.last_seen
            if peer.state != "dead" and silent > self.timing.dead_s:
                peer.state = "dead"
                events.append(Event("dead", peer))
            elif peer.state == "alive" and silent > self.timing.suspect_s:
                peer.state = "suspect"
                events.append(Event("suspect", peer))

    # -- sending -----------------------------------------------------------------
    def send(self, peer: Peer, body: Control) -> bool:
        ok = self._send_raw(peer.identity, body)
        if not ok and peer.state != "dead":
            peer.last_seen = min(peer.last_seen, time.monotonic() - self.timing.dead_s - 1)
        return ok

    def _send_raw(self, identity: bytes, body: Control) -> bool:
        try:
            frames = self.codec.encode(body)
        except ProtocolError as exc:
            # the agent would refuse it (or its libzmq drop the link): the message is lost, as before,
            # but the peer is not at fault, so it is not reported unreachable; the job's lease expires
            log.error("unsendable", type=body.type.value, error=str(exc)[:200])
            return True
        try:
            self.sock.send_multipart([identity, *frames], zmq.NOBLOCK)
            return True
        except zmq.ZMQError as exc:  # EHOSTUNREACH: peer gone; EAGAIN: its queue is full
            log.debug("send_failed", errno=exc.errno, error=str(exc))
            return False

    def alive(self, role: str | None = None) -> list[Peer]:
        return [p for p in self.peers.values() if p.state != "dead" and (role is None or p.role == role)]

    def close(self, reason: str = "run finished", grace_s: float = 2.0) -> None:
        """Tell every peer ever seen (dead ones included: one wrongly declared dead while busy would
        otherwise reconnect forever) that the run is over, and wait, at most grace_s, for each to
        answer: libzmq drops messages a peer has not read yet when the connection closes, so closing
        right after sending could lose the DISCONNECT."""
        waiting = {identity for identity in self.peers
                   if self._send_raw(identity, Disconnect(reason=reason))}
        deadline = time.monotonic() + grace_s
        while waiting and time.monotonic() < deadline:
            for ev in self.poll(0.02):
                if ev.kind == "left":
                    waiting.discard(ev.peer.identity)
        self._watch.stop()
        self.sock.close()
        gate.release(self.ctx, self._zap_domain)
