"""Encoding and decoding of signed multipart messages."""
from __future__ import annotations

import itertools
import secrets
from dataclasses import dataclass, field

from bus.auth import ReplayGuard, Signer
from protocols.control import validate_control
from protocols.envelope import (MAX_BLOB_BYTES, MAX_BLOBS, MAX_BODY_BYTES, PROTOCOL, MessageType,
                                MINOR_VERSION, pack, parse_header, unpack)
from protocols.schema import ProtocolError


@dataclass
class Message:
    type: MessageType
    sender: str
    body: dict
    blobs: list[bytes] = field(default_factory=list)
    identity: bytes | None = None  # ROUTER side: the peer it came from


class Codec:
    """Signs outgoing messages with a per-process incarnation and sequence;
    verifies, bounds and de-duplicates incoming ones."""

    def __init__(self, signer: Signer, sender: str, incarnation: int | None = None) -> None:
        self.signer = signer
        self.sender = sender
        self.incarnation = incarnation if incarnation is not None else secrets.randbits(62)
        self._seq = itertools.count(1)
        self.guard = ReplayGuard()

    def encode(self, mtype: MessageType, body: dict, blobs: list[bytes] = ()) -> list[bytes]:
        header = pack({"type": mtype.value, "sender": self.sender, "inc": self.incarnation,
                       "seq": next(self._seq), "minor": MINOR_VERSION})
        payload = pack(body)
        return [PROTOCOL, self.signer.sign([header, payload, *blobs]), header, payload, *blobs]

    def decode(self, frames: list[bytes]) -> Message:
        if len(frames) < 4:
            raise ProtocolError(f"expected at least 4 frames, got {len(frames)}")
        if len(frames) > 4 + MAX_BLOBS:
            raise ProtocolError(f"too many frames ({len(frames)})")
        if frames[0] != PROTOCOL:
            raise ProtocolError(f"unsupported protocol {bytes(frames[0][:16])!r} (this side speaks {PROTOCOL!r})")
        if len(frames[3]) > MAX_BODY_BYTES or any(len(b) > MAX_BLOB_BYTES for b in frames[4:]):
            raise ProtocolError("oversized message")
        if len(frames[1]) != 32 or not self.signer.verify(frames[1], frames[2:]):
            raise ProtocolError("bad or missing signature")
        header = parse_header(frames[2])
        mtype = MessageType(header["type"])
        body = validate_control(mtype, unpack(frames[3]))
        self.guard.check(header["sender"], header["inc"], header["seq"])
        return Message(mtype, header["sender"], body, list(frames[4:]))
