"""Bodies of every message type and of every job payload.

Roles and job kinds:
    planner   takes "plan"   jobs (PlanRequest  -> Plan)
    coder     takes "code"   jobs (CodeRequest  -> Code)
    repairer  takes "repair" jobs (RepairRequest -> Code)
    evaluator takes "eval"   jobs (EvalJob      -> EvalReport)
A Candidate is a piece of code plus what is known about it.
"""
from __future__ import annotations

from protocols.schema import Field, ProtocolError, Schema, validate

ROLES = ("planner", "coder", "repairer", "evaluator")
JOB_KINDS = ("plan", "code", "repair", "eval")
ROLE_OF_KIND = {"plan": "planner", "code": "coder", "repair": "repairer", "eval": "evaluator"}

MAX_CODE = 512 * 1024
MAX_TEXT = 64 * 1024
NAME = 200

# -- job payloads ---------------------------------------------------------------
PROBLEM = Schema("problem", (
    Field("target", str, max_len=NAME),
    Field("name", str, max_len=NAME),
    Field("family", str, max_len=NAME),
    Field("dims", dict, max_len=16),
    Field("description", str, max_len=MAX_TEXT),
))
MENU_OPTION = Schema("menu_option", (
    Field("id", str, max_len=NAME),
    Field("title", str, max_len=NAME * 2),
    Field("description", str, max_len=MAX_TEXT),
))
CANDIDATE = Schema("candidate", (
    Field("id", str, max_len=NAME),
    Field("code", str, max_len=MAX_CODE),
    Field("cycles", (int, float), required=False),
    Field("feedback_text", str, required=False, max_len=MAX_TEXT),
    Field("metrics", dict, required=False),
))
PLAN = Schema("plan", (
    Field("text", str, max_len=MAX_TEXT),
    Field("option_id", str, max_len=NAME),
    Field("params", dict, required=False),
))
PLAN_REQUEST = Schema("plan_request", (
    Field("problem", dict, schema=PROBLEM),
    Field("parent", dict, schema=CANDIDATE),
    Field("menu", list, max_len=256, items=MENU_OPTION),
    Field("model", str, max_len=NAME),
    Field("iteration", int, min_value=0),
    Field("iterations", int, min_value=1),
    Field("seed", int, min_value=0),
))
CODE_REQUEST = Schema("code_request", (
    Field("problem", dict, schema=PROBLEM),
    Field("parent", dict, schema=CANDIDATE),
    Field("plan", dict, schema=PLAN),
    Field("model", str, max_len=NAME),
    Field("seed", int, min_value=0),
))
REPAIR_REQUEST = Schema("repair_request", (
    Field("problem", dict, schema=PROBLEM),
    Field("plan", dict, schema=PLAN),
    Field("code", str, max_len=MAX_CODE),
    Field("error", str, max_len=MAX_TEXT),
    Field("stdout", str, required=False, max_len=MAX_TEXT),
    Field("model", str, max_len=NAME),
    Field("seed", int, min_value=0),
))
EVAL_JOB = Schema("eval_job", (
    Field("problem", dict, schema=PROBLEM),
    Field("code", str, max_len=MAX_CODE),
    Field("seed", int, min_value=0),
))
PLAN_RESULT = Schema("plan_result", (Field("plan", dict, schema=PLAN), Field("model", str, max_len=NAME)))
CODE_RESULT = Schema("code_result", (Field("code", str, max_len=MAX_CODE), Field("model", str, max_len=NAME)))
EVAL_RESULT = Schema("eval_result", (
    Field("correct", bool),
    Field("cycles", (int, float), required=False),
    Field("utilization", (int, float), required=False),
    Field("roofline_fraction", (int, float), required=False),
    Field("error", str, required=False, max_len=MAX_TEXT),
    Field("error_kind", str, required=False, max_len=NAME),
    Field("feedback", dict, required=False),
    Field("feedback_text", str, required=False, max_len=MAX_TEXT),
    Field("stdout", str, required=False, max_len=MAX_TEXT),
))

REQUESTS = {"plan": PLAN_REQUEST, "code": CODE_REQUEST, "repair": REPAIR_REQUEST, "eval": EVAL_JOB}
RESULTS = {"plan": PLAN_RESULT, "code": CODE_RESULT, "repair": CODE_RESULT, "eval": EVAL_RESULT}


def validate_request(kind: str, payload: dict) -> dict:
    if kind not in REQUESTS:
        raise ProtocolError(f"unknown job kind {kind!r}")
    return validate(REQUESTS[kind], payload)


def validate_result(kind: str, payload: dict) -> dict:
    if kind not in RESULTS:
        raise ProtocolError(f"unknown job kind {kind!r}")
    return validate(RESULTS[kind], payload)
