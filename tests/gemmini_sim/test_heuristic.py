"""The offline gemmini-sim heuristic (hw_runners/gemmini_sim/heuristic/): its schedules render correct
fine-grained kernels across the schedule space, its planner stays off the loop FSMs when the menu does
(--isa fine), adapts recorded plans to new shapes, and its cost model's best schedules come close to the
hardware loop on ResNet-50 shapes."""
from __future__ import annotations

import random
import tomllib
from dataclasses import asdict, fields, replace
from itertools import product

import pytest

from autocomp_zmq.hw_runners.gemmini_sim.heuristic.agent import GemminiHeuristic
from autocomp_zmq.hw_runners.gemmini_sim.heuristic.codegen import (ConvSchedule, GemmSchedule, parse_schedule, reference_schedule,
                                              render)
from autocomp_zmq.hw_runners.gemmini_sim.heuristic.moves import OPTION_MUTATIONS, adapt, candidates, predict, retile
from autocomp_zmq.hw_runners.base import target_info
from autocomp_zmq.protocols.jobs import CodeRequest, MenuOption, Parent, Plan, PlanRequest, ProblemRef, RepairRequest
from . import simkit

FSM_OPTIONS = {"loop-ws", "loop-ws-blocks", "loop-conv-ws", "conv-flatten-loop-ws"}
GEMM_FLAGS = [f.name for f in fields(GemmSchedule) if f.type in ("bool", bool)]
CONV_FLAGS = [f.name for f in fields(ConvSchedule) if f.type in ("bool", bool)]


def _menu(fine: bool) -> list[MenuOption]:
    options = tomllib.loads(target_info("gemmini-sim").menu.read_text())["option"]
    return [MenuOption(id=o["id"], title=o["title"], description=o["description"]) for o in options
            if not fine or o["id"] not in FSM_OPTIONS]


def _wire(p) -> ProblemRef:
    return ProblemRef(target="gemmini-sim", name=p.name, family=p.family, dims=dict(p.dims))


def _sample(cls, flags, dims, grid, n, seed):
    """n distinct fitting schedules with random flags and block sizes (all flags on and all off included)."""
    rng = random.Random(seed)
    out = [s for s in (cls(**{f: True for f in flags}), cls()) if s.fits(dims)]
    while len(out) < n:
        s = cls(**{f: rng.random() < 0.5 for f in flags}, **{k: rng.choice(v) for k, v in grid.items()})
        if s.fits(dims) and s not in out:
            out.append(s)
    return out


@pytest.mark.system
@pytest.mark.parametrize("dims", [(64, 64, 64), (128, 256, 64), (200, 72, 136), (40, 100, 24)],
                         ids=lambda d: "x".join(map(str, d)))
