"""Planner role (phase 1): pick ONE optimization from the menu that survived
dropout and describe the concrete transformation."""
from __future__ import annotations

from agents.heuristic import HeuristicAgent
from agents.llm.agent import LLMAgent
from agents.synthetic import SyntheticPlanner

IMPLEMENTATIONS = {"heuristic": HeuristicAgent, "llm": LLMAgent, "synthetic": SyntheticPlanner}
