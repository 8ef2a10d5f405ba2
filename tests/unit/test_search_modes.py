"""Autocomp's search modes as this product runs them, without processes: one-phase beam search (one call chooses,
plans and writes), reading a one-phase answer, its prompt, and a run that continues another run's final beam (the
real BeamSearch and RunStore; the stores read back as --continue-from reads them)."""
from __future__ import annotations

from pathlib import Path

import pytest

from autocomp_zmq.agents.engine.search import BeamConfig, BeamSearch
from autocomp_zmq.agents.run import continuation
from autocomp_zmq.agents.run.runconfig import RunConfig
from autocomp_zmq.agents.run.runstart import RunError, check_modes
from autocomp_zmq.agents.store import RunStore, candidate_rows
from autocomp_zmq.agents.workers.llm.parse import FREE_TEXT, OPTION_LINE, AnswerError, parse_one_phase
from autocomp_zmq.agents.workers.llm.prompts import render
from autocomp_zmq.agents.workers.llm.specs import parse_spec
from autocomp_zmq.protocols.jobs import CodeRequest, CodeResult, EvalReport, Parent, Plan, ProblemRef
from tests.unit import storekit
from tests.unit.test_full_check import drive as drive_to_end
from tests.unit.test_search import MENU, PROBLEM, answer, drive

LLM = "openai:m"


def one_phase_answer(job):
    """A coder that chooses: the first offered option, a plan and a kernel, in one answer."""
    if job.kind == "code" and job.payload.plan is None:
        p = job.payload
        return CodeResult(code=f"code {p.seed}", model=job.model,
                          plan=Plan(text=f"apply {p.menu[0].id} to the loops", option_id=p.menu[0].id))
    return answer(job)


def run_one_phase(cfg, store=None):
    return drive_to_end(cfg, one_phase_answer, store)


def test_one_phase_makes_no_plan_jobs_and_n_menus_of_k_samples_per_parent(tmp_path):
    cfg = BeamConfig(iterations=2, beam=2, plans=3, codes=2, seed=3, patience=10, one_phase=True,
                     plan_models=(LLM,), code_models=(LLM,))
    store = RunStore(tmp_path / "run.db")
    search, seen = run_one_phase(cfg, store)
    assert not [j for j in seen if j.kind == "plan"]
    first = [j for j in seen if j.kind == "code" and j.iteration == 1]
    assert len(first) == 3 * 2 and all(j.payload.plan is None and j.payload.menu for j in first)
    assert len({tuple(o.id for o in j.payload.menu) for j in first}) == 3     # N distinct menus, K samples of each
    assert len({j.id for j in first}) == 6                                    # every sample its own job
    # the plan each answer brought is the candidate's, and is stored as the plan of that code job
    made = [c for c in search.candidates.values() if c.origin == "code"]
    assert made and all(c.plan.text.startswith("apply ") and c.plan_job in {j.id for j in seen} for c in made)
    stored = dict(store.db.execute("SELECT job_id, option_id FROM plans").fetchall())
    assert {c.plan_job for c in made} <= set(stored) and all(stored[c.plan_job] == c.plan.option_id for c in made)
    assert search.best.latency < 1000


def test_two_phase_search_is_unchanged_by_the_new_options():
    """The default (two-phase) beam search makes the same jobs and beam as before the modes existed."""
    cfg = BeamConfig(iterations=3, beam=2, plans=2, codes=2, seed=5, patience=10)
    search, seen = drive(cfg)
    assert [j.kind for j in seen][:3] == ["eval", "plan", "plan"] and search.best.latency < 1000


def test_continued_kernels_are_evaluated_again_and_the_better_ones_form_the_first_beam():
    cfg = BeamConfig(iterations=1, beam=2, plans=1, codes=1, seed=1, patience=10)
    continued = ("fast kernel", "broken kernel", "naive", "slow kernel")
    results = {"naive": 1000, "fast kernel": 200, "slow kernel": 1500}
    search = BeamSearch(cfg, PROBLEM, "naive", MENU, continued=continued)
    search.start()
    evals = search.next_jobs()
    # the start and each distinct continued kernel, evaluated here (the start's own code once)
    assert sorted(j.payload.code for j in evals) == ["broken kernel", "fast kernel", "naive", "slow kernel"]
    for job in evals:
        latency = results.get(job.payload.code)
        search.on_result(job.id, True, EvalReport(correct=True, latency=latency) if latency else
                         EvalReport.failure("wrong_result", "wrong"), None)
    first_beam = [c.code for c in search.beam]
    assert first_beam == ["fast kernel", "naive"]      # the slower and the wrong one stay out
    assert search.baseline.code == "naive" and search.candidates[search.beam[0].parent_id].code == "naive"
    plans = search.next_jobs()
    assert {j.payload.parent.code for j in plans} == {"fast kernel", "naive"}


