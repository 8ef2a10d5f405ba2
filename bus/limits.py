"""What the transport does with messages it will not accept: read them within
fixed bounds, name the fault from a fixed set of reasons, count it, and warn
about it at a bounded rate, naming the peer's address.

Nothing here is keyed by text a peer chose: a flood of distinct faults costs
one counter per reason and one log line per reason per interval."""
from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

import zmq

from autocomp_zmq.protocols.envelope import ProtocolError

REASONS = (
    "bad_credentials",   # refused during the connection handshake (the gate): no run secret
    # refused by libzmq during the handshake, before the gate is asked (bus/handshake.py reports them)
    "needs_curve",       # the run uses CURVE, the peer PLAIN or nothing
    "unexpected_mechanism",   # the run does not use CURVE, the peer does (or uses nothing)
    "wrong_server_key",  # the peer encrypted for another CURVE server key
    "handshake_failed",  # any other ZMTP handshake failure, or a peer that hung up in the middle of one
    "too_many_frames",
    "oversized",
    "bad_framing",       # fewer frames than a message has
    "bad_protocol",      # another PROTOCOL (an older or newer major version)
    "bad_signature",
    "bad_header",
    "bad_body",
    "replayed",
    "unknown_peer",      # signed, but from a peer that has not said HELLO (or was declared dead)
    "not_coordinator",   # an agent got a signed message from something other than a coordinator
)
HINTS = {
    "bad_credentials": "this peer does not know the run secret: a worker with the wrong --secret-file?",
    "bad_signature": "signed with another secret",
    "bad_protocol": "another major version of the protocol",
    "needs_curve": "the run encrypts with CURVE and this peer does not: a worker without --curve-server-key, or "
                   "of an older version",
    "unexpected_mechanism": "this peer uses CURVE (or no security) and the run does not use CURVE: a worker given "
                            "--curve-server-key for a run without --curve, or of an older version",
    "wrong_server_key": "this peer encrypted for another CURVE server key: a worker with a wrong --curve-server-key",
    "handshake_failed": "the ZeroMQ handshake failed: not an autocomp worker of this version",
}


class Rejected(ProtocolError):
    """A message refused for one of REASONS; the detail is for logs only."""

    def __init__(self, reason: str, detail: str = "") -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown rejection reason {reason!r}")
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class Received:
    frames: list[bytes]          # empty when rejected
    reason: str | None           # one of REASONS, or None
    first: zmq.Frame             # carries the connection's metadata

    @property
    def peer(self) -> str:
        return peer_address(self.first)


def peer_address(frame: zmq.Frame) -> str:
    """The remote IP of a tcp connection (libzmq metadata), or "unknown" (ipc, inproc)."""
    try:
        return frame.get("Peer-Address") or "unknown"
    except (zmq.ZMQError, UnicodeDecodeError):
        return "unknown"


def recv_bounded(sock: zmq.Socket, max_frames: int, max_bytes: int) -> Received | None:
    """One message, frame by frame, keeping at most max_frames frames and max_bytes bytes: past
    either, the rest of the message is read and dropped at once. None when nothing is waiting.

    This bounds what Python holds, not what libzmq buffered: libzmq makes a message readable only
    once all its frames have arrived. Frames over ZMQ_MAXMSGSIZE never get that far, and peers
    without the run secret never get past the handshake (bus/gate.py); this is the last line."""
    try:
        first = sock.recv(zmq.NOBLOCK, copy=False)
    except zmq.Again:
        return None
    kept: list[zmq.Frame] = [first]
    total, reason, frame = len(first), None, first
    while frame.more:
        frame = sock.recv(copy=False)      # cannot block: the whole message is already here
        if reason is not None:
            continue
        total += len(frame)
        if len(kept) >= max_frames:
            reason = "too_many_frames"
        elif total > max_bytes:
            reason = "oversized"
        else:
            kept.append(frame)
            continue
        kept = []                          # let go of what was kept while the rest drains
    return Received([f.bytes for f in kept], reason, first)


class RejectLog:
    """A counter per reason and warnings at most once per reason per interval_s. The first
    rejection of a reason is logged at once; later ones are summed into the next line (written
    on the next rejection of that reason, or by flush() once the interval has passed).
    Thread-safe: the gate's ZAP thread and the socket owner both report here."""

    def __init__(self, logger: Any, interval_s: float = 10.0, event: str = "rejected",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.log = logger
        self.interval_s = interval_s
        self.event = event
        self.clock = clock
        self._counts: Counter[str] = Counter()
        self._pending: dict[str, tuple[int, str, str]] = {}   # reason -> (count, last peer, last detail)
        self._last_line: dict[str, float] = {}
        self._known: dict[str, str] = {}     # reason -> the last peer address known (bounded by REASONS)
        self._lock = threading.Lock()

    @property
    def counts(self) -> Counter[str]:
        """A copy: the ZAP thread may be adding to the original."""
        with self._lock:
            return Counter(self._counts)

    def add(self, reason: str, peer: str, detail: str = "") -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown rejection reason {reason!r}")
        with self._lock:
            self._counts[reason] += 1
            n = self._pending.get(reason, (0, "", ""))[0] + 1
            # a line names the last address known for its reason: some refusals come without one (bus/handshake.py)
            if peer != "unknown":
                self._known[reason] = peer
            self._pending[reason] = (n, self._known.get(reason, peer), detail)
            now = self.clock()
            if now - self._last_line.get(reason, float("-inf")) >= self.interval_s:
                self._write(reason, now)

    def flush(self) -> None:
        """Write the summaries whose interval has passed; call it now and then."""
        with self._lock:
            now = self.clock()
            for reason in list(self._pending):
                if now - self._last_line.get(reason, float("-inf")) >= self.interval_s:
                    self._write(reason, now)

    def _write(self, reason: str, now: float) -> None:
        count, peer, detail = self._pending.pop(reason)
        self._last_line[reason] = now
        fields = {"reason": reason, "count": count, "total": self._counts[reason], "peer": peer}
        if detail:
            fields["detail"] = detail[:200]
        if reason in HINTS:
            fields["hint"] = HINTS[reason]
        self.log.warning(self.event, **fields)
