"""Coder role (phase 2): implement a plan as a complete kernel."""
from __future__ import annotations

# module:class, imported only by the worker that runs it (a heuristic planner never loads the LLM SDKs)
IMPLEMENTATIONS = {"heuristic": "agents.heuristic:HeuristicAgent", "llm": "agents.llm.agent:LLMAgent",
                   "synthetic": "agents.synthetic:SyntheticCoder"}
