"""The error every offline heuristic raises for a job it cannot do (the job then fails with its message)."""


class HeuristicError(RuntimeError):
    """The heuristic cannot do what was asked; the message says why."""


# A plan request none of whose offered options changes the current schedule: not a failure, a proposal of
# nothing (the search then has one plan fewer). Runs before this constant stored the same words, so show,
# report and runs recognise theirs too (agents/engine/failures.py is_noop).
NO_CHANGE = "none of the menu options that survived dropout"
