"""Re-export of hw_runners/toolkit/errors.py (see this package's docstring)."""
from autocomp_zmq.hw_runners.toolkit.errors import NO_CHANGE, HeuristicError

__all__ = ["NO_CHANGE", "HeuristicError"]
