"""One async client per model spec, through the official SDKs (OpenAI-compatible servers through the
openai SDK's base_url). The SDKs' own retries are off: each try is a call the agent records and retries itself
(agents/workers/llm/faults.py), so that no paid attempt goes unseen; we set the per-call timeout.

OpenAI's own models are called through the Responses API (OpenAI's recommended interface for reasoning models:
it returns a summary of the model's reasoning, which the chat interface does not); OpenAI-compatible servers, and
OpenAI with --openai-api chat, through Chat Completions. OpenAI's calls ask for --service-tier and are priced at
the tier the answer reports. Each request is built by a *_params method and each answer read by a read_* function,
so that a Batch API (agents/workers/llm/batches.py) sends the same requests and reads the same answers.

Every prompt comes in two parts: a long stable prefix shared by all calls of a run (ISA, rules, menu,
examples) and the part that varies. The prefix goes first, as the system prompt, so that providers can
cache it: Anthropic caches up to an explicit cache_control breakpoint placed on it; OpenAI caches every
prompt prefix it has seen automatically (a prompt_cache_key keeps the calls of one prefix on the same
cache); vLLM's and SGLang's prefix caches work the same way.
"""
from __future__ import annotations

import asyncio
import hashlib
import importlib
import re
from dataclasses import dataclass, field

from autocomp_zmq.agents.workers.llm.faults import UnbilledAnswer
from autocomp_zmq.agents.workers.llm.specs import CallOptions, ModelSpec, aws_region

# OpenAI's reasoning models (asked for a reasoning summary); others refuse the reasoning parameter
REASONING_MODELS = re.compile(r"(o\d|gpt-5|codex)", re.I)
# Gemini models that think (their thought summaries asked for); older ones refuse the thinking configuration
THINKING_GEMINI = re.compile(r"gemini-(2\.5|[3-9])", re.I)
# Anthropic extended thinking (and Gemini's thinking budget) for --reasoning-effort: the thinking budget in tokens (counted in the output)
THINKING_BUDGET = {"low": 2048, "medium": 8192, "high": 24576}
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "refusal": "refusal",
           "model_context_window_exceeded": "length", "pause_turn": "stop", "tool_use": "stop"}


@dataclass
class Completion:
    text: str                    # the answer as the model wrote it
    tokens_in: int               # every prompt token, cached ones included
    tokens_out: int              # every generated token, reasoning included
    tokens_cached: int = 0
    tokens_cache_write: int = 0
    tokens_reasoning: int = 0
    finish: str = "stop"         # stop | length | refusal | content_filter
    reasoning: str = ""          # reasoning returned apart from the answer (thinking blocks, reasoning_content)
    tier: str = ""               # the price list applied: "" standard, flex, priority, batch (ModelCall.tier)
    headers: dict = field(default_factory=dict)   # the answer's HTTP headers (rate-limit headroom: limits.py)


def sdk(provider: str):
    """The official SDK a provider's calls go through, imported on first use: each takes about a CPU-second to
    import, and an agent or a preflight that talks to one provider needs only its own."""
    return importlib.import_module({"anthropic": "anthropic", "gemini": "google.genai", "bedrock": "boto3"}
                                   .get(provider, "openai"))


