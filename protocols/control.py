"""Control messages of the transport: handshake, liveness, job envelopes.
Generic: a job here is an id, a kind and an opaque payload map; what the
payload means is in protocols/jobs.py."""
from __future__ import annotations

from protocols.envelope import MessageType
from protocols.schema import Field, Schema, validate

MAX_TEXT = 64 * 1024
NAME = 200


HELLO = Schema("hello", (
    Field("role", str, max_len=NAME),
    Field("impl", str, max_len=NAME),
    Field("models", list, max_len=64, items=str),
    Field("target", str, required=False, max_len=NAME),
    Field("capacity", int, min_value=1, max_value=256),
    Field("host", str, max_len=NAME),
    Field("pid", int, min_value=0),
))
WELCOME = Schema("welcome", (
    Field("run_id", str, max_len=NAME),
    Field("heartbeat_s", (int, float), min_value=0.001, max_value=3600),
    Field("dead_after", int, min_value=1, max_value=1000),
))
HEARTBEAT = Schema("heartbeat", ())
JOB = Schema("job", (
    Field("job_id", str, max_len=NAME),
    Field("kind", str, max_len=NAME),
    Field("attempt", int, min_value=1, max_value=1000),
    Field("lease_s", (int, float), min_value=0, max_value=86400),
    Field("payload", dict),
))
RESULT = Schema("result", (
    Field("job_id", str, max_len=NAME),
    Field("kind", str, max_len=NAME),
    Field("attempt", int, min_value=1, max_value=1000),
    Field("ok", bool),
    Field("payload", dict, required=False),
    Field("error", str, required=False, max_len=MAX_TEXT),
    Field("elapsed_s", (int, float), required=False, min_value=0),
))
ACK = Schema("ack", (Field("job_id", str, max_len=NAME),))
CANCEL = Schema("cancel", (Field("job_id", str, max_len=NAME),))
DISCONNECT = Schema("disconnect", (Field("reason", str, max_len=MAX_TEXT),))
ERROR = Schema("error", (Field("code", str, max_len=NAME), Field("message", str, max_len=MAX_TEXT)))

CONTROL = {
    MessageType.HELLO: HELLO, MessageType.WELCOME: WELCOME, MessageType.HEARTBEAT: HEARTBEAT,
    MessageType.JOB: JOB, MessageType.RESULT: RESULT, MessageType.ACK: ACK,
    MessageType.CANCEL: CANCEL, MessageType.DISCONNECT: DISCONNECT, MessageType.ERROR: ERROR,
}


def validate_control(mtype: MessageType, body: dict) -> dict:
    return validate(CONTROL[mtype], body)
