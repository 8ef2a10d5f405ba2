"""What an offline plan says is what its code is, for every target's heuristic (issue 42: a kernel with TI 2 /
TJ 4 / TK 32 was stored under a plan saying "to 4x8x32 tiles").

A heuristic plan carries schedules (its choice and the variants coders with odd seeds take) and its text is
written from those same schedule objects. Over many plans (seeds, menus after dropout, several steps, stalled
searches that take multi-step moves) and many coders per plan: the schedule in every kernel is one the plan
carries, the plan's text names that schedule's description, and no two different schedules of one plan share a
description (else the text could not say which kernel is which)."""
from __future__ import annotations

import random
import tomllib

import pytest

from autocomp_zmq.hw_runners.toolkit.errors import HeuristicError
from autocomp_zmq.agents.run.problemsource import wire
from autocomp_zmq.hw_runners.base import target_class, target_info
from autocomp_zmq.hw_runners.problemfile import read
from autocomp_zmq.protocols.jobs import CodeRequest, MenuOption, Parent, Plan, PlanRequest, ProblemRef
from tests.cuda.heuristic_kit import PROBLEMS as CUDA_PROBLEMS, ROOT, wire_problem

EXAMPLES = ROOT / "problems" / "examples"


def _menu(target: str, leave_out=()) -> list[MenuOption]:
    options = tomllib.loads(target_info(target).menu.read_text())["option"]
    return [MenuOption(id=o["id"], title=o["title"]) for o in options if o["id"] not in leave_out]


def _gemmini():
    from autocomp_zmq.hw_runners.gemmini_sim.heuristic.agent import GemminiHeuristic, _describe
    from autocomp_zmq.hw_runners.gemmini_sim.heuristic.codegen import parse_schedule
    agent, problems = GemminiHeuristic(), target_info("gemmini-sim").problems
    fsm = {"loop-ws", "loop-ws-blocks", "loop-conv-ws", "conv-flatten-loop-ws"}
    cases = []
    for family, dims, start in [("gemm", {"I": 512, "J": 512, "K": 512}, "gemm_baseline.c"),
                                ("gemm", {"I": 200, "J": 72, "K": 136}, "gemm_baseline.c"),
                                ("conv3x3", {"P": 28, "C": 128}, "conv_baseline.c")]:
        for isa, menu in (("fine", _menu("gemmini-sim", fsm)), ("", _menu("gemmini-sim"))):
            problem = ProblemRef(target="gemmini-sim", name=f"{family}-{isa}", family=family, dims=dims, isa=isa)
            cases.append((problem, menu, (problems / start).read_text()))
    return agent, cases, lambda code, p: parse_schedule(code, p.family), lambda s, p: _describe(s)


def _trainium():
    from autocomp_zmq.hw_runners.trainium_sim.heuristic.agent import TrainiumHeuristic
    from autocomp_zmq.hw_runners.trainium_sim.heuristic.codegen import parse_schedule
    agent, t = TrainiumHeuristic(), object.__new__(target_class("trainium-sim"))
    cases = []
    for name in ("gemm", "rmsnorm", "layernorm", "transpose", "cumsum", "rope", "conv1d", "maxpool"):
        p = t.problem(name)
        cases.append((wire(p, "us", None), _menu("trainium-sim"), p.kernel_source("naive")))
    for file in ("my_softmax.toml", "my_bias_relu.toml"):
        p = t.problem_from_definition(read(EXAMPLES / "trainium-sim-rowwise" / file))
        cases.append((wire(p, "us", None), _menu("trainium-sim"), p.kernel_source("start")))
    return (agent, cases, lambda code, p: parse_schedule(code, agent._key(p)),
            lambda s, p: agent._family(p).describe(s))


def _cuda():
    from autocomp_zmq.hw_runners.cuda.heuristic.agent import CudaHeuristic
    from autocomp_zmq.hw_runners.cuda.heuristic.codegen import FAMILIES, parse_schedule
    from autocomp_zmq.hw_runners.cuda.heuristic.workload import recognize
    agent, cases = CudaHeuristic(), []
    for name in ("matmul-fp32", "bmm-fp16", "softmax", "layernorm", "rmsnorm-bf16", "gemm-bias-gelu-bf16"):
        cases.append((wire_problem(name), _menu("cuda"), (CUDA_PROBLEMS / name / "naive.py").read_text()))

    def describe(s, p):
        w = recognize(p)
        return FAMILIES[w.family].describe(s, w)
    return agent, cases, lambda code, p: parse_schedule(code, recognize(p).family), describe


@pytest.mark.parametrize("target", [_gemmini, _trainium, _cuda], ids=["gemmini-sim", "trainium-sim", "cuda"])
def test_every_kernel_is_the_schedule_its_plan_names(target):
    agent, cases, parse, describe = target()
    assert cases
    pairs = 0
    for problem, menu, start in cases:
        code = start
        for step in range(3):   # from the start, then from a kernel of the previous step's plans
            written = []
            for seed in range(8):
                rng = random.Random(f"{problem.name}-{step}-{seed}")
                kept = [o for o in menu if rng.random() < 0.4] or menu[:1]
                req = PlanRequest(problem=problem, parent=Parent(id="p", code=code), menu=kept, model="heuristic",
                                  iteration=step, iterations=4, seed=seed, stale=rng.choice((0, 0, 3, 12)))
                try:
                    plan = agent.plan(req)
                except HeuristicError:   # no surviving option changes the schedule
                    continue
                carried = [_schedule(v, parse, agent, req) for v in plan.params["variants"]]
                named: dict[str, set] = {}
                for s in carried:
                    named.setdefault(describe(s, problem), set()).add(s)
                assert all(len(same) == 1 for same in named.values()), \
                    f"{problem.name}: two schedules of one plan share a description: {named}"
                for coder_seed in range(6):
                    kernel = agent.code(CodeRequest(problem=problem, parent=req.parent, plan=plan, model="heuristic",
                                                    seed=coder_seed))
                    s = parse(kernel, problem)
                    assert s is not None and s in carried
                    assert describe(s, problem) in plan.text, (problem.name, plan.text, describe(s, problem))
                    written.append(kernel)
                    pairs += 1
            if written:
                code = written[step % len(written)]
    assert pairs >= 100


def _schedule(variant: dict, parse, agent, req):
    """The schedule object a plan's variant is, as the coder builds it: rendered alone and read back."""
    alone = Plan(text="", option_id="x", params={"schedule": variant, "variants": [variant]})
    return parse(agent.code(CodeRequest(problem=req.problem, parent=req.parent, model="heuristic", seed=0,
                                        plan=alone)), req.problem)
