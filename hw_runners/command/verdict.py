"""The one JSON line a command prints on stdout, and how it becomes an evaluation report.

    {"correct": true, "latency": 812.4, "unit": "us", "noise": {"reps": 12, "mad": 3.1, "rel_ci": 0.008}}
    {"correct": false, "error": "output[17] = 3.5, expected 1.25", "error_kind": "wrong_result"}

Anything else (no line, several lines, not JSON, a missing or mistyped field, an unknown field, a unit
other than the target's, a crash, a timeout) is the command's fault, never a verdict on the kernel: it
becomes a failure whose message names what was wrong and which keeps the command's whole stdout and
stderr (up to the report's limits), so nothing the command said is lost."""
from __future__ import annotations

import math
from typing import Any, Literal

import msgspec

from autocomp_zmq.hw_runners.base import EvalResult
from autocomp_zmq.protocols.envelope import convert

# what a command may call a candidate's failure (the product's own kinds, protocols/jobs.py EvalReport)
KernelFault = Literal["compile", "crash", "timeout", "limit", "wrong_result", "sandbox", "policy"]


class CommandVerdict(msgspec.Struct, forbid_unknown_fields=True):
    correct: bool
    latency: float | None = None       # required when correct: positive and finite, in `unit`
    unit: str | None = None            # must be the target's latency_unit
    noise: dict[str, Any] = {}         # how the latency was measured: reps, median, mad, rel_ci, ...
    error: str = ""                    # when not correct: why, in words fit for a repair prompt
    error_kind: KernelFault = "wrong_result"
    feedback: dict[str, Any] = {}      # numbers for the planners (achieved GFLOP/s, ...)
    feedback_text: str = ""            # the same in words


class MalformedVerdict(ValueError):
    pass


def read_verdict(stdout: str, unit: str) -> CommandVerdict:
    """The verdict of a command's stdout; MalformedVerdict says, in one sentence, what is wrong with it."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise MalformedVerdict("it printed nothing on stdout (it must print one JSON line)")
    if len(lines) > 1:
        raise MalformedVerdict(f"it printed {len(lines)} lines on stdout (it must print exactly one JSON line; "
                               "anything else belongs on stderr)")
    try:
        verdict = convert(msgspec.json.decode(lines[0].encode()), CommandVerdict)   # safe from any thread
    except msgspec.ValidationError as exc:
        raise MalformedVerdict(f"its JSON line does not follow the schema: {exc}") from None
    except msgspec.DecodeError as exc:
        raise MalformedVerdict(f"its stdout is not a JSON line: {exc}") from None
    if verdict.correct:
        if verdict.latency is None or not math.isfinite(verdict.latency) or verdict.latency <= 0:
            raise MalformedVerdict(f"it said correct with latency {verdict.latency!r} (a positive, finite number "
                                   "is required)")
        if verdict.unit != unit:
            raise MalformedVerdict(f"its latency is in {verdict.unit!r}; the target's unit is {unit!r}")
    return verdict


def to_report(verdict: CommandVerdict, unit: str, stderr: str) -> EvalResult:
    feedback = {**verdict.feedback, **({"noise": verdict.noise} if verdict.noise else {})}
    if not verdict.correct:
        return EvalResult.failure(verdict.error_kind, verdict.error or "the command judged the kernel incorrect "
                                  "without saying why", latency_unit=unit, feedback=feedback,
                                  feedback_text=verdict.feedback_text, stderr=stderr)
    return EvalResult(correct=True, latency=verdict.latency, latency_unit=unit, feedback=feedback,
                      feedback_text=verdict.feedback_text, stderr=stderr)


def command_fault(what: str, stdout: str, stderr: str, unit: str, kind: str = "setup") -> EvalResult:
    """A failure that is the command's, not the kernel's: named so, with everything the command printed."""
    return EvalResult.failure(kind, f"the evaluation command {what}; this is a fault of the command, not "
                              f"of the kernel.\nstdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}",
                              latency_unit=unit, stdout=stdout, stderr=stderr)
