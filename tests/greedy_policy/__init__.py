"""A search-policy plug-in outside the product (registered as `greedy` in the autocomp_zmq.policies
entry-point group by tests/system/test_plugin_policy.py): hill climbing. Each step asks for one plan on the
best kernel so far (the whole menu offered, in a seeded order), implements it once, evaluates it and keeps it
if it is faster. It knows the product only through autocomp_zmq.sdk: the SearchPolicy protocol it implements,
the RunRecord it writes (so show, report and runs work on its runs) and the shared job helpers."""
from __future__ import annotations

import random
from collections import deque
from typing import Annotated

from autocomp_zmq.sdk import (CodeRequest, EvalReport, Job, Kernel, Parent, PlanRequest, RunRecord, SearchSettings,
                              SearchSummary, content_id, eval_job, never_seeded, opt, seed_of)
from autocomp_zmq.sdk import option_bounds as bounded


class GreedyConfig(SearchSettings, frozen=True, kw_only=True):
    """The settings every policy gets, and this policy's own section of the run configuration (search.options:
    `--search-option menu_size=3`, or [search.options] in a config file)."""
    menu_size: Annotated[bounded(int, ge=1) | None, opt("Menu options offered per step (none: all).")] = None


class GreedySearch:
    Config = GreedyConfig

    def __init__(self, cfg, problem, initial_code, menu, store: RunRecord | None = None, seeded=never_seeded,
                 prior=None) -> None:
        self.cfg, self.problem, self.menu, self.store = cfg, problem, menu, store
        self.initial_code = initial_code
        self.done, self.stop_reason, self.halted = False, "", ""
        self.step = 0
        self.queue: deque[Job] = deque()
        self.jobs: dict[str, Job] = {}
        self.code: dict[str, str] = {}                 # candidate id -> code
        self.results: dict[str, EvalReport] = {}       # candidate id -> its evaluation
        self.baseline: str | None = None
        self.best: str | None = None
        self.evaluations = self.replayed = 0

    # -- SearchPolicy ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._evaluate(self._candidate(self.initial_code, None, "initial", None, None))

    def next_jobs(self) -> list[Job]:
        jobs = list(self.queue)
        self.queue.clear()
        return jobs

    def on_result(self, job_id, ok, result, error) -> None:
        job = self.jobs.pop(job_id, None)
        if job is None:
            return                      # a duplicate or late result
        getattr(self, f"_on_{job.kind}")(job, result if ok else None)

    def halt(self, reason: str) -> None:
        self.halted = self.halted or reason

    def summary(self) -> SearchSummary:
        return SearchSummary(iteration=self.step, iterations=self.cfg.iterations, evaluations=self.evaluations,
                             produced=len(self.code) - 1, replayed_results=self.replayed,
                             latency_unit=self.problem.latency_unit, baseline=self._kernel(self.baseline),
                             best=self._kernel(self.best), frontier=tuple(k for k in [self._kernel(self.best)] if k),
                             done=self.done, stop_reason=self.stop_reason)

    # -- the climb ------------------------------------------------------------------------------------
    def _emit(self, job: Job) -> None:
        self.jobs[job.id] = job
        stored = self.store.finished_job(job.id) if self.store else None
        if stored is not None:          # a resumed run: the stored outcome, not a new call
            self.replayed += 1
            self.on_result(job.id, *stored)
            return
        if self.store:
            self.store.add_job(job.id, job.kind, job.iteration, job.payload)
        self.queue.append(job)

    def _candidate(self, code, parent, origin, plan_job, model) -> str:
        cid = content_id("candidate", parent, code)
        if cid not in self.code:
            self.code[cid] = code
            if self.store:
                self.store.add_candidate(cid, parent, self.step, plan_job, origin, model, code)
        return cid

    def _evaluate(self, cid: str) -> None:
        jid, request = eval_job(self.problem, self.code[cid], self.cfg.eval_seed)
        self._emit(Job(jid, "eval", self.step, request, ctx={"cid": cid}))

    def _on_eval(self, job: Job, report: EvalReport | None) -> None:
        report = report or EvalReport.failure("lost", "evaluation failed")
        cid = job.ctx["cid"]
        self.results[cid] = report
        self.evaluations += 1
        if self.store:
            self.store.add_eval(cid, job.id, report)
        if self.baseline is None:
            if not report.correct:
                self.done, self.stop_reason = True, f"the initial kernel is not correct: {report.error}"
                return
            self.baseline = self.best = cid
        elif report.correct and report.latency < self.results[self.best].latency:
            self.best = cid
        self._next_step()

    def _next_step(self) -> None:
        if self.store:
            self.store.set_beam(self.step, [(self.best, self.results[self.best].latency)])
        if self.halted or self.step >= self.cfg.iterations:
            self.done, self.stop_reason = True, self.halted or f"finished {self.cfg.iterations} steps"
            return
        self.step += 1
        seed = seed_of(self.cfg.seed, "greedy", self.step)
        menu = list(self.menu)
        random.Random(seed).shuffle(menu)
        menu = menu[:self.cfg.menu_size]
        model = self.cfg.plan_models[self.step % len(self.cfg.plan_models)]
        request = PlanRequest(problem=self.problem, parent=self._parent(self.best), menu=menu, model=model,
                              iteration=self.step, iterations=self.cfg.iterations, seed=seed)
        jid = content_id("greedy-plan", self.best, self.step, model, seed)
        self._emit(Job(jid, "plan", self.step, request, model, ctx={"parent": self.best}))

    def _on_plan(self, job: Job, result) -> None:
        if result is None:              # no plan this step (e.g. nothing in the menu applies): the next step
            return self._next_step()
        parent = job.ctx["parent"]
        if self.store:
            self.store.add_plan(job.id, parent, job.iteration, result.model or job.model, result.plan,
                                [o.id for o in job.payload.menu])
        model = self.cfg.code_models[self.step % len(self.cfg.code_models)]
        request = CodeRequest(problem=self.problem, parent=self._parent(parent), plan=result.plan, model=model,
                              seed=seed_of(self.cfg.seed, "greedy-code", job.id))
        self._emit(Job(content_id("greedy-code", job.id, model), "code", job.iteration, request, model,
                       ctx={"parent": parent, "plan_job": job.id}))

    def _on_code(self, job: Job, result) -> None:
        if result is None:
            return self._next_step()
        cid = self._candidate(result.code, job.ctx["parent"], "code", job.ctx["plan_job"], result.model or job.model)
        twin = next((c for c in self.results if self.code[c] == result.code), None)
        if twin is None:
            return self._evaluate(cid)
        self.results[cid] = self.results[twin]          # the same code, measured before: recorded, not rerun
        if self.store:
            self.store.add_eval(cid, eval_job(self.problem, result.code, self.cfg.eval_seed)[0], self.results[cid])
        self._next_step()

    def _parent(self, cid: str) -> Parent:
        r = self.results[cid]
        return Parent(id=cid, code=self.code[cid], latency=r.latency, feedback_text=r.feedback_text,
                      metrics=r.feedback)

    def _kernel(self, cid: str | None) -> Kernel | None:
        if cid is None:
            return None
        r = self.results[cid]
        return Kernel(cid, self.code[cid], r.latency, r.utilization, r.roofline_fraction)
