"""The public SDK: everything a plug-in (a target, a search policy, an agent implementation, an offline
heuristic) builds on, under one import, `from autocomp_zmq.sdk import Target, EvalResult, ...`. A plug-in that
imports only this module keeps working when the product's packages are rearranged; anything else is internal.

How plug-ins are found is plugins.py: a table NAME -> "module:Class" per kind, declared in an installed
package's entry points (groups autocomp_zmq.targets, autocomp_zmq.policies, autocomp_zmq.agents). The names
below are loaded on first use (PEP 562), so importing the SDK for a target does not import the search engine,
and a worker that needs the job types does not import a target.

    Targets       Target, Problem, EvalResult, TargetInfo, IsaProfile, get_target, UnknownProblemError,
                  ProblemSizeError, bounded_result (a verdict's texts cut to what travels on the bus)
    Policies      SearchPolicy, SearchSettings, SearchSummary, RunRecord, Job, Kernel, content_id, eval_job,
                  seed_of, never_seeded, opt (an option's declaration), option_bounds (bounded numbers)
    Jobs          Request, Answer, PlanRequest, Plan, PlanResult, CodeRequest, CodeResult, RepairRequest,
                  EvalReport, Parent, ProblemRef (which problem a job is about, as it travels)
    Heuristics    HeuristicError, NO_CHANGE, choose_option, variant_of
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_HW, _POLICY, _JOBS = "autocomp_zmq.hw_runners.base", "autocomp_zmq.agents.engine.policy", "autocomp_zmq.protocols.jobs"
_TOOLKIT = "autocomp_zmq.hw_runners.toolkit"
EXPORTS: dict[str, tuple[str, str]] = {
    **{name: (_HW, name) for name in ("Target", "Problem", "EvalResult", "TargetInfo", "IsaProfile", "get_target",
                                      "UnknownProblemError", "ProblemSizeError")},
    "bounded_result": (_HW, "bounded"),
    **{name: (_POLICY, name) for name in ("SearchPolicy", "SearchSettings", "SearchSummary", "RunRecord", "Job",
                                          "Kernel", "content_id", "eval_job", "seed_of", "never_seeded")},
    "opt": ("autocomp_zmq.agents.engine.options", "opt"),
    "option_bounds": ("autocomp_zmq.agents.engine.options", "bounded"),
    **{name: (_JOBS, name) for name in ("Request", "Answer", "PlanRequest", "Plan", "PlanResult", "CodeRequest",
                                        "CodeResult", "RepairRequest", "EvalReport", "Parent")},
    "ProblemRef": (_JOBS, "ProblemRef"),
    "HeuristicError": (f"{_TOOLKIT}.errors", "HeuristicError"),
    "NO_CHANGE": (f"{_TOOLKIT}.errors", "NO_CHANGE"),
    "choose_option": (f"{_TOOLKIT}.choice", "choose_option"),
    "variant_of": (f"{_TOOLKIT}.choice", "variant_of"),
}
__all__ = sorted(EXPORTS)


def __getattr__(name: str):
    if name not in EXPORTS:
        raise AttributeError(f"autocomp_zmq.sdk has no {name!r}; it offers {', '.join(__all__)}")
    module, attr = EXPORTS[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value          # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:        # what type checkers and editors see: the same names, imported eagerly
    from autocomp_zmq.agents.engine.options import bounded as option_bounds, opt  # noqa: F401
    from autocomp_zmq.agents.engine.policy import (Job, Kernel, RunRecord, SearchPolicy, SearchSettings,  # noqa: F401
                                                   SearchSummary, content_id, eval_job, never_seeded, seed_of)
    from autocomp_zmq.hw_runners.base import (EvalResult, IsaProfile, Problem, ProblemSizeError, Target,  # noqa: F401
                                              TargetInfo, UnknownProblemError, get_target)
    from autocomp_zmq.hw_runners.base import bounded as bounded_result  # noqa: F401
    from autocomp_zmq.hw_runners.toolkit.choice import choose_option, variant_of  # noqa: F401
    from autocomp_zmq.hw_runners.toolkit.errors import NO_CHANGE, HeuristicError  # noqa: F401
    from autocomp_zmq.protocols.jobs import (Answer, CodeRequest, CodeResult, EvalReport, Parent, Plan,  # noqa: F401
                                             PlanRequest, PlanResult, ProblemRef, RepairRequest, Request)
