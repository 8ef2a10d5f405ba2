"""Before any agent starts: does every model endpoint answer, accept the key, and know the model?

One cheap request per distinct endpoint (listing its models, which costs nothing) through the official SDK,
with a short timeout and no retries; Anthropic models are looked up by id (aliases included). A model the
listing does not hold is a mistake to catch now, before a run pays for its other models. A server that
answers the listing with another HTTP status is reachable: some OpenAI-compatible servers do not
implement it, and that is not a reason to refuse a run."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from autocomp_zmq.agents.workers.llm.faults import root_cause
from autocomp_zmq.agents.workers.llm.providers import sdk
from autocomp_zmq.agents.workers.llm.specs import ModelSpec

SHOWN_MODELS = 8   # how many of an endpoint's models an error lists


def endpoint_problems(specs: list[ModelSpec], timeout_s: float = 10.0) -> dict[str, str]:
    """For models of one endpoint: model spec -> why it cannot be used (nothing for those that can). Only this
    endpoint's SDK is imported (both name their errors alike)."""
    spec = specs[0]
    if spec.provider == "bedrock":   # credentials and region were checked with the keys; access by the first call
        return {}
    key = spec.api_key()
    api = sdk(spec.provider)
    if spec.provider == "gemini":
        return _gemini_problems(api, specs, key, timeout_s)
    try:
        if spec.provider == "anthropic":
            client = api.Anthropic(api_key=key, timeout=timeout_s, max_retries=0)
            missing = {}
            for s in specs:
                try:
                    client.models.retrieve(s.model)
                except api.NotFoundError as exc:
                    if s.model in str(exc):   # not a proxy that lacks the endpoint: the API names the model
                        missing[s.text] = f"does not know the model {s.model!r} (see `anthropic.models.list`)"
            return missing
        listed = api.OpenAI(api_key=key or "none", base_url=spec.base_url, timeout=timeout_s,
                            max_retries=0).models.list()
        served = [m.id for m in listed.data]
    except (api.AuthenticationError, api.PermissionDeniedError) as exc:
        return {s.text: f"rejected the API key ({exc.status_code})" for s in specs}
    except api.APITimeoutError:
        return {s.text: f"did not answer within {timeout_s:g} s" for s in specs}
    except api.APIConnectionError as exc:
        return {s.text: f"does not answer: {root_cause(exc)}" for s in specs}
    except api.APIStatusError:
        return {}
    if not served:
        return {}
    shown = ", ".join(served[:SHOWN_MODELS]) + (f" and {len(served) - SHOWN_MODELS} more" if len(served) > SHOWN_MODELS
                                                 else "")
    return {s.text: f"does not serve the model {s.model!r} (it lists {shown})" for s in specs if s.model not in served}


def _gemini_problems(genai, specs: list[ModelSpec], key: str | None, timeout_s: float) -> dict[str, str]:
    """Gemini models looked up one by one (google-genai raises one error class, with the HTTP status as `code`)."""
    client = genai.Client(api_key=key, http_options=genai.types.HttpOptions(
        timeout=int(timeout_s * 1000), retry_options=genai.types.HttpRetryOptions(attempts=1)))
    problems = {}
    for s in specs:
        try:
            client.models.get(model=s.model)
        except genai.errors.APIError as exc:
            if exc.code in (401, 403) or (exc.code == 400 and "API key" in str(exc)):
                problems[s.text] = f"rejected the API key ({exc.code})"
            elif exc.code == 404:
                problems[s.text] = f"does not know the model {s.model!r}"
        except Exception as exc:  # noqa: BLE001 - the transport's errors: httpx's or its successor's
            problems[s.text] = f"does not answer: {root_cause(exc)}"
    return problems


def check_endpoints(specs: list[ModelSpec], timeout_s: float = 10.0) -> list[str]:
    """One line per hosted model that cannot be used (endpoints checked in parallel)."""
    hosted = {s.text: s for s in specs if not s.offline}
    endpoints: dict[tuple, list[ModelSpec]] = {}
    for spec in hosted.values():
        endpoints.setdefault((spec.provider, spec.base_url, spec.key_variable), []).append(spec)
    if not endpoints:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(endpoints))) as pool:
        found = list(pool.map(lambda group: endpoint_problems(group, timeout_s), endpoints.values()))
    return [f"model {s.text}: the endpoint {s.base_url or s.provider} {problems[s.text]}"
            for group, problems in zip(endpoints.values(), found) for s in group if s.text in problems]
