"""Encoding and decoding of signed multipart messages."""
from __future__ import annotations

import itertools
import secrets
from dataclasses import dataclass

from autocomp_zmq.bus.auth import ReplayGuard, Signer
from autocomp_zmq.bus.limits import Rejected
from autocomp_zmq.protocols.control import CONTROL, Control
from autocomp_zmq.protocols.envelope import (MAX_BODY_BYTES, MAX_FRAMES, MAX_HEADER_BYTES, PROTOCOL, Header, MessageType,
                                MINOR_VERSION, ProtocolError, decode, encode, parse_header)


@dataclass
class Message:
    type: MessageType
    sender: str
    body: Control                  # the typed message of `type` (protocols/control.py)
    identity: bytes | None = None  # ROUTER side: the peer it came from


class Codec:
    """Signs outgoing messages with a per-process incarnation and sequence;
    verifies, bounds and de-duplicates incoming ones. Every refusal is a
    Rejected with one of bus.limits.REASONS."""

    def __init__(self, signer: Signer, sender: str, incarnation: int | None = None) -> None:
        self.signer = signer
        self.sender = sender
        self.incarnation = incarnation if incarnation is not None else secrets.randbits(62)
        self._seq = itertools.count(1)
        self.guard = ReplayGuard()

    def encode(self, body: Control) -> list[bytes]:
        """Raises Rejected("oversized") for a body the receiver would refuse: sending it anyway
        would only make the receiving libzmq drop the connection (ZMQ_MAXMSGSIZE)."""
        payload = encode(body)
        if len(payload) > MAX_BODY_BYTES:
            raise Rejected("oversized", f"{body.type.value} body of {len(payload)} bytes exceeds {MAX_BODY_BYTES}")
        header = encode(Header(body.type, self.sender, self.incarnation, next(self._seq), MINOR_VERSION))
        return [PROTOCOL, self.signer.sign([header, payload]), header, payload]

    def decode(self, frames: list[bytes]) -> Message:
        if len(frames) > MAX_FRAMES:
            raise Rejected("too_many_frames", str(len(frames)))
        if len(frames) < MAX_FRAMES:
            raise Rejected("bad_framing", f"{len(frames)} frames")
        if frames[0] != PROTOCOL:
            raise Rejected("bad_protocol", f"{bytes(frames[0][:16])!r}, this side speaks {PROTOCOL!r}")
        if len(frames[2]) > MAX_HEADER_BYTES or len(frames[3]) > MAX_BODY_BYTES:
            raise Rejected("oversized")
        if len(frames[1]) != 32 or not self.signer.verify(frames[1], frames[2:]):
            raise Rejected("bad_signature")
        try:
            header = parse_header(frames[2])
        except ProtocolError as exc:
            raise Rejected("bad_header", str(exc)) from None
        mtype = header.type                   # the header's decoder allowed only known types
        try:
            body = decode(frames[3], CONTROL[mtype])
        except ProtocolError as exc:
            raise Rejected("bad_body", f"{mtype.value}: {exc}") from None
        try:
            self.guard.check(header.sender, header.inc, header.seq)
        except ProtocolError:
            raise Rejected("replayed", header.sender[:80]) from None
        return Message(mtype, header.sender, body)
