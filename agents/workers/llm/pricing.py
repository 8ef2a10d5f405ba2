"""What model calls cost, as the providers bill them.

Prices come from the genai-prices package (pydantic/genai-prices: a maintained price table that ships its
data inside the package, so nothing is fetched; it knows cached-token, cache-write and tiered prices),
with the user's own prices file merged on top, model by model (`--prices FILE`, else $AUTOCOMP_PRICES):

    ["openai-compat@http://localhost:8000/v1:qwen3-coder"]   # a model spec, as given to --model
    input = 0.0          # USD per million prompt tokens
    output = 0.0         # USD per million generated tokens (reasoning included)
    cached_input = 0.0   # optional: per million prompt tokens read from the provider's cache (default: input)
    cache_write = 0.0    # optional: per million prompt tokens written to the cache (default: input)

A model in neither has no known price: `price()` says None, and a run with --max-cost refuses to start.

A call is priced at the tier the provider applied (ModelCall.tier): OpenAI's flex and priority service tiers as
the answer reports them, and the Batch APIs' half price, from genai-prices' tier prices (a user's own price is
taken as it is for every tier). A job's worst case takes the dearest tier its call may be billed at: with
--service-tier auto the project's own setting decides, so priority is assumed.
"""
from __future__ import annotations

import functools
import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from autocomp_zmq.agents.workers.llm.specs import ModelSpec, SpecError, first_limit, parse_spec
from autocomp_zmq.protocols.jobs import BILLED_NONE, BILLED_UNKNOWN, Plan

PRICE_KEYS = {"input", "output", "cached_input", "cache_write"}
PRICES_HELP = ('give one in a prices file (--prices FILE, a TOML table ["MODEL_SPEC"] with input = and output = in '
               'USD per million tokens; 0 for a server you run yourself)')


class PriceError(ValueError):
    """A prices file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Usage:
    """Token counts of one call, as the provider reports them (see protocols.jobs.ModelCall)."""
    tokens_in: int = 0            # every prompt token, cached ones included
    tokens_out: int = 0           # every generated token, reasoning included
    tokens_cached: int = 0        # prompt tokens read from the cache
    tokens_cache_write: int = 0   # prompt tokens written to the cache
    tier: str = ""                # the price list applied: "" standard, flex, priority, batch (ModelCall.tier)


@dataclass(frozen=True)
class Price:
    """A model's price in USD per million tokens, from the user's file."""
    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def cost(self, u: Usage) -> float:
        cached, written = min(u.tokens_cached, u.tokens_in), min(u.tokens_cache_write, u.tokens_in)
        fresh = max(0, u.tokens_in - cached - written)
        return (fresh * self.input + cached * _or(self.cached_input, self.input)
                + written * _or(self.cache_write, self.input) + u.tokens_out * self.output) / 1e6


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


class PriceBook:
    """The prices of a run: the user's entries first, then genai-prices. With `long_cache` (--long-cache) Anthropic's
    cache writes are priced as its 1-hour cache's, twice the input price (the tables list the 5-minute cache's)."""

    def __init__(self, own: dict[str, Price] | None = None, source: str = "", long_cache: bool = False,
                 service_tier: str = "default", batch: bool = False) -> None:
        self.own = own or {}
        self.source = source
        self.long_cache = long_cache
        self.service_tier, self.batch = service_tier, batch     # what calls ask for (--service-tier, --batch-window-s)

    @classmethod
    def load(cls, path: str | Path | None = None, **options) -> "PriceBook":
        """The book with the user's file (path, else $AUTOCOMP_PRICES, else none) merged on top."""
        path = path or os.environ.get("AUTOCOMP_PRICES") or None
        return cls(read_prices(Path(path)) if path else {}, str(path or ""), **options)

    @classmethod
    def of(cls, models) -> "PriceBook":
        """The book a run's model options (agents/run/runsections.py Models) ask for: their prices file, and the tiers
        and caches their calls are made with."""
        return cls.load(models.prices, long_cache=models.long_cache, service_tier=models.service_tier,
                        batch=models.batch_window_s is not None)

    def tiers(self, spec: ModelSpec) -> tuple[str, ...]:
        """The tiers a call of this model may be billed at, as the run calls it."""
        if self.batch and spec.provider in BATCH_PROVIDERS:
            return ("batch",)
        if spec.provider != "openai":
            return ("",)
        return {"default": ("",), "auto": ("", "priority")}.get(self.service_tier, (self.service_tier,))

    def known(self, spec: ModelSpec) -> bool:
        return spec.offline or self.cost(spec, Usage(1000, 1000)) is not None

    def cost(self, spec: ModelSpec, usage: Usage) -> float | None:
        """USD for one call, None if the model's price is unknown (offline models cost nothing)."""
        if spec.offline:
            return 0.0
        if self.long_cache and spec.provider == "anthropic" and usage.tokens_cache_write:
            # 1-hour cache writes: twice the input price, i.e. the input price once more over fresh input
            # (the input price at this prompt's size: long prompts have a dearer tier)
            fresh = self._table_cost(spec, Usage(usage.tokens_in, usage.tokens_out, usage.tokens_cached, tier=usage.tier))
            inputs = self._table_cost(spec, Usage(usage.tokens_in, 0, tier=usage.tier))
            if fresh is None or inputs is None:
                return None
            return fresh + min(usage.tokens_cache_write, usage.tokens_in) * inputs / usage.tokens_in
        return self._table_cost(spec, usage)

    def _table_cost(self, spec: ModelSpec, usage: Usage) -> float | None:
        own = self.own.get(spec.text) or self.own.get(f"{spec.provider}:{spec.model}")
        if own is not None:
            return own.cost(usage)
        return _catalogue_cost(spec, usage)

    def worst_case(self, spec: ModelSpec, tokens_in: int, tokens_out: int) -> float | None:
        """The most a call with at most tokens_in prompt tokens and tokens_out generated tokens can cost:
        every prompt token at the dearer of the fresh and the cache-write price, every output token billed, at the
        dearest tier the call may be billed at."""
        costs = [self.cost(spec, Usage(tokens_in, tokens_out, tokens_cache_write=written, tier=tier))
                 for tier in self.tiers(spec) for written in (0, tokens_in)]
        return None if None in costs else max(costs)


