"""LLM implementations of the planner, coder and repairer roles."""
