"""Before any agent starts: does every model endpoint answer, and does it accept the key?

One cheap request per distinct endpoint (listing the models, which costs nothing) through the official
SDK, with a short timeout and no retries. A server that answers with any HTTP status other than an
authentication error is reachable: some OpenAI-compatible servers do not implement the listing, and
that is not a reason to refuse a run."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import anthropic
import openai

from agents.llm.providers import root_cause
from agents.llm.specs import ModelSpec


def endpoint_problem(spec: ModelSpec, timeout_s: float = 10.0) -> str | None:
    """None if the endpoint of spec answers; otherwise why not, in words."""
    key = spec.api_key()
    try:
        if spec.provider == "anthropic":
            anthropic.Anthropic(api_key=key, timeout=timeout_s, max_retries=0).models.list(limit=1)
        else:
            openai.OpenAI(api_key=key or "none", base_url=spec.base_url, timeout=timeout_s,
                          max_retries=0).models.list()
    except (openai.AuthenticationError, anthropic.AuthenticationError, openai.PermissionDeniedError,
            anthropic.PermissionDeniedError) as exc:
        return f"rejected the API key ({exc.status_code})"
    except (openai.APITimeoutError, anthropic.APITimeoutError):
        return f"did not answer within {timeout_s:g} s"
    except (openai.APIConnectionError, anthropic.APIConnectionError) as exc:
        return f"does not answer: {root_cause(exc)}"
    except (openai.APIStatusError, anthropic.APIStatusError):
        return None
    return None


def check_endpoints(specs: list[ModelSpec], timeout_s: float = 10.0) -> list[str]:
    """One line per hosted model whose endpoint does not answer (endpoints checked in parallel)."""
    hosted = {s.text: s for s in specs if not s.offline}
    endpoints: dict[tuple, list[ModelSpec]] = {}
    for spec in hosted.values():
        endpoints.setdefault((spec.provider, spec.base_url), []).append(spec)
    if not endpoints:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(endpoints))) as pool:
        problems = list(pool.map(lambda group: endpoint_problem(group[0], timeout_s), endpoints.values()))
    return [f"model {s.text}: the endpoint {s.base_url or s.provider} {problem}"
            for group, problem in zip(endpoints.values(), problems) if problem for s in group]

