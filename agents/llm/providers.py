"""One async client per model spec, through the official SDKs (OpenAI-compatible
servers through the openai SDK's base_url). The SDKs retry 429/5xx/timeouts
with exponential backoff and jitter and honour Retry-After; we set the retry
count and the per-call timeout."""
from __future__ import annotations

import functools
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

import anthropic
import openai

from agents.llm.specs import CallOptions, ModelSpec


@dataclass
class Completion:
    text: str
    tokens_in: int
    tokens_out: int


class Client:
    def __init__(self, spec: ModelSpec, opts: CallOptions) -> None:
        self.spec, self.opts = spec, opts
        key = spec.api_key()
        if spec.provider == "anthropic":
            self._anthropic = anthropic.AsyncAnthropic(api_key=key, timeout=opts.timeout_s, max_retries=opts.max_retries)
        else:
            self._openai = openai.AsyncOpenAI(api_key=key or "none", base_url=spec.base_url, timeout=opts.timeout_s,
                                              max_retries=opts.max_retries)

    async def complete(self, prompt: str) -> Completion:
        if self.spec.provider == "anthropic":
            kwargs = {"temperature": self.opts.temperature} if self.opts.temperature is not None else {}
            resp = await self._anthropic.messages.create(model=self.spec.model, max_tokens=self.opts.max_tokens,
                                                         messages=[{"role": "user", "content": prompt}], **kwargs)
            text = "".join(getattr(block, "text", "") for block in resp.content)
            return Completion(text, resp.usage.input_tokens, resp.usage.output_tokens)
        kwargs = {}
        if self.opts.temperature is not None:
            kwargs["temperature"] = self.opts.temperature
        if self.opts.reasoning_effort:
            kwargs["reasoning_effort"] = self.opts.reasoning_effort
        limit = {"max_completion_tokens": self.opts.max_tokens} if self.spec.provider == "openai" \
            else {"max_tokens": self.opts.max_tokens}   # what OpenAI-compatible servers understand
        resp = await self._openai.chat.completions.create(model=self.spec.model,
                                                          messages=[{"role": "user", "content": prompt}],
                                                          **limit, **kwargs)
        if not resp.choices:
            return Completion("", 0, 0)
        usage = resp.usage
        return Completion(resp.choices[0].message.content or "", getattr(usage, "prompt_tokens", 0) or 0,
                          getattr(usage, "completion_tokens", 0) or 0)


@functools.cache
def price_table() -> dict[str, dict[str, float]]:
    path = Path(os.environ.get("AUTOCOMP_PRICES") or Path(__file__).with_name("prices.toml"))
    return tomllib.loads(path.read_text())


def cost_usd(spec: ModelSpec, tokens_in: int, tokens_out: int) -> float | None:
    price = price_table().get(spec.text)
    if price is None:
        return None
    return (tokens_in * price["input"] + tokens_out * price["output"]) / 1e6


def root_cause(exc: BaseException) -> str:
    """The innermost reason behind an SDK error, in a few words: the SDKs wrap httpx, which wraps the OS
    error ("connection refused" says more than "Connection error.")."""
    inner, seen = exc, set()
    while (nxt := inner.__cause__ or inner.__context__) is not None and id(nxt) not in seen:
        seen.add(id(inner))
        inner = nxt
    if isinstance(inner, ConnectionRefusedError) or "Connection refused" in str(inner):
        return "connection refused"
    text = str(inner).splitlines()[0] if str(inner) else type(inner).__name__
    return text[:200]