def read_prices(path: Path) -> dict[str, Price]:
    """The entries of a user's prices file, checked: one-line errors that name the file and the entry."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PriceError(f"cannot read the prices file {path}: {exc}") from None
    prices = {}
    for key, entry in data.items():
        where = f"{path}: [{key!r}]"
        if not isinstance(entry, dict):
            raise PriceError(f'{where} must be a table: ["{key}"] with input = and output = (USD per million tokens)')
        try:
            offline = parse_spec(key).offline
        except ValueError as exc:
            raise PriceError(f"{where}: not a model spec ({exc})") from None
        if offline:
            raise PriceError(f"{where}: not a hosted model (openai:MODEL, anthropic:MODEL, openai-compat@URL:MODEL); "
                             "an agent implementation the run starts by name costs nothing")
        unknown = sorted(set(entry) - PRICE_KEYS)
        missing = sorted({"input", "output"} - set(entry))
        if unknown or missing:
            raise PriceError(f"{where}: " + (f"unknown keys {', '.join(unknown)}" if unknown else
                                             f"missing {', '.join(missing)}") + f" (keys: {', '.join(sorted(PRICE_KEYS))})")
        for name, value in entry.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise PriceError(f"{where}.{name} must be a number of USD per million tokens >= 0, not {value!r}")
        prices[key] = Price(**{k: float(v) for k, v in entry.items()})
    return prices


# -- genai-prices -----------------------------------------------------------------------------------
_PROVIDER_IDS = {"openai": "openai", "anthropic": "anthropic", "gemini": "google", "bedrock": "aws"}
BATCH_PROVIDERS = ("openai", "anthropic")     # whose calls --batch-window-s sends through a Batch API


def price_context(tier: str) -> dict[str, str] | None:
    """genai-prices' name for a tier's price variant."""
    return {"processing": "batch"} if tier == "batch" else {"service_tier": tier} if tier else None


def _catalogue_cost(spec: ModelSpec, usage: Usage) -> float | None:
    from genai_prices import Usage as CatalogueUsage, calc_price   # imported on first use: it loads its table
    where = {"provider_id": _PROVIDER_IDS[spec.provider]} if spec.provider in _PROVIDER_IDS \
        else {"provider_api_url": spec.base_url}
    # genai-prices counts cache reads and writes inside input_tokens, as OpenAI reports them
    fresh = CatalogueUsage(input_tokens=usage.tokens_in, output_tokens=usage.tokens_out,
                           cache_read_tokens=min(usage.tokens_cached, usage.tokens_in) or None,
                           cache_write_tokens=min(usage.tokens_cache_write, usage.tokens_in) or None)
    try:
        return float(calc_price(fresh, spec.model, price_context=price_context(usage.tier), **where).total_price)
    except LookupError:
        return None
    except ValueError:   # a price table that cannot price this usage (e.g. no cache-write price): as fresh input
        if not usage.tokens_cache_write:
            return None
        return _catalogue_cost(spec, Usage(usage.tokens_in, usage.tokens_out, usage.tokens_cached, 0, usage.tier))


@functools.cache
def catalogue_version() -> str:
    from importlib.metadata import version
    return f"genai-prices {version('genai-prices')}"


# -- what the coordinator asks -----------------------------------------------------------------------
PROMPT_OVERHEAD_TOKENS = 64   # chat-format tokens around the two messages
UNRENDERED_PACK_BYTES = 512 * 1024   # the bound taken for a prompt pack the coordinator cannot render
_NO_PLAN = Plan(text="", option_id="")   # a one-phase job's plan, unknown before its answer: counted apart


def usage_of(call) -> Usage:
    """The token counts of a protocols.jobs.ModelCall."""
    return Usage(call.tokens_in, call.tokens_out, call.tokens_cached, call.tokens_cache_write, call.tier)


def job_worst_case(book: PriceBook, spec: ModelSpec, kind: str, request, max_tokens: int) -> float | None:
    """The most a plan, code or repair job can cost: its first call at half of max_tokens and, if that answer
    is cut off, one more at max_tokens (agents/workers/llm/agent.py), each with its prompt at one token per byte (a
    byte-level tokenizer never makes more tokens than bytes) and every prompt token at the dearest input price. A
    code job asked for edits may ask once more for the whole kernel (the same again, with the reason and, in
    one-phase mode, the plan the model wrote: at most max_tokens more prompt tokens)."""
    import msgspec

    from autocomp_zmq.agents.workers.llm.prompts import EDITS_ERROR_CHARS, render, whole_kernel_prompt
    fallback = kind == "code" and request.edits
    try:
        prompt_bytes = len(render(kind, request).text.encode())
        if fallback:    # the reason given back: at most EDITS_ERROR_CHARS characters of 4 bytes
            whole = whole_kernel_prompt(request, request.plan or _NO_PLAN, "")
            fallback_bytes = len(whole.text.encode()) + 4 * EDITS_ERROR_CHARS
    except ValueError:   # no prompt pack here (a plug-in agent's target): the request plus more than any pack
        prompt_bytes = fallback_bytes = len(msgspec.json.encode(request)) + UNRENDERED_PACK_BYTES
    prompts = [prompt_bytes] + ([fallback_bytes + (0 if request.plan else max_tokens)] if fallback else [])
    first = first_limit(max_tokens)
    limits = (first, max_tokens) if first < max_tokens else (first,)
    costs = [book.worst_case(spec, size + PROMPT_OVERHEAD_TOKENS, limit) for size in prompts for limit in limits]
    return None if None in costs else sum(costs)


def cap_refusal(book: PriceBook, specs: list[ModelSpec], prompt_bytes: int, max_tokens: int,
                max_usd: float) -> str | None:
    """Why --max-cost admits no plan job at all (None when one fits): the cheapest plan model's worst case for
    the smallest prompt a plan job can have (the shared prefix and the starting kernel) already exceeds the cap.
    Says what one job may cost and the --max-tokens that would fit."""
    hosted = [s for s in specs if not s.offline and book.known(s)]
    if not hosted:
        return None
    tokens_in = prompt_bytes + PROMPT_OVERHEAD_TOKENS

    def worst(spec: ModelSpec, limit: int) -> float:
        first = first_limit(limit)
        return sum(book.worst_case(spec, tokens_in, n) or 0.0 for n in ((first, limit) if first < limit else (first,)))

    spec = min(hosted, key=lambda s: worst(s, max_tokens))
    cost = worst(spec, max_tokens)
    if cost <= max_usd:
        return None
    fits = [n for n in (2 ** k * 1024 for k in range(8)) if n < max_tokens and worst(spec, n) <= max_usd]
    lower = f"--max-tokens {max(fits)} fits it" if fits else "no --max-tokens from 1024 fits it"
    return (f"--max-cost ${max_usd:.2f} admits no model call: one plan job of {spec.text} may cost up to "
            f"${cost:.4f} (a prompt of at least {tokens_in:,} tokens, answered within --max-tokens {max_tokens:,} "
            f"and once more if cut off); raise --max-cost, or lower --max-tokens ({lower})")


def cost_functions(book: PriceBook, max_tokens: int):
    """The coordinator's two prices (agents/engine/coordinator.py CostPolicy) from this book: a finished call's cost
    from its tokens, and a job's worst case at --max-tokens. None for a model no spec names (a plug-in agent's)."""
    def call_cost(call) -> float | None:
        if call.billing == BILLED_NONE:
            return 0.0
        try:
            spec = parse_spec(call.model)
        except SpecError:
            return None
        if call.billing == BILLED_UNKNOWN:   # its tokens are bounds: the prompt at a byte a token, the output limit
            return book.worst_case(spec, call.tokens_in, call.tokens_out)   # at the dearest tier it may have had
        return book.cost(spec, usage_of(call))

    def worst_case(job) -> float | None:
        try:
            return job_worst_case(book, parse_spec(job.model), job.kind, job.payload, max_tokens)
        except SpecError:
            return None

    return call_cost, worst_case
