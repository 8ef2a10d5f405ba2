"""Prices as providers bill them: genai-prices' table (cached and cache-write tokens, current models), the
user's file merged over it model by model, and the worst case of a job that the cost cap reserves."""
from __future__ import annotations

import msgspec
import pytest

from autocomp_zmq.agents.workers.llm.pricing import PriceBook, PriceError, Usage, job_worst_case
from autocomp_zmq.agents.workers.llm.prompts import render
from autocomp_zmq.agents.workers.llm.specs import parse_spec
from autocomp_zmq.protocols.jobs import CodeRequest

GPT5, SONNET = parse_spec("openai:gpt-5"), parse_spec("anthropic:claude-sonnet-4-5")
LOCAL = parse_spec("openai-compat@http://localhost:8000/v1:qwen3-coder")


def test_anthropics_one_hour_cache_writes_cost_twice_the_input_price():
    book, long = PriceBook(), PriceBook(long_cache=True)
    usage = Usage(100_000, 10_000, tokens_cached=50_000, tokens_cache_write=40_000)
    # claude-sonnet-4-5: 1-hour cache writes at $6 (2 x $3 input) where the 5-minute cache's are $3.75
    assert long.cost(SONNET, usage) == pytest.approx((10_000 * 3 + 50_000 * 0.3 + 40_000 * 6 + 10_000 * 15) / 1e6)
    assert long.worst_case(SONNET, 100_000, 10_000) == pytest.approx((100_000 * 6 + 10_000 * 15) / 1e6)
    assert long.cost(GPT5, Usage(100_000, 10_000)) == book.cost(GPT5, Usage(100_000, 10_000))  # OpenAI: no surcharge


def test_current_models_are_priced_from_the_catalogue():
    book = PriceBook()
    # gpt-5: $1.25 per million input tokens, $0.125 cached, $10 output (reasoning tokens are output tokens)
    assert book.cost(GPT5, Usage(tokens_in=100_000, tokens_out=10_000)) == pytest.approx(0.225)
    assert book.cost(GPT5, Usage(100_000, 10_000, tokens_cached=80_000)) == pytest.approx(
        (20_000 * 1.25 + 80_000 * 0.125 + 10_000 * 10) / 1e6)
    # claude-sonnet-4-5: $3 input, $0.30 cache read, $3.75 cache write, $15 output; dated ids are the same model
    assert book.cost(SONNET, Usage(100_000, 10_000, tokens_cached=50_000, tokens_cache_write=40_000)) == pytest.approx(
        (10_000 * 3 + 50_000 * 0.3 + 40_000 * 3.75 + 10_000 * 15) / 1e6)
    dated = parse_spec("anthropic:claude-sonnet-4-5-20250929")
    assert book.cost(dated, Usage(1000, 1000)) == book.cost(SONNET, Usage(1000, 1000))
    for model in ("anthropic:claude-opus-4-1", "openai:o3", "openai:gpt-5-mini", "anthropic:claude-haiku-4-5"):
        assert book.known(parse_spec(model)), model
    assert not book.known(LOCAL) and book.cost(parse_spec("openai:no-such-model-x"), Usage(1, 1)) is None
    assert book.cost(parse_spec("heuristic"), Usage(10**6, 10**6)) == 0


def test_the_users_file_overrides_one_model_and_keeps_the_rest(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text(f'["{LOCAL.text}"]\ninput = 0.5\noutput = 2.0\ncached_input = 0.05\n\n'
                    '["openai:gpt-5"]\ninput = 2.0\noutput = 20.0\n')
    book = PriceBook.load(path)
    assert book.cost(LOCAL, Usage(1_000_000, 1_000_000, tokens_cached=500_000)) == pytest.approx(0.25 + 0.025 + 2.0)
    assert book.cost(GPT5, Usage(1_000_000, 0)) == pytest.approx(2.0)          # overridden
    assert book.cost(SONNET, Usage(100_000, 0)) == pytest.approx(0.3)          # still from the catalogue
    assert book.cost(SONNET, Usage(1_000_000, 0)) == pytest.approx(6.0)        # its long-context tier


@pytest.mark.parametrize("text, message", [
    ('["openai:gpt-5"]\ninput = 1.0\n', r"\['openai:gpt-5'\]: missing output"),
    ('["openai:gpt-5"]\ninput = 1.0\noutput = -2\n', "output must be a number of USD per million tokens >= 0"),
    ('["openai:gpt-5"]\ninput = 1.0\noutput = 2\nouput = 3\n', "unknown keys ouput"),
    ('["gpt-5"]\ninput = 1.0\noutput = 2\n', "not a hosted model"),
    ('["openai:"]\ninput = 1.0\noutput = 2\n', "not a model spec"),
    ('input = 1.0\n', "must be a table"),
    ("[[[", "cannot read the prices file"),
])
def test_bad_price_files_are_one_line_errors(tmp_path, text, message):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PriceError, match=message):
        PriceBook.load(path)


