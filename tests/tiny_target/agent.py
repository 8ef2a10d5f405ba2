"""A plug-in agent implementation (registered as planner.tiny, coder.tiny and repairer.tiny in the
`autocomp_zmq.agents` entry-point group): `run --model tiny` starts it on the run's host like the built-in
heuristic. It serves the model named "tiny" and answers from the tiny target's rules of thumb."""
from __future__ import annotations

from autocomp_zmq.sdk import Answer, CodeResult, PlanResult, Request
from tests.tiny_target.heuristic import TinyHeuristic


class TinyAgent:
    name = "tiny"
    models = ["tiny"]

    def __init__(self) -> None:
        self.rules = TinyHeuristic()

    def handle(self, kind: str, req: Request) -> Answer:
        if kind == "plan":
            return PlanResult(plan=self.rules.plan(req), model="tiny")
        return CodeResult(code=getattr(self.rules, kind)(req), model="tiny")
