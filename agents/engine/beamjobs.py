"""The jobs of beam search (agents/engine/search.py): what each plan, code, one-phase, proposal and repair job asks,
and its identity. A job's id is a content hash of what makes it that job (its parent, its sample index, its model, the menu
it offers, ...), so that a resumed run finds every stored answer and identical requests are asked once; which of
these a search makes, and when, is search.py's."""
from __future__ import annotations

import random

from autocomp_zmq.agents.engine.candidates import Candidate
from autocomp_zmq.agents.engine.policy import Job, code_hash, content_id, seed_of
from autocomp_zmq.protocols.jobs import CodeRequest, MenuOption, Plan, PlanRequest, RepairRequest


def _edits_mark(cfg) -> list[str]:
    """Code jobs asked for edits are other jobs than those asked for whole kernels; runs without keep their ids."""
    return ["edits"] if cfg.code_edits else []


class BeamJobs:
    """Mixed into BeamSearch: builds its jobs and hands them to its _emit."""

    def _emit_repair(self, cand: Candidate) -> None:
        models = self.cfg.code_models
        model = models[(seed_of("repair-model", cand.id)) % len(models)]
        r = cand.result
        request = RepairRequest(problem=self.problem, plan=cand.plan, code=cand.code,
                                error=(r.error or "unknown failure")[:60000], stdout=r.stdout[:60000],
                                model=model, seed=seed_of(self.cfg.seed, "repair", cand.id))
        jid = content_id("repair", cand.id, model, cand.repairs) if self.seeded(model) else \
            content_id("repair", cand.code, request.error, cand.plan.text, model)
        self._emit(Job(jid, "repair", self.iteration, request, model,
                       ctx={"parent_id": cand.parent_id, "plan": cand.plan, "plan_job": cand.plan_job,
                            "repairs": cand.repairs + 1}))

    def _emit_codes(self, plan_job: Job, plan: Plan) -> None:
        """The K code jobs of a plan."""
        parent = self.candidates[plan_job.ctx["parent_id"]]
        for c, model in enumerate(plan_job.ctx["code_models"]):
            request = CodeRequest(problem=self.problem, parent=parent.as_parent(), plan=plan, model=model,
                                  seed=seed_of(self.cfg.seed, "code", plan_job.id, c), edits=self.cfg.code_edits,
                                  reference=self._reference(plan_job.iteration))
            # the paper's K samples per plan: K independent calls, even when their prompts are identical
            # (the sample index c is part of the job's identity, so resume replays each one)
            jid = content_id("code", plan_job.id, c, model, *_edits_mark(self.cfg))
            self._emit(Job(jid, "code", plan_job.iteration, request, model,
                           ctx={"parent_id": parent.id, "plan": plan, "plan_job": plan_job.id}))

    def _translating(self, iteration: int) -> bool:
        """Whether an iteration is one of the first --translate-iters, which write the kernel from the reference."""
        return self.translation is not None and iteration <= self.cfg.translate_iters

    def _reference(self, iteration: int) -> str:
        return self.translation.reference if self._translating(iteration) else ""

    def _offered(self, parent: Candidate, j: int) -> tuple[int, list[MenuOption]]:
        """The seed of the j-th plan (or one-phase menu) of a parent, and the menu options its dropout draw keeps (of
        the translation menu in a translation iteration)."""
        seed = seed_of(self.cfg.seed, "plan", self.iteration, parent.id, j)
        rng = random.Random(seed)
        menu = list(self.translation.menu) if self._translating(self.iteration) else \
            self.menu + self.proposed.get(parent.id, [])
        kept = [o for o in menu if rng.random() < 1.0 - self.cfg.dropout] or [rng.choice(menu)]
        rng.shuffle(kept)   # offered in a seeded order: no option gains from its place in the menu file
        return seed, kept

    def _emit_steps(self, parent: Candidate, steps: list) -> None:
        """A parent's N plans, or N one-phase menus: each step (j, plan model, its K code models)."""
        for j, model, code_models in steps:
            if self.cfg.one_phase:
                self._emit_one_phase(parent, j, code_models)
            else:
                self._emit_plan(parent, j, model, code_models)

    def _emit_proposal(self, parent: Candidate, model: str, steps: list) -> None:
        """Model-proposed options: a planner call for new menu options for this parent, its steps emitted after."""
        request = PlanRequest(problem=self.problem, parent=parent.as_parent(), menu=[], model=model,
                              iteration=self.iteration, iterations=self.cfg.iterations,
                              seed=seed_of(self.cfg.seed, "propose", self.iteration, parent.id),
                              propose=self.cfg.propose_options)
        jid = content_id("propose", parent.id, self.iteration, model, request.seed, request.propose) \
            if self.seeded(model) else content_id("propose", code_hash(parent.code), self.iteration, model,
                                                  request.propose)
        self._emit(Job(jid, "plan", self.iteration, request, model, ctx={"parent_id": parent.id, "steps": steps}))

    def _emit_one_phase(self, parent: Candidate, j: int, models: list[str]) -> None:
        """One-phase mode: the j-th menu of a parent, given to K code jobs that each choose and implement."""
        seed, kept = self._offered(parent, j)
        menu_ids = [o.id for o in kept]
        for c, model in enumerate(models):
            request = CodeRequest(problem=self.problem, parent=parent.as_parent(), model=model, menu=kept,
                                  seed=seed_of(self.cfg.seed, "one-phase", seed, c), iteration=self.iteration,
                                  iterations=self.cfg.iterations, edits=self.cfg.code_edits,
                                  reference=self._reference(self.iteration))
            # like a plan job's id, with the sample index c: K identical prompts are still K samples
            jid = content_id("one-phase", parent.id, self.iteration, j, c, model, menu_ids, request.seed,
                             *_edits_mark(self.cfg)) if self.seeded(model) else \
                content_id("one-phase", code_hash(parent.code), self.iteration, j, c, model, menu_ids,
                           *_edits_mark(self.cfg))
            self._emit(Job(jid, "code", self.iteration, request, model,
                           ctx={"parent_id": parent.id, "plan": None, "plan_job": jid}))

    def _emit_plan(self, parent: Candidate, j: int, model: str, code_models: list[str]) -> None:
        seed, kept = self._offered(parent, j)
        prior = self.prior.plans[self.iteration - 1] if self.prior and self.iteration <= len(self.prior.plans) \
            else None
        if prior is not None:   # schedule reuse: this step of the recorded trace, with just its option
            kept = [o for o in self.menu if o.id == prior.option_id] or kept
        request = PlanRequest(problem=self.problem, parent=parent.as_parent(), menu=kept, model=model,
                              iteration=self.iteration, iterations=self.cfg.iterations, seed=seed, prior=prior,
                              prior_problem=self.prior.problem if prior else None, stale=self.stale_iterations,
                              reference=self._reference(self.iteration))
        menu_ids = [o.id for o in kept]
        reused = [prior.option_id, prior.text] if prior else []   # the ids of runs without reuse stay as they were
        # the paper's N plans per parent are N independent calls: the sample index j is part of the job's
        # identity, so two identical prompts are still two samples and resume replays each one. The run's
        # length is left out so that a run extended on resume reuses the answers it already has.
        jid = content_id("plan", parent.id, self.iteration, j, model, menu_ids, seed, *reused) \
            if self.seeded(model) else content_id("plan", code_hash(parent.code), self.iteration, j, model, menu_ids,
                                                   *reused)
        self._emit(Job(jid, "plan", self.iteration, request, model,
                       ctx={"parent_id": parent.id, "code_models": code_models}))
