"""Translation iterations without processes: what they offer (each target's translation menu as data, the reference
found for built-in problems and problem files), their prompts, how beam search runs them (the translation menu and
the reference in every job of the first N iterations, translations within the slack ahead of their parents), and
what is refused."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from autocomp_zmq.agents.engine.search import BeamConfig, BeamSearch, Translation
from autocomp_zmq.agents.run import problemsource, translation
from autocomp_zmq.agents.run.runconfig import RunConfig
from autocomp_zmq.agents.run.runstart import RunError, check_modes
from autocomp_zmq.agents.workers.llm.prompts import render
from autocomp_zmq.agents.workers.llm.specs import parse_spec
from autocomp_zmq.hw_runners.base import Problem
from autocomp_zmq.hw_runners.base import target_class
from autocomp_zmq.protocols.jobs import CodeResult, EvalReport, MenuOption, Parent, Plan, PlanRequest, PlanResult, \
    ProblemRef
from tests.unit.test_search import MENU, PROBLEM

ROOT = Path(__file__).resolve().parents[2]
ON = RunConfig.of(translate_iters=1)


def bare(name: str):
    """A target without its evaluation machinery (which starts processes): enough to look its problems up."""
    return object.__new__(target_class(name))


def _loaded(target: str, problem: str, isa: str | None = None, definition=None):
    t = bare(target)
    info = t.info()
    return info, info.isa_profile(isa), problemsource.load(t, problem, isa, definition)


def test_gemmini_translations_come_from_the_pack_and_follow_profile_and_family():
    info, full, gemm = _loaded("gemmini-sim", "gemm-256x256x256")
    offered = translation.of(ON, info, full, gemm, BeamSearch)
    ids = [o.id for o in offered.menu]
    assert "library-call" in ids and "loop-fsm" in ids and "im2col" not in ids
    assert "def reference(A" in offered.reference
    info, fine, conv = _loaded("gemmini-sim", "conv3x3-14-256", "fine")
    fine_ids = [o.id for o in translation.of(ON, info, fine, conv, BeamSearch).menu]
    assert "im2col" in fine_ids and "library-call" not in fine_ids and "loop-fsm" not in fine_ids


def test_the_packs_gemmini_references_compute_what_the_target_checks_against():
    from autocomp_zmq.hw_runners.gemmini_sim.workloads import FAMILIES
    rng = np.random.default_rng(1)
    refs = {}
    for family in ("gemm", "conv3x3"):
        spec = importlib.util.spec_from_file_location(family, ROOT / "prompts/gemmini-sim/references" / f"{family}.py")
        refs[family] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(refs[family])
    a, b = rng.integers(-128, 128, (33, 70), dtype=np.int8), rng.integers(-128, 128, (70, 20), dtype=np.int8)
    assert (refs["gemm"].reference(a, b) == FAMILIES["gemm"].reference({"I": 33, "J": 20, "K": 70}, [a, b])).all()
    x = rng.integers(-128, 128, (4, 7, 7, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (3, 3, 16, 16), dtype=np.int8)
    bias = rng.integers(-9000, 9000, (1, 16), dtype=np.int32)
    assert (refs["conv3x3"].reference(x, w, bias) == FAMILIES["conv3x3"].reference({"P": 5, "C": 16}, [x, w, bias])
            ).all()


@pytest.mark.parametrize("target, problem, shows", [("trainium-sim", "gemm", "def reference(lhsT"),
                                                    ("cuda", "softmax", "class Model")])
def test_trainium_and_cuda_problems_translate_their_own_reference(target, problem, shows):
    info = target_class(target).info()
    folder = info.problems / problem
    kernel = next(p for p in sorted(folder.iterdir()) if p.name != "reference.py" and p.suffix == ".py")
    loaded = Problem(name=problem, target=target, family=problem, dims={}, description="",
                           kernels={"naive": kernel})
    profile = info.isa_profile(None)
    offered = translation.of(ON, info, profile, loaded, BeamSearch)
    assert shows in offered.reference and len(offered.menu) >= 5


def test_a_problem_files_own_reference_is_the_one_translated():
    definition = problemsource.read_definition(ROOT / "problems/examples/gemmini-sim/my_gemm.toml", None, None)
    info, profile, loaded = _loaded("gemmini-sim", "my-gemm", None, definition)
    offered = translation.of(ON, info, profile, loaded, BeamSearch)
    assert offered.reference == (ROOT / "problems/examples/gemmini-sim/my_gemm_reference.py").read_text()


def test_a_target_without_a_translation_menu_and_a_problem_without_a_reference_are_refused():
    t = bare("hostcpu")
    info = t.info()
    problem = t.problems()[0]
    with pytest.raises(RunError, match="has no translation menu"):
        translation.of(ON, info, info.isa_profile(None), problem, BeamSearch)
    info, profile, tinympc = _loaded("gemmini-sim", "tinympc-u")
    with pytest.raises(RunError, match="has no reference source to translate"):
        translation.of(ON, info, profile, tinympc, BeamSearch)
    assert translation.of(RunConfig.of(), info, profile, tinympc, BeamSearch) is None


def test_translation_needs_a_model_and_does_not_go_with_reuse():
    specs = lambda m: {role: [parse_spec(m)] for role in ("planner", "coder", "repairer")}   # noqa: E731
    with pytest.raises(RunError, match="--translate-iters: translating the problem's reference takes a model"):
        check_modes(ON, specs("heuristic"))
    with pytest.raises(RunError, match="--translate-iters with --reuse"):
        check_modes(RunConfig.of(translate_iters=2, reuse="auto"), specs("openai:m"))
    check_modes(ON, specs("openai:m"))


def test_the_plan_prompt_shows_the_reference_only_in_a_translation_step():
    problem = ProblemRef(target="gemmini-sim", name="gemm-256x256x256", family="gemm")
    req = PlanRequest(problem=problem, parent=Parent(id="p", code="void solution() {}"), model="openai:m",
                      menu=[MenuOption(id="tile-the-product", title="Tile it")], iteration=1, iterations=3, seed=1)
    plain = render("plan", req).body
    translating = render("plan", PlanRequest(**{**req.to_dict(), "problem": problem, "parent": req.parent,
                                                "menu": req.menu, "reference": "def reference(A, B): ..."})).body
    assert "Reference to translate" not in plain and "$reference" not in plain
    assert "## Reference to translate" in translating and "def reference(A, B): ..." in translating
    assert translating.replace(translating[translating.index("## Reference"):translating.index("## Current")], "") \
        == plain


TRANSLATE_MENU = (MenuOption(id="tr-a", title="Translate one way"), MenuOption(id="tr-b", title="Translate another"))


def test_translation_iterations_offer_their_menu_and_reference_and_put_slower_translations_first():
    cfg = BeamConfig(iterations=2, beam=2, plans=2, codes=1, seed=2, patience=10, dropout=0.0, translate_iters=1,
                     plan_models=("openai:m",), code_models=("openai:m",))
    search = BeamSearch(cfg, PROBLEM, "naive", MENU, translation=Translation("def reference(): ...", TRANSLATE_MENU))
    latency = {"naive": 1000}
    search.start()
    seen = []
    while not search.done:
        for job in search.next_jobs():
            seen.append(job)
            p = job.payload
            if job.kind == "plan":
                result = PlanResult(plan=Plan(text=f"plan {p.seed}", option_id=p.menu[0].id), model=job.model)
            elif job.kind == "code":
                code = f"translated {p.seed}" if job.iteration == 1 else f"optimized {p.seed}"
                latency.setdefault(code, 3000 + len(latency) if job.iteration == 1 else 500 + len(latency))
                result = CodeResult(code=code, model=job.model)
            else:
                result = EvalReport(correct=True, latency=latency[p.code])
            search.on_result(job.id, True, result, None)
    first = [j for j in seen if j.iteration == 1 and j.kind in ("plan", "code")]
    later = [j for j in seen if j.iteration == 2 and j.kind in ("plan", "code")]
    assert first and all(j.payload.reference == "def reference(): ..." for j in first)
    assert {o.id for j in first if j.kind == "plan" for o in j.payload.menu} == {"tr-a", "tr-b"}
    assert later and not any(j.payload.reference for j in later)
    assert {o.id for j in later if j.kind == "plan" for o in j.payload.menu} <= {o.id for o in MENU}
    # three times slower than the start, within the slack: the translations were iteration 2's parents
    assert {j.payload.parent.code for j in later if j.kind == "plan"} == {c for c in latency if "translated" in c}
    assert search.best.code.startswith("optimized")


def test_a_translation_past_the_slack_stays_out():
    cfg = BeamConfig(iterations=1, beam=2, plans=1, codes=1, seed=2, patience=10, translate_iters=1,
                     translate_slack=2.0)
    search = BeamSearch(cfg, PROBLEM, "naive", MENU, translation=Translation("ref", TRANSLATE_MENU))
    search.start()
    while not search.done:
        for job in search.next_jobs():
            p = job.payload
            result = PlanResult(plan=Plan(text="translate it", option_id="tr-a"), model=job.model) \
                if job.kind == "plan" else CodeResult(code="slow", model=job.model) if job.kind == "code" else \
                EvalReport(correct=True, latency=1000 if p.code == "naive" else 2500)
            search.on_result(job.id, True, result, None)
    assert [c.code for c in search.beam] == ["naive"]
