"""The seam between the coordinator and the bus: the few things the
coordinator uses from a transport, as a Protocol. bus/router.py (ZeroMQ
ROUTER) is the real one; bus/inproc.py is an in-process one for tests and
embedding. Peer and Event live here, shared by both (bus.router re-exports
them)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from autocomp_zmq.bus.timing import BusTiming
from autocomp_zmq.protocols.control import Control

if TYPE_CHECKING:
    from autocomp_zmq.bus.wire import Message


@dataclass
class Peer:
    identity: bytes
    sender: str
    role: str
    impl: str
    models: list[str]
    target: str | None
    capacity: int
    host: str
    pid: int
    joined: float
    last_seen: float
    state: str = "alive"          # alive | suspect | dead
    in_flight: set[str] = field(default_factory=set)
    address: str = "unknown"      # the remote IP its connection came from (logs: who joined, who went)
    # this HELLO's number, unique in the process: an agent that rejoins under its old identity is a new
    # incarnation (what the old one lost is not held against it)
    incarnation: int = field(default_factory=itertools.count(1).__next__)

    @property
    def credit(self) -> int:
        return self.capacity - len(self.in_flight) if self.state == "alive" else 0

    def describe(self) -> str:
        return f"{self.role}/{self.impl}@{self.host}:{self.pid}"


@dataclass
class Event:
    kind: str                     # joined | message | suspect | dead | left
    peer: Peer
    message: "Message | None" = None


@runtime_checkable
class Transport(Protocol):
    """What the coordinator needs from a bus. Not thread-safe: one event loop owns it."""
    timing: BusTiming             # heartbeat_s paces the coordinator's poll
    endpoints: list[str]          # where agents connect (the first is recorded in the run store)
    peers: dict[bytes, Peer]      # every peer ever seen, by identity; dead ones stay (state "dead")

    def poll(self, timeout_s: float) -> list[Event]:
        """Wait at most timeout_s for traffic; return what happened (joins, messages, liveness changes)."""
        ...

    def send(self, peer: Peer, body: Control) -> bool:
        """Queue a message for peer; False if it cannot be delivered (the peer is then soon reported dead)."""
        ...

    def alive(self, role: str | None = None) -> list[Peer]:
        """Peers not dead, optionally of one role."""
        ...

    def close(self, reason: str = "run finished") -> None:
        """Tell every peer the run is over and release the transport."""
        ...