class Client:
    def __init__(self, spec: ModelSpec, opts: CallOptions) -> None:
        self.spec, self.opts = spec, opts
        key = spec.api_key()
        if spec.provider == "anthropic":
            self.anthropic = sdk("anthropic").AsyncAnthropic(api_key=key, timeout=opts.timeout_s, max_retries=0)
        elif spec.provider == "gemini":   # GOOGLE_GEMINI_BASE_URL, if set, is the endpoint (a proxy, a test server)
            genai = sdk("gemini")
            self._gemini = genai.Client(api_key=key, http_options=genai.types.HttpOptions(
                timeout=int(opts.timeout_s * 1000), retry_options=genai.types.HttpRetryOptions(attempts=1)))
        elif spec.provider == "bedrock":   # AWS_ENDPOINT_URL_BEDROCK_RUNTIME, if set, is the endpoint
            from botocore.config import Config
            session = sdk("bedrock").Session()
            self._bedrock = session.client("bedrock-runtime", region_name=aws_region(session), config=Config(
                retries={"total_max_attempts": 1}, read_timeout=opts.timeout_s,
                connect_timeout=min(opts.timeout_s, 60), max_pool_connections=opts.concurrency))
        else:
            self.openai = sdk("openai").AsyncOpenAI(api_key=key or "none", base_url=spec.base_url,
                                                    timeout=opts.timeout_s, max_retries=0)

    @property
    def responses_api(self) -> bool:
        return self.spec.provider == "openai" and self.opts.openai_api == "responses"

    async def complete(self, prefix: str, prompt: str, max_tokens: int) -> Completion:
        if self.spec.provider == "anthropic":
            return await self._complete_anthropic(prefix, prompt, max_tokens)
        if self.spec.provider == "gemini":
            return await self._complete_gemini(prefix, prompt, max_tokens)
        if self.spec.provider == "bedrock":     # boto3 blocks: the call waits in a thread of the loop's pool
            resp = await asyncio.to_thread(self._bedrock.converse, **self.bedrock_params(prefix, prompt, max_tokens))
            return read_converse(resp)
        if self.responses_api:
            raw = await self.openai.responses.with_raw_response.create(
                **_extra_body(self.responses_params(prefix, prompt, max_tokens)), **self._service_tier())
            return read_response(raw.parse(), raw.headers)
        raw = await self.openai.chat.completions.with_raw_response.create(
            **_extra_body(self.chat_params(prefix, prompt, max_tokens)),
            **(self._service_tier() if self.spec.provider == "openai" else {}))
        return read_chat(raw.parse(), raw.headers)

    def _service_tier(self) -> dict:
        return {"service_tier": self.opts.service_tier}

    def _openai_cache(self, prefix: str) -> dict:
        """OpenAI's cache routing: one key per prefix keeps a run's calls on the same cache; --long-cache asks for
        the extended 24-hour retention."""
        return {"prompt_cache_key": hashlib.sha256(prefix.encode()).hexdigest()[:32],
                **({"prompt_cache_retention": "24h"} if self.opts.long_cache else {})}

    def responses_params(self, prefix: str, prompt: str, max_tokens: int) -> dict:
        """A Responses API request (the body of a batch line as it is)."""
        kwargs: dict = {}
        if self.opts.temperature is not None:
            kwargs["temperature"] = self.opts.temperature
        if self.opts.reasoning_effort or REASONING_MODELS.match(self.spec.model):
            # a summary of the reasoning comes back (the reasoning itself is billed but never returned)
            kwargs["reasoning"] = {"summary": "auto", **({"effort": self.opts.reasoning_effort}
                                                        if self.opts.reasoning_effort else {})}
        return dict(model=self.spec.model, instructions=prefix or None, input=prompt, max_output_tokens=max_tokens,
                    store=False, **self._openai_cache(prefix), **kwargs)

    def chat_params(self, prefix: str, prompt: str, max_tokens: int) -> dict:
        """A Chat Completions request."""
        kwargs: dict = {}
        if self.opts.temperature is not None:
            kwargs["temperature"] = self.opts.temperature
        if self.opts.reasoning_effort:
            kwargs["reasoning_effort"] = self.opts.reasoning_effort
        if self.spec.provider == "openai":
            # reasoning tokens count against max_completion_tokens; the cache key routes one prefix's calls together
            kwargs["max_completion_tokens"] = max_tokens
            kwargs.update(self._openai_cache(prefix))
        else:
            kwargs["max_tokens"] = max_tokens      # what OpenAI-compatible servers understand
        messages = ([{"role": "system", "content": prefix}] if prefix else []) + [{"role": "user", "content": prompt}]
        return dict(model=self.spec.model, messages=messages, **kwargs)

    def anthropic_params(self, prefix: str, prompt: str, max_tokens: int) -> dict:
        """A Messages API request."""
        kwargs: dict = {}
        if self.opts.reasoning_effort:   # extended thinking; its tokens are output tokens and need temperature 1
            budget = min(THINKING_BUDGET[self.opts.reasoning_effort], max(1024, max_tokens - 1024))
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": budget}
        elif self.opts.temperature is not None:
            kwargs["temperature"] = self.opts.temperature
        cache = {"type": "ephemeral", **({"ttl": "1h"} if self.opts.long_cache else {})}
        system = [{"type": "text", "text": prefix, "cache_control": cache}] if prefix else []
        return dict(model=self.spec.model, max_tokens=max_tokens, system=system,
                    messages=[{"role": "user", "content": prompt}], **kwargs)

    def bedrock_params(self, prefix: str, prompt: str, max_tokens: int) -> dict:
        """A Bedrock Converse request: the prefix as the system prompt, followed by a cache point for the models
        Bedrock caches prompts of (Claude, Nova); Claude's extended thinking for --reasoning-effort."""
        config: dict = {"maxTokens": max_tokens}
        extra: dict = {}
        if self.opts.reasoning_effort and BEDROCK_CLAUDE.search(self.spec.model):
            budget = min(THINKING_BUDGET[self.opts.reasoning_effort], max(1024, max_tokens - 1024))
            extra["thinking"] = {"type": "enabled", "budget_tokens": budget}
        elif self.opts.temperature is not None:
            config["temperature"] = self.opts.temperature
        system = [{"text": prefix}] if prefix else []
        if prefix and BEDROCK_CACHED.search(self.spec.model):
            system.append({"cachePoint": {"type": "default"}})
        return dict(modelId=self.spec.model, system=system, inferenceConfig=config,
                    messages=[{"role": "user", "content": [{"text": prompt}]}],
                    **({"additionalModelRequestFields": extra} if extra else {}))

    async def _complete_anthropic(self, prefix: str, prompt: str, max_tokens: int) -> Completion:
        # streamed: the timeout bounds each wait for the next piece, not the whole answer, so a long answer is not
        # cut off (and paid for) at --call-timeout-s; the final message is the one a plain request returns
        async with self.anthropic.messages.stream(**self.anthropic_params(prefix, prompt, max_tokens)) as stream:
            resp = await stream.get_final_message()
            headers = stream.response.headers
        if resp.stop_reason is None:   # the stream ended before the message did: what was billed is unknown
            raise UnbilledAnswer("the answer's stream ended before the answer did")
        return read_message(resp, headers)

    async def _complete_gemini(self, prefix: str, prompt: str, max_tokens: int) -> Completion:
        types = sdk("gemini").types
        config: dict = {"system_instruction": prefix or None, "max_output_tokens": max_tokens}
        if self.opts.temperature is not None:
            config["temperature"] = self.opts.temperature
        if self.opts.reasoning_effort or THINKING_GEMINI.match(self.spec.model):
            # thought summaries come back as parts marked `thought`; thinking tokens are billed as output
            budget = THINKING_BUDGET[self.opts.reasoning_effort] if self.opts.reasoning_effort else None
            config["thinking_config"] = types.ThinkingConfig(include_thoughts=True, thinking_budget=budget)
        resp = await self._gemini.aio.models.generate_content(model=self.spec.model, contents=prompt,
                                                              config=types.GenerateContentConfig(**config))
        u = resp.usage_metadata
        if u is None:
            raise UnbilledAnswer("an answer without its usage")
        thoughts = u.thoughts_token_count or 0
        usage = (u.prompt_token_count or 0, (u.candidates_token_count or 0) + thoughts,
                 u.cached_content_token_count or 0, 0, thoughts)
        headers = dict(getattr(getattr(resp, "sdk_http_response", None), "headers", None) or {})
        candidate = resp.candidates[0] if resp.candidates else None
        if candidate is None:       # the prompt itself was blocked
            return Completion("", *usage, finish="content_filter" if resp.prompt_feedback else "empty",
                              headers=headers)
        parts = (candidate.content.parts if candidate.content else None) or []
        reason = getattr(candidate.finish_reason, "name", str(candidate.finish_reason or "STOP"))
        finish = {"STOP": "stop", "MAX_TOKENS": "length"}.get(reason, "content_filter")
        return Completion("".join(p.text for p in parts if p.text and not p.thought), *usage, finish=finish,
                          reasoning="\n\n".join(p.text for p in parts if p.text and p.thought), headers=headers)


