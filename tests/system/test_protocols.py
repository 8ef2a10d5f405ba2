"""The message vocabulary rejects malformed and oversized input with a clear error."""
from __future__ import annotations

import msgpack
import pytest

from protocols.control import validate_control
from protocols.envelope import MAX_HEADER_BYTES, MessageType, pack, parse_header, unpack
from protocols.jobs import validate_request, validate_result
from protocols.schema import ProtocolError

PROBLEM = {"target": "gemmini-sim", "name": "gemm-256x256x256", "family": "gemm", "dims": {"I": 256},
           "description": "d"}


def test_eval_job_round_trips_through_msgpack():
    job = {"problem": PROBLEM, "code": "void solution() {}", "seed": 3}
    assert validate_request("eval", unpack(pack(job))) == job


@pytest.mark.parametrize("payload, message", [
    ({"problem": PROBLEM, "code": "x"}, "missing field 'seed'"),
    ({"problem": PROBLEM, "code": 5, "seed": 1}, "expected str, got int"),
    ({"problem": PROBLEM, "code": "x", "seed": True}, "expected int, got bool"),
    ({"problem": PROBLEM, "code": "x", "seed": -1}, "< 0"),
    ({"problem": {**PROBLEM, "name": 3}, "code": "x", "seed": 1}, "problem.name"),
    ({"problem": PROBLEM, "code": "x" * (600 * 1024), "seed": 1}, "too long"),
])
def test_bad_eval_jobs_are_rejected(payload, message):
    with pytest.raises(ProtocolError, match=message):
        validate_request("eval", payload)


def test_unknown_job_kind_and_bad_results():
    with pytest.raises(ProtocolError, match="unknown job kind"):
        validate_request("compile", {})
    with pytest.raises(ProtocolError, match="missing field .option_id."):
        validate_result("plan", {"plan": {"text": "t"}, "model": "m"})
    assert validate_result("eval", {"correct": False, "error": "boom", "extra": [1, 2]})["error"] == "boom"


def test_unknown_fields_are_ignored_for_forward_compatibility():
    body = {"job_id": "j", "extra_from_a_newer_minor": {"x": 1}}
    assert validate_control(MessageType.ACK, body) is body


@pytest.mark.parametrize("data, message", [
    (msgpack.packb([1, 2]), "expected a map"),
    (b"\xc1", "undecodable"),
    (msgpack.packb({1: "int key"}), "undecodable"),
    (msgpack.packb({"x": msgpack.ExtType(5, b"z")}), "undecodable"),
    (msgpack.packb({"a": 1}) + b"trailing", "undecodable"),
])
def test_unpack_accepts_only_plain_maps(data, message):
    with pytest.raises(ProtocolError, match=message):
        unpack(data)


def test_oversized_header_is_rejected():
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        parse_header(msgpack.packb({"type": "ack", "sender": "s" * MAX_HEADER_BYTES, "inc": 1, "seq": 1}))
