"""Checking a kernel on every output element before a search builds on it or reports it.

A target may check a large output on a sample of its elements (trainium-sim: the last writes at drawn points,
EvalReport.sampled), which a kernel wrong in one interior tile passes most of the time (a 2048 GEMM with one
wrong 128x512 tile passed 8 of 10 sampled checks). A wrong kernel that becomes a parent wastes every model call
made from it, and one reported as the result ships. So before a candidate becomes a parent or the run's result,
the search evaluates it once more with EvalRequest.full (every instruction computed, every element compared);
a candidate found wrong takes that verdict and leaves the beam. The check is a job like any other: stored,
replayed on resume, sent once per kernel (its id follows from the evaluation's).
"""
from __future__ import annotations

import msgspec

from autocomp_zmq.agents.engine.policy import Job, content_id, eval_job
from autocomp_zmq.protocols.jobs import EvalReport


class FullChecks:
    """Mixed into a search policy that has the beam search's jobs, candidates, store and _emit/_resolve."""

    def __init__(self) -> None:
        self.full_checks = 0            # candidates re-checked on every output element
        self.full_check_failures = 0    # ... found wrong (their sampled check had passed)
        self.full_check_s = 0.0         # evaluator time those checks took

    def _check_in_full(self, cands: list) -> bool:
        """Send a full check for each correct candidate whose verdict rests on a sample; True while any check is
        out. Checks a resumed run already made are taken from the store at once, as they were then."""
        for cand in cands:
            if cand.correct and cand.result.sampled:
                jid, request = eval_job(self.problem, cand.code, self.cfg.eval_seed)
                sharing = self.jobs[jid].ctx["cids"] if jid in self.jobs else [cand.id]
                full = content_id("full-check", jid)
                if full not in self.jobs:
                    self.full_checks += 1
                    self._emit(Job(full, "eval", self.iteration, msgspec.structs.replace(request, full=True),
                                   ctx={"cids": list(sharing), "full": True}))
        while self._replayed:
            self._resolve(*self._replayed.popleft())
        return bool(self.outstanding)

    def _on_full_check(self, job: Job, result: EvalReport) -> None:
        """The full verdict replaces the sampled one for every candidate of that code."""
        self.full_check_s += result.wall_s
        if not (result.correct and not result.sampled):
            self.full_check_failures += result.error_kind == "wrong_result"
            if result.correct:          # a report that still rests on a sample cannot make a parent
                result = EvalReport.failure("lost", "the full value check came back sampled")
        for cid in job.ctx["cids"]:
            self.candidates[cid].result = result
            if self.store:
                self.store.add_eval(cid, job.id, result)
