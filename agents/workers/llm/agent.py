"""The 'llm' implementation of the planner, coder and repairer roles: render the prompt from the target's
pack, call the job's model, read the answer as real models write it (agents/workers/llm/parse.py). A code job
without a plan (one-phase mode) is answered with the plan the model chose beside its kernel; one asked for edits
(--code-edits) gets the parent's code with the answer's edits applied (agents/workers/llm/edits.py), and edits that
cannot be read or applied go back to the model, in one more call, asking for the whole kernel. A plan job that asks
for proposals is answered with new menu options for its parent (agents/workers/llm/proposals.py).

Calls run on an asyncio loop in a background thread, at most --llm-concurrency at a time per model, fewer while
the provider answers 429 or its rate-limit headers say its window is nearly spent (agents/workers/llm/limits.py); with
--batch-window-s, OpenAI's and Anthropic's go through their Batch APIs instead (agents/workers/llm/batches.py). A call
first asks for half of --max-tokens; an answer cut off there (finish reason "length") is asked again once
with the whole --max-tokens, and one cut off at --max-tokens is a failure named "truncated". Every try,
failed or not, goes back in the result's "calls" with its prompt, its raw answer and the provider's token
counts (reasoning and cached tokens included), so that the coordinator can price it and a person can read it.
A try the provider did not bill (429, 5xx, no connection) is tried again here after a wait; one lost after it
was sent (a timeout, a reset, a malformed answer) is recorded at its worst case and the job handed back for
the coordinator to send again under the cost cap (agents/workers/llm/faults.py).
"""
from __future__ import annotations

import asyncio
import random
import threading
import time

from autocomp_zmq.agents.workers.llm.faults import backoff_s, classify, root_cause, status_of
from autocomp_zmq.agents.workers.llm.batches import Batcher
from autocomp_zmq.agents.workers.llm.limits import AdaptiveLimit, headroom_of
from autocomp_zmq.agents.workers.llm.edits import apply_edits, parse_edits
from autocomp_zmq.agents.workers.llm.parse import AnswerError, parse_code, parse_plan, plan_in_prose
from autocomp_zmq.agents.workers.llm.proposals import parse_proposals
from autocomp_zmq.agents.workers.llm.prompts import Prompt, pack, render, whole_kernel_prompt
from autocomp_zmq.agents.workers.llm.providers import CallOptions, Client, Completion
from autocomp_zmq.agents.workers.llm.pricing import BATCH_PROVIDERS, PROMPT_OVERHEAD_TOKENS
from autocomp_zmq.agents.workers.llm.specs import first_limit, parse_spec
from autocomp_zmq.agents.workers.worker import JobFailed
from autocomp_zmq.protocols.jobs import (BILLED_UNKNOWN, Answer, CodeRequest, CodeResult, ModelCall, Plan, PlanResult,
                                         Request)

OUTCOME_CHARS = 200           # ModelCall.outcome's limit (protocols/envelope.py Name)
_FINISH_WORDS = {"refusal": "the model refused to answer", "content_filter": "the provider's content filter "
                 "blocked the answer", "empty": "the provider returned no answer"}


def _why(fault, exc: BaseException) -> str:
    """The fault in words, with the innermost error unless the words already hold it."""
    cause = root_cause(exc)
    return fault.words if cause in fault.words else f"{fault.words} ({cause})"


