"""Model calls sent through the providers' Batch APIs (--batch-window-s): half the price, answered within the
provider's window (24 hours) rather than in seconds. The calls an agent makes to one model within the window of each
other go in one batch: OpenAI's (the requests uploaded as a JSONL file, a batch made of it, its output and error
files read once it ends) or Anthropic's Message Batches (the requests in one call, the results read once it ends).

A call's request is the one a direct call sends and its answer is read by the same functions
(agents/workers/llm/providers.py), so it comes back as the same Completion, priced at the "batch" tier. A request the
batch did not run (it errored, or the batch expired or was cancelled first) raises BatchError, which is not billed.
Looking at a batch costs nothing: a look that fails is tried again after a wait, for as long as the batch may run; a
batch that can no longer be looked at may still run, so its calls are lost with billing unknown.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass

from autocomp_zmq.agents.workers.llm.faults import RETRIED_STATUSES, BatchError, UnbilledAnswer, classify, root_cause
from autocomp_zmq.agents.workers.llm.providers import Client, Completion, read_chat, read_message, read_response
from autocomp_zmq.agents.workers.llm.specs import BATCH_LOOK_S, MAX_WAIT_S

BATCH_WINDOW = "24h"                 # OpenAI's only completion window; Anthropic's batches also end within 24 h
ANTHROPIC_RETRIED = {"api_error", "overloaded_error", "rate_limit_error"}


@dataclass
class _Entry:
    custom_id: str
    request: dict
    future: asyncio.Future


class Batcher:
    """Batches the calls to one model: `complete` has a direct call's signature (use from one event loop)."""

    def __init__(self, client: Client, window_s: float, poll_s: float = 2.0, sleep=asyncio.sleep) -> None:
        self.client, self.window_s, self.poll_s = client, window_s, poll_s
        self._sleep = sleep
        self._pending: list[_Entry] = []
        self._timer: asyncio.TimerHandle | None = None
        self._ids = itertools.count(1)
        self._running: set[asyncio.Task] = set()
        self.batches = 0                   # batches submitted (for tests and the log)

    async def complete(self, prefix: str, prompt: str, max_tokens: int) -> Completion:
        loop = asyncio.get_running_loop()
        c = self.client
        request = c.anthropic_params(prefix, prompt, max_tokens) if c.spec.provider == "anthropic" else \
            c.responses_params(prefix, prompt, max_tokens) if c.responses_api else c.chat_params(prefix, prompt, max_tokens)
        entry = _Entry(f"call-{next(self._ids)}", request, loop.create_future())
        self._pending.append(entry)
        if self._timer is None:
            self._timer = loop.call_later(self.window_s, self._flush)
        return await entry.future

    def _flush(self) -> None:
        entries, self._pending, self._timer = self._pending, [], None
        task = asyncio.ensure_future(self._run(entries))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, entries: list[_Entry]) -> None:
        try:
            results = await (self._anthropic(entries) if self.client.spec.provider == "anthropic"
                             else self._openai(entries))
        except Exception as exc:  # noqa: BLE001 - every call of the batch fails with it, classified by the agent
            for e in entries:
                e.future.set_exception(exc)
            return
        for e in entries:
            got = results.get(e.custom_id) or BatchError("the batch ended without this request's result", True)
            (e.future.set_exception if isinstance(got, BaseException) else e.future.set_result)(got)

    async def _openai(self, entries: list[_Entry]) -> dict:
        api, responses = self.client.openai, self.client.responses_api
        url = "/v1/responses" if responses else "/v1/chat/completions"
        lines = "\n".join(json.dumps({"custom_id": e.custom_id, "method": "POST", "url": url, "body": e.request})
                          for e in entries)
        try:
            upload = await api.files.create(file=("requests.jsonl", lines.encode()), purpose="batch")
        except Exception as exc:   # nothing runs before the batch is made of the file
            raise BatchError(f"the batch's requests could not be uploaded ({root_cause(exc)})",
                             classify(exc).retry) from exc
        batch = await api.batches.create(input_file_id=upload.id, endpoint=url, completion_window=BATCH_WINDOW)
        self.batches += 1
        batch = await self._until(lambda: api.batches.retrieve(batch.id),
                                  lambda b: b.status in ("completed", "failed", "expired", "cancelled"), batch)
        if batch.status == "failed":       # the input was refused as a whole: nothing ran
            errors = "; ".join(e.message or e.code or "" for e in (getattr(batch.errors, "data", None) or []))
            raise BatchError(f"the batch was refused ({errors or 'no reason given'})", False)
        results: dict = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                content = await self._look(lambda f=file_id: api.files.content(f))
                for line in content.text.splitlines():
                    if line.strip():
                        results.update(_openai_result(json.loads(line), responses))
        if batch.status in ("expired", "cancelled"):      # the requests it did not reach are in neither file
            unrun = BatchError(f"the batch {batch.status} before this request ran", True)
            results = {e.custom_id: unrun for e in entries} | results
        return results

    async def _anthropic(self, entries: list[_Entry]) -> dict:
        api = self.client.anthropic.messages.batches
        batch = await api.create(requests=[{"custom_id": e.custom_id, "params": e.request} for e in entries])
        self.batches += 1
        await self._until(lambda: api.retrieve(batch.id), lambda b: b.processing_status == "ended", batch)

        async def read_all():
            return [item async for item in await api.results(batch.id)]
        return {item.custom_id: _anthropic_result(item.result) for item in await self._look(read_all)}

    async def _until(self, look, ended, batch):
        """The batch once `ended(batch)`, looked at every poll_s, doubling up to MAX_WAIT_S."""
        wait = self.poll_s
        while not ended(batch):
            await self._sleep(wait)
            wait = min(MAX_WAIT_S, wait * 2)
            batch = await self._look(look)
        return batch

    async def _look(self, look):
        """look(), tried again after a wait while it fails with a fault worth retrying."""
        deadline, wait = time.monotonic() + BATCH_LOOK_S, self.poll_s
        while True:
            try:
                return await look()
            except Exception as exc:  # noqa: BLE001 - classified: a final error or the deadline ends the wait
                fault = classify(exc)
                if not fault.retry or time.monotonic() > deadline:
                    raise UnbilledAnswer(f"the batch could not be looked at ({fault.words}); it may still run") \
                        from exc
            await self._sleep(wait)
            wait = min(MAX_WAIT_S, wait * 2)


