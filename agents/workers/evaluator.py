"""Evaluator role: compile, check and measure candidates on one target.
Run one per core/device, next to the simulator or the hardware."""
from __future__ import annotations

import dataclasses

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.base import ProblemSizeError, UnknownIsaError, UnknownProblemError
from autocomp_zmq.hw_runners.problemfile import DefinitionError
from autocomp_zmq.protocols.jobs import EvalReport, EvalRequest


class TargetEvaluator:
    """Evaluates on the target named at start-up; rejects jobs for any other."""

    def __init__(self, target: str = "gemmini-sim", target_options: dict | None = None) -> None:
        self.target_name = target
        self.target = get_target(target, **(target_options or {}))
        self.name = target
        self.models: list[str] = []

    def handle(self, kind: str, req: EvalRequest) -> EvalReport:
        if req.problem.target != self.target_name:
            raise ValueError(f"this evaluator runs {self.target_name}, not {req.problem.target}")
        try:
            if req.problem.definition is not None:
                # a user's problem file travels with the job; the target loads it once per content
                prob = self.target.problem_from_definition(req.problem.definition)
                prob = dataclasses.replace(prob, isa=self.target.info().isa_profile(req.problem.isa).name)
            else:
                prob = self.target.problem(req.problem.name, req.problem.isa)
        except (UnknownProblemError, UnknownIsaError, ProblemSizeError, DefinitionError) as exc:
            raise ValueError(exc.args[0]) from None
        return self.target.judge(prob, req.code, seed=req.seed, full=req.full)

