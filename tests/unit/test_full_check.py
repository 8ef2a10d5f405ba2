"""A kernel whose value check was sampled is checked on every output element before it becomes a parent or the
run's result (issue 39: a 2048 GEMM with one wrong 128x512 tile passed the sampled check 8 of 10 times, and the
best kernel was never checked again). Beam search driven by scripted results; the evaluations say `sampled`
as trainium-sim's do, and the full check knows which kernels are wrong."""
from __future__ import annotations

import hashlib

from autocomp_zmq.agents.workers.llm.specs import answers_from_seed
from autocomp_zmq.agents.engine.search import BeamConfig, BeamSearch
from autocomp_zmq.protocols.jobs import CodeResult, EvalReport, MenuOption, Plan, PlanResult, ProblemRef
from autocomp_zmq.agents.store import RunStore, finished_evaluations

PROBLEM = ProblemRef(target="t", name="p", family="gemm")
MENU = [MenuOption(id=f"opt-{i}", title=f"Option {i}", description="d") for i in range(6)]


def latency_of(code: str) -> float:
    return 1000.0 if code == "naive" else 1000.0 - int(hashlib.sha256(code.encode()).hexdigest()[:8], 16) % 600


def scripted(wrong: set[str]):
    """Agents whose every kernel passes the sampled check; the full check fails the codes in `wrong`."""
    def answer(job):
        p = job.payload
        if job.kind == "plan":
            return PlanResult(plan=Plan(text=f"plan {p.seed}", option_id=p.menu[0].id), model=job.model)
        if job.kind in ("code", "repair"):
            return CodeResult(code=f"code {p.seed}", model=job.model)
        if p.full and p.code in wrong:
            return EvalReport(correct=False, error="wrong result in output c: 65,536 elements", wall_s=2.0,
                              error_kind="wrong_result")
        return EvalReport(correct=True, latency=latency_of(p.code), sampled=not p.full, wall_s=2.0 if p.full else 1.0)
    return answer


def drive(cfg, answer, store=None):
    search = BeamSearch(cfg, PROBLEM, "naive", MENU, seeded=answers_from_seed, store=store)
    search.start()
    seen = []
    while not search.done:
        jobs = search.next_jobs()
        assert jobs, "search stalled"
        for job in jobs:
            seen.append(job)
            result = answer(job)
            if store is not None:                    # as the coordinator stores every result
                store.finish_job(job.id, True, result, None)
            search.on_result(job.id, True, result, None)
    return search, seen


CFG = BeamConfig(iterations=3, beam=2, plans=2, codes=2, seed=7, patience=10)


def test_every_parent_and_the_result_were_checked_in_full():
    search, seen = drive(CFG, scripted(set()))
    full = [j for j in seen if j.kind == "eval" and j.payload.full]
    checked = {j.payload.code for j in full}
    parents = {j.payload.parent.code for j in seen if j.kind == "plan"}
    assert parents <= checked                       # every parent, the starting kernel included
    assert search.best.code in checked and not search.best.result.sampled
    assert len(checked) == len(full)                # each kernel once
    summary = search.summary()
    assert summary.full_checks == len(full) and summary.full_check_failures == 0
    assert summary.full_check_s == 2.0 * len(full)
    assert summary.evaluations == sum(1 for j in seen if j.kind == "eval" and not j.payload.full)


def test_a_kernel_the_full_check_finds_wrong_is_never_a_parent_nor_the_result():
    honest, _ = drive(CFG, scripted(set()))
    cheat = honest.best.code                         # the fastest kernel turns out wrong on unsampled elements
    search, seen = drive(CFG, scripted({cheat}))
    assert search.best.code != cheat and search.best.correct
    assert all(j.payload.parent.code != cheat for j in seen if j.kind == "plan")
    assert cheat not in {c.code for c in search.beam}
    assert search.summary().full_check_failures == 1
    bad = [c for c in search.candidates.values() if c.code == cheat]
    assert bad and all(c.result.error_kind == "wrong_result" for c in bad)


def test_a_resumed_run_replays_the_full_checks_and_reaches_the_same_beam(tmp_path):
    honest, _ = drive(CFG, scripted(set()))
    store = RunStore(tmp_path / "run.db")
    with store.tx():
        first, _ = drive(CFG, scripted({honest.best.code}), store=store)
    again = BeamSearch(CFG, PROBLEM, "naive", MENU, seeded=answers_from_seed, store=store)
    again.start()
    assert again.done and again.next_jobs() == []    # nothing left to ask: every check came from the store
    assert [c.id for c in again.beam] == [c.id for c in first.beam]
    assert again.summary().full_check_failures == 1
    # the store keeps the checks apart: what `show` counts as the run's evaluations is what the run counted
    assert finished_evaluations(store.db) == first.summary().evaluations
    assert store.db.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'check'").fetchone()[0] == first.full_checks
