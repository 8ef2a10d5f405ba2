"""An in-process Transport: no sockets, no threads, no waiting. Test code (or
an embedding program) plays the agents explicitly:

    t = InProcTransport(clock=fake_clock)
    a = t.join("evaluator", "fake", target="gemmini-sim", capacity=2)
    coordinator.step()                 # polls t: sees the join, dispatches
    for job in t.jobs_for(a):          # the Job messages the coordinator sent to a
        t.reply(a, Result(job_id=job.job_id, kind=job.kind, attempt=job.attempt, ok=True, payload=...))

Liveness follows the injected clock, as the real Router's does its own: a
joined agent heartbeats implicitly until freeze() (then it turns suspect and
dead as the clock passes timing.suspect_s and timing.dead_s), kill() makes the
next poll() report it dead at once, leave() is a DISCONNECT. It knows nothing
of jobs or kernels: messages are the typed control messages of protocols/control.py."""
from __future__ import annotations

import itertools
import time
from collections import deque
from typing import Callable

from autocomp_zmq.bus.timing import BusTiming
from autocomp_zmq.bus.transport import Event, Peer
from autocomp_zmq.bus.wire import Message
from autocomp_zmq.protocols.control import Control, Disconnect, Job
from autocomp_zmq.protocols.envelope import MessageType


class InProcTransport:
    def __init__(self, timing: BusTiming = BusTiming(), clock: Callable[[], float] = time.monotonic,
                 on_send: Callable[[Peer, Control], None] | None = None) -> None:
        self.timing = timing
        self.clock = clock
        self.on_send = on_send                       # a hook: sees every message as it is sent
        self.endpoints = ["inproc://coordinator"]
        self.peers: dict[bytes, Peer] = {}
        self.sent: dict[bytes, list[Control]] = {}   # everything ever sent, per identity
        self.closed: str | None = None               # the reason given to close()
        self._read: dict[bytes, int] = {}            # how far jobs_for() has read each identity's messages
        self._pending: deque[Event] = deque()        # events poll() reports next
        self._frozen: set[bytes] = set()             # silent: no implicit heartbeats
        self._killed: set[bytes] = set()             # gone: sends fail, reported dead
        self._unreachable: set[bytes] = set()        # sends fail, otherwise alive (a full queue)
        self._ids = itertools.count(1)

    # -- the Transport side (used by the coordinator) ----------------------------------
    def poll(self, timeout_s: float = 0.0) -> list[Event]:
        now = self.clock()
        events = list(self._pending)
        self._pending.clear()
        for identity, peer in self.peers.items():
            if peer.state == "dead":
                continue
            if identity in self._killed:
                peer.state = "dead"
                events.append(Event("dead", peer))
                continue
            if identity not in self._frozen:
                peer.last_seen = now
                peer.state = "alive"
                continue
            silent = now - peer.last_seen
            if silent > self.timing.dead_s:
                peer.state = "dead"
                events.append(Event("dead", peer))
            elif peer.state == "alive" and silent > self.timing.suspect_s:
                peer.state = "suspect"
                events.append(Event("suspect", peer))
        return events

    def send(self, peer: Peer, body: Control) -> bool:
        if peer.identity in self._killed or peer.identity in self._unreachable or peer.state == "dead":
            if peer.state != "dead":
                self._killed.add(peer.identity)      # as the Router does: unreachable means dead at the next poll
            return False
        self.sent.setdefault(peer.identity, []).append(body)
        if self.on_send:
            self.on_send(peer, body)
        return True

    def alive(self, role: str | None = None) -> list[Peer]:
        return [p for p in self.peers.values() if p.state != "dead" and (role is None or p.role == role)]

    def close(self, reason: str = "run finished") -> None:
        for peer in self.alive():
            self.send(peer, Disconnect(reason=reason))
        self.closed = reason

    # -- the agents' side (used by test code) -------------------------------------------
    def join(self, role: str, impl: str = "fake", models: list[str] | tuple[str, ...] = (),
             target: str | None = None, capacity: int = 1) -> bytes:
        """A new agent says HELLO; the next poll() reports it joined. Returns its identity."""
        n = next(self._ids)
        identity = f"agent-{n}".encode()
        now = self.clock()
        peer = Peer(identity, f"{role}:{n}", role, impl, list(models), target, capacity, "inproc", n, now, now,
                    address="inproc")
        self.peers[identity] = peer
        self._pending.append(Event("joined", peer))
        return identity

    def rejoin(self, identity: bytes) -> None:
        """The agent says HELLO again under its identity (it was declared dead, or reconnected): a new
        incarnation, as the Router makes one; the old one is reported dead first if it was not yet."""
        old = self.peers[identity]
        if old.state != "dead":
            old.state = "dead"
            self._pending.append(Event("dead", old))
        self._frozen.discard(identity)
        self._killed.discard(identity)
        now = self.clock()
        peer = Peer(identity, old.sender, old.role, old.impl, list(old.models), old.target, old.capacity, old.host,
                    old.pid, now, now, address=old.address)
        self.peers[identity] = peer
        self._pending.append(Event("joined", peer))

    def reply(self, identity: bytes, body: Control) -> None:
        """The agent sends a message (a Result, usually); the next poll() delivers it."""
        peer = self.peers[identity]
        self._pending.append(Event("message", peer, Message(body.type, peer.sender, body, identity)))

    def leave(self, identity: bytes) -> None:
        """The agent says DISCONNECT."""
        peer = self.peers[identity]
        peer.state = "dead"
        self._pending.append(Event("left", peer, Message(MessageType.DISCONNECT, peer.sender, Disconnect(), identity)))

    def kill(self, identity: bytes) -> None:
        """The agent's process dies: sends to it fail and the next poll() reports it dead."""
        self._killed.add(identity)

    def freeze(self, identity: bytes) -> None:
        """The agent stops heartbeating (e.g. SIGSTOP): suspect, then dead, as the clock advances."""
        self._frozen.add(identity)

    def unreachable(self, identity: bytes) -> None:
        """Sends to the agent fail (its queue is full); the first failed send gets it reported dead."""
        self._unreachable.add(identity)

    def messages_for(self, identity: bytes, mtype: MessageType | None = None) -> list[Control]:
        """Every message sent to identity so far (of one type, if given)."""
        return [b for b in self.sent.get(identity, []) if mtype is None or b.type is mtype]

    def jobs_for(self, identity: bytes) -> list[Job]:
        """Job messages sent to identity since the last call."""
        msgs = self.sent.get(identity, [])
        start, self._read[identity] = self._read.get(identity, 0), len(msgs)
        return [b for b in msgs[start:] if isinstance(b, Job)]
