"""Beam-search policy driven by scripted results: determinism under any
arrival order, duplicates counted once, dropout and ensembling statistics,
stage barriers."""
from __future__ import annotations

import hashlib
import random
import statistics

import pytest

from autocomp_zmq.agents.workers.llm.specs import answers_from_seed
from autocomp_zmq.agents.engine.search import BeamSearch, BeamConfig
from autocomp_zmq.protocols.jobs import CodeResult, EvalReport, MenuOption, Plan, PlanResult, ProblemRef

PROBLEM = ProblemRef(target="t", name="p", family="gemm")
MENU = [MenuOption(id=f"opt-{i}", title=f"Option {i}", description="d") for i in range(20)]


def answer(job):
    """A deterministic stand-in for the agents: code from the request, latency from the code."""
    p = job.payload
    if job.kind == "plan":
        return PlanResult(plan=Plan(text=f"plan {p.seed}", option_id=p.menu[0].id), model=job.model)
    if job.kind in ("code", "repair"):
        return CodeResult(code=f"code {p.seed}", model=job.model)
    h = int(hashlib.sha256(p.code.encode()).hexdigest()[:8], 16)
    if h % 7 == 0:
        return EvalReport(correct=False, error="wrong", error_kind="wrong_result")
    return EvalReport(correct=True, latency=1000 - h % 600 if p.code != "naive" else 1000)


def drive(cfg, order="fifo", seed=0, duplicates=False):
    search = BeamSearch(cfg, PROBLEM, "naive", MENU, seeded=answers_from_seed)
    rng = random.Random(seed)
    search.start()
    pending = []
    seen = []
    while not search.done:
        pending += search.next_jobs()
        assert pending, "search stalled"
        job = pending.pop(rng.randrange(len(pending)) if order == "random" else 0)
        seen.append(job)
        search.on_result(job.id, True, answer(job), None)
        if duplicates:
            search.on_result(job.id, True, answer(job), None)
    return search, seen


CFG = BeamConfig(iterations=4, beam=3, plans=3, codes=2, dropout=0.7, seed=5, patience=10)


def test_any_arrival_order_gives_the_same_beam():
    ref, _ = drive(CFG)
    for s in range(5):
        other, _ = drive(CFG, order="random", seed=s)
        assert [c.id for c in other.beam] == [c.id for c in ref.beam]
    assert ref.best.latency < 1000


def test_duplicate_results_count_once():
    ref, _ = drive(CFG)
    dup, _ = drive(CFG, duplicates=True)
    assert dup.evals_done == ref.evals_done and [c.id for c in dup.beam] == [c.id for c in ref.beam]


def test_failed_candidates_get_one_repair_each():
    search, seen = drive(CFG)
    failed = [c for c in search.candidates.values() if c.result and not c.correct and c.origin == "code"]
    repairs = [j for j in seen if j.kind == "repair"]
    assert failed and len(repairs) == len(failed)


def test_dropout_keeps_the_configured_fraction_on_average():
    cfg = BeamConfig(iterations=6, beam=4, plans=6, codes=1, dropout=0.7, seed=11, patience=10)
    _, seen = drive(cfg)
    kept = [len(j.payload.menu) / len(MENU) for j in seen if j.kind == "plan"]
    assert len(kept) > 60
    mean = statistics.mean(kept)
    # binomial(20, 0.3)/20 has sd 0.102 per draw; 3 standard errors of the mean
    assert abs(mean - 0.3) < 3 * 0.102 / len(kept) ** 0.5 + 0.01, mean


def test_samples_are_divided_over_all_models():
    cfg = BeamConfig(iterations=3, beam=2, plans=1, codes=1, seed=3, patience=10,
                       plan_models=("a", "b", "c"), code_models=("x", "y"))
    _, seen = drive(cfg)
    plans = [j.model for j in seen if j.kind == "plan"]
    codes = [j.model for j in seen if j.kind == "code"]
    assert set(plans) == {"a", "b", "c"} and set(codes) == {"x", "y"}   # N = K = 1, yet no model idle
    for ms in (plans, codes):   # round robin over the whole run
        assert max(ms.count(m) for m in set(ms)) - min(ms.count(m) for m in set(ms)) <= 1


def test_stage_barriers_hold_later_stages():
    cfg = BeamConfig(iterations=1, beam=1, plans=4, codes=2, seed=1, stage_barriers=True)
    search = BeamSearch(cfg, PROBLEM, "naive", MENU, seeded=answers_from_seed)
    search.start()
    base = search.next_jobs()
    search.on_result(base[0].id, True, answer(base[0]), None)
    plans = search.next_jobs()
    assert [j.kind for j in plans] == ["plan"] * 4
    search.on_result(plans[0].id, True, answer(plans[0]), None)
    assert search.next_jobs() == []                  # codes wait for the other plans
    for j in plans[1:]:
        search.on_result(j.id, True, answer(j), None)
    codes = search.next_jobs()
    assert [j.kind for j in codes] == ["code"] * 8


