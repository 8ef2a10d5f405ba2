"""Every agent implementation, in one table: ROLE.NAME -> "module:Class".

The built-in ones are listed here; other packages add theirs under the same ROLE.NAME keys in the
`autocomp_zmq.agents` entry-point group (the product's one plug-in mechanism, plugins.py) (e.g. `planner.mine = "my_pkg.agents:MyPlanner"`), and a plug-in may
also replace a built-in name. A class is imported only by the worker that runs it (a heuristic planner never
loads the LLM SDKs). Its constructor declares the options it takes as keyword parameters, and is given those
and no others (construct).
"""
from __future__ import annotations

import inspect

from autocomp_zmq import plugins
from autocomp_zmq.protocols.jobs import ROLES

_AGENTS = "autocomp_zmq.agents.workers"
_HEURISTIC, _LLM = f"{_AGENTS}.heuristic:HeuristicAgent", f"{_AGENTS}.llm.agent:LLMAgent"
BUILTIN = {
    **{f"{role}.heuristic": _HEURISTIC for role in ("planner", "coder", "repairer")},
    **{f"{role}.llm": _LLM for role in ("planner", "coder", "repairer")},
    "planner.synthetic": f"{_AGENTS}.synthetic:SyntheticPlanner",
    "coder.synthetic": f"{_AGENTS}.synthetic:SyntheticCoder",
    "repairer.synthetic": f"{_AGENTS}.synthetic:SyntheticCoder",
    "evaluator.target": f"{_AGENTS}.evaluator:TargetEvaluator",
    "evaluator.synthetic": f"{_AGENTS}.synthetic:SyntheticEvaluator",
}
DEFAULT = {"planner": "heuristic", "coder": "heuristic", "repairer": "heuristic", "evaluator": "target"}


class RegistryError(ValueError):
    """An unknown role or implementation, or an option the implementation does not take."""


def entries(role: str) -> dict[str, plugins.Entry]:
    """name -> entry (ROLE.NAME, "module:Class", origin) of every implementation of a role. Nothing is imported."""
    if role not in ROLES:
        raise RegistryError(f"unknown role {role!r}; choose from {', '.join(ROLES)}")
    return {key.partition(".")[2]: entry for key, entry in plugins.table("agents", BUILTIN).items()
            if key.partition(".")[0] == role}


def implementations(role: str) -> dict[str, str]:
    """name -> "module:Class" of every implementation of a role, built-in and plug-in. Nothing is imported."""
    return {name: entry.path for name, entry in entries(role).items()}


def load(role: str, name: str | None = None) -> type:
    """The class of a role's implementation (its default when name is None), importing only its module."""
    impls = entries(role)
    name = name or DEFAULT[role]
    if name not in impls:
        raise RegistryError(f"role {role} has no implementation {name!r}; choose from {', '.join(impls)}")
    try:
        return plugins.load(impls[name], "agents")
    except plugins.PluginError as exc:
        raise RegistryError(str(exc)) from exc


def accepts(cls: type) -> set[str] | None:
    """The keyword options a constructor takes (None: any, it has **options)."""
    params = inspect.signature(cls).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def construct(cls: type, offered: dict, given: dict[str, str] | None = None):
    """cls(**the offered options it takes). `given` maps the options the user set explicitly to how they were
    written (e.g. {"latency_s": "--latency"}): one of those the class does not take is an error, not ignored."""
    takes = accepts(cls)
    unused = [flag for option, flag in (given or {}).items() if takes is not None and option not in takes]
    if unused:
        raise RegistryError(f"{', '.join(unused)} {'is' if len(unused) == 1 else 'are'} not an option of "
                            f"{getattr(cls, 'name', cls.__name__)} ({cls.__module__}.{cls.__qualname__})")
    return cls(**{k: v for k, v in offered.items() if takes is None or k in takes})
