"""Framing shared by every process.

A message is the frame list [PROTOCOL, signature, header, body], exactly four
frames (a ROUTER sees the peer identity before it). Header and body are msgpack
maps decoded straight into the typed messages of protocols/control.py; the
signature is HMAC-SHA256 over every frame after it. The header names the
message type and the sender's (incarnation, sequence) pair used against
replays. Minor protocol versions only add fields (decoders ignore fields they
do not know); a major change changes PROTOCOL, and peers with another PROTOCOL
are rejected.
"""
from __future__ import annotations

import enum
import threading
from typing import Annotated, Any, TypeVar

import msgspec

PROTOCOL = b"AC2"   # AC2: typed payloads, results carry latency + latency_unit (AC1 had cycles)
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

# Field types with their limits, declared once and used by every message.
Name = Annotated[str, msgspec.Meta(max_length=200)]
Text = Annotated[str, msgspec.Meta(max_length=64 * 1024)]
Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class ProtocolError(ValueError):
    """A message that is malformed, oversized, unsigned or otherwise unacceptable."""


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


class Header(msgspec.Struct, frozen=True):
    type: MessageType
    sender: Name
    inc: Count
    seq: Count
    minor: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 0


T = TypeVar("T")


def encode(obj: Any) -> bytes:
    return msgspec.msgpack.encode(obj)


def _no_extensions(code: int, data: memoryview) -> Any:
    # plain data only: an extension value in a free-form field (feedback, params) would reach the run
    # store and the displays as an object nothing can encode
    raise msgspec.ValidationError(f"msgpack extension type {code} is not accepted")


# msgspec completes a Struct's type information lazily, on the type's first decode or conversion, and two threads
# doing that at once can crash the process (a worker's job threads handle their first requests together; under
# load the interpreter switches threads in the middle of it): every first use runs under this one lock
_type_info_lock = threading.Lock()
_decoders: dict[Any, msgspec.msgpack.Decoder] = {}
_converted: set[Any] = set()


def decoder(type: Any) -> msgspec.msgpack.Decoder:
    """The decoder of a type, built once (under _type_info_lock)."""
    found = _decoders.get(type)
    if found is None:
        with _type_info_lock:
            found = _decoders.get(type) or _decoders.setdefault(type, msgspec.msgpack.Decoder(type, ext_hook=_no_extensions))
    return found


def convert(obj: Any, type: type[T], **options: Any) -> T:
    """msgspec.convert, safe from any thread: a type's first conversion runs under _type_info_lock (a plain
    msgspec.convert of a Struct's first use from several threads at once segfaults msgspec 0.22)."""
    if type in _converted:
        return msgspec.convert(obj, type, **options)
    with _type_info_lock:
        out = msgspec.convert(obj, type, **options)
        _converted.add(type)
    return out


def decode(data: bytes | memoryview, type: type[T], limit: int = MAX_BODY_BYTES) -> T:
    """Decode one msgpack frame straight into `type`, within a size limit; any fault is a ProtocolError
    that names the offending field (e.g. "Expected `str` of length <= 200 - at `$.problem.name`")."""
    if len(data) > limit:
        raise ProtocolError(f"frame of {len(data)} bytes exceeds the limit of {limit}")
    try:
        return decoder(type).decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ProtocolError(str(exc)) from None


def parse_header(data: bytes) -> Header:
    return decode(data, Header, MAX_HEADER_BYTES)