def test_streaming_releases_codes_as_soon_as_a_plan_exists():
    search = BeamSearch(BeamConfig(iterations=1, beam=1, plans=4, codes=2, seed=1), PROBLEM, "naive", MENU,
                        seeded=answers_from_seed)
    search.start()
    base = search.next_jobs()[0]
    search.on_result(base.id, True, answer(base), None)
    plans = search.next_jobs()
    search.on_result(plans[0].id, True, answer(plans[0]), None)
    assert [j.kind for j in search.next_jobs()] == ["code", "code"]


def test_dropout_zero_offers_the_whole_menu_and_near_one_keeps_at_least_one_option():
    for dropout, sizes in ((0.0, {len(MENU)}), (0.999, {1})):
        cfg = BeamConfig(iterations=1, beam=1, plans=6, codes=1, dropout=dropout, seed=2)
        search = BeamSearch(cfg, PROBLEM, "naive", MENU, seeded=answers_from_seed)
        search.start()
        base = search.next_jobs()[0]
        search.on_result(base.id, True, answer(base), None)
        assert {len(j.payload.menu) for j in search.next_jobs()} == sizes


# -- model allocation (--model-allocation) -------------------------------------------------------------
def test_even_allocation_deals_models_in_turn_across_iterations():
    from autocomp_zmq.agents.engine.allocation import ModelAllocation
    even = ModelAllocation("even", 0, ("a", "b", "c"), ("x", "y"))
    assert even.deal("plan", 4, 1, offset=0) == ["a", "b", "c", "a"]
    assert even.deal("plan", 4, 2, offset=4) == ["b", "c", "a", "b"]
    assert even.deal("code", 3, 1, offset=1) == ["y", "x", "y"]


def test_bandit_allocation_shifts_samples_to_the_model_that_wins_and_keeps_exploring():
    from autocomp_zmq.agents.engine.allocation import ModelAllocation
    bandit = ModelAllocation("bandit", 3, ("good", "bad"), ("good", "bad"))
    for _ in range(30):
        bandit.learn("plan", "good", True)
        bandit.learn("plan", "bad", False)
    dealt = bandit.deal("plan", 16, 5, offset=0)
    assert dealt.count("good") >= 13 and dealt.count("bad") >= 1          # at least one sample each
    assert dealt == ModelAllocation("bandit", 3, ("good", "bad"), ("good", "bad"),
                                    records=bandit.records).deal("plan", 16, 5, offset=0)   # seeded: reproducible
    assert bandit.deal("code", 16, 5, offset=0).count("good") in range(3, 14)   # no evidence for coders: ~even


def answer_by_model(job):
    """Coder 'good' always speeds its parent up, coder 'bad' always slows it down: only good's candidates can
    enter the beam. The code carries its latency."""
    p = job.payload
    if job.kind == "plan":
        return PlanResult(plan=Plan(text=f"plan {p.seed} by {job.model}", option_id=p.menu[0].id), model=job.model)
    if job.kind in ("code", "repair"):
        factor = 0.9 - (p.seed % 100) / 1000 if job.model == "good" else 1.05
        return CodeResult(code=f"{p.parent.latency * factor} by {job.model} {p.seed}", model=job.model)
    return EvalReport(correct=True, latency=10_000 if p.code == "naive" else float(p.code.split()[0]))


@pytest.mark.parametrize("policy", ["even", "bandit"])
def test_bandit_search_gives_the_winning_code_model_more_samples(policy):
    cfg = BeamConfig(iterations=6, beam=2, plans=4, codes=2, dropout=0.5, seed=2, patience=10,
                       plan_models=("good", "bad"), code_models=("good", "bad"), model_allocation=policy)
    search = BeamSearch(cfg, PROBLEM, "naive", MENU, seeded=lambda m: True)
    search.start()
    seen = []
    while not search.done:
        for job in search.next_jobs():
            seen.append(job)
            search.on_result(job.id, True, answer_by_model(job), None)
    late = [j.model for j in seen if j.kind == "code" and j.iteration >= 4]
    share = late.count("good") / len(late)
    if policy == "even":
        assert share == 0.5
    else:
        assert share >= 0.75
        assert search.history[-1]["model_shares"]["code"]["good"] >= 0.75


def test_an_unknown_allocation_is_refused():
    with pytest.raises(ValueError, match="model allocation must be one of even, bandit, not 'greedy'"):
        BeamSearch(BeamConfig(model_allocation="greedy"), PROBLEM, "naive", MENU)
