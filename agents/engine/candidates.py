"""What beam search (agents/engine/search.py) keeps about each kernel it has seen, the recorded trace a run may reuse
and what its translation iterations offer: plain records, no decisions."""
from __future__ import annotations

from dataclasses import dataclass

from autocomp_zmq.agents.engine.policy import Kernel
from autocomp_zmq.protocols.jobs import EvalReport, MenuOption, Parent, Plan, ProblemRef

# Where a candidate came from: the run's starting kernel, a kernel of the final beam of the run this one continues
# (--continue-from), a coder's answer, a repairer's answer
ORIGINS = ("initial", "continued", "code", "repair")


@dataclass(frozen=True)
class PriorTrace:
    """Schedule reuse: the plans recorded on a similar workload, offered in order as the plans of the first
    iterations (every plan of iteration t carries step t, with only its menu option); then normal search."""
    problem: ProblemRef
    plans: tuple[Plan, ...]


@dataclass(frozen=True)
class Translation:
    """What translation iterations (--translate-iters) offer instead of the optimization menu: the target's
    translation menu, and the problem's reference source that every plan and code job of them carries."""
    reference: str
    menu: tuple[MenuOption, ...]


@dataclass
class Candidate:
    id: str
    code: str
    parent_id: str | None
    iteration: int
    origin: str                     # one of ORIGINS
    plan: Plan | None = None
    plan_job: str | None = None
    model: str | None = None
    repairs: int = 0
    result: EvalReport | None = None    # a full check's report replaces a sampled one

    @property
    def correct(self) -> bool:
        return self.result is not None and self.result.correct and self.result.latency is not None

    @property
    def latency(self) -> float:
        return float(self.result.latency) if self.correct else float("inf")

    def as_parent(self) -> Parent:
        r = self.result
        return Parent(id=self.id, code=self.code, latency=r.latency if r else None,
                      feedback_text=r.feedback_text if r else "", metrics=r.feedback if r else {})

    def as_kernel(self) -> Kernel:
        r = self.result
        return Kernel(self.id, self.code, self.latency, r.utilization, r.roofline_fraction,
                      r.feedback.get("upper_bound"))
