"""Offline implementations of the LLM roles, one per target that has one."""
from __future__ import annotations

from agents.heuristic.gemmini import GemminiHeuristic, HeuristicError

_BY_TARGET = {"gemmini-sim": GemminiHeuristic}


def for_target(target: str):
    try:
        return _BY_TARGET[target]()
    except KeyError:
        raise HeuristicError(f"the heuristic agent has no knowledge of target {target!r}; "
                             f"it supports: {', '.join(sorted(_BY_TARGET))}") from None


__all__ = ["HeuristicError", "for_target"]
