"""Offline implementations of the LLM roles, one per target that has one."""
from __future__ import annotations

import time

from agents.heuristic.gemmini import GemminiHeuristic, HeuristicError

_BY_TARGET = {"gemmini-sim": GemminiHeuristic}


def for_target(target: str):
    try:
        return _BY_TARGET[target]()
    except KeyError:
        raise HeuristicError(f"the heuristic agent has no knowledge of target {target!r}; "
                             f"it supports: {', '.join(sorted(_BY_TARGET))}") from None


class HeuristicAgent:
    """The offline 'heuristic' model behind the planner, coder and repairer roles."""
    name = "heuristic"
    models = ["heuristic"]

    def __init__(self, **options) -> None:
        pass  # no options

    def handle(self, kind: str, payload: dict) -> dict:
        from agents.worker import call_record
        started = time.monotonic()
        agent = for_target(payload["problem"]["target"])
        if kind == "plan":
            answer = {"plan": agent.plan(payload)}
        else:
            answer = {"code": {"code": agent.code, "repair": agent.repair}[kind](payload)}
        return {**answer, "model": "heuristic", "calls": [call_record("heuristic", payload, started)]}


__all__ = ["HeuristicAgent", "HeuristicError", "for_target"]
