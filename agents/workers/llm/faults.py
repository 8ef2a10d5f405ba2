"""What went wrong with one model call, as far as the bill is concerned, and how long to wait before the next.

The SDKs' own retries are off (agents/workers/llm/providers.py): a retry inside the SDK is a paid attempt nobody sees.
Instead every failed attempt is classified here and recorded by the agent:

- not billed: the provider answered with an error status (429 rate limit, 5xx, Anthropic's 529 overloaded) or the
  request never left (connection refused, DNS, connect timeout). Retried in the agent after a wait: the
  provider's Retry-After when it sends one, else exponential backoff with jitter.
- billing unknown: the request was sent and no usable answer came back (a read timeout, a connection reset
  mid-answer, a 200 whose body is not JSON or has no usage). The model may have generated, and the provider
  billed, the whole answer; the attempt is charged at its worst case and the job goes back to the coordinator,
  which retries it only if the cost cap still has room for another worst case.
- final: an error that a retry would repeat (400, 401, 403, 404, ...): the job fails with it.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass

from autocomp_zmq.agents.workers.llm.specs import MAX_WAIT_S
from autocomp_zmq.protocols.jobs import BILLED_NONE, BILLED_UNKNOWN

RETRIED_STATUSES = {408, 409, 429}                 # and every 5xx (Anthropic's 529 among them)
# causes (by class name: the SDKs wrap httpx or its successors, whose classes this module need not import) that mean
# nothing reached the model: no connection, none free in the pool, a body the server never read whole
NOT_SENT = {"ConnectError", "ConnectTimeout", "PoolTimeout", "WriteTimeout", "WriteError", "ConnectionRefusedError",
            "gaierror", "UnsupportedProtocol", "InvalidURL", "LocalProtocolError", "EndpointConnectionError"}
LOST_MID_ANSWER = {"APIConnectionError", "TransportError", "NetworkError", "ProtocolError", "ConnectionClosedError"}


class UnbilledAnswer(ValueError):
    """A 200 whose body lacks what a bill needs (usage): the provider's count of the call is unknown."""


class BatchError(Exception):
    """A request a Batch API did not run (it errored, or the batch expired or was cancelled first): not billed.
    `retry`: whether sending it again may succeed."""

    def __init__(self, words: str, retry: bool) -> None:
        super().__init__(words)
        self.words, self.retry = words, retry


@dataclass(frozen=True)
class Fault:
    words: str                  # what happened, for the call's outcome ("rate limited (429)", "read timeout")
    billing: str                # BILLED_NONE or BILLED_UNKNOWN
    retry: bool                 # worth another attempt (in the agent when unbilled, by the coordinator otherwise)
    retry_after: float | None = None   # the provider's own wait, seconds


def classify(exc: BaseException) -> Fault:
    """The fault behind an exception raised by a provider's SDK (with retries off)."""
    if isinstance(exc, BatchError):
        return Fault(exc.words, BILLED_NONE, exc.retry)
    status = status_of(exc)
    if status is not None:           # the provider answered with an error status
        retry = status in RETRIED_STATUSES or status >= 500
        words = {429: "rate limited (429)", 529: "overloaded (529)"}.get(status, f"HTTP {status}")
        return Fault(words, BILLED_NONE, retry, retry_after(getattr(exc, "response", None)))
    if isinstance(exc, (json.JSONDecodeError, UnbilledAnswer)):
        return Fault(f"malformed answer ({str(exc)[:80]})", BILLED_UNKNOWN, True)
    chain = _chain(exc)
    names = {cls.__name__ for e in chain for cls in type(e).__mro__}
    cause = chain[-1]
    if names & NOT_SENT:
        return Fault(f"could not connect ({str(cause)[:80] or type(cause).__name__})", BILLED_NONE, True)
    if "APITimeoutError" in names or "TimeoutException" in names or "ReadTimeout" in names:
        return Fault("read timeout after the request was sent", BILLED_UNKNOWN, True)
    if names & LOST_MID_ANSWER or isinstance(cause, OSError):
        return Fault(f"connection lost mid-answer ({str(cause)[:80] or type(cause).__name__})", BILLED_UNKNOWN,
                     True)
    return Fault(f"{type(exc).__name__}: {str(exc)[:120]}", BILLED_NONE, False)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a provider's error answer (openai and anthropic: status_code; google-genai: code; boto3: the
    response's metadata)."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    response = getattr(exc, "response", None)
    if isinstance(response, dict):        # botocore's ClientError
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        return status if isinstance(status, int) else None
    code = getattr(exc, "code", None)
    names = {cls.__name__ for cls in type(exc).__mro__}
    return code if isinstance(code, int) and "APIError" in names and 100 <= code < 600 else None


def retry_after(response) -> float | None:
    """Seconds the provider asks to wait (retry-after-ms, then retry-after in seconds), at most MAX_WAIT_S."""
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            value = float(headers.get(name, ""))
        except (TypeError, ValueError):
            continue
        if value >= 0:
            return min(value * scale, MAX_WAIT_S)
    return None


def backoff_s(retry: int, base_s: float, fault: Fault, rng: random.Random = random.Random()) -> float:
    """The wait before retry number `retry` (1, 2, ...): the provider's Retry-After, else base * 2^(retry-1) with
    full jitter in its upper half, never above MAX_WAIT_S."""
    if fault.retry_after is not None:
        return fault.retry_after
    ceiling = min(MAX_WAIT_S, base_s * 2 ** (retry - 1))
    return ceiling * (0.5 + 0.5 * rng.random())


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes, outermost first."""
    chain, seen = [exc], {id(exc)}
    while (nxt := chain[-1].__cause__ or chain[-1].__context__) is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        chain.append(nxt)
    return chain


def root_cause(exc: BaseException) -> str:
    """The innermost reason behind an SDK error, in a few words: the SDKs wrap their HTTP library, which wraps the
    OS error ("connection refused" says more than "Connection error.")."""
    inner = _chain(exc)[-1]
    if isinstance(inner, ConnectionRefusedError) or "Connection refused" in str(inner):
        return "connection refused"
    text = str(inner).splitlines()[0] if str(inner) else type(inner).__name__
    return text[:200]
