"""Framing shared by every process.

A message is the frame list [PROTOCOL, signature, header, body], exactly four
frames (a ROUTER sees the peer identity before it). Header and body are msgpack
maps; the signature is HMAC-SHA256 over every frame after it. The header names the
message type and the sender's (incarnation, sequence) pair used against
replays. Minor protocol versions only add fields; a major change changes
PROTOCOL, and peers with another PROTOCOL are rejected.
"""
from __future__ import annotations

import enum
from typing import Any

import msgpack

from protocols.schema import Field, ProtocolError, Schema, validate

PROTOCOL = b"AC1"
MINOR_VERSION = 0

MAX_HEADER_BYTES = 4 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024
# No binary side frames ("blobs"): nothing used them, and every frame a message may carry
# is memory a peer can make the receiver hold before the signature is checked.
MAX_FRAMES = 4
# The largest legitimate frame is a body: the socket-level ZMQ_MAXMSGSIZE (which libzmq
# applies per frame, before allocating it) drops a connection that announces a bigger one.
MAX_FRAME_BYTES = MAX_BODY_BYTES
MAX_MESSAGE_BYTES = len(PROTOCOL) + 32 + MAX_HEADER_BYTES + MAX_BODY_BYTES


class MessageType(str, enum.Enum):
    HELLO = "hello"
    WELCOME = "welcome"
    HEARTBEAT = "heartbeat"
    JOB = "job"
    RESULT = "result"
    ACK = "ack"
    CANCEL = "cancel"
    DISCONNECT = "disconnect"
    ERROR = "error"


HEADER = Schema("header", (
    Field("type", str, choices=tuple(t.value for t in MessageType)),
    Field("sender", str, max_len=200),
    Field("inc", int, min_value=0, max_value=2**63),
    Field("seq", int, min_value=0, max_value=2**63),
    Field("minor", int, required=False, min_value=0, max_value=1000),
))


def pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def unpack(data: bytes, limit: int = MAX_BODY_BYTES) -> dict:
    """Decode one msgpack map with hard limits; never anything but plain data."""
    if len(data) > limit:
        raise ProtocolError(f"frame of {len(data)} bytes exceeds the limit of {limit}")
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True,
                              max_str_len=limit, max_bin_len=limit,
                              max_array_len=100_000, max_map_len=10_000, max_ext_len=0)
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, TypeError) as exc:
        raise ProtocolError(f"undecodable frame: {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"expected a map, got {type(obj).__name__}")
    return obj


def parse_header(data: bytes) -> dict:
    return validate(HEADER, unpack(data, MAX_HEADER_BYTES))
