"""Control messages of the transport: handshake, liveness, job envelopes.

Generic: a job here is an id, a kind and an opaque payload (msgpack bytes,
carried untouched by the bus); what a payload means, and its decoding into a
typed request or result, is in protocols/jobs.py."""
from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from autocomp_zmq.protocols.envelope import Name, MessageType, Text

Attempt = Annotated[int, msgspec.Meta(ge=1, le=1000)]
NO_PAYLOAD = msgspec.Raw(b"\xc0")   # msgpack nil: a result with nothing attached (Raw cannot be optional)


class Control(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Base of every control message; `type` is the header's message type."""
    type: ClassVar[MessageType]


class Hello(Control):
    type = MessageType.HELLO
    role: Name
    impl: Name
    models: Annotated[list[Name], msgspec.Meta(max_length=64)]
    capacity: Annotated[int, msgspec.Meta(ge=1, le=256)]
    host: Name
    pid: Annotated[int, msgspec.Meta(ge=0)]
    target: Name | None = None


class Welcome(Control):
    type = MessageType.WELCOME
    run_id: Name
    heartbeat_s: Annotated[float, msgspec.Meta(ge=0.001, le=3600)]
    dead_after: Annotated[int, msgspec.Meta(ge=1, le=1000)]


class Heartbeat(Control):
    type = MessageType.HEARTBEAT


MAX_LEASE_S = 7 * 86400.0   # the longest a worker may hold a job (a Batch API call may wait a day or more)


class Job(Control):
    type = MessageType.JOB
    job_id: Name
    kind: Name
    attempt: Attempt
    lease_s: Annotated[float, msgspec.Meta(ge=0, le=MAX_LEASE_S)]
    payload: msgspec.Raw


class Result(Control):
    type = MessageType.RESULT
    job_id: Name
    kind: Name
    attempt: Attempt
    ok: bool
    payload: msgspec.Raw = NO_PAYLOAD
    error: Text | None = None
    elapsed_s: Annotated[float, msgspec.Meta(ge=0)] | None = None


class Ack(Control):
    type = MessageType.ACK
    job_id: Name


class Cancel(Control):
    type = MessageType.CANCEL
    job_id: Name


class Disconnect(Control):
    type = MessageType.DISCONNECT
    reason: Text = ""


class Error(Control):
    type = MessageType.ERROR
    code: Name
    message: Text = ""


CONTROL: dict[MessageType, type[Control]] = {cls.type: cls for cls in (
    Hello, Welcome, Heartbeat, Job, Result, Ack, Cancel, Disconnect, Error)}