# Bedrock model ids (with or without a cross-region prefix such as us. or global.) whose prompts Bedrock caches
BEDROCK_CLAUDE = re.compile(r"(^|\.)anthropic\.claude")
BEDROCK_CACHED = re.compile(r"(^|\.)(anthropic\.claude|amazon\.nova)")
_CONVERSE_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "max_tokens": "length",
                    "model_context_window_exceeded": "length", "guardrail_intervened": "content_filter",
                    "content_filtered": "content_filter"}


def read_converse(resp: dict) -> Completion:
    """A Bedrock Converse answer (boto3's dict) as a Completion: inputTokens leaves out the cached tokens."""
    u = resp.get("usage")
    content = ((resp.get("output") or {}).get("message") or {}).get("content")
    if not isinstance(u, dict) or not isinstance(content, list):
        raise UnbilledAnswer("an answer without its usage or content")
    read, written = u.get("cacheReadInputTokens") or 0, u.get("cacheWriteInputTokens") or 0
    text = "".join(b.get("text", "") for b in content)
    thinking = "\n".join(((b.get("reasoningContent") or {}).get("reasoningText") or {}).get("text", "")
                         for b in content if "reasoningContent" in b)
    stop = resp.get("stopReason") or "end_turn"
    return Completion(text, (u.get("inputTokens") or 0) + read + written, u.get("outputTokens") or 0, read, written,
                      0, _CONVERSE_FINISH.get(stop, stop), thinking,
                      headers=(resp.get("ResponseMetadata") or {}).get("HTTPHeaders") or {})


