"""Handshakes that fail before a single message is read, seen from both ends of a link.

libzmq refuses some connections itself, before the gate (bus/gate.py) is asked: a peer of another security
mechanism (PLAIN against CURVE, CURVE against PLAIN, an older version's NULL) or one that encrypted for
another CURVE server key. It says so only on a socket monitor, so both ends watch theirs:

* the coordinator (ConnectionWatch) logs each refusal, by reason and with the peer's address, through the
  Router's rate-limited RejectLog, as the gate logs a wrong secret;
* an agent (LinkWatch) learns why its own attempt failed, so that it can say so and give up after a bounded
  number of refusals instead of retrying forever.

Monitor events (libzmq's v1 format) name only the listening endpoint, not the peer: the coordinator takes the
address from the accepted connection itself, on a thread of its own so that it reads it before the refusal
closes the connection (within a millisecond). That is best effort: a connection closed before the thread woke
stays "unknown", and RejectLog then names the last address it knew for that reason.
"""
from __future__ import annotations

import itertools
import os
import socket
import struct
import threading

import zmq

from autocomp_zmq.bus.limits import RejectLog

MISMATCH = zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
CRYPTOGRAPHIC = zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC
FAILED = zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL


_ids = itertools.count()


def _monitor(sock: zmq.Socket, events: int) -> zmq.Socket:
    """A monitor of sock on an inproc name of its own: libzmq frees a closed socket's name asynchronously, so
    pyzmq's default name (from the descriptor, reused by the next socket) can still be taken."""
    return sock.get_monitor_socket(events, addr=f"inproc://autocomp-handshakes-{os.getpid()}-{next(_ids)}")


def _event(frames: list[bytes]) -> tuple[int, int]:
    """(event, value) of a v1 monitor message: a 16-bit event and a 32-bit value, then the endpoint frame."""
    return struct.unpack("=HI", frames[0][:6])


def _peer_of(fd: int) -> str:
    """The remote IP of an accepted TCP connection, read from a duplicate of libzmq's descriptor."""
    try:
        with socket.socket(fileno=os.dup(fd)) as conn:
            address = conn.getpeername()
    except OSError:                 # closed already (or not a socket any more)
        return "unknown"
    return address[0] if isinstance(address, tuple) and address[0] else "unknown"


def server_reason(event: int, value: int, curve: bool) -> str:
    """The bus.limits reason of a handshake the coordinator's socket refused."""
    if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and value == MISMATCH:
        return "needs_curve" if curve else "unexpected_mechanism"
    if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and value == CRYPTOGRAPHIC:
        return "wrong_server_key"
    return "handshake_failed"


class ConnectionWatch(threading.Thread):
    """Reports every handshake the Router's socket refuses before the gate (the gate reports its own)."""

    def __init__(self, sock: zmq.Socket, rejects: RejectLog, curve: bool) -> None:
        super().__init__(name="bus-handshakes", daemon=True)
        self.sock, self.rejects, self.curve = sock, rejects, curve
        # MONITOR_STOPPED: disable_monitor() then tells this thread to end
        self.monitor = _monitor(sock, zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED | FAILED | zmq.EVENT_MONITOR_STOPPED
                                | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
        self.start()

    def run(self) -> None:
        addresses: dict[int, str] = {}     # descriptor -> peer address, of the connections still open
        # connections whose handshake has not ended yet, oldest first. A handshake's end names no descriptor: it is
        # taken as the oldest's (connections handshake in the order they came, nearly always), so that one that
        # closes before its handshake ended, with no reason given (random bytes, a port probe), is counted too
        handshaking: dict[int, None] = {}
        refused: tuple[str, str] | None = None
        try:
            while True:
                try:
                    event, value = _event(self.monitor.recv_multipart())
                except (struct.error, IndexError):     # never stop reading: libzmq would block on a full monitor
                    continue
                if event == zmq.EVENT_ACCEPTED:
                    addresses[value] = _peer_of(value)
                    handshaking[value] = None
                elif event in (zmq.EVENT_HANDSHAKE_SUCCEEDED, zmq.EVENT_HANDSHAKE_FAILED_AUTH):
                    handshaking.pop(next(iter(handshaking), None), None)   # the gate reports its own refusals
                elif event & FAILED:       # libzmq reports the connection's end (its descriptor) right after
                    detail = f"ZMTP error 0x{value:x}" if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL else \
                        f"the peer closed the connection during the handshake ({os.strerror(value)})"
                    refused = (server_reason(event, value, self.curve), detail)
                elif event == zmq.EVENT_DISCONNECTED:
                    address = addresses.pop(value, "unknown")
                    unfinished = value in handshaking
                    handshaking.pop(value, None)
                    if refused:
                        self.rejects.add(refused[0], address, refused[1])
                        refused = None
                    elif unfinished:
                        self.rejects.add("handshake_failed", address, "the connection closed before its ZeroMQ "
                                         "handshake ended (not a ZeroMQ peer: random bytes, a port probe?)")
                elif event == zmq.EVENT_MONITOR_STOPPED:
                    return
        except zmq.ZMQError:               # the context is terminating
            return
        finally:
            self.monitor.close(linger=0)

    def stop(self) -> None:
        """Before the socket closes: libzmq's I/O thread blocks on a monitor that nobody reads."""
        try:
            self.sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self.join(timeout=2)


class LinkWatch:
    """Agent side: what one connection attempt's handshake came to (read from the socket's monitor)."""

    def __init__(self, sock: zmq.Socket, curve: bool) -> None:
        self.sock, self.curve = sock, curve
        self.monitor = _monitor(sock, zmq.EVENT_CONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED
                                | zmq.EVENT_HANDSHAKE_FAILED_AUTH | FAILED)
        self.connected = False        # a TCP connection was made: something listens there
        self.handshaken = False       # the coordinator's gate admitted this agent
        self.refusal: str | None = None
        # the other end accepted the connection and closed it without a reason: a coordinator's libzmq refusing a
        # CURVE key, or a forwarder (ssh -L) with no coordinator behind it yet. Not a refusal: a worker waits
        # --unreachable-s for it (saying what it may be), as for a coordinator not there yet
        self.dropped: str | None = None

    def read(self) -> str | None:
        """Take the events that arrived; why the coordinator's end refused this attempt, once known."""
        while self.monitor.poll(0):
            event, value = _event(self.monitor.recv_multipart())
            if event == zmq.EVENT_CONNECTED:
                self.connected = True
            elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.handshaken = True
            elif event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                self.refusal = "the coordinator's gate refused this worker's run secret (a wrong --secret-file?)"
            elif event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and value == MISMATCH:
                self.refusal = ("the coordinator does not use CURVE: drop --curve-server-key" if self.curve else
                                "the coordinator uses CURVE: give --curve-server-key (RUN_DIR/curve/server.key)") \
                    + ", or it is of another version"
            elif event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
                self.refusal = f"the ZeroMQ handshake failed (ZMTP error 0x{value:x}): another version?"
            elif event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL and self.connected:
                self.dropped = ("the other end closed the connection during the handshake: a wrong "
                                "--curve-server-key, or a forwarder with no coordinator behind it yet" if self.curve else
                                "the other end closed the connection during the handshake: a coordinator that uses "
                                "CURVE (give --curve-server-key RUN_DIR/curve/server.key), a forwarder with no "
                                "coordinator behind it yet, or not an autocomp coordinator")
        return self.refusal

    def close(self) -> None:
        """Before the socket closes (see ConnectionWatch.stop)."""
        try:
            self.sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self.monitor.close(linger=0)
