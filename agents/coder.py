"""Coder role (phase 2): implement a plan as a complete kernel."""
from __future__ import annotations

from agents.heuristic import HeuristicAgent
from agents.llm.agent import LLMAgent
from agents.synthetic import SyntheticCoder

IMPLEMENTATIONS = {"heuristic": HeuristicAgent, "llm": LLMAgent, "synthetic": SyntheticCoder}
