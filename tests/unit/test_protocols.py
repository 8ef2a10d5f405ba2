"""The message vocabulary decodes straight into its types and rejects malformed and oversized
input with an error that names the field."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgpack
import pytest

from autocomp_zmq.protocols.control import Ack, Hello, Job, Result
from autocomp_zmq.protocols.envelope import MAX_HEADER_BYTES, ProtocolError, decode, encode, parse_header
from autocomp_zmq.protocols.jobs import (EvalReport, EvalRequest, Failure, ModelCall, Plan, PlanResult, ProblemRef, decode_failure,
                            decode_request, decode_result, raw, stored_result, to_json)

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = {"target": "gemmini-sim", "name": "gemm-256x256x256", "family": "gemm", "dims": {"I": 256},
           "description": "d"}


def test_eval_request_round_trips_inside_a_job_message():
    req = EvalRequest(problem=ProblemRef(**PROBLEM), code="void solution() {}", seed=3)
    job = decode(encode(Job(job_id="j", kind="eval", attempt=1, lease_s=5.0, payload=raw(req))), Job)
    assert decode_request("eval", job.payload) == req
    assert decode_request("eval", job.payload).problem.latency_unit == "cycles"


@pytest.mark.parametrize("payload, message", [
    ({"problem": PROBLEM, "code": "x"}, "missing required field `seed`"),
    ({"problem": PROBLEM, "code": 5, "seed": 1}, r"Expected `str`, got `int` - at `\$.code`"),
    ({"problem": PROBLEM, "code": "x", "seed": True}, r"Expected `int`, got `bool` - at `\$.seed`"),
    ({"problem": PROBLEM, "code": "x", "seed": -1}, r"Expected `int` >= 0 - at `\$.seed`"),
    ({"problem": {**PROBLEM, "name": 3}, "code": "x", "seed": 1}, r"at `\$.problem.name`"),
    ({"problem": {**PROBLEM, "name": "n" * 201}, "code": "x", "seed": 1}, r"length <= 200 - at `\$.problem.name`"),
    ({"problem": PROBLEM, "code": "x" * (600 * 1024), "seed": 1}, r"length <= 524288 - at `\$.code`"),
    ({"problem": {**PROBLEM, "dims": {f"d{i}": i for i in range(17)}}, "code": "x", "seed": 1}, "length <= 16"),
])
def test_bad_eval_requests_are_rejected_naming_the_field(payload, message):
    with pytest.raises(ProtocolError, match=message):
        decode_request("eval", encode(payload))


def test_unknown_job_kind_and_bad_results():
    with pytest.raises(ProtocolError, match="unknown job kind"):
        decode_request("compile", encode({}))
    with pytest.raises(ProtocolError, match="missing required field `option_id`"):
        decode_result("plan", encode({"plan": {"text": "t"}, "model": "m"}))
    report = decode_result("eval", encode({"correct": False, "error": "boom", "extra": [1, 2]}))
    assert isinstance(report, EvalReport) and report.error == "boom" and report.latency is None


def test_unknown_fields_are_ignored_for_forward_compatibility():
    assert decode(encode({"job_id": "j", "extra_from_a_newer_minor": {"x": 1}}), Ack) == Ack(job_id="j")


def test_results_and_failures_carry_their_model_calls():
    answer = PlanResult(plan=Plan(text="tile it", option_id="tiling"), model="m",
                        calls=[ModelCall(model="m", tokens_in=5, cost=0.25)])
    result = decode(encode(Result(job_id="j", kind="plan", attempt=1, ok=True, payload=raw(answer))), Result)
    assert decode_result("plan", result.payload).calls[0].cost == 0.25
    assert decode_failure(None) == Failure()
    assert decode_failure(raw(Failure(calls=answer.calls))).calls[0].tokens_in == 5


def test_stored_results_come_back_in_their_type():
    report = EvalReport(correct=True, latency=1234.0, feedback={"bound": "compute"})
    assert stored_result("eval", True, to_json(report)) == report
    assert stored_result("eval", False, to_json(Failure())) == Failure()
    with pytest.raises(ProtocolError, match="stored eval result"):
        stored_result("eval", True, '{"correct": "yes"}')


@pytest.mark.parametrize("data, message", [
    (msgpack.packb([1, 2]), "Expected `object`, got `array`"),
    (b"\xc1", "invalid"),
    (msgpack.packb({"role": "r", "impl": "i", "models": [], "capacity": 1, "host": "h", "pid": 1}) + b"x",
     "trailing"),
    (msgpack.packb({"role": "r", "impl": "i", "models": [], "capacity": 0, "host": "h", "pid": 1}),
     r"Expected `int` >= 1 - at `\$.capacity`"),
    (msgpack.packb({"role": "r", "impl": "i", "models": [], "capacity": 1, "host": "h", "pid": 1,
                    "target": msgpack.ExtType(5, b"z")}), "at `\\$.target`"),
])
def test_control_messages_accept_only_their_shape(data, message):
    with pytest.raises(ProtocolError, match=message):
        decode(data, Hello)


def test_oversized_header_is_rejected():
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        parse_header(msgpack.packb({"type": "ack", "sender": "s" * MAX_HEADER_BYTES, "inc": 1, "seq": 1}))
    with pytest.raises(ProtocolError, match="Invalid enum value 'shout'"):
        parse_header(msgpack.packb({"type": "shout", "sender": "s", "inc": 1, "seq": 1}))


def test_extension_values_are_refused_even_in_free_form_fields():
    evil = msgpack.packb({"correct": True, "latency": 1.0, "feedback": {"x": msgpack.ExtType(1, b"evil")}})
    with pytest.raises(ProtocolError, match="extension type 1 is not accepted"):
        decode_result("eval", evil)


RACE = """
import sys, threading
sys.setswitchinterval(1e-6)              # a thread switch between any two bytecodes
from autocomp_zmq.protocols.envelope import encode
from autocomp_zmq.protocols.jobs import decode_request, decode_result
plan = encode({"problem": {"target": "t", "name": "n", "family": "f"}, "parent": {"id": "p", "code": "c"},
               "menu": [{"id": "a", "title": "b"}], "model": "m", "iteration": 1, "iterations": 2, "seed": 3})
res = encode({"plan": {"text": "t", "option_id": "a"}, "model": "m", "calls": [{"model": "m"}]})
barrier = threading.Barrier(16)
def work(i):
    barrier.wait()
    decode_request("plan", plan) if i % 2 else decode_result("plan", res)
threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
print("ok")
"""


@pytest.mark.system     # a fresh interpreter: the race needs types no one has decoded yet
def test_threads_decoding_a_type_for_the_first_time_together_do_not_crash():
    # a worker's job threads decode their first requests at once; msgspec builds a type's information
    # lazily, and unguarded concurrent builds segfaulted this script on every run
    out = subprocess.run([sys.executable, "-c", RACE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stderr[-2000:])