def test_gemm_schedules_render_correct_kernels(sim, dims):
    """Aligned shapes, and shapes whose last tile along I, J or K is partial (edge tiles)."""
    p = simkit.gemm(*dims)
    n = {k: -(-v // 16) for k, v in p.dims.items()}
    grid = {"ti": simkit_divisors(n["I"]), "tj": simkit_divisors(n["J"]), "tk": simkit_divisors(n["K"]),
            "order": ["ij", "ji"]}
    for s in _sample(GemmSchedule, GEMM_FLAGS, p.dims, grid, 14, seed=sum(dims)):
        code = render(s, p.dims)
        assert parse_schedule(code, "gemm") == s
        r = sim.evaluate(p, code)
        assert r.correct, (s, r.error)
        assert r.feedback["fsm_instructions"] == 0


@pytest.mark.system
def test_conv_schedules_render_correct_kernels(sim):
    p = simkit.conv(20, 64)   # strips of 16 and 4 pixels, 4 channel tiles
    grid = {"kt": [1, 2, 4], "rows": [1, 2, 4, 5]}
    for s in _sample(ConvSchedule, CONV_FLAGS, p.dims, grid, 10, seed=1):
        r = sim.evaluate(p, render(s, p.dims))
        assert r.correct, (s, r.error)
        assert r.feedback["fsm_instructions"] == 0


def simkit_divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def test_foreign_code_maps_to_the_plain_schedule():
    baseline = (target_info("gemmini-sim").problems / "gemm_baseline.c").read_text()
    hwloop = (target_info("gemmini-sim").problems / "gemm_hwloop.c").read_text()
    assert reference_schedule(baseline, "gemm") == GemmSchedule()
    assert reference_schedule(hwloop, "gemm").mode == "fsm"
    conv = (target_info("gemmini-sim").problems / "conv_baseline.c").read_text()
    assert reference_schedule(conv, "conv3x3") == ConvSchedule()


@pytest.mark.parametrize("family,dims,start", [
    ("gemm", {"I": 512, "J": 512, "K": 512}, "gemm_baseline.c"),
    ("gemm", {"I": 12544, "J": 64, "K": 256}, "gemm_baseline.c"),
    ("conv3x3", {"P": 28, "C": 128}, "conv_baseline.c"),
])
def test_plans_under_fine_menus_never_use_the_loop_fsm(family, dims, start):
    agent, menu = GemminiHeuristic(), _menu(fine=True)
    problem = ProblemRef(target="gemmini-sim", name="x", family=family, dims=dims)
    code = (target_info("gemmini-sim").problems / start).read_text()
    for step in range(3):   # from the baseline, then from the plans' own schedules
        chosen = []
        for seed in range(12):
            kept = [o for o in menu if random.Random(seed * 7 + step).random() < 0.3] or menu[:1]
            req = PlanRequest(problem=problem, parent=Parent(id="p", code=code), menu=kept, model="heuristic",
                              iteration=1, iterations=4, seed=seed)
            try:
                plan = agent.plan(req)
            except Exception as exc:   # a menu of options that change nothing
                assert "changes the current schedule" in str(exc)
                continue
            assert plan.option_id in {o.id for o in kept}
            for variant in plan.params["variants"]:
                assert variant["mode"] == "cpu"
            out = agent.code(CodeRequest(problem=problem, parent=req.parent, plan=plan, model="heuristic", seed=seed))
            assert not any(name in out for name in ("gemmini_loop", "tiled_matmul", "tiled_conv"))
            chosen.append((predict(parse_schedule(out, family), dims), out))
        assert chosen
        code = min(chosen)[1]
    assert len(set(OPTION_MUTATIONS[family]) - FSM_OPTIONS) >= 12   # dropout leaves most plans a useful move


def test_full_menus_still_offer_the_loop_fsm():
    agent = GemminiHeuristic()
    problem = ProblemRef(target="gemmini-sim", name="x", family="gemm", dims={"I": 256, "J": 256, "K": 256})
    code = (target_info("gemmini-sim").problems / "gemm_naive.c").read_text()
    menu = [o for o in _menu(fine=False) if o.id == "loop-ws"]
    plan = agent.plan(PlanRequest(problem=problem, parent=Parent(id="p", code=code), menu=menu, model="heuristic",
                                  iteration=1, iterations=4, seed=0))
    assert plan.params["schedule"]["mode"] == "fsm"


def test_a_prior_plan_is_adapted_to_the_new_shape():
    agent = GemminiHeuristic()
    recorded_on = ProblemRef(target="gemmini-sim", name="gemm-512x512x512", family="gemm",
                          dims={"I": 512, "J": 512, "K": 512})
    schedule = GemmSchedule(ti=8, tj=4, tk=32, double_buffer=True, prefetch=True, split_banks=True)
    prior = Plan(text="recorded", option_id="software-pipeline",
                 params={"mutation": "prefetch", "schedule": asdict(schedule), "variants": [asdict(schedule)]})
    problem = ProblemRef(target="gemmini-sim", name="gemm-128x256x64", family="gemm", dims={"I": 128, "J": 256, "K": 64})
    baseline = (target_info("gemmini-sim").problems / "gemm_baseline.c").read_text()
    menu = [o for o in _menu(fine=True) if o.id == "software-pipeline"]
    req = PlanRequest(problem=problem, parent=Parent(id="p", code=baseline), menu=menu, model="heuristic",
                      iteration=1, iterations=4, seed=3, prior=prior, prior_problem=recorded_on)
    plan = agent.plan(req)
    assert plan.option_id == "software-pipeline" and "gemm-512x512x512" in plan.text
    got = GemmSchedule(**plan.params["schedule"])
    assert got.fits(problem.dims) and (got.ti, got.tj, got.tk) == (8, 4, 4)
    assert (got.double_buffer, got.prefetch, got.split_banks) == (True, True, True)
    # a prior from another model (no schedule) applies its option's mutation to the parent
    plain = agent.plan(PlanRequest(problem=problem, parent=Parent(id="p", code=baseline), menu=menu,
                                   model="heuristic", iteration=1, iterations=4, seed=3,
                                   prior=Plan(text="pipeline it", option_id="software-pipeline"),
                                   prior_problem=recorded_on))
    assert plain.option_id == "software-pipeline" and GemmSchedule(**plain.params["schedule"]).prefetch
    # a conv schedule fitted to a smaller conv
    conv = adapt(ConvSchedule(kt=4, rows=7, double_buffer=True, input_reuse=True, weight_resident=True),
                 {"P": 20, "C": 64})
    assert conv.fits({"P": 20, "C": 64}) and conv.double_buffer and conv.input_reuse


def test_repair_falls_back_to_safer_schedules():
    agent = GemminiHeuristic()
    problem = ProblemRef(target="gemmini-sim", name="x", family="gemm", dims={"I": 64, "J": 64, "K": 64})
    s = GemmSchedule(ti=2, tj=2, tk=4, double_buffer=True, prefetch=True)
    code = render(s, problem.dims)
    fixed = agent.repair(RepairRequest(problem=problem, plan=Plan(text="x", option_id="x"), code=code, error="e",
                                       model="heuristic", seed=0))
    assert parse_schedule(fixed, "gemm") == replace(s, prefetch=False)


@pytest.mark.parametrize("family,dims", [("gemm", {"I": 3136, "J": 128, "K": 512}), ("conv3x3", {"P": 28, "C": 128})])
def test_the_model_ranks_pipelining_above_plain_blocks(family, dims):
    cls = GemmSchedule if family == "gemm" else ConvSchedule
    flags = GEMM_FLAGS if family == "gemm" else CONV_FLAGS
    plain = retile(cls(), dims, 1)[0]
    full = retile(cls(**{f: True for f in flags}), dims, 1)[0]
    assert predict(full, dims) < 0.75 * predict(plain, dims)
    # every mutation yields only fitting schedules, best first
    for mutation in set(OPTION_MUTATIONS[family].values()):
        cands = candidates(mutation, plain, dims)
        assert all(c.fits(dims) for c in cands)
        assert [predict(c, dims) for c in cands] == sorted(predict(c, dims) for c in cands)


HWLOOP = {"gemm-12544x64x256": 804278, "conv3x3-14-128": 467691}
# How close the best CPU-issued schedule must come: the paper's best GEMMs reached 86-94% of the hardware FSM
# (hw_runners/gemmini_sim/published.toml); for convolutions it published no FSM figure, and the CPU issues
# more instructions per MAC (taps), so a looser bound.
REACH = {"gemm": 0.9, "conv3x3": 0.85}


@pytest.mark.system
@pytest.mark.parametrize("name", sorted(HWLOOP))
def test_the_models_best_schedule_reaches_the_hardware_loop(sim, name):
    p = sim.problem(name)
    cls = GemmSchedule if p.family == "gemm" else ConvSchedule
    flags = GEMM_FLAGS if p.family == "gemm" else CONV_FLAGS
    best = retile(cls(**{f: True for f in flags}), p.dims, 1)[0]
    r = sim.evaluate(p, render(best, p.dims))
    assert r.correct, r.error
    assert HWLOOP[name] / r.latency >= REACH[p.family], (best, r.latency)


def test_every_flag_combination_has_a_consistent_fit():
    dims = {"I": 128, "J": 128, "K": 128}
    for values in product([False, True], repeat=len(GEMM_FLAGS)):
        s = GemmSchedule(ti=2, tj=2, tk=2, **dict(zip(GEMM_FLAGS, values)))
        assert s.fits(dims) == ((not s.prefetch or s.double_buffer) and (not s.spread_stores or s.double_acc))


def test_the_plan_text_describes_every_kernel_its_coders_write():
    """A plan carries its best schedule and variants, and coders with odd seeds take a variant: the text named
    only the best, so a kernel with TI 2 / TJ 4 / TK 32 was stored under 'to 4x8x32 tiles'. Every kernel a
    plan's coders write must be described in the plan's text."""
    from autocomp_zmq.hw_runners.gemmini_sim.heuristic.agent import _describe
    agent = GemminiHeuristic()
    problem = ProblemRef(target="gemmini-sim", name="gemm-512x512x512", family="gemm",
                      dims={"I": 512, "J": 512, "K": 512})
    code = (target_info("gemmini-sim").problems / "gemm_naive.c").read_text()
    menu = _menu(fine=True)
    checked = 0
    for seed in range(6):
        plan = agent.plan(PlanRequest(problem=problem, parent=Parent(id="p", code=code), menu=menu,
                                      model="heuristic", iteration=1, iterations=4, seed=seed))
        for coder_seed in range(4):
            kernel = agent.code(CodeRequest(problem=problem, parent=Parent(id="p", code=code), plan=plan,
                                            model="heuristic", seed=coder_seed))
            assert _describe(parse_schedule(kernel, "gemm")) in plan.text, (plan.text, coder_seed)
            checked += 1
        if len(plan.params["variants"]) > 1:
            assert "Coders with odd seeds take one of its variants instead: " in plan.text
    assert checked == 24
