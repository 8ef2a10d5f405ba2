"""Beam search, one SearchPolicy (agents/engine/policy.py): which jobs to run next, given the results so far.

Pure logic, no sockets: the coordinator feeds results in and dispatches the
jobs that come out. Within an iteration nothing waits for a stage: a plan
immediately yields K code jobs, a code immediately yields its evaluation, a
failed evaluation immediately yields a repair. Only the beam selection at the
end of an iteration waits for the iteration's jobs. In one-phase mode a parent's
N menus go straight to K code jobs each, whose answers bring their own plan; a
run that continues another starts from that run's final beam, evaluated again
here as the children of its starting kernel.

Everything random or order-dependent is derived from content: job ids hash
what the job is, the dropout draw of a plan request is seeded by (run seed,
iteration, parent, index), models are dealt per iteration (agents/engine/allocation.py), and the beam is
sorted by (cycles, id). Hence results may arrive in any order, and a resumed
run that replays stored results reaches exactly the same beam.
"""
from __future__ import annotations

from collections import deque
from typing import Annotated, Any

from autocomp_zmq.agents.engine.allocation import ModelAllocation
from autocomp_zmq.agents.engine.beamjobs import BeamJobs
from autocomp_zmq.agents.engine.candidates import Candidate, PriorTrace, Translation  # noqa: F401 - re-exported
from autocomp_zmq.agents.engine.fullcheck import FullChecks
from autocomp_zmq.agents.engine.policy import (IsSeeded, Job, SearchSettings, SearchSummary, code_hash,
                                               content_id, eval_job, never_seeded)
from autocomp_zmq.agents.engine.options import bounded, opt
from autocomp_zmq.agents.store import RunStore
from autocomp_zmq.protocols.jobs import (MAX_PROPOSALS, Answer, CodeResult, EvalReport, MenuOption, Plan, PlanResult,
                                         ProblemRef)

_STAGE = {"plan": 0, "code": 1, "eval": 2, "repair": 3}  # order of the stage-serial schedule


class BeamConfig(SearchSettings, frozen=True, kw_only=True):
    """Beam search's configuration: the settings every policy gets, and its own options (its section of the run
    configuration, search.options; flags of `run`)."""
    beam: Annotated[bounded(int, ge=1), opt("Beam width.", "-B", metavar="N")] = 4                 # B
    plans: Annotated[bounded(int, ge=1), opt("Plans per beam candidate.", "-N", metavar="N")] = 4   # N
    codes: Annotated[bounded(int, ge=1), opt("Code candidates per plan.", "-K", metavar="N")] = 2   # K
    dropout: Annotated[bounded(float, ge=0, lt=1), opt(
        "Menu dropout: the probability that a menu option is left out of a plan request (the paper: 0.7-0.8).",
        metavar="P")] = 0.7
    one_phase: Annotated[bool, opt(
        "One-phase mode (Autocomp's skip_planning): one model call picks an option from the offered menu, says how it "
        "applies it and writes the kernel; N menus per candidate, K samples each, all from the coding models.")] = False
    translate_iters: Annotated[bounded(int, ge=0), opt(
        "Translation iterations (Autocomp's translate_iters): the first N iterations write the kernel from the "
        "problem's reference (numpy; PyTorch for cuda) with the target's translation menu; a correct translation "
        "within --translate-slack of its parent enters the beam ahead of the kernels it was written beside.",
        metavar="N")] = 0
    translate_slack: Annotated[bounded(float, ge=1), opt(
        "How many times slower than its parent a translation may be and still enter the beam.", metavar="X")] = 15.0
    propose_options: Annotated[bounded(int, ge=0, le=MAX_PROPOSALS), opt(
        "Model-proposed menu options (Autocomp's menu_strategy = \"one-shot\"): each iteration, one planner call "
        "per beam candidate proposes up to N new options for it, offered beside the menu's (dropout applies to "
        "both).", metavar="N")] = 0
    code_edits: Annotated[bool, opt(
        "Coders answer with edits (old/new pairs) to the current kernel instead of the whole file (Autocomp's "
        "use_edits; for large kernels); edits that cannot be applied are given back, asking for the whole "
        "kernel.")] = False
    # emulate the original's stage-serial schedule (benchmarks; a TOML key, no flag)
    stage_barriers: Annotated[bool, opt()] = False


