"""Job payloads and results: one typed definition each, with its limits.

Roles and job kinds:
    planner   takes "plan"   jobs (PlanRequest   -> PlanResult)
    coder     takes "code"   jobs (CodeRequest   -> CodeResult)
    repairer  takes "repair" jobs (RepairRequest -> CodeResult)
    evaluator takes "eval"   jobs (EvalRequest   -> EvalReport)
A failed job may still carry a Failure (the model calls it paid for).

Payloads travel as msgpack inside a Job/Result control message and are
decoded straight into these types; the run store keeps them as JSON and
converts them back the same way on resume."""
from __future__ import annotations

import hashlib
from typing import Annotated, Any, Union

import msgspec

from autocomp_zmq.protocols.envelope import Name, ProtocolError, Text, convert, decode, encode

ROLES = ("planner", "coder", "repairer", "evaluator")
JOB_KINDS = ("plan", "code", "repair", "eval")
ROLE_OF_KIND = {"plan": "planner", "code": "coder", "repair": "repairer", "eval": "evaluator"}

Code = Annotated[str, msgspec.Meta(max_length=512 * 1024)]
Seed = Annotated[int, msgspec.Meta(ge=0)]
Latency = Annotated[float, msgspec.Meta(ge=0)]


class Payload(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Base of every payload: unknown fields are ignored (minor versions add fields)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (fields left at their defaults omitted), for JSON files and displays."""
        return msgspec.to_builtins(self)


DEFINITION_FILES = 8                   # a problem file and the files it names (reference, starting kernel)
DEFINITION_BYTES = 256 * 1024          # all of them together


class ProblemDefinition(Payload, frozen=True):
    """A problem the user defined in their own file (--problem-file): the file and the files it names, as
    text keyed by their paths relative to it, so that an evaluator on another host needs none of them."""
    path: Name                                                   # the problem file, one of `files`
    files: Annotated[dict[Name, Text], msgspec.Meta(max_length=DEFINITION_FILES)]

    @property
    def digest(self) -> str:
        """A content hash: what evaluators cache a loaded definition under and evaluation ids include."""
        h = hashlib.sha256(self.path.encode() + b"\0")
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + self.files[name].encode() + b"\0")
        return h.hexdigest()


class ProblemRef(Payload, frozen=True):
    """Which problem a job is about, as it travels: a target's problem by name (with its sizes and ISA profile),
    or a user's problem file carried whole. An evaluator loads it into the target's Problem
    (hw_runners/base.py), the one type of that name."""
    target: Name
    name: Name
    family: Name
    dims: Annotated[dict[Name, int], msgspec.Meta(max_length=16)] = {}
    description: Text = ""
    latency_unit: Name = "cycles"      # what the target's latencies count: cycles, us, ...
    isa: Name = ""                     # the target's ISA profile ("" = its default): what kernels may use
    definition: ProblemDefinition | None = None   # a user's problem file (None: a problem the target knows by name)


class MenuOption(Payload, frozen=True):
    id: Name
    title: Annotated[str, msgspec.Meta(max_length=400)]
    description: Text = ""


class Parent(Payload, frozen=True):
    """A kernel to improve, with what is known about it."""
    id: Name
    code: Code
    latency: Latency | None = None
    feedback_text: Text = ""
    metrics: dict[str, Any] = {}


class Plan(Payload, frozen=True):
    text: Text
    option_id: Name                     # "" for a plan that names no option (free text)
    params: dict[str, Any] = {}
    # how a model's answer named its option (agents/workers/llm/parse.py): "option line", "prose", "off menu" (an option
    # of the target not offered in this step) or "free text"; "" for an agent that picks from the menu itself
    choice: Name = ""


Tokens = Annotated[int, msgspec.Meta(ge=0)]
CallText = Annotated[str, msgspec.Meta(max_length=1024 * 1024)]


BILLED_REPORTED, BILLED_NONE, BILLED_UNKNOWN = "reported", "none", "unknown"   # ModelCall.billing


class ModelCall(Payload):
    """One model call, billed or not: what the run store's model_calls table records. Token counts are as
    the provider bills them: tokens_in counts every prompt token (cached ones included), tokens_cached
    those read from the provider's prompt cache, tokens_cache_write those written to it (Anthropic),
    tokens_out every generated token (reasoning included), tokens_reasoning the reasoning part. The
    coordinator prices a call from these counts; `cost` from an agent is kept only for models it cannot price."""
    model: Name
    prompt_hash: Name = ""
    tokens_in: Tokens = 0
    tokens_out: Tokens = 0
    cost: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    latency: Latency = 0.0
    outcome: Name = "ok"
    tokens_cached: Tokens = 0
    tokens_cache_write: Tokens = 0
    tokens_reasoning: Tokens = 0
    max_tokens: Tokens = 0              # the output limit the call asked for
    finish: Name = ""                   # why the answer ended: stop | length | refusal | content_filter | error
    # whose count prices the call: "reported" (the provider's usage), "none" (an error status or a request that
    # never left: not billed), "unknown" (sent, no usable answer back: priced at its worst case, tokens_in and
    # tokens_out then being the bounds of the prompt and of the output limit)
    billing: Name = BILLED_REPORTED
    # the price list the provider applied: "" standard, "flex" or "priority" (OpenAI's service tiers, as the answer
    # reports them), "batch" (a Batch API, half price)
    tier: Name = ""
    # what was said, for inspection (`show --candidate`, `show --calls`): the stable prompt prefix shared by
    # every call of a run (cached by providers), the rest of the prompt, the answer as the model wrote it, and
    # reasoning the provider returned apart from it
    prefix: CallText = ""
    prompt: CallText = ""
    answer: CallText = ""
    reasoning: CallText = ""


Calls = Annotated[list[ModelCall], msgspec.Meta(max_length=64)]


MAX_PROPOSALS = 32          # new menu options one proposal may bring


class PlanRequest(Payload):
    problem: ProblemRef
    parent: Parent
    menu: Annotated[list[MenuOption], msgspec.Meta(max_length=256)]
    model: Name
    iteration: Annotated[int, msgspec.Meta(ge=0)]
    iterations: Annotated[int, msgspec.Meta(ge=1)]
    seed: Seed
    # schedule reuse: a plan recorded for a similar workload, offered as this step's plan; the planner
    # adapts it to this problem (the menu then holds just its option)
    prior: Plan | None = None
    prior_problem: ProblemRef | None = None   # the workload the prior plan was recorded on
    # search steps since the best kernel last improved: a planner may take bigger steps when its small ones
    # have all been tried (the heuristic then combines two changes)
    stale: Annotated[int, msgspec.Meta(ge=0)] = 0
    # a translation iteration: the problem's reference to write the kernel from (the menu: translation strategies)
    reference: Text = ""
    # model-proposed options: propose up to this many new menu options for the parent instead of a plan
    propose: Annotated[int, msgspec.Meta(ge=0, le=MAX_PROPOSALS)] = 0


class CodeRequest(Payload):
    """Implement `plan` on the parent. Without a plan (one-phase mode) the coder also chooses: it picks one of
    `menu`, says how it applies it and writes the kernel in one answer, and returns that plan with the code."""
    problem: ProblemRef
    parent: Parent
    model: Name
    seed: Seed
    plan: Plan | None = None
    menu: Annotated[list[MenuOption], msgspec.Meta(max_length=256)] = []   # one-phase: the options offered
    iteration: Annotated[int, msgspec.Meta(ge=0)] = 0                    # one-phase: the step, for the prompt
    iterations: Annotated[int, msgspec.Meta(ge=0)] = 0
    edits: bool = False                 # answer with edits to the parent's code, not the whole kernel
    reference: Text = ""                # a translation iteration: the problem's reference the kernel is written from


class RepairRequest(Payload):
    problem: ProblemRef
    plan: Plan
    code: Code
    error: Text
    model: Name
    seed: Seed
    stdout: Text = ""


class EvalRequest(Payload):
    """Evaluate `code`. `full`: compare every output element, also where the target checks a sample (a candidate
    about to become a parent or the run's result; see EvalReport.sampled)."""
    problem: ProblemRef
    code: Code
    seed: Seed
    full: bool = False


class PlanResult(Payload):
    """A plan; or, for a request that asked for proposals (PlanRequest.propose), the new menu options proposed."""
    model: Name
    plan: Plan | None = None
    calls: Calls = []
    proposals: Annotated[list[MenuOption], msgspec.Meta(max_length=MAX_PROPOSALS)] = []


class CodeResult(Payload):
    code: Code
    model: Name
    calls: Calls = []
    plan: Plan | None = None            # one-phase mode: the plan the same answer chose and described


class EvalReport(Payload):
    """Outcome of evaluating one candidate. `correct` is False whenever anything failed; `error` then
    says why in words fit for a repair prompt. `latency` is in `latency_unit` (cycles, us, ...)."""
    correct: bool
    latency: Latency | None = None
    latency_unit: Name = "cycles"
    utilization: float | None = None
    roofline_fraction: float | None = None
    bound: Name | None = None
    error: Text | None = None
    error_kind: Name | None = None   # policy | compile | crash | timeout | limit | wrong_result | sandbox | lost
    feedback: dict[str, Any] = {}
    feedback_text: Text = ""
    stdout: Text = ""
    stderr: Text = ""
    wall_s: float = 0.0
    sandbox: Annotated[list[Text], msgspec.Meta(max_length=64)] = []
    calls: Calls = []
    # True when `correct` rests on a sample of the output elements (trainium-sim's value check on large outputs):
    # a search checks such a kernel in full (EvalRequest.full) before it becomes a parent or its result
    sampled: bool = False

    @classmethod
    def failure(cls, kind: str, message: str, **extra: Any) -> "EvalReport":
        return cls(correct=False, error=message, error_kind=kind, **extra)


class Failure(Payload):
    """The payload of a failed job: the calls it paid for before failing; `retry` when another attempt may well
    succeed (the answer was lost to the network after the request was sent): the coordinator sends the job
    again if the cost cap has room for its worst case once more."""
    calls: Calls = []
    retry: bool = False


Request = Union[PlanRequest, CodeRequest, RepairRequest, EvalRequest]
Answer = Union[PlanResult, CodeResult, EvalReport]
# "check": an evaluation on every output element before a kernel becomes a parent (agents/engine/fullcheck.py), sent to
# evaluators as an "eval" job and kept under its own kind in the run store
REQUESTS: dict[str, type] = {"plan": PlanRequest, "code": CodeRequest, "repair": RepairRequest, "eval": EvalRequest,
                             "check": EvalRequest}
RESULTS: dict[str, type] = {"plan": PlanResult, "code": CodeResult, "repair": CodeResult, "eval": EvalReport,
                            "check": EvalReport}


def _of(table: dict[str, type], kind: str) -> type:
    try:
        return table[kind]
    except KeyError:
        raise ProtocolError(f"unknown job kind {kind!r}") from None


def raw(payload: Payload) -> msgspec.Raw:
    """A payload as the opaque bytes a Job or Result carries."""
    return msgspec.Raw(encode(payload))


def decode_request(kind: str, data: bytes | msgspec.Raw) -> Request:
    return decode(bytes(data), _of(REQUESTS, kind))


def decode_result(kind: str, data: bytes | msgspec.Raw) -> Answer:
    return decode(bytes(data), _of(RESULTS, kind))


def decode_failure(data: bytes | msgspec.Raw | None) -> Failure:
    data = bytes(data or b"")
    return decode(data, Failure) if data not in (b"", b"\xc0") else Failure()


def to_json(payload: Payload) -> str:
    return msgspec.json.encode(payload).decode()


def stored_result(kind: str, ok: bool, text: str | None) -> Answer | Failure | None:
    """A result the run store kept as JSON, back in its type (a Failure when the job failed)."""
    if text is None:
        return None
    try:
        return convert(msgspec.json.decode(text), _of(RESULTS, kind) if ok else Failure)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ProtocolError(f"stored {kind} result: {exc}") from None
