"""Repairer role: fix a failed candidate given its plan, code and error."""
from __future__ import annotations

from agents.heuristic import HeuristicAgent
from agents.llm.agent import LLMAgent
from agents.synthetic import SyntheticCoder

IMPLEMENTATIONS = {"heuristic": HeuristicAgent, "llm": LLMAgent, "synthetic": SyntheticCoder}
