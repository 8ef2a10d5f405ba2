"""Model-proposed menu options without processes: reading a strategist's answer, its prompt, and how beam search
runs proposals (one planner call per beam candidate and iteration, its plans after it, offered the proposals beside
the menu; a failed proposal leaves the menu alone; none in translation iterations)."""
from __future__ import annotations

import pytest

from autocomp_zmq.agents.engine.search import BeamConfig, BeamSearch, Translation
from autocomp_zmq.agents.run.runconfig import RunConfig
from autocomp_zmq.agents.run.runstart import RunError, check_modes
from autocomp_zmq.agents.workers.llm.parse import AnswerError
from autocomp_zmq.agents.workers.llm.pricing import PriceBook, job_worst_case
from autocomp_zmq.agents.workers.llm.prompts import render
from autocomp_zmq.agents.workers.llm.proposals import parse_proposals
from autocomp_zmq.agents.workers.llm.specs import parse_spec
from autocomp_zmq.protocols.jobs import (CodeResult, EvalReport, MenuOption, Parent, Plan, PlanRequest, PlanResult,
                                         ProblemRef)
from tests.unit.test_search import MENU, PROBLEM

ANSWER = """<think>which ideas are new?</think>
Here are my proposals:
- Stage B through the accumulator: keep the B panel as int32 rows and reuse it across strips.
- **Option 1**: not a title of its own but still one idea
1. Split K across two accumulators: halve the dependency chain of every output tile.
- Option 2: the menu already has this one
- stage b through the ACCUMULATOR: said twice
Some closing prose that is not an option.
"""


def test_bullet_lines_become_new_options_with_ids_from_their_titles():
    got = parse_proposals(ANSWER, 10, ["Option 2", "Option 7"])
    assert [o.title for o in got] == ["Stage B through the accumulator", "Option 1",
                                      "Split K across two accumulators"]
    assert got[0].description.startswith("keep the B panel") and all(o.id.startswith("new-") for o in got)
    again = parse_proposals("- Stage B through the accumulator: another wording", 10, [])
    assert again[0].id == got[0].id          # the same idea proposed twice is one option
    assert len(parse_proposals(ANSWER, 2, [])) == 2


def test_an_answer_without_new_options_is_an_error_of_its_kind():
    with pytest.raises(AnswerError) as err:
        parse_proposals("- Option 2: again\nno bullets here", 5, ["Option 2"])
    assert err.value.kind == "no_options"


def _propose_request(count=4):
    return PlanRequest(problem=ProblemRef(target="gemmini-sim", name="gemm-256x256x256", family="gemm"),
                       parent=Parent(id="p", code="void solution() {}", latency=10.0), menu=[], model="openai:gpt-4o",
                       iteration=2, iterations=5, seed=1, propose=count)


def test_the_proposal_prompt_asks_for_new_options_and_is_priced_like_a_plan():
    body = render("plan", _propose_request()).body
    assert "# Your role: strategist" in body and "propose up to 4 NEW optimization options" in body
    assert "OPTION:" not in body and "void solution() {}" in body
    assert job_worst_case(PriceBook.load(None), parse_spec("openai:gpt-4o"), "plan", _propose_request(), 8000) > 0


def _run(cfg, translation=None, fail_proposals=False):
    search = BeamSearch(cfg, PROBLEM, "naive", MENU, translation=translation)
    search.start()
    seen, answered = [], set()
    while not search.done:
        for job in search.next_jobs():
            seen.append(job)
            p = job.payload
            if job.kind == "plan" and p.propose:
                assert not any(j.kind == "plan" and not j.payload.propose and j.ctx["parent_id"] ==
                               job.ctx["parent_id"] and j.iteration == job.iteration for j in seen)
                result = None if fail_proposals else PlanResult(model=job.model, proposals=[
                    MenuOption(id=f"new-{job.iteration}-{p.parent.id[:4]}", title="A new idea")])
            elif job.kind == "plan":
                result = PlanResult(plan=Plan(text=f"plan {p.seed}", option_id=p.menu[0].id), model=job.model)
            elif job.kind == "code":
                result = CodeResult(code=f"code {p.seed}", model=job.model)
            else:
                result = EvalReport(correct=True, latency=1000 if p.code == "naive" else 900 - len(answered))
                answered.add(p.code)
            search.on_result(job.id, result is not None, result, None if result else "failed")
    return search, seen


CFG = dict(iterations=2, beam=2, plans=2, codes=1, seed=4, patience=10, dropout=0.0, propose_options=3,
           plan_models=("openai:m",), code_models=("openai:m",))


def test_each_beam_candidate_gets_one_proposal_per_iteration_and_its_plans_offer_the_new_options():
    search, seen = _run(BeamConfig(**CFG))
    proposals = [j for j in seen if j.kind == "plan" and j.payload.propose == 3]
    plans = [j for j in seen if j.kind == "plan" and not j.payload.propose]
    assert len(proposals) == 1 + 2             # iteration 1: the start; iteration 2: a beam of two
    assert len(plans) == 2 * len(proposals)
    for plan in plans:
        ids = [o.id for o in plan.payload.menu]
        assert f"new-{plan.iteration}-{plan.payload.parent.id[:4]}" in ids and set(ids) > {o.id for o in MENU}
    assert search.best.latency < 1000


def test_a_failed_proposal_leaves_the_parents_plans_with_the_menu_alone():
    _, seen = _run(BeamConfig(**CFG), fail_proposals=True)
    plans = [j for j in seen if j.kind == "plan" and not j.payload.propose]
    assert plans and all({o.id for o in j.payload.menu} == {o.id for o in MENU} for j in plans)


def test_translation_iterations_propose_nothing():
    translation = Translation("def reference(): ...", (MenuOption(id="tr", title="Translate"),))
    _, seen = _run(BeamConfig(**{**CFG, "translate_iters": 1}), translation=translation)
    assert {j.iteration for j in seen if j.kind == "plan" and j.payload.propose} == {2}


def test_proposals_need_a_planning_model():
    specs = lambda m: {role: [parse_spec(m)] for role in ("planner", "coder", "repairer")}   # noqa: E731
    with pytest.raises(RunError, match="--propose-options: a planning model proposes"):
        check_modes(RunConfig.of(propose_options=4), specs("heuristic"))
    check_modes(RunConfig.of(propose_options=4), specs("openai:m"))
