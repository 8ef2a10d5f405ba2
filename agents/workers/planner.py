"""Planner role (phase 1): pick ONE optimization from the menu that survived
dropout and describe the concrete transformation.

What an implementation of this role provides; agents/workers/registry.py lists the implementations (heuristic, llm,
synthetic and plug-ins) and a worker runs one of them."""
from __future__ import annotations

from typing import Literal, Protocol

from autocomp_zmq.protocols.jobs import PlanRequest, PlanResult


class Planner(Protocol):
    name: str
    models: list[str]       # the model specs it answers for: the coordinator routes each job by its model

    def handle(self, kind: Literal["plan"], request: PlanRequest) -> PlanResult: ...
