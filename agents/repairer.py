"""Repairer role: fix a failed candidate given its plan, code and error."""
from __future__ import annotations

import time

from agents.heuristic import for_target
from agents.synthetic import SyntheticCoder
from agents.worker import call_record


class HeuristicRepairer:
    name = "heuristic"
    models = ["heuristic"]

    def __init__(self, **options) -> None:
        pass  # the heuristic needs no options

    def handle(self, kind: str, payload: dict) -> dict:
        started = time.monotonic()
        code = for_target(payload["problem"]["target"]).repair(payload)
        return {"code": code, "model": "heuristic", "calls": [call_record("heuristic", payload, started)]}


IMPLEMENTATIONS = {"heuristic": HeuristicRepairer, "synthetic": SyntheticCoder}
