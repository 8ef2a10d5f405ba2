"""Hardware targets. Each subpackage registers itself on import; third-party
targets can register through the `autocomp_zmq.targets` entry-point group. A
folder without Python whose target.toml has a [command] table (hostcpu/, or
one named in $AUTOCOMP_TARGET_PATH) is registered by the command/ subpackage."""
from __future__ import annotations

import functools
import importlib
import pkgutil
from importlib.metadata import entry_points


@functools.cache
def load_builtin_targets() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if mod.ispkg:
            importlib.import_module(f"{__name__}.{mod.name}")
    for ep in entry_points(group="autocomp_zmq.targets"):
        ep.load()


from autocomp_zmq.hw_runners.base import EvalResult, Problem, Target, get_target, register, target_names  # noqa: E402

__all__ = ["EvalResult", "Problem", "Target", "get_target", "register", "target_names"]
