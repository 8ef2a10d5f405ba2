"""Planner role (phase 1): pick ONE optimization from the menu that survived
dropout and describe the concrete transformation."""
from __future__ import annotations

import time

from agents.heuristic import for_target
from agents.synthetic import SyntheticPlanner
from agents.worker import call_record


class HeuristicPlanner:
    name = "heuristic"
    models = ["heuristic"]

    def __init__(self, **options) -> None:
        pass  # the heuristic needs no options

    def handle(self, kind: str, payload: dict) -> dict:
        started = time.monotonic()
        plan = for_target(payload["problem"]["target"]).plan(payload)
        return {"plan": plan, "model": "heuristic", "calls": [call_record("heuristic", payload, started)]}


IMPLEMENTATIONS = {"heuristic": HeuristicPlanner, "synthetic": SyntheticPlanner}