def _openai_result(line: dict, responses: bool) -> dict:
    """custom_id -> Completion, or the BatchError of a request that failed, from one output or error file line."""
    response, error = line.get("response") or {}, line.get("error")
    status, body = response.get("status_code"), response.get("body")
    if status == 200 and isinstance(body, dict):
        from openai.types.chat import ChatCompletion
        from openai.types.responses import Response
        # built as the SDK builds a direct answer: leniently, fields it does not know kept, missing ones None
        parsed = (Response if responses else ChatCompletion).construct(**body)
        try:
            return {line["custom_id"]: (read_response if responses else read_chat)(parsed, tier="batch")}
        except (AttributeError, TypeError, UnbilledAnswer) as exc:
            return {line["custom_id"]: UnbilledAnswer(f"a batch answer that cannot be read ({str(exc)[:80]})")}
    message = ((body or {}).get("error") or {}).get("message") if isinstance(body, dict) else None
    message = message or (error or {}).get("message") or "no reason given"
    retry = status is None or status in RETRIED_STATUSES or status >= 500
    return {line["custom_id"]: BatchError(f"HTTP {status or '-'} in the batch: {message[:200]}", retry)}


def _anthropic_result(result) -> Completion | BatchError:
    if result.type == "succeeded":
        return read_message(result.message, tier="batch")
    if result.type == "errored":
        inner = getattr(result.error, "error", None)
        kind = getattr(inner, "type", "error")
        return BatchError(f"{kind} in the batch: {getattr(inner, 'message', '')[:200]}", kind in ANTHROPIC_RETRIED)
    return BatchError(f"the batch {result.type} before this request ran", True)   # expired | canceled
