"""Code as edits: reading a coder's edits and applying them (exact match first, then whitespace ignored line by
line; an edit that matches nowhere or more than once is an error that names it), the prompts that ask for edits and
for the whole kernel after edits failed, and the worst case a code job asked for edits may cost."""
from __future__ import annotations

import json

import pytest

from autocomp_zmq.agents.engine.search import BeamConfig
from autocomp_zmq.agents.workers.llm.edits import Edit, apply_edits, parse_edits
from autocomp_zmq.agents.workers.llm.parse import AnswerError
from autocomp_zmq.agents.workers.llm.pricing import PriceBook, job_worst_case
from autocomp_zmq.agents.workers.llm.prompts import render, whole_kernel_prompt
from autocomp_zmq.agents.workers.llm.specs import parse_spec
from autocomp_zmq.protocols.jobs import CodeRequest, Parent, Plan, ProblemRef
from tests.unit.test_search import MENU, PROBLEM
from tests.unit.test_search_modes import run_one_phase

KERNEL = """void kernel(int *a, int n) {
    for (int i = 0; i < n; i++) {
        a[i] = a[i] * 2;
    }
    fence();
}
"""


def answer(*edits) -> str:
    return "I will tile the loop.\n```json\n" + json.dumps({"edits": [{"old": o, "new": n} for o, n in edits]}) + \
        "\n```\n"


def test_exact_edits_apply_in_order_each_to_what_the_one_before_left():
    edits = parse_edits(answer(("a[i] * 2", "a[i] << 1"), ("a[i] << 1;", "a[i] << 1;  // doubled")))
    assert apply_edits(KERNEL, edits) == KERNEL.replace("a[i] * 2;", "a[i] << 1;  // doubled")


def test_an_edit_quoted_with_other_whitespace_applies_to_its_lines_and_takes_their_indentation():
    quoted = "for (int i = 0;  i < n; i++) {\n  a[i] = a[i] * 2;\n}"          # re-indented and re-spaced
    new = "for (int i = 0; i < n; i += 2) {\n  a[i] = a[i] * 2;\n  a[i + 1] = a[i + 1] * 2;\n}"
    out = apply_edits(KERNEL, [Edit(old=quoted, new=new)])
    assert "    for (int i = 0; i < n; i += 2) {\n      a[i] = a[i] * 2;\n      a[i + 1] = a[i + 1] * 2;\n    }" in out
    assert out.startswith("void kernel(int *a, int n) {\n") and out.endswith("    fence();\n}\n")


@pytest.mark.parametrize("old, why", [("a[i] = a[i] * 3;", "matches nowhere in the current code"),
                                      ("a", "occurs"), ("   ", "its old text is empty")])
def test_an_edit_that_matches_nowhere_or_more_than_once_is_an_error_naming_it(old, why):
    with pytest.raises(AnswerError) as err:
        apply_edits(KERNEL, [Edit(old="fence();", new="fence(); "), Edit(old=old, new="x")])
    assert err.value.kind == "bad_edits" and "edit 2" in str(err.value) and why in str(err.value)


def test_lines_that_repeat_are_ambiguous_even_with_whitespace_ignored():
    code = "x = 1;\ny = 2;\n  x = 1;\n"
    with pytest.raises(AnswerError, match=r"matches 2 times \(at lines 1, 3\)"):
        apply_edits(code, [Edit(old="x  =  1;", new="x = 3;")])


@pytest.mark.parametrize("text, why", [("```json\n{\"edits\": [{\"old\": \"a\",}]}\n```", "not valid JSON"),
                                       ("```json\n{\"edits\": [{\"from\": \"a\", \"to\": \"b\"}]}\n```", "shape"),
                                       ("```json\n{\"edits\": []}\n```", "no edits"),
                                       ("Here is my plan, but no edits.", "not valid JSON")])
def test_malformed_edits_are_a_clear_error(text, why):
    with pytest.raises(AnswerError) as err:
        parse_edits(text)
    assert err.value.kind == "bad_edits" and why in str(err.value)


def test_a_bare_list_and_reasoning_before_the_block_are_read():
    edits = parse_edits('<think>the json: {"edits": 1}</think>\n```json\n[{"old": "a", "new": "b"}]\n```')
    assert edits == [Edit(old="a", new="b")]


GEMMINI = ProblemRef(target="gemmini-sim", name="gemm-256x256x256", family="gemm")


def _request(**extra) -> CodeRequest:
    return CodeRequest(problem=GEMMINI, parent=Parent(id="p", code=KERNEL, latency=100.0), model="openai:gpt-4o",
                       seed=1, **extra)


def test_the_code_prompt_asks_for_edits_only_when_the_mode_is_on_and_the_fallback_asks_for_the_whole_kernel():
    plan = Plan(text="Double the loop step.", option_id="unroll")
    assert "COMPLETE new kernel" in render("code", _request(plan=plan)).body
    edits = render("code", _request(plan=plan, edits=True)).body
    assert '{"edits": [{"old":' in edits and "COMPLETE new kernel" not in edits
    back = whole_kernel_prompt(_request(menu=[], edits=True), plan, "edit 1: its old text matches nowhere")
    assert "COMPLETE new kernel" in back.body and "edit 1: its old text matches nowhere" in back.body
    assert "Double the loop step." in back.body and back.prefix == render("code", _request(plan=plan)).prefix


def test_a_code_job_asked_for_edits_reserves_the_fallback_call_too():
    book, spec = PriceBook.load(None), parse_spec("openai:gpt-4o")
    plan = Plan(text="Double the loop step.", option_id="unroll")
    whole = job_worst_case(book, spec, "code", _request(plan=plan), 8000)
    edits = job_worst_case(book, spec, "code", _request(plan=plan, edits=True), 8000)
    one_phase = job_worst_case(book, spec, "code", _request(menu=[], edits=True), 8000)
    assert whole > 0 and edits > 1.9 * whole and one_phase > edits


def test_edit_jobs_are_other_jobs_than_whole_file_ones_and_both_modes_combine():
    base = dict(iterations=1, beam=1, plans=2, codes=1, seed=3, patience=10, one_phase=True,
                plan_models=("openai:m",), code_models=("openai:m",))
    _, whole = run_one_phase(BeamConfig(**base))
    _, edits = run_one_phase(BeamConfig(**base, code_edits=True))
    code = lambda seen: [j for j in seen if j.kind == "code"]   # noqa: E731
    assert all(j.payload.edits for j in code(edits)) and not any(j.payload.edits for j in code(whole))
    assert not {j.id for j in code(whole)} & {j.id for j in code(edits)}
