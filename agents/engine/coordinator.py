"""Coordinator: owns all policy and all state of a run.

One event loop around the ROUTER socket: agents join and leave, results come
in, leases expire. Every job goes to an agent of the right role (and model,
for LLM roles) that has credit left; it carries a lease and an attempt
number. A dead agent or an expired lease puts the job back in the queue, up to
max_attempts, for an agent that has not lost it yet when there is one, else for
any live agent that can serve it (an agent that rejoins is a new incarnation):
no job waits for an agent that cannot come. A late result of a job still queued
is accepted, once; a duplicate is acknowledged and counted. Results are
committed to the run store before they are acknowledged.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import structlog

from autocomp_zmq.agents.engine.failures import FailureTally, is_noop, reason_of
from autocomp_zmq.agents.engine.policy import IsSeeded, Job, SearchPolicy, never_seeded
from autocomp_zmq.agents.store import RunStore, call_billing
from autocomp_zmq.agents.engine.spending import CostPolicy, Spending
from autocomp_zmq.bus.transport import Event, Peer, Transport
from autocomp_zmq.protocols import control
from autocomp_zmq.protocols.envelope import ProtocolError
from autocomp_zmq.protocols.jobs import ROLE_OF_KIND, Answer, EvalReport, Failure, ModelCall, decode_failure, decode_result, raw

log = structlog.get_logger("agents.coordinator")
# Evaluations first: they are on the critical path and the expensive resource.
DISPATCH_ORDER = ("evaluator", "repairer", "coder", "planner")


@dataclass(frozen=True)
class LeasePolicy:
    lease_s: dict[str, float] = field(default_factory=lambda: {"plan": 600.0, "code": 600.0, "repair": 600.0,
                                                                "eval": 600.0})
    max_attempts: int = 3
    unserved_warn_s: float = 30.0      # warn when queued jobs have had no agent of their role/model this long


@dataclass
class InFlight:
    job: Job
    peer: Peer
    attempt: int
    deadline: float
    started: float
    late: bool = False        # answered after it was lost, while queued again


@dataclass
class Stats:
    started: float = field(default_factory=time.monotonic)
    dispatched: int = 0
    duplicates: int = 0
    requeued: int = 0
    lost: int = 0
    failed: dict[str, int] = field(default_factory=dict)   # per kind: jobs answered with ok=False
    handler_s: float = 0.0            # wall time spent in coordinator logic (not waiting)
    cpu_s: float = 0.0                # CPU time of the coordinator process (incl. its ZeroMQ I/O threads)
    busy_s: dict[str, float] = field(default_factory=dict)   # per role: agent-seconds with a job
    agent_s: dict[str, float] = field(default_factory=dict)  # per role: agent-seconds connected


class Coordinator(Spending):
    def __init__(self, router: Transport, store: RunStore, search: SearchPolicy, leases: LeasePolicy = LeasePolicy(),
                 on_progress: Callable[["Coordinator"], None] | None = None, progress_every_s: float = 0.5,
                 cost: CostPolicy = CostPolicy(), replay: RunStore | None = None,
                 clock: Callable[[], float] = time.monotonic, seeded: IsSeeded = never_seeded) -> None:
        self.router = router
        self.seeded = seeded                      # offline models: free, answered from a seed, never replayed
        self.clock = clock                        # leases, liveness accounting, warnings: injectable for tests
        self.store = store
        self.search = search
        self.leases = leases
        self.on_progress = on_progress
        self.progress_every_s = progress_every_s
        self.queues: dict[str, deque[Job]] = {role: deque() for role in DISPATCH_ORDER}
        self.attempts: dict[str, int] = {}
        self.avoid: dict[str, set[int]] = {}     # job id -> incarnations of the agents that already lost it
        self.in_flight: dict[str, InFlight] = {}
        self.stats = Stats(started=clock())
        self.failures = FailureTally()            # failed jobs and incorrect candidates, by reason
        self._warned: set[str] = set()
        self._next_warn_check = 0.0
        self._unserved_since: dict[tuple, float] = {}   # (role, model) -> when queued jobs began to lack an agent
        self.cost = cost
        self.replay = replay                      # answer LLM jobs only from this recorded run
        self.spent = store.total_cost()           # a resumed run starts with what it already spent
        self.spent_by: dict[tuple[str, str], float] = store.cost_by()   # (model, role) -> USD
        # calls the provider did not bill ("none": 429, 5xx, no connection) and calls lost after they were sent
        # ("unknown": counted at their worst case), this run's sessions all included
        self.call_faults: dict[str, int] = {b: n for b, (n, _) in call_billing(store.db).items() if b != "reported"}
        self.reserved: dict[str, float] = {}      # job id -> worst-case cost of the job in flight
        self.cap_reached = False
        self._blocked = 0.0                       # worst case of the job the cap held back
        self._worst: dict[str, float] = {}        # job id -> worst-case cost of its model calls
        self._placeholders: set[tuple[str, int]] = set()   # (job, attempt) lost and counted at its worst case
        self._answered: dict[str, set[int]] = {}  # settled model job id -> the attempts whose answers were taken
        self._last_tick = clock()
        self._next_progress = 0.0

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        cpu0 = time.process_time()
        self.begin()
        while not self.search.done and not should_stop():
            self.step()
        self.stats.cpu_s += time.process_time() - cpu0
        if self.on_progress:
            self.on_progress(self)

    def begin(self) -> None:
        """Start the search and queue its first jobs (run() does this; tests may drive begin/step)."""
        t0 = time.perf_counter()
        self.search.start()
        self._enqueue(self.search.next_jobs())
        self.stats.handler_s += time.perf_counter() - t0

    def step(self) -> None:
        """One turn of the event loop: poll the transport, handle events, expire leases, dispatch."""
        events = self.router.poll(timeout_s=min(0.2, self.router.timing.heartbeat_s / 2))
        t0 = time.perf_counter()
        now = self.clock()
        self._account(now)
        for ev in events:
            self._on_event(ev)
        self._expire_leases(now)
        self._enqueue(self.search.next_jobs())
        self._dispatch(now)
        self.stats.handler_s += time.perf_counter() - t0
        if self.on_progress and now >= self._next_progress:
            self._next_progress = now + self.progress_every_s
            self.on_progress(self)

    # -- events -------------------------------------------------------------------
    def _on_event(self, ev: Event) -> None:
        if ev.kind == "joined":
            log.info("agent_joined", agent=ev.peer.describe(), address=ev.peer.address, models=ev.peer.models,
                     capacity=ev.peer.capacity)
        elif ev.kind in ("dead", "left"):
            log.warning("agent_gone", agent=ev.peer.describe(), address=ev.peer.address, how=ev.kind,
                        jobs=len(ev.peer.in_flight))
            for job_id in list(ev.peer.in_flight):
                self._requeue(job_id, f"agent {ev.peer.describe()} {'died' if ev.kind == 'dead' else 'left'}")
        elif ev.kind == "message" and isinstance(ev.message.body, control.Result):
            self._on_result(ev.peer, ev.message.body)

    def _decode(self, peer: Peer, job: Job, body: control.Result) -> tuple[bool, Answer | Failure | None, str | None]:
        """The result in its type; a malformed one is a failure of the job (a malformed failure keeps its error)."""
        try:
            if body.ok:
                return True, decode_result(job.kind, body.payload), None
            return False, decode_failure(body.payload), body.error
        except ProtocolError as exc:
            return False, None, body.error or f"malformed result from {peer.describe()}: {exc}"

    def _on_result(self, peer: Peer, body: control.Result) -> None:
        job_id = body.job_id
        flight = self.in_flight.get(job_id) or self._late(peer, body)
        peer.in_flight.discard(job_id)
        if flight is None:
            self.stats.duplicates += 1     # duplicate or already settled: ack, count it once
            self._record_unused(body)
            self.router.send(peer, control.Ack(job_id=job_id))
            return
        ok, result, error = self._decode(peer, flight.job, body)
        if flight.peer is not peer:
            flight.peer.in_flight.discard(job_id)
        self.in_flight.pop(job_id, None)
        self.reserved.pop(job_id, None)
        if flight.job.kind != "eval":
            self._answered.setdefault(job_id, set()).add(body.attempt)
        with self.store.tx():
            earlier = body.attempt != flight.attempt     # an attempt lost before the one in flight answered
            if earlier:
                self.store.end_attempt(job_id, flight.attempt, f"not needed: attempt {body.attempt} answered")
            self.store.end_attempt(job_id, body.attempt, ("ok" if ok else "failed")
                                   + (" (answered after it was lost)" if flight.late or earlier else ""))
            if result is not None and (job_id, body.attempt) in self._placeholders:
                self._unplace(job_id, body.attempt)     # the calls it reports replace their worst case
            for call in result.calls if result is not None else ():
                self._charge(job_id, ROLE_OF_KIND[flight.job.kind], call)
                # the texts are kept once, with the call; the job's stored result (for resume) needs only counts
                call.prefix = call.prompt = call.answer = call.reasoning = ""
            again = self._send_again(flight, result, error)
            if not again:
                self.store.finish_job(job_id, ok, result, error, "done" if ok else "failed")
                self.search.on_result(job_id, ok, result if ok else None, error)
        self.router.send(peer, control.Ack(job_id=job_id))  # only after the commit above
        if again:
            return
        if not ok:
            self.stats.failed[flight.job.kind] = self.stats.failed.get(flight.job.kind, 0) + 1
            self.failures.add(flight.job.kind, flight.job.model, reason_of(error, flight.job.model))
            if not is_noop(error):         # a proposal of nothing is the search at work, not a failure
                log.info("job_failed", kind=flight.job.kind, job=job_id, model=flight.job.model,
                         error=(error or "")[:300])
        elif flight.job.kind == "eval" and not result.correct:
            self.failures.add("eval", None, str(result.error_kind or "incorrect"))

    def _late(self, peer: Peer, body: control.Result) -> InFlight | None:
        """A job lost by an agent (declared dead, or its lease expired) and queued again, answered by that agent
        after all: taken out of the queue and settled by this answer, as if it were in flight."""
        job_id = body.job_id
        kind = ROLE_OF_KIND.get(body.kind)
        queue = self.queues.get(kind) if kind else None
        job = next((j for j in queue if j.id == job_id), None) if queue else None
        if job is None:
            return None
        queue.remove(job)
        log.info("late_result_accepted", kind=job.kind, job=job_id, agent=peer.describe(), attempt=body.attempt)
        now = self.clock()
        return InFlight(job, peer, body.attempt, now, now, late=True)

    # -- leases -------------------------------------------------------------------
    def _expire_leases(self, now: float) -> None:
        for job_id, flight in list(self.in_flight.items()):
            if now <= flight.deadline:
                continue
            why = f"lease of {self.leases.lease_s[flight.job.kind]:g} s expired on {flight.peer.describe()}"
            if flight.job.kind == "eval":
                self._expire_evaluation(job_id, flight, why)
            else:
                flight.peer.in_flight.discard(job_id)
                self._requeue(job_id, why)

    def _expire_evaluation(self, job_id: str, flight: InFlight, why: str) -> None:
        """An evaluator that is alive (a dead one is handled when it is declared gone) held an evaluation past
        its lease: the candidate outran every limit of the evaluator, so it fails here. Sending it to the next
        evaluator would only hang that one too. The evaluator keeps the job in its slot until it answers (the
        late answer is acknowledged and dropped), so a hung evaluator gets no new work meanwhile."""
        del self.in_flight[job_id]
        verdict = EvalReport.failure("timeout", f"the evaluation did not finish within its lease ({why}); the "
                                                "kernel ran past every limit of the evaluator")
        with self.store.tx():
            self.store.end_attempt(job_id, flight.attempt, f"lost: {why}")
            self.store.finish_job(job_id, True, verdict, None, "done")
            self.search.on_result(job_id, True, verdict, None)
        self.failures.add("eval", None, "timeout")
        log.warning("evaluation_expired", job=job_id, agent=flight.peer.describe(), why=why)

    def _requeue(self, job_id: str, why: str) -> None:
        flight = self.in_flight.pop(job_id, None)
        if flight is None:
            return
        self.store.end_attempt(job_id, flight.attempt, f"lost: {why}")
        self.avoid.setdefault(job_id, set()).add(flight.peer.incarnation)
        lost = self.reserved.pop(job_id, 0.0)
        if lost:   # the lost call may well have been billed: count it at its worst case, visibly
            self._placeholders.add((job_id, flight.attempt))
            self._charge(job_id, ROLE_OF_KIND[flight.job.kind],
                         ModelCall(model=flight.job.model or "?", cost=lost, outcome=self._lost_outcome(flight.attempt)),
                         priced=False)
        if self.attempts[job_id] >= self.leases.max_attempts:
            self.stats.lost += 1
            self.failures.add(flight.job.kind, flight.job.model, "lost after repeated attempts")
            error = f"job lost after {self.attempts[job_id]} attempts (last: {why})"
            with self.store.tx():
                self.store.finish_job(job_id, False, None, error, "failed")
                self.search.on_result(job_id, False, None, error)
            log.error("job_lost", kind=flight.job.kind, job=job_id, why=why)
            return
        self.stats.requeued += 1
        self.store.requeue_job(job_id)
        self.queues[ROLE_OF_KIND[flight.job.kind]].appendleft(flight.job)
        log.warning("job_requeued", kind=flight.job.kind, job=job_id, why=why)

    # -- dispatch -----------------------------------------------------------------
    def _enqueue(self, jobs: list[Job]) -> None:
        for job in jobs:
            if self.replay is not None and self._paid(job):
                self._replay(job)
            elif self.cap_reached and self._paid(job):
                with self.store.tx():
                    self.store.finish_job(job.id, False, None, "not run: cost cap reached", "failed")
                    self.search.on_result(job.id, False, None, "not run: cost cap reached")
            else:
                self.queues[ROLE_OF_KIND[job.kind]].append(job)

    @property
    def queued(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def _dispatch(self, now: float) -> None:
        free: dict[str, list[Peer]] = {}      # agents with credit left, by role: built once per pass
        for peer in self.router.peers.values():
            if peer.credit > 0:
                free.setdefault(peer.role, []).append(peer)
        work = [(role, free[role]) for role in DISPATCH_ORDER if self.queues[role] and free.get(role)]
        if work:
            with self.store.tx():             # one commit for the whole pass
                for role, peers in work:
                    self._dispatch_role(self.queues[role], peers, now)
        self._warn_unserved()

    def _dispatch_role(self, queue: deque[Job], peers: list[Peer], now: float) -> None:
        skipped: list[Job] = []               # no suitable agent free (model or target)
        while queue and peers:
            job = queue.popleft()
            estimate = 0.0
            if self._paid(job) and self.cost.max_usd is not None:
                estimate = self._worst_case(job)
                if self.spent + sum(self.reserved.values()) + estimate > self.cost.max_usd:
                    queue.appendleft(job)
                    self._blocked = estimate
                    if not self.reserved:   # nothing in flight could free room: this is the cap
                        self._reach_cap()
                    return                  # else wait: finished calls usually cost less than their worst case
            peer = self._pick_agent(job, peers)
            if peer is None:
                skipped.append(job)
                continue
            attempt = self.attempts.get(job.id, 0) + 1
            lease = self.leases.lease_s[job.kind]
            body = control.Job(job_id=job.id, kind=job.kind, attempt=attempt, lease_s=lease, payload=raw(job.payload))
            if not self.router.send(peer, body):
                peers.remove(peer)
                skipped.append(job)
                continue
            self.attempts[job.id] = attempt
            if estimate:
                self.reserved[job.id] = estimate
            peer.in_flight.add(job.id)
            if peer.credit <= 0:
                peers.remove(peer)
            self.in_flight[job.id] = InFlight(job, peer, attempt, now + lease, now)
            self.store.start_attempt(job.id, attempt, peer.describe())
            self.stats.dispatched += 1
        queue.extendleft(reversed(skipped))

    @staticmethod
    def _can_serve(peer: Peer, job: Job) -> bool:
        if peer.role == "evaluator":
            return peer.target == job.payload.problem.target
        return job.model is None or job.model in peer.models

    def _pick_agent(self, job: Job, peers: list[Peer]) -> Peer | None:
        """The free agent with the most credit that can serve the job, one that has not lost it (died with it or
        outlasted its lease) when any live agent has not: then the job waits for that one. When every live agent
        that can serve it has lost it once, it goes to one of them again (max_attempts bounds that) rather than
        wait for an agent that may never come."""
        avoid = self.avoid.get(job.id, ())
        able = [p for p in peers if self._can_serve(p, job)]
        fresh = [p for p in able if p.incarnation not in avoid]
        if not fresh and avoid and any(p.incarnation not in avoid and self._can_serve(p, job)
                                       for p in self.router.alive(ROLE_OF_KIND[job.kind])):
            return None
        return max(fresh or able, key=lambda p: p.credit, default=None)

    def _warn_unserved(self) -> None:
        """Name (once) every role/model that queued jobs have needed, with no agent offering it, for
        unserved_warn_s without a break: agents that are still starting (a busy host takes a while to
        import the SDKs) or reconnecting are not a problem worth a warning."""
        now = self.clock()
        if now < self._next_warn_check:
            return
        self._next_warn_check = now + 1.0
        alive = self.router.alive()
        needs: dict[tuple, Job] = {}          # one queued job per (role, model or target): each need checked once
        for role, q in self.queues.items():
            for j in q:
                needs.setdefault((role, j.model if j.kind != "eval" else j.payload.problem.target), j)
        unserved = {need for need, j in needs.items()
                    if not any(p.role == need[0] and self._can_serve(p, j) for p in alive)}
        self._unserved_since = {k: self._unserved_since.get(k, now) for k in unserved}
        for (role, need), since in self._unserved_since.items():
            key = f"{role}:{need}"
            if now - since >= self.leases.unserved_warn_s and key not in self._warned:
                self._warned.add(key)
                if role == "evaluator":
                    log.warning("no_agent_for_job", role=role, target=need, waiting_s=round(now - since),
                                note=f"start one with `launch.py worker --role evaluator --target {need}`")
                else:
                    log.warning("no_agent_for_job", role=role, model=need, waiting_s=round(now - since),
                                note="start one with `launch.py worker --role ...`" if need is None else
                                "start a worker that serves this model (`launch.py worker --role ... --model ...`)")

    def _account(self, now: float) -> None:
        dt = now - self._last_tick
        self._last_tick = now
        for peer in self.router.peers.values():
            if peer.state == "dead":
                continue
            self.stats.agent_s[peer.role] = self.stats.agent_s.get(peer.role, 0.0) + dt * peer.capacity
            self.stats.busy_s[peer.role] = self.stats.busy_s.get(peer.role, 0.0) + dt * len(peer.in_flight)

    def busy_fraction(self, role: str) -> float:
        total = self.stats.agent_s.get(role, 0.0)
        return self.stats.busy_s.get(role, 0.0) / total if total else 0.0