def test_the_worst_case_of_a_job_covers_its_prompt_and_both_tries():
    request = msgspec.convert({
        "problem": {"target": "gemmini-sim", "name": "gemm-256x256x256", "family": "gemm",
                    "dims": {"I": 256, "J": 256, "K": 256}, "description": "int8 GEMM"},
        "parent": {"id": "p", "code": "void solution() {}", "latency": 1000},
        "plan": {"text": "tile it", "option_id": "tile-sizes"}, "model": SONNET.text, "seed": 1}, CodeRequest)
    book = PriceBook()
    prompt_bytes = len(render("code", request).text.encode())
    worst = job_worst_case(book, SONNET, "code", request, max_tokens=8000)
    # every prompt byte at the cache-write price ($3.75) twice, 4000 + 8000 output tokens at $15
    expected = (2 * (prompt_bytes + 64) * 3.75 + 12_000 * 15) / 1e6
    assert worst == pytest.approx(expected)
    assert job_worst_case(book, LOCAL, "code", request, 8000) is None


def test_each_tier_is_priced_from_the_catalogue_and_the_cap_takes_the_dearest_one_a_call_may_get():
    usage = dict(tokens_in=100_000, tokens_out=10_000)
    standard = 0.225                                              # gpt-5 at $1.25 / $10
    book = PriceBook()
    assert book.cost(GPT5, Usage(**usage, tier="flex")) == pytest.approx(standard / 2)
    assert book.cost(GPT5, Usage(**usage, tier="priority")) == pytest.approx(standard * 2)
    assert book.cost(GPT5, Usage(**usage, tier="batch")) == pytest.approx(standard / 2)
    assert book.cost(SONNET, Usage(**usage, tier="batch")) == pytest.approx((100_000 * 1.5 + 10_000 * 7.5) / 1e6)
    # what a call is asked for decides what the cap reserves: --service-tier auto may be served at priority
    assert PriceBook(service_tier="auto").worst_case(GPT5, **usage) == pytest.approx(standard * 2)
    assert PriceBook(service_tier="flex").worst_case(GPT5, **usage) == pytest.approx(standard / 2)
    assert PriceBook(batch=True).worst_case(GPT5, **usage) == pytest.approx(standard / 2)
    assert PriceBook(service_tier="priority").tiers(SONNET) == ("",)     # OpenAI's tiers only
    assert PriceBook(batch=True).tiers(LOCAL) == ("",)                   # no Batch API behind a compat server


def test_a_users_own_price_holds_at_every_tier(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text('["openai:gpt-5"]\ninput = 1.0\noutput = 1.0\n')
    book = PriceBook.load(path, batch=True)
    assert book.cost(GPT5, Usage(10**6, 0, tier="batch")) == book.cost(GPT5, Usage(10**6, 0)) == 1.0


def test_a_model_jobs_lease_fits_the_protocol_however_long_its_calls_may_take():
    from autocomp_zmq.agents.run.runconfig import ConfigError, RunConfig
    from autocomp_zmq.protocols.control import MAX_LEASE_S
    assert RunConfig.of(call_timeout_s=100_000).model_lease_s == MAX_LEASE_S     # before: a job no worker took
    assert 86_400 < RunConfig.of(batch_window_s=5).model_lease_s <= MAX_LEASE_S  # a batch may take a day
    with pytest.raises(ConfigError, match="llm_lease_s|llm-lease-s"):
        RunConfig.of(llm_lease_s=10 * 86400)
