"""Evaluator role: compile, check and measure candidates on one target.
Run one per core/device, next to the simulator or the hardware."""
from __future__ import annotations

from hw_runners import get_target
from hw_runners.base import UnknownProblemError


class TargetEvaluator:
    """Evaluates on the target named at start-up; rejects jobs for any other."""

    def __init__(self, target: str = "gemmini-sim", **options) -> None:
        self.target_name = target
        self.target = get_target(target)
        self.name = target
        self.models: list[str] = []

    def handle(self, kind: str, payload: dict) -> dict:
        problem = payload["problem"]
        if problem["target"] != self.target_name:
            raise ValueError(f"this evaluator runs {self.target_name}, not {problem['target']}")
        try:
            prob = self.target.problem(problem["name"])
        except UnknownProblemError as exc:
            raise ValueError(exc.args[0]) from None
        result = self.target.evaluate(prob, payload["code"], seed=payload["seed"]).to_dict()
        return {k: v for k, v in result.items() if v is not None}


IMPLEMENTATIONS = {"target": "agents.evaluator:TargetEvaluator", "synthetic": "agents.synthetic:SyntheticEvaluator"}