def _finished_run(run_dir: Path, problem: ProblemRef = storekit.PROBLEM, run_id: str | None = None) -> Path:
    storekit.build(run_dir, iterations=2)
    store = RunStore(run_dir / "run.db")
    store.set_meta("problem", problem.to_dict())
    store.set_meta("initial_code", storekit.NAIVE)
    if run_id:
        store.set_meta("run_id", run_id)
    store.close()
    return run_dir


def test_continue_from_takes_the_final_beam_best_first_by_directory_name_or_id(tmp_path):
    runs = tmp_path / "runs"
    run = _finished_run(runs / "gemm-a", run_id="abc123")
    store = RunStore(run / "run.db")
    final = [cid for cid, _ in store.beam()]
    codes = {row[0]: row[6] for row in candidate_rows(store.db)}
    store.close()
    for spec in (str(run), "gemm-a", "abc123"):
        taken = continuation.load(spec, runs, storekit.PROBLEM)
        assert taken["ids"] == final and taken["run_dir"] == str(run.absolute())
        assert taken["initial_code"] == storekit.NAIVE and len(taken["kernels"]) == len(final)
    assert taken["kernels"] == [codes[cid] for cid in final]
    with pytest.raises(RunError, match="not a run directory"):
        continuation.load("nope", runs, storekit.PROBLEM)


@pytest.mark.parametrize("other", [ProblemRef(target="t", name="q", family="gemm"),
                                   ProblemRef(target="u", name="p", family="gemm"),
                                   ProblemRef(target="t", name="p", family="gemm", isa="fine")])
def test_continue_from_refuses_another_problem_target_or_isa_profile(tmp_path, other):
    run = _finished_run(tmp_path / "run")
    with pytest.raises(RunError, match="a run continues only a run of the same problem, target and ISA profile"):
        continuation.load(str(run), tmp_path, other)


def test_continue_from_refuses_a_run_without_a_beam(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    store = RunStore(run / "run.db")
    store.set_meta("problem", storekit.PROBLEM.to_dict())
    store.close()
    with pytest.raises(RunError, match="kept no beam yet"):
        continuation.load(str(run), tmp_path, storekit.PROBLEM)


OPTIONS = ["tile", "unroll"]
KERNEL = "```c\nvoid kernel(int *a) { a[0] = 1; }\n```\n"


def test_a_one_phase_answer_gives_its_plan_and_its_kernel():
    plan, code = parse_one_phase(f"OPTION: unroll\nPLAN:\nUnroll the inner loop by four and keep two accumulators.\n\n"
                                 f"{KERNEL}", OPTIONS, {}, OPTIONS, ("c",), "kernel", "c")
    assert (plan.option_id, plan.choice) == ("unroll", OPTION_LINE) and "Unroll the inner loop" in plan.text
    assert code.startswith("void kernel") and "```" not in plan.text


def test_a_one_phase_answer_without_a_plan_keeps_its_kernel_and_says_so():
    plan, code = parse_one_phase(KERNEL, OPTIONS, {}, OPTIONS, ("c",), "kernel", "c")
    assert code.startswith("void kernel") and plan.option_id == "" and plan.choice == FREE_TEXT
    assert "without a plan" in plan.text


def test_a_one_phase_answer_without_code_is_an_error_of_its_kind():
    with pytest.raises(AnswerError) as err:
        parse_one_phase("OPTION: tile\nPLAN:\nTile the loops by 16 in every dimension.", OPTIONS, {}, OPTIONS,
                        ("c",), "kernel", "c")
    assert err.value.kind == "no_code"


def test_the_one_phase_prompt_offers_the_menu_and_asks_for_the_choice_and_the_kernel():
    problem = ProblemRef(target="gemmini-sim", name="gemm-256x256x256", family="gemm")
    from autocomp_zmq.protocols.jobs import MenuOption
    menu = [MenuOption(id="tile-x", title="Tile it"), MenuOption(id="unroll-y", title="Unroll it")]
    req = CodeRequest(problem=problem, parent=Parent(id="p", code="void f() {}", latency=100.0), model=LLM, seed=1,
                      menu=menu, iteration=2, iterations=5)
    body = render("code", req).body
    assert "1. tile-x: Tile it\n2. unroll-y: Unroll it" in body and "OPTION: <id" in body
    assert "2 of 5" in body and "COMPLETE new kernel" in body and "void f() {}" in body


def test_one_phase_is_refused_for_the_offline_heuristic_and_with_schedule_reuse():
    specs = lambda *m: {"planner": [parse_spec(x) for x in m], "coder": [parse_spec(x) for x in m],  # noqa: E731
                        "repairer": [parse_spec(x) for x in m]}
    with pytest.raises(RunError, match="--one-phase: .*heuristic"):
        check_modes(RunConfig.of(one_phase=True), specs("heuristic"))
    with pytest.raises(RunError, match="--one-phase with --reuse"):
        check_modes(RunConfig.of(one_phase=True, reuse="auto"), specs(LLM))
    check_modes(RunConfig.of(one_phase=True), specs(LLM))
    check_modes(RunConfig.of(), specs("heuristic"))