class BeamSearch(FullChecks, BeamJobs):
    """The paper's beam search: B parents, N plans each (menu dropout), K codes per plan, repairs; every parent
    and result checked on all of its output (FullChecks)."""

    Config = BeamConfig

    def __init__(self, cfg: BeamConfig, problem: ProblemRef, initial_code: str, menu: list[MenuOption],
                 store: RunStore | None = None, seeded: IsSeeded = never_seeded,
                 prior: PriorTrace | None = None, continued: tuple[str, ...] = (),
                 translation: Translation | None = None) -> None:
        self.cfg = cfg
        self.translation = translation  # --translate-iters: the reference and the translation menu
        self.proposed: dict[str, list[MenuOption]] = {}   # --propose-options: this iteration's, by parent
        self.continued = continued      # --continue-from: the other run's final beam, evaluated again here
        self.prior = prior
        self.problem = problem
        self.menu = menu
        self.store = store
        self.seeded = seeded
        self.initial_code = initial_code
        self.candidates: dict[str, Candidate] = {}
        self.beam: list[Candidate] = []
        self.baseline: Candidate | None = None
        self.iteration = 0
        self.jobs: dict[str, Job] = {}
        self.outstanding: set[str] = set()
        self.queue: deque[Job] = deque()
        self._replayed: deque[tuple[str, bool, Answer | None, str | None]] = deque()
        self.evals_emitted = 0
        self.evals_done = 0
        FullChecks.__init__(self)
        self.replayed_results = 0
        self.stale_iterations = 0
        self.done = False
        self.stop_reason = ""
        self.history: list[dict] = []   # one entry per finished iteration
        self._held: list[Job] = []      # stage_barriers: jobs waiting for earlier stages to finish
        self.halted = ""                # set by halt(): finish the current jobs, start no new iteration
        self.plans_emitted = 0          # run-wide: models rotate across iterations, none left idle
        self.allocation = ModelAllocation(cfg.model_allocation, cfg.seed, cfg.plan_models, cfg.code_models)

    # -- SearchPolicy -------------------------------------------------------------------
    def start(self) -> None:
        base = self._candidate(self.initial_code, None, 0, "initial")
        self._emit_eval(base)
        for code in self.continued:     # children of the start, so that speedups and lineages read from it
            self._emit_eval(self._candidate(code, base, 0, "continued"))
        self._drain()

    def next_jobs(self) -> list[Job]:
        if self._held:
            held_ids = {j.id for j in self._held}
            busy = {_STAGE[self.jobs[i].kind] for i in self.outstanding if i not in held_ids}
            ready = [j for j in self._held if not any(st < _STAGE[j.kind] for st in busy)]
            self._held = [j for j in self._held if j not in ready]
            self.queue.extend(ready)
        jobs = list(self.queue)
        self.queue.clear()
        return jobs

    def on_result(self, job_id: str, ok: bool, result: Answer | None, error: str | None) -> None:
        self._resolve(job_id, ok, result, error)
        self._drain()

    def halt(self, reason: str) -> None:
        """Stop after the jobs already running (e.g. the cost cap): the beam is still selected. Before
        start(), the search evaluates the starting kernel and stops there."""
        self.halted = self.halted or reason
        if not self.outstanding and not self.done and self.candidates:
            self._drain()

    def summary(self) -> SearchSummary:
        return SearchSummary(
            iteration=self.iteration, iterations=self.cfg.iterations, evaluations=self.evals_done,
            produced=len(self.candidates) - 1, replayed_results=self.replayed_results,
            latency_unit=self.problem.latency_unit,
            baseline=self.baseline.as_kernel() if self.baseline else None,
            best=self.best.as_kernel() if self.best else None,
            frontier=tuple(c.as_kernel() for c in self.beam), done=self.done, stop_reason=self.stop_reason,
            iteration_evals=self._iteration_evals(), full_checks=self.full_checks,
            full_check_failures=self.full_check_failures, full_check_s=self.full_check_s)

    def _iteration_evals(self) -> tuple[int, int]:
        """(done, expected) evaluations of the running iteration: each waiting plan is K evaluations to come,
        each waiting code or repair job one (a failed plan or code, or a kernel written before, none)."""
        it, done, waiting = self.iteration, 0, 0
        for job in self.jobs.values():
            if job.iteration != it:
                continue
            if job.ctx.get("full"):
                continue
            if job.id not in self.outstanding:
                done += job.kind == "eval"
            elif "steps" in job.ctx:       # a proposal: every plan of its parent still to come
                waiting += len(job.ctx["steps"]) * self.cfg.codes
            else:
                waiting += self.cfg.codes if job.kind == "plan" else 1
        return done, done + waiting

    @property
    def best(self) -> Candidate | None:
        return self.beam[0] if self.beam else None

    # -- internals ---------------------------------------------------------------------
    def _drain(self) -> None:
        while self._replayed:
            self._resolve(*self._replayed.popleft())
        if not self.outstanding and not self.done:
            self._advance()
            if self._replayed:
                self._drain()

    def _resolve(self, job_id: str, ok: bool, result: Answer | None, error: str | None) -> None:
        job = self.jobs.get(job_id)
        if job is None or job_id not in self.outstanding:
            return  # duplicate or late result: counted once
        self.outstanding.discard(job_id)
        {"plan": self._on_plan, "code": self._on_code, "repair": self._on_code, "eval": self._on_eval}[job.kind](
            job, result if ok else None, error)

    def _emit(self, job: Job) -> None:
        if job.id in self.jobs:
            return
        self.jobs[job.id] = job
        self.outstanding.add(job.id)
        stored = self.store.finished_job(job.id) if self.store else None
        if stored is not None:
            self.replayed_results += 1
            self._replayed.append((job.id, *stored))
            return
        if self.store:
            # a full check is an evaluator's job, kept apart in the store: `show` counts the run's evaluations
            self.store.add_job(job.id, "check" if job.ctx.get("full") else job.kind, job.iteration, job.payload)
        (self._held if self.cfg.stage_barriers else self.queue).append(job)

    def _candidate(self, code: str, parent: Candidate | None, iteration: int, origin: str, **extra: Any) -> Candidate:
        cid = content_id("candidate", parent.id if parent else None, code)
        if cid not in self.candidates:
            self.candidates[cid] = Candidate(cid, code, parent.id if parent else None, iteration, origin, **extra)
            if self.store:
                self.store.add_candidate(cid, parent.id if parent else None, iteration, extra.get("plan_job"),
                                         origin, extra.get("model"), code)
        return self.candidates[cid]

    def _emit_eval(self, cand: Candidate) -> None:
        if self.cfg.max_evals is not None and self.evals_emitted >= self.cfg.max_evals:
            return
        jid, request = eval_job(self.problem, cand.code, self.cfg.eval_seed)
        job = Job(jid, "eval", self.iteration, request, ctx={"cids": [cand.id]})
        if jid in self.jobs:  # same code already being evaluated for another parent: share the result
            other = self.jobs[jid]
            other.ctx["cids"].append(cand.id)
            if jid not in self.outstanding:
                first = self.candidates[other.ctx["cids"][0]]
                cand.result = first.result
                if self.store and cand.result is not None:
                    self.store.add_eval(cand.id, jid, cand.result)   # every evaluated candidate has its row
            return   # a shared evaluation costs nothing from the budget
        self.evals_emitted += 1
        self._emit(job)

    def _on_eval(self, job: Job, result: EvalReport | None, error: str | None) -> None:
        if result is None:
            result = EvalReport.failure("lost", error or "evaluation failed")
        if job.ctx.get("full"):
            self._on_full_check(job, result)
            return
        self.evals_done += 1
        for cid in job.ctx["cids"]:
            cand = self.candidates[cid]
            cand.result = result
            if self.store:
                self.store.add_eval(cid, job.id, result)
            if not cand.correct and cand.iteration > 0 and cand.repairs < self.cfg.max_repairs \
                    and result.error_kind != "lost" and cand.plan is not None:
                self._emit_repair(cand)

    def _on_plan(self, job: Job, result: PlanResult | None, error: str | None) -> None:
        if "steps" in job.ctx:      # a proposal of new options: the parent's plans now (the menu alone if it failed)
            self.proposed[job.ctx["parent_id"]] = list(result.proposals) if result else []
            self._emit_steps(self.candidates[job.ctx["parent_id"]], job.ctx["steps"])
            return
        if result is None:
            return
        plan = result.plan
        if self.store:
            self.store.add_plan(job.id, job.ctx["parent_id"], job.iteration, result.model or job.model, plan,
                                [o.id for o in job.payload.menu])
        self._emit_codes(job, plan)

    def _on_code(self, job: Job, result: CodeResult | None, error: str | None) -> None:
        if result is None:
            return
        parent = self.candidates[job.ctx["parent_id"]]
        fresh = content_id("candidate", parent.id, result.code) not in self.candidates
        plan = job.ctx["plan"]
        if plan is None:                # one-phase: the plan came with the code, and is kept as a plan job's would be
            plan = result.plan or Plan(text="(the answer described no plan)", option_id="")
            if self.store:
                self.store.add_plan(job.id, parent.id, job.iteration, result.model or job.model, plan,
                                    [o.id for o in job.payload.menu])
        cand = self._candidate(result.code, parent, job.iteration, job.kind, plan=plan,
                               plan_job=job.ctx["plan_job"], model=result.model or job.model,
                               repairs=job.ctx.get("repairs", 0))
        if fresh:
            self._emit_eval(cand)

    def _advance(self) -> None:
        it = self.iteration
        if it == 0:
            base = next(iter(self.candidates.values()))
            if self._check_in_full([base]):
                return
            if not base.correct:
                self.done = True
                self.stop_reason = f"the initial kernel is not correct: {base.result.error if base.result else None}"
                return
            self.baseline = base
            self.beam = [base]
        old_best = self.best.latency
        # a translation may be slower than the kernel it was written beside: within the slack, it goes first
        translating = it > 0 and self._translating(it)
        slack = self.cfg.translate_slack if translating else 1.0
        by_latency = lambda cs: sorted(cs, key=lambda c: (c.latency, c.id))   # noqa: E731
        while True:         # the beam's members checked in full; one found wrong makes room for the next
            # this iteration's children that beat their parent (in iteration 0, the continued run's kernels)
            new = [c for c in self.candidates.values() if c.iteration == it and c.parent_id is not None
                   and c.correct and c.latency < slack * self.candidates[c.parent_id].latency]
            ranked = by_latency(new) + by_latency(self.beam) if translating else by_latency(self.beam + new)
            pool: dict[str, Candidate] = {}
            for c in ranked:
                pool.setdefault(code_hash(c.code), c)  # one entry per distinct code
            beam = list(pool.values())[:self.cfg.beam]
            if self._check_in_full(beam):
                return      # resumed by the checks' results (_drain)
            if all(c.correct for c in beam):
                break
        self.beam = beam
        if it > 0:
            if not translating:          # a translation step is not a stall
                self.stale_iterations = 0 if self.best.latency < old_best else self.stale_iterations + 1
            self._learn(it)
        if self.store:
            self.store.set_beam(it, [(c.id, c.latency) for c in self.beam])
        self.history.append({"iteration": it, "beam": [c.latency for c in self.beam], "evals": self.evals_done,
                             "model_shares": {r: dict(v) for r, v in self.allocation.shares.items()}})
        self.stop_reason = self._stop_reason()
        if self.stop_reason:
            self.done = True
            return
        self.iteration += 1
        slots, codes = len(self.beam) * self.cfg.plans, self.cfg.codes
        plan_models = [] if self.cfg.one_phase else self.allocation.deal("plan", slots, self.iteration,
                                                                         self.plans_emitted)
        code_models = self.allocation.deal("code", slots * codes, self.iteration, self.plans_emitted * codes)
        proposing = self.cfg.propose_options and not self._translating(self.iteration)
        n = self.cfg.plans
        for b, parent in enumerate(self.beam):
            # (j, its plan model, its K code models): the k-th sample of the iteration is parent b's j-th
            steps = [(j, plan_models[k] if plan_models else None, code_models[k * codes:(k + 1) * codes])
                     for j, k in ((j, b * n + j) for j in range(n))]
            self.plans_emitted += len(steps)
            if proposing:   # the parent's plans wait for the options proposed for it
                self._emit_proposal(parent, self.cfg.plan_models[b % len(self.cfg.plan_models)], steps)
            else:
                self._emit_steps(parent, steps)
        if not self.outstanding:
            self.done, self.stop_reason = True, "no jobs left to run"

    def _learn(self, it: int) -> None:
        """Credit the models of this iteration's candidates: a win for each that entered the beam."""
        beam = {c.id for c in self.beam}
        for c in self.candidates.values():
            if c.iteration == it and c.parent_id is not None:
                plan_job = self.jobs.get(c.plan_job or "")
                self.allocation.learn("code", c.model, c.id in beam)
                if plan_job is not None and plan_job.kind == "plan":     # one-phase kernels had no planner
                    self.allocation.learn("plan", plan_job.model, c.id in beam)

    def _stop_reason(self) -> str:
        cfg = self.cfg
        if self.halted:
            return self.halted
        if self.iteration >= cfg.iterations:
            return f"finished {cfg.iterations} iterations"
        if self.iteration > 0 and self.stale_iterations >= cfg.patience:
            return f"no improvement for {cfg.patience} iterations"
        if cfg.max_evals is not None and self.evals_emitted >= cfg.max_evals:
            return f"evaluation budget of {cfg.max_evals} spent"
        roofline = self.best.result.roofline_fraction
        if cfg.stop_roofline is not None and (roofline or 0) >= cfg.stop_roofline:
            return f"reached {roofline:.1%} of roofline"
        return ""
