"""Planner role (phase 1): pick ONE optimization from the menu that survived
dropout and describe the concrete transformation."""
from __future__ import annotations

# module:class, imported only by the worker that runs it (a heuristic planner never loads the LLM SDKs)
IMPLEMENTATIONS = {"heuristic": "agents.heuristic:HeuristicAgent", "llm": "agents.llm.agent:LLMAgent",
                   "synthetic": "agents.synthetic:SyntheticPlanner"}