# parameters the openai SDK may not know by name: sent in the request's body as they are
OPENAI_BODY_ONLY = ("prompt_cache_key", "prompt_cache_retention")


def _extra_body(params: dict) -> dict:
    extra = {k: params.pop(k) for k in OPENAI_BODY_ONLY if k in params}
    return {**params, "extra_body": extra} if extra else params


def _tier(service_tier: str | None) -> str:
    """The price list an OpenAI answer's service_tier names ("" for the standard one)."""
    return "" if service_tier in (None, "", "default", "auto") else service_tier


def read_response(resp, headers=None, tier: str | None = None) -> Completion:
    """A Responses API answer (an SDK Response) as a Completion."""
    u = resp.usage
    if u is None or resp.output is None:
        raise UnbilledAnswer("an answer without its usage or output")
    usage = (u.input_tokens or 0, u.output_tokens or 0,
             getattr(getattr(u, "input_tokens_details", None), "cached_tokens", 0) or 0, 0,
             getattr(getattr(u, "output_tokens_details", None), "reasoning_tokens", 0) or 0)
    text, refusal, summary = [], [], []
    for item in resp.output:
        if item.type == "reasoning":
            summary += [s.text for s in (getattr(item, "summary", None) or []) if getattr(s, "text", "")]
        elif item.type == "message":
            for part in item.content or []:
                (refusal if part.type == "refusal" else text).append(getattr(part, "refusal", None)
                                                                     or getattr(part, "text", "") or "")
    reason = getattr(resp.incomplete_details, "reason", None) if resp.status == "incomplete" else None
    finish = "refusal" if refusal else {"max_output_tokens": "length", "content_filter": "content_filter"}.get(
        reason or "", "stop" if resp.status == "completed" else (resp.status or "stop"))
    return Completion("".join(refusal or text), *usage, finish=finish, reasoning="\n\n".join(summary),
                      tier=_tier(getattr(resp, "service_tier", None)) if tier is None else tier,
                      headers=dict(headers or {}))


def read_chat(resp, headers=None, tier: str | None = None) -> Completion:
    """A Chat Completions answer (an SDK ChatCompletion) as a Completion."""
    u = resp.usage
    if u is None:
        raise UnbilledAnswer("an answer without its usage")
    prompt_details = getattr(u, "prompt_tokens_details", None)
    out_details = getattr(u, "completion_tokens_details", None)
    # prompt_tokens counts cached ones; newer models also report (and bill) tokens written to the cache
    usage = (getattr(u, "prompt_tokens", 0) or 0, getattr(u, "completion_tokens", 0) or 0,
             getattr(prompt_details, "cached_tokens", 0) or 0,
             getattr(prompt_details, "cache_write_tokens", 0) or 0,
             getattr(out_details, "reasoning_tokens", 0) or 0)
    extra = dict(tier=_tier(getattr(resp, "service_tier", None)) if tier is None else tier, headers=dict(headers or {}))
    if not resp.choices:
        return Completion("", *usage, finish="empty", **extra)
    choice = resp.choices[0]
    message = choice.message
    refusal = getattr(message, "refusal", None)
    if refusal:
        return Completion(refusal, *usage, finish="refusal", **extra)
    # servers that separate reasoning (vLLM's reasoning parsers, DeepSeek) return it beside the content
    reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None) or ""
    return Completion(message.content or "", *usage, finish=choice.finish_reason or "stop",
                      reasoning=reasoning if isinstance(reasoning, str) else "", **extra)


def read_message(resp, headers=None, tier: str = "") -> Completion:
    """A Messages API answer (an SDK Message) as a Completion."""
    u = resp.usage
    if u is None or not isinstance(resp.content, list):
        raise UnbilledAnswer("an answer without its usage or content")
    text = "".join(getattr(b, "text", "") for b in resp.content if b.type == "text")
    thinking = "\n".join(getattr(b, "thinking", "") or "" for b in resp.content if b.type == "thinking")
    written, read = u.cache_creation_input_tokens or 0, u.cache_read_input_tokens or 0
    details = getattr(u, "output_tokens_details", None)
    return Completion(text, u.input_tokens + written + read, u.output_tokens, read, written,
                      getattr(details, "thinking_tokens", 0) or 0,
                      _FINISH.get(resp.stop_reason or "", resp.stop_reason or "stop"), thinking, tier=tier,
                      headers=dict(headers or {}))
