"""The build's model calls: made through the product's LLM layer (agents/workers/llm: specs, the SDK clients, fault
classification and pricing), each recorded as a protocols.jobs.ModelCall (prompt, answer, tokens, cost) on one
JSON line of calls.jsonl the moment it returns, so that a build that fails or is stopped keeps what it spent.

A Caller is live (a model) or a replay (a calls.jsonl): a replay answers each call with the recorded one of the
same place and the same prompt, and writes the same records, so the rebuilt pack is the same, byte for byte.
Before each live call the spending cap is checked against the call's worst case, as a run's --max-cost is."""
from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

from autocomp_zmq.agents.workers.llm.faults import backoff_s, classify, root_cause
from autocomp_zmq.agents.workers.llm.pricing import PRICES_HELP, PROMPT_OVERHEAD_TOKENS, PriceBook, usage_of
from autocomp_zmq.agents.workers.llm.specs import CallOptions, parse_spec
from autocomp_zmq.protocols.jobs import BILLED_NONE, BILLED_UNKNOWN, ModelCall


class CallError(RuntimeError):
    """No answer: the cap would be passed, the model kept failing, or a replay does not match; the message
    says which, with what was spent."""


@dataclass
class Answer:
    text: str
    finish: str


def prompt_hash(prefix: str, body: str) -> str:
    return hashlib.sha256(f"{prefix}\0{body}".encode()).hexdigest()[:16]


