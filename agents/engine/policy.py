"""What the coordinator needs from a search policy, what a policy records for
show/report/runs, the registry of policies, and the pieces every policy shares.

A policy decides which jobs to run next given the results so far; it owns no
socket and no clock. The coordinator calls start() once, then repeatedly
next_jobs() to dispatch and on_result() as results arrive (in any order,
replayed ones included), until `done`. Displays and the run's summary read
only summary(); `show`, `report` and `runs` read only what the policy wrote
through its RunRecord. Beam search (agents/engine/search.py) is one implementation;
`--search NAME` picks another (POLICIES, or the autocomp_zmq.policies
entry-point group), constructed as Policy(config, problem, initial_code, menu,
record, seeded=..., prior=...). `config` is a SearchSettings, or the policy's
own `Config` class: a SearchSettings subclass whose added fields (declared with
agents/engine/options.py opt) are the policy's section of the run configuration.

Job ids are content hashes of what a job is, so that a resumed run finds its
stored results and identical requests are asked (and paid for) once.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

import msgspec

from autocomp_zmq import plugins
from autocomp_zmq.protocols.jobs import Answer, EvalReport, EvalRequest, Failure, Plan, ProblemRef, Request


def content_id(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:24]


def seed_of(*parts: Any) -> int:
    return int(content_id(*parts)[:12], 16)


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def eval_job(problem: ProblemRef, code: str, eval_seed: int) -> tuple[str, EvalRequest]:
    """The id and request of the evaluation of code (the same code is evaluated once per run)."""
    profile = (problem.isa,) if problem.isa else ()   # the default profile keeps the ids of earlier runs
    # a user's problem file is part of what is evaluated (the same name may mean another file); problems
    # known by name keep the ids of earlier runs
    defined = (problem.definition.digest,) if problem.definition else ()
    jid = content_id("eval", problem.target, problem.name, *profile, *defined, code_hash(code), eval_seed)
    return jid, EvalRequest(problem=problem, code=code, seed=eval_seed)


class SearchSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What every search policy is given, from the run's budget, search and models sections."""
    iterations: int = 8                          # T
    seed: int = 0
    plan_models: tuple[str, ...] = ("heuristic",)
    code_models: tuple[str, ...] = ("heuristic",)
    model_allocation: str = "even"               # even (models take turns) or bandit (agents/engine/allocation.py)
    max_repairs: int = 1                         # repair attempts per failed candidate
    patience: int = 3                            # stop after this many iterations without a new best
    max_evals: int | None = None                 # stop dispatching evaluations after this many
    stop_roofline: float | None = None           # stop once the best reaches this fraction of roofline
    eval_seed: int = 0


def config_class(policy: type) -> type[SearchSettings]:
    return getattr(policy, "Config", SearchSettings)


@dataclass
class Job:
    id: str
    kind: str                       # plan | code | repair | eval
    iteration: int
    payload: Request
    model: str | None = None        # which model must serve it (None: any agent of the role)
    ctx: dict = field(default_factory=dict)   # the policy's own bookkeeping; never sent


@dataclass(frozen=True)
class Kernel:
    """A measured kernel, as summaries report it."""
    id: str
    code: str
    latency: float
    utilization: float | None = None
    roofline_fraction: float | None = None
    upper_bound: dict | None = None     # the ISA profile's bound: {"name", "cycles", "fraction"} (feedback)


@dataclass(frozen=True)
class SearchSummary:
    iteration: int                  # the iteration running (or the last one, when done)
    iterations: int                 # planned
    evaluations: int                # evaluations finished
    produced: int                   # candidates the agents wrote (the starting kernel excluded)
    replayed_results: int           # results taken from the run store instead of an agent
    latency_unit: str
    baseline: Kernel | None = None
    best: Kernel | None = None
    frontier: tuple[Kernel, ...] = ()   # what the policy keeps (the beam), best first
    done: bool = False
    stop_reason: str = ""
    # progress within the running iteration: (evaluations done, evaluations it is expected to make), or None for
    # a policy that cannot say (the display then shows iterations only)
    iteration_evals: tuple[int, int] | None = None
    # kernels whose sampled value check passed, checked again on every output element before they became parents
    # or the result (EvalReport.sampled), and how many of those were wrong
    full_checks: int = 0
    full_check_failures: int = 0
    full_check_s: float = 0.0        # evaluator time they took

    @property
    def speedup(self) -> float | None:
        return self.baseline.latency / self.best.latency if self.baseline and self.best else None


# Which models answer from a seed rather than from their prompt alone: for those, two jobs with the
# same prompt but different seeds are different jobs. Supplied by whoever knows the models.
IsSeeded = Callable[[str | None], bool]


def never_seeded(model: str | None) -> bool:
    """The default: every model's answer depends on its prompt alone."""
    return False


@runtime_checkable
class SearchPolicy(Protocol):
    done: bool

    def start(self) -> None:
        """Emit the first jobs (the starting kernel's evaluation)."""

    def next_jobs(self) -> list[Job]:
        """Jobs ready to dispatch now (each returned once)."""

    def on_result(self, job_id: str, ok: bool, result: Answer | None, error: str | None) -> None:
        """A job's outcome; duplicates and results of unknown jobs are ignored."""

    def halt(self, reason: str) -> None:
        """Start nothing new (e.g. the cost cap); finish the jobs already running and wrap up."""

    def summary(self) -> SearchSummary: ...


class RunRecord(Protocol):
    """What a policy writes to the run store (agents/store RunStore implements it) and what show,
    report and runs read back: every job it emits, every candidate kernel with its parent and the plan and
    model that produced it, every evaluation, every plan, and the frontier it keeps after each iteration
    (best first). finished_job gives a resumed run the stored outcome of a job emitted before."""

    def add_job(self, job_id: str, kind: str, iteration: int, request: Request) -> None: ...

    def finished_job(self, job_id: str) -> tuple[bool, Answer | Failure | None, str | None] | None: ...

    def add_candidate(self, cid: str, parent_id: str | None, iteration: int, plan_job: str | None,
                      origin: str, model: str | None, code: str) -> None: ...

    def add_eval(self, cid: str, job_id: str, r: EvalReport) -> None: ...

    def add_plan(self, job_id: str, parent_id: str, iteration: int, model: str, plan: Plan,
                 menu: list[str]) -> None: ...

    def set_beam(self, iteration: int, beam: list[tuple[str, float]]) -> None: ...


POLICIES = {"beam": "autocomp_zmq.agents.engine.search:BeamSearch"}
DEFAULT_POLICY = "beam"


class UnknownPolicyError(ValueError):
    pass


def policies() -> dict[str, str]:
    """name -> "module:Class" of every search policy: the built-in ones and the autocomp_zmq.policies
    entry points (plugins.py). Nothing is imported here."""
    return {name: entry.path for name, entry in plugins.table("policies", POLICIES).items()}


def policy_class(name: str) -> type:
    known = plugins.table("policies", POLICIES)
    if name not in known:
        raise UnknownPolicyError(f"unknown search policy {name!r}; available: {', '.join(sorted(known))}")
    try:
        return plugins.load(known[name], "policies")
    except plugins.PluginError as exc:
        raise UnknownPolicyError(str(exc)) from exc
