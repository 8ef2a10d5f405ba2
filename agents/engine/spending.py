"""What model calls cost a run, and the two ways a run avoids paying: the cost cap (--max-cost) and replay
(--replay). The Coordinator's share of that, kept apart from its dispatch and liveness logic: a mixin over the
coordinator's state (queues, store, search, spent, reserved)."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable

import msgspec
import structlog

from autocomp_zmq.agents.engine.policy import Job
from autocomp_zmq.protocols import control
from autocomp_zmq.protocols.envelope import ProtocolError
from autocomp_zmq.protocols.jobs import (BILLED_REPORTED, ROLE_OF_KIND, Failure, ModelCall, decode_failure,
                                         decode_result)

log = structlog.get_logger("agents.coordinator")


def _unknown_price(_) -> None:
    return None


@dataclass(frozen=True)
class CostPolicy:
    """--max-cost: a hard ceiling in USD. A model job starts only if what was spent, plus the worst case of
    every job in flight, plus its own worst case stays within it. The prices are two functions (a run gets
    them from the LLM price book, agents/workers/llm/pricing.py cost_functions): what a finished call cost, from the
    tokens the provider reported, and the most a job can cost before it starts (its prompt and --max-tokens
    at the model's price). None from either means the price is unknown: the call keeps the agent's own
    figure, the job counts 0 toward the cap (a run with --max-cost refuses such models up front)."""
    max_usd: float | None = None
    call_cost: Callable[[ModelCall], float | None] = _unknown_price
    job_worst_case: Callable[[Job], float | None] = _unknown_price


class Spending:
    """The Coordinator's cost cap and replay (agents/engine/coordinator.py supplies the state these methods use)."""

    def _paid(self, job: Job) -> bool:
        """A model call that may cost money: subject to the cost cap, answered from the record on replay."""
        return job.kind != "eval" and not self.seeded(job.model)

    def _charge(self, job_id: str, role: str, call: ModelCall, priced: bool | None = None) -> None:
        """Price a call from its token counts (the agent's own figure only for a model without a known price),
        record it and add it to what was spent."""
        if priced is None:
            cost = self.cost.call_cost(call)
            priced = cost is not None
            if priced:
                call.cost = cost
        self.store.add_model_call(job_id, role, call, priced)
        if call.billing != BILLED_REPORTED:
            self.call_faults[call.billing] = self.call_faults.get(call.billing, 0) + 1
        self.spent += call.cost
        key = (call.model, role)
        self.spent_by[key] = self.spent_by.get(key, 0.0) + call.cost

    @staticmethod
    def _lost_outcome(attempt: int) -> str:
        return f"lost: counted at its worst case (attempt {attempt})"

    def _unplace(self, job_id: str, attempt: int) -> None:
        """A lost attempt answered after all: the worst case it was counted at leaves the record and the total;
        the calls its answer reports are charged instead."""
        self._placeholders.discard((job_id, attempt))
        for model, role, cost in self.store.drop_model_calls(job_id, self._lost_outcome(attempt)):
            self.spent -= cost
            self.spent_by[(model, role)] = self.spent_by.get((model, role), 0.0) - cost

    def _record_unused(self, body: control.Result) -> None:
        """Another attempt's answer to a model job already settled (an attempt lost, then answered after another
        did): not used, but the calls it reports were made and may have been billed, so they are recorded and
        charged (replacing the worst case its lost attempt was counted at). A re-sent answer is not charged twice."""
        answered = self._answered.get(body.job_id)
        if answered is None or body.attempt in answered or body.kind not in ROLE_OF_KIND:
            return
        try:
            answer = decode_result(body.kind, body.payload) if body.ok else decode_failure(body.payload)
        except ProtocolError:
            return
        answered.add(body.attempt)
        with self.store.tx():
            if (body.job_id, body.attempt) in self._placeholders:
                self._unplace(body.job_id, body.attempt)
            for call in answer.calls:
                call.outcome = f"{call.outcome or 'ok'} (answered after the job was settled: not used)"
                self._charge(body.job_id, ROLE_OF_KIND[body.kind], call)

    def _send_again(self, flight, result, error: str | None) -> bool:
        """A model job whose answer was lost after its request was sent (its calls charged at their worst case) goes
        back to the front of its queue, up to max_attempts and while the cost cap is not reached; there the cap
        decides whether it can afford the job's worst case once more."""
        job = flight.job
        if not (isinstance(result, Failure) and result.retry) or self.cap_reached \
                or self.attempts.get(job.id, 0) >= self.leases.max_attempts:
            return False
        self.stats.requeued += 1
        self.store.requeue_job(job.id)
        self.queues[ROLE_OF_KIND[job.kind]].appendleft(job)
        log.warning("job_sent_again", kind=job.kind, job=job.id, model=job.model, attempt=flight.attempt,
                    why=(error or "")[:300])
        return True

    def _worst_case(self, job: Job) -> float:
        """The most this job's model calls can cost (0 for a model without a known price: a run with
        --max-cost does not start with one). Computed once per job: a job the cap holds back is asked again
        on every turn of the loop, and its worst case depends only on what the job is."""
        if job.id not in self._worst:
            self._worst[job.id] = self.cost.job_worst_case(job) or 0.0
        return self._worst[job.id]

    def _reach_cap(self) -> None:
        """Stop spending: no new model calls; calls in flight finish; the beam is still selected."""
        if self.cap_reached:
            return
        self.cap_reached = True
        reason = f"cost cap of ${self.cost.max_usd:.2f} reached (spent ${self.spent:.4f}; one more call could " \
                 f"cost ${self._blocked:.4f})"
        log.warning("cost_cap_reached", max_usd=self.cost.max_usd, spent=round(self.spent, 4))
        self.search.halt(reason)
        for role in ("planner", "coder", "repairer"):
            queue, self.queues[role] = self.queues[role], deque()
            with self.store.tx():
                for job in queue:
                    self.store.finish_job(job.id, False, None, "not run: cost cap reached", "failed")
                    self.search.on_result(job.id, False, None, "not run: cost cap reached")

    def _replay(self, job: Job) -> None:
        """Answer from the recorded run, never the network; a job it lacks fails clearly."""
        recorded = self.replay.finished_job(job.id)
        ok, result, error = recorded if recorded else (False, None, "replay: the recorded run has no answer "
                                                                    "for this job")
        with self.store.tx():
            self.store.finish_job(job.id, ok, result, error, "done" if ok else "failed")
            for call in result.calls if result is not None else ():
                self.store.add_model_call(job.id, ROLE_OF_KIND[job.kind],
                                          msgspec.structs.replace(call, cost=0.0, outcome="replayed"))
            self.search.on_result(job.id, ok, result if ok else None, error)
