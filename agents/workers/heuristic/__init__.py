"""The offline 'heuristic' model behind the planner, coder and repairer roles.

The knowledge of each target lives in a class that the target's descriptor names (`heuristic =
"module:Class"` in its target.toml), with plan(PlanRequest) -> Plan, code(CodeRequest) -> str and
repair(RepairRequest) -> str; this agent only loads the one a job's target asks for."""
from __future__ import annotations

import functools
import importlib
import time

from autocomp_zmq.hw_runners.toolkit.errors import HeuristicError
from autocomp_zmq.hw_runners.base import DescriptorError, UnknownTargetError, target_info
from autocomp_zmq.protocols.jobs import Answer, CodeResult, PlanResult, ProblemRef, Request


@functools.cache
def _heuristic_class(target: str) -> type:
    try:
        spec = target_info(target).heuristic
    except (UnknownTargetError, DescriptorError) as exc:
        raise HeuristicError(f"the heuristic agent cannot serve target {target!r}: {exc.args[0]}") from None
    if not spec:
        raise HeuristicError(f"target {target!r} declares no offline heuristic (heuristic = \"module:Class\" in "
                             f"its target.toml): use an LLM model")
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def for_target(target: str):
    return _heuristic_class(target)()


def unsupported(problem: ProblemRef) -> str | None:
    """Why the offline heuristic has no moves for this problem, in a few words (None: it has some). Asked
    before a search starts, so that such a run ends after its starting kernel instead of failing every plan;
    a heuristic class answers through supports(problem) -> None | reason (one without it supports all)."""
    try:
        cls = _heuristic_class(problem.target)
    except HeuristicError as exc:
        return str(exc)
    supports = getattr(cls(), "supports", None)
    return supports(problem) if supports else None


class HeuristicAgent:
    """The offline 'heuristic' model: the same agent for every role and target."""
    name = "heuristic"
    models = ["heuristic"]

    def handle(self, kind: str, req: Request) -> Answer:
        from autocomp_zmq.agents.workers.worker import call_record
        started = time.monotonic()
        agent = for_target(req.problem.target)
        if kind == "plan":
            return PlanResult(plan=agent.plan(req), model="heuristic", calls=[call_record("heuristic", req, started)])
        code = {"code": agent.code, "repair": agent.repair}[kind](req)
        return CodeResult(code=code, model="heuristic", calls=[call_record("heuristic", req, started)])


__all__ = ["HeuristicAgent", "HeuristicError", "for_target", "unsupported"]
