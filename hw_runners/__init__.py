"""Hardware targets: the interface every target implements (base.py) and the table that finds them
(registry.py). A target is a subpackage whose target.toml names its class, a folder without Python whose
target.toml has a [command] table (hostcpu/, or one named in $AUTOCOMP_TARGET_PATH), or a class an installed
package declares in the `autocomp_zmq.targets` entry-point group; none is imported until it is used."""
from __future__ import annotations

from autocomp_zmq.hw_runners.base import EvalResult, Problem, Target, get_target, target_names

__all__ = ["EvalResult", "Problem", "Target", "get_target", "target_names"]