class Caller:
    """Model calls for one build, appended to `log` (calls.jsonl). `ask` returns an answer or raises CallError."""

    def __init__(self, log: Path, model: str | None = None, *, replay: Path | None = None,
                 budget_usd: float | None = None, prices: PriceBook | None = None,
                 options: CallOptions = CallOptions(), retries: int = 2) -> None:
        self.log, self.options, self.retries = log, options, retries
        self.budget, self.book = budget_usd, prices or PriceBook.load()
        self.spent, self.calls, self.unpriced = 0.0, 0, 0
        self.recorded = _read_log(replay) if replay else None
        if self.recorded:       # a replay speaks for the recorded model
            recorded = json.loads(self.recorded[0])["model"]
            if model and model != recorded:
                raise CallError(f"--replay {replay} was recorded with {recorded}, not {model}")
            model = recorded
        if not model:
            raise CallError("give --model, or --replay a calls.jsonl of an earlier build")
        self.spec = parse_spec(model)
        if self.spec.offline:
            raise CallError(f"{model} is not a model that can write: give a hosted or OpenAI-compatible one")
        if self.recorded is None and budget_usd is not None and not self.book.known(self.spec):
            raise CallError(f"--budget-usd needs the price of {model}, which is not known; " + PRICES_HELP)
        self._client = None
        self._loop = asyncio.new_event_loop()    # one loop for the build: the SDK client is bound to it
        self._rng = random.Random(0)

    @property
    def model(self) -> str:
        return self.spec.text

    def ask(self, prefix: str, body: str, max_tokens: int) -> Answer:
        """One answer to the prompt: calls the provider did not bill and lost answers are tried again, up to
        `retries` more times, each under the cap."""
        tries = 0
        while True:
            call = ModelCall(model=self.model, prompt_hash=prompt_hash(prefix, body), max_tokens=max_tokens,
                             prefix=prefix, prompt=body)
            try:
                return self._replayed(call) if self.recorded is not None else self._live(call)
            except _Retry as fault:
                tries += 1
                if tries > self.retries:
                    raise CallError(f"model {self.model} failed {tries} times: {fault}; {self.spent_words()}") from None
                time.sleep(backoff_s(tries, self.options.backoff_s, fault.fault, self._rng) if fault.fault else 0)

    def _live(self, call: ModelCall) -> Answer:
        tokens_in = len((call.prefix + call.prompt).encode()) + PROMPT_OVERHEAD_TOKENS
        worst = self.book.worst_case(self.spec, tokens_in, call.max_tokens)
        if self.budget is not None and worst is not None and self.spent + worst > self.budget:
            raise CallError(f"stopped by --budget-usd {self.budget:g}: the next call could cost up to ${worst:.4f} and "
                            f"${self.spent:.4f} is spent; {self.spent_words()}")
        started = time.monotonic()
        try:
            done = self._loop.run_until_complete(self._complete(call.prefix, call.prompt, call.max_tokens))
        except Exception as exc:  # noqa: BLE001 - every SDK error is a try to record and classify
            fault = classify(exc)
            call.latency, call.finish, call.billing = time.monotonic() - started, "error", fault.billing
            if fault.billing == BILLED_UNKNOWN:       # sent, nothing usable back: priced at its worst case
                call.tokens_in, call.tokens_out = tokens_in, call.max_tokens
            call.outcome = f"error: {fault.words}"
            self._record(call)
            if fault.retry:
                raise _Retry(f"{fault.words} ({root_cause(exc)})", fault) from None
            raise CallError(f"model {self.model} failed: {fault.words} ({root_cause(exc)}); {self.spent_words()}") \
                from None
        call.latency, call.finish, call.answer, call.reasoning = time.monotonic() - started, done.finish, done.text, \
            done.reasoning
        call.tokens_in, call.tokens_out, call.tokens_cached = done.tokens_in, done.tokens_out, done.tokens_cached
        call.tokens_cache_write, call.tokens_reasoning, call.tier = done.tokens_cache_write, done.tokens_reasoning, \
            done.tier
        call.outcome = "ok" if done.finish == "stop" else f"finished: {done.finish}"
        self._record(call)
        return Answer(done.text, done.finish)

    async def _complete(self, prefix: str, body: str, max_tokens: int):
        from autocomp_zmq.agents.workers.llm.providers import Client
        self._client = self._client or Client(self.spec, self.options)   # made once: an SDK client per build
        return await self._client.complete(prefix, body, max_tokens)

    def _replayed(self, call: ModelCall) -> Answer:
        if self.calls >= len(self.recorded):
            raise CallError(f"the replayed build made more calls than the {len(self.recorded)} recorded: the "
                            "documentation or the options differ from the recorded build's")
        line = self.recorded[self.calls]
        record = json.loads(line)
        if record.get("prompt_hash") != call.prompt_hash:
            raise CallError(f"call {self.calls + 1} of the replay asks something else than the recorded one: the "
                            "documentation or the options differ from the recorded build's")
        self._record(msgspec.json.decode(line, type=ModelCall), line)
        if record.get("finish") == "error":
            raise _Retry(record.get("outcome", "error"), None)
        return Answer(record.get("answer", ""), record.get("finish", "stop"))

    def _record(self, call: ModelCall, as_recorded: str | None = None) -> None:
        """Price the call (the product's pricing; unknown prices count $0 and are counted) and append it."""
        if as_recorded is None:
            cost = 0.0 if call.billing == BILLED_NONE else self.book.cost(self.spec, usage_of(call))
            self.unpriced += cost is None
            call.cost = cost or 0.0
        self.spent += call.cost
        self.calls += 1
        line = as_recorded if as_recorded is not None else msgspec.json.encode(call).decode()
        with self.log.open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    def close(self) -> None:
        if self._client is not None and hasattr(self._client, "openai"):
            self._loop.run_until_complete(self._client.openai.close())
        self._loop.close()

    def spent_words(self) -> str:
        unknown = f" ({self.unpriced} without a known price, counted as $0)" if self.unpriced else ""
        return f"{self.calls} call(s), ${self.spent:.4f} spent{unknown}, every call kept in {self.log}"


class _Retry(Exception):
    def __init__(self, words: str, fault) -> None:
        super().__init__(words)
        self.fault = fault


def _read_log(path: Path) -> list[str]:
    """The recorded calls' lines, each checked to be a call; kept as they are, to be written again as they are."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for line in lines:
            msgspec.json.decode(line, type=ModelCall)
        return lines
    except (OSError, UnicodeDecodeError, msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise CallError(f"--replay {path}: not a readable calls.jsonl ({exc})") from None