class LLMAgent:
    name = "llm"

    def __init__(self, models: list[str] | tuple[str, ...] = (), call_options: CallOptions = CallOptions()) -> None:
        specs = [parse_spec(m) for m in models]
        if not specs or any(s.offline for s in specs):
            raise ValueError("the llm implementation needs --model specs of hosted or OpenAI-compatible models")
        self.models = [s.text for s in specs]
        self.options = call_options
        self._specs = {s.text: s for s in specs}
        self._clients: dict[str, Client | Batcher] = {}    # made on first use: an idle agent imports no SDK
        self._loop = asyncio.new_event_loop()
        self._limits = {m: AdaptiveLimit(call_options.concurrency) for m in self.models}
        self._rng = random.Random()
        threading.Thread(target=self._loop.run_forever, name="llm-calls", daemon=True).start()

    def _client(self, model: str) -> Client | Batcher:
        if model not in self._clients:
            spec, opts = self._specs[model], self.options
            client = Client(spec, opts)
            self._clients[model] = Batcher(client, opts.batch_window_s, opts.batch_poll_s) \
                if opts.batch_window_s is not None and spec.provider in BATCH_PROVIDERS else client
        return self._clients[model]

    async def _call(self, model: str, prompt: Prompt, limit: int) -> Completion:
        client = self._client(model)
        if isinstance(client, Batcher):      # a batch is one request, however many calls it holds
            return await client.complete(prompt.prefix, prompt.body, limit)
        async with self._limits[model] as slots:
            try:
                done = await client.complete(prompt.prefix, prompt.body, limit)
            except Exception as exc:
                if status_of(exc) == 429:
                    slots.rate_limited(classify(exc).retry_after)
                raise
            slots.observe(headroom_of(done.headers), done.tokens_in + limit)
        await slots.answered()
        return done

    def handle(self, kind: str, req: Request) -> Answer:
        model = req.model
        if model not in self._specs:
            raise ValueError(f"this agent serves {', '.join(self.models)}, not {model}")
        prompt = render(kind, req)
        calls: list[ModelCall] = []
        done = self._answer(model, prompt, calls)
        try:
            p = pack(req.problem.target, req.problem.isa, req.problem.family)
            if kind == "plan" and req.propose:        # model-proposed menu options for the parent
                proposals = parse_proposals(done.text, req.propose, list(p["titles"].values()))
                return PlanResult(proposals=proposals, model=model, calls=calls)
            if kind == "plan":
                titles = {**p["titles"], **{o.id: o.title for o in req.menu}}
                plan = parse_plan(done.text, [o.id for o in req.menu], titles, list(p["titles"]))
                return PlanResult(plan=plan, model=model, calls=calls)
            plan = req.plan
            if kind == "code" and plan is None:      # one-phase: the answer chose and planned too
                plan = plan_in_prose(done.text, [o.id for o in req.menu],
                                     {**p["titles"], **{o.id: o.title for o in req.menu}}, list(p["titles"]))
            if kind == "code" and req.edits:
                code = self._from_edits(req, plan, p, done, calls)
            else:
                code = parse_code(done.text, p["fence_tags"], p["entry_point"], p["fence"])
            return CodeResult(code=code, model=model, calls=calls, plan=None if req.plan else plan)
        except AnswerError as exc:
            calls[-1].outcome = f"unusable answer: {exc.kind}"
            raise JobFailed(f"unusable answer from {model}: {exc}", calls=calls) from None

    def _from_edits(self, req: CodeRequest, plan: Plan, p: dict, done: Completion, calls: list[ModelCall]) -> str:
        """The parent's code with the answer's edits applied. Edits that cannot be read or applied (unless the answer
        gave the whole kernel anyway) go back to the model with why, asking for the whole kernel: one more call."""
        try:
            return apply_edits(req.parent.code, parse_edits(done.text))
        except AnswerError as exc:
            why = str(exc)
        try:
            return parse_code(done.text, p["fence_tags"], p["entry_point"], p["fence"])
        except AnswerError:
            # an outcome is a short name (the reason is whole in the next call's prompt)
            calls[-1].outcome = f"unusable edits, the whole kernel asked for: {why}"[:OUTCOME_CHARS]
        done = self._answer(req.model, whole_kernel_prompt(req, plan, why), calls)
        return parse_code(done.text, p["fence_tags"], p["entry_point"], p["fence"])

    def _answer(self, model: str, prompt: Prompt, calls: list[ModelCall]) -> Completion:
        """The model's finished answer; a truncated, refused or failed call raises JobFailed with every try made."""
        ceiling = self.options.max_tokens
        limit = first_limit(ceiling)
        retries = 0
        while True:
            call = ModelCall(model=model, prompt_hash=prompt.hash, max_tokens=limit, prefix=prompt.prefix,
                             prompt=prompt.body)
            calls.append(call)
            started = time.monotonic()
            try:
                done = asyncio.run_coroutine_threadsafe(self._call(model, prompt, limit), self._loop).result()
            except Exception as exc:  # noqa: BLE001 - every SDK error is a try to record and classify
                call.latency, call.finish = time.monotonic() - started, "error"
                fault = classify(exc)
                call.billing = fault.billing
                if fault.billing == BILLED_UNKNOWN:
                    # sent, and no usable answer back: the provider may bill all of it; the bounds price it
                    call.tokens_in = len(prompt.text.encode()) + PROMPT_OVERHEAD_TOKENS
                    call.tokens_out = limit
                    call.outcome = f"lost: {fault.words}; billing unknown, counted at its worst case"
                    raise JobFailed(f"model {model}: {_why(fault, exc)}; the job is sent again if the cost cap "
                                    "allows", calls=calls, retry=True) from None
                if fault.retry and retries < self.options.max_retries:
                    retries += 1
                    wait = backoff_s(retries, self.options.backoff_s, fault, self._rng)
                    call.outcome = f"{fault.words}: not billed, tried again after {wait:.1f} s"
                    time.sleep(wait)
                    continue
                call.outcome = f"error: {fault.words}"
                raise JobFailed(f"model {model} failed: {_why(fault, exc)}"
                                + (f" after {retries} retries" if retries else ""), calls=calls) from None
            call.latency = time.monotonic() - started
            call.tokens_in, call.tokens_out = done.tokens_in, done.tokens_out
            call.tokens_cached, call.tokens_cache_write = done.tokens_cached, done.tokens_cache_write
            call.tokens_reasoning, call.finish = done.tokens_reasoning, done.finish
            call.answer, call.reasoning, call.tier = done.text, done.reasoning, done.tier
            if done.finish == "length":
                if limit < ceiling:
                    call.outcome = "truncated (asked again with a larger limit)"
                    limit = ceiling
                    continue
                call.outcome = "truncated"
                raise JobFailed(f"truncated: the answer of {model} was cut off at the {limit:,}-token output limit "
                                f"({done.tokens_reasoning:,} of its {done.tokens_out:,} tokens were reasoning); raise "
                                "--max-tokens", calls=calls)
            if done.finish in _FINISH_WORDS:
                call.outcome = done.finish
                raise JobFailed(f"{done.finish}: {_FINISH_WORDS[done.finish]} ({model})"
                                + (f": {done.text.strip()[:300]}" if done.text.strip() else ""), calls=calls)
            call.outcome = "ok"
            return done
