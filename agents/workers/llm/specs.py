"""Model specifications as users write them on the command line or in the config:

    openai:MODEL                      OpenAI (OPENAI_API_KEY)
    anthropic:MODEL                   Anthropic (ANTHROPIC_API_KEY)
    gemini:MODEL                      Google's Gemini API (GEMINI_API_KEY)
    bedrock:MODEL_ID                  AWS Bedrock's Converse API, e.g. bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0
                                      (AWS credentials and region as boto3 finds them: AWS_* variables, a
                                      profile, an instance role; the extra autocomp-zmq[bedrock])
    openai-compat@BASE_URL:MODEL      any OpenAI-compatible server (vLLM, Ollama, LM Studio, Together,
                                      OpenRouter...); BASE_URL includes its path, e.g. http://host:8000/v1;
                                      key from OPENAI_COMPAT_API_KEY if the server wants one
    openai-compat[VAR]@BASE_URL:MODEL the same with the key in the environment variable VAR (one per
                                      endpoint: two keyed providers can be ensembled)
    heuristic                         the offline auto-tuner (no network)
    NAME                              any other agent implementation registered for the role (agents/workers/registry.py),
                                      started on the run's host like the heuristic; it serves the model NAME
    replay                            the models of the run given by --replay RUN_DIR, answered only
                                      from that run's store (no network)
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit


MAX_WAIT_S = 60.0   # the longest wait between tries of a call: a Retry-After above it, or backoff, is cut to it
BATCH_LOOK_S = 25 * 3600.0   # how long a batch is waited for (the providers end theirs within 24 h)


@dataclass(frozen=True)
class CallOptions:
    timeout_s: float = 600.0
    max_retries: int = 4                  # retries of a call the provider did not bill (agents/workers/llm/faults.py)
    backoff_s: float = 1.0                # the first wait between them without a Retry-After (doubling)
    concurrency: int = 64                 # calls to one model at once (--llm-concurrency; fewer after 429s)
    openai_api: str = "responses"         # how OpenAI's own models are called: responses | chat
    long_cache: bool = False              # Anthropic's 1-hour cache, OpenAI's 24-hour retention (--long-cache)
    service_tier: str = "default"         # OpenAI's processing tier: default | flex | priority | auto
    batch_window_s: float | None = None   # through the Batch APIs, calls this close together in one batch
    batch_poll_s: float = 2.0             # the first wait between looks at a batch (doubling up to MAX_WAIT_S)
    max_tokens: int = 32000               # the most output tokens (reasoning included) a call may use
    temperature: float | None = None
    reasoning_effort: str | None = None   # OpenAI reasoning models: low | medium | high


def first_limit(max_tokens: int) -> int:
    """The output limit of a call's first try: half of --max-tokens (the rest is for one retry of a cut-off answer)."""
    return max(1, max_tokens // 2)


class SpecError(ValueError):
    """A model specification or its key is unusable; the message says how to fix it."""


KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
                 "openai-compat": "OPENAI_COMPAT_API_KEY"}
NATIVE = ("openai", "anthropic", "gemini", "bedrock")     # providers called through their own SDK


@dataclass(frozen=True)
class ModelSpec:
    provider: str
    model: str
    base_url: str | None = None
    text: str = ""
    key_var: str | None = None        # openai-compat[VAR]@...: the endpoint's own key variable

    @property
    def offline(self) -> bool:
        """An agent implementation the run starts on its own host by name (no network, no key, no price)."""
        return self.provider == "agent"

    @property
    def key_variable(self) -> str | None:
        return self.key_var or KEY_VARIABLES.get(self.provider)

    def api_key(self, env=os.environ) -> str | None:
        return env.get(self.key_variable) if self.key_variable else None


# Offline implementations whose answers follow the job's seed (the heuristic, and the synthetic agents of the
# benchmarks): two jobs that differ only in their seed are different jobs, and calling them costs nothing.
SEEDED_MODELS = frozenset({"heuristic", "synthetic"})


def answers_from_seed(model: str | None) -> bool:
    return model in SEEDED_MODELS


_COMPAT = re.compile(r"openai-compat(?:\[([^\]]*)\])?@")
_AGENT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
SPEC_FORMS = ("use openai:MODEL, anthropic:MODEL, gemini:MODEL, bedrock:MODEL_ID, openai-compat@BASE_URL:MODEL, replay, "
              "or the name of "
              "an agent implementation (heuristic, or one a plug-in registers)")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_spec(text: str) -> ModelSpec:
    text = text.strip()
    if text == "replay":
        raise SpecError("model 'replay' needs --replay RUN_DIR, the recorded run whose answers it replays")
    if _AGENT_NAME.fullmatch(text):   # whether the role has such an implementation is checked by the run
        return ModelSpec("agent", text, text=text)
    compat = _COMPAT.match(text)
    if compat:
        key_var = compat.group(1)
        if key_var is not None and not _ENV_NAME.fullmatch(key_var):
            raise SpecError(f"model {text!r}: {key_var!r} is not an environment variable name (write "
                            "openai-compat[MY_API_KEY]@BASE_URL:MODEL)")
        rest = text[compat.end():]
        scheme_end = rest.find("://")
        path_start = rest.find("/", scheme_end + 3) if scheme_end >= 0 else -1
        split = rest.find(":", path_start) if path_start >= 0 else -1
        if scheme_end < 0 or path_start < 0 or split < 0 or not rest[split + 1:]:
            raise SpecError(f"model {text!r}: write openai-compat@BASE_URL:MODEL with the base URL's path, "
                            "e.g. openai-compat@http://localhost:8000/v1:meta-llama/Llama-3.1-8B-Instruct")
        url = rest[:split]
        if urlsplit(url).scheme not in ("http", "https"):
            raise SpecError(f"model {text!r}: the base URL must start with http:// or https://")
        return ModelSpec("openai-compat", rest[split + 1:], url, text, key_var)
    provider, sep, model = text.partition(":")
    if provider in NATIVE and sep and model:
        return ModelSpec(provider, model, text=text)
    raise SpecError(f"unknown model {text!r}: {SPEC_FORMS}")


def check_keys(specs: list[ModelSpec], env=os.environ) -> None:
    """Before any work starts: every hosted model needs its key in the environment."""
    for spec in specs:
        if spec.provider == "bedrock":
            check_aws(spec)
        elif (spec.provider in NATIVE or spec.key_var) and not spec.api_key(env):
            raise SpecError(f"model {spec.text} needs the environment variable {spec.key_variable} "
                            f"(the API key); it is not set")


def check_aws(spec: ModelSpec) -> None:
    """A Bedrock model needs boto3, AWS credentials and a region, found as boto3 finds them."""
    try:
        import boto3
    except ImportError:
        raise SpecError(f"model {spec.text} needs boto3, AWS's SDK: pip install 'autocomp-zmq[bedrock]'") from None
    session = boto3.Session()
    if session.get_credentials() is None:
        raise SpecError(f"model {spec.text} needs AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                        "AWS_PROFILE, or an instance role); none were found")
    if not aws_region(session):
        raise SpecError(f"model {spec.text} needs an AWS region: set AWS_REGION (e.g. us-east-1)")


def aws_region(session) -> str | None:
    """AWS_REGION as AWS's other SDKs and CLI read it, then boto3's own chain (AWS_DEFAULT_REGION, the profile)."""
    return os.environ.get("AWS_REGION") or session.region_name
