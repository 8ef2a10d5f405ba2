"""The error every offline heuristic raises for a job it cannot do (the job then fails with its message)."""


class HeuristicError(RuntimeError):
    """The heuristic cannot do what was asked; the message says why."""
