"""The real Coordinator and BeamSearch over the in-process transport: agents
are played by the test, time is a fake clock, nothing sleeps or spawns. Covers
dispatch (credit, role, model, target), requeueing of a dead agent's jobs and
the avoid-list, lease expiry, max_attempts, late and duplicate results, commit
before ACK, the cost cap, replay, malformed results."""
from __future__ import annotations

import hashlib
import inspect
import sqlite3

import msgspec
import pytest

from autocomp_zmq.agents.engine.coordinator import CostPolicy, Coordinator, LeasePolicy
from autocomp_zmq.agents.workers.llm.pricing import Price, PriceBook, cost_functions
from autocomp_zmq.agents.workers.llm.specs import answers_from_seed
from autocomp_zmq.agents.store import RunStore
from autocomp_zmq.agents.engine.search import BeamSearch, BeamConfig
from autocomp_zmq.bus.inproc import InProcTransport
from autocomp_zmq.bus.router import Router
from autocomp_zmq.bus.transport import Transport
from autocomp_zmq.protocols.control import NO_PAYLOAD, Ack, Job, Result
from autocomp_zmq.protocols.envelope import MessageType, encode
from autocomp_zmq.protocols.jobs import (Answer, CodeResult, EvalReport, MenuOption, ModelCall, Plan, PlanResult, ProblemRef,
                            decode_request)

PROBLEM = ProblemRef(target="t", name="p", family="gemm")
MENU = [MenuOption(id=f"opt-{i}", title=f"Option {i}", description="d") for i in range(6)]
SMALL = BeamConfig(iterations=2, beam=2, plans=2, codes=1, seed=3, patience=10,
                     plan_models=("synthetic",), code_models=("synthetic",))
LLM = "openai:fake-model"          # not seeded: subject to the cost cap and to replay
SHORT = LeasePolicy(lease_s={"plan": 5.0, "code": 5.0, "repair": 5.0, "eval": 5.0}, max_attempts=3)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def answer(job: Job) -> Answer:
    """A deterministic agent: plans and code from the request's seed, latency from the code."""
    p = decode_request(job.kind, job.payload)
    if job.kind == "plan":
        return PlanResult(plan=Plan(text=f"plan {p.seed}", option_id=p.menu[0].id), model=p.model)
    if job.kind in ("code", "repair"):
        return CodeResult(code=f"code {p.seed}", model=p.model)
    h = int(hashlib.sha256(p.code.encode()).hexdigest()[:8], 16)
    return EvalReport(correct=True, latency=1000 if p.code == "naive" else 400 + h % 500)


def result(job: Job, payload: object = None, ok: bool = True, error: str | None = None) -> Result:
    """The agent's Result message; payload: a typed answer or any plain data (malformed on purpose)."""
    body = answer(job) if payload is None and ok else payload
    return Result(job_id=job.job_id, kind=job.kind, attempt=job.attempt, ok=ok, error=error,
                  payload=msgspec.Raw(encode(body)) if body is not None else NO_PAYLOAD)


class Rig:
    def __init__(self, tmp_path, cfg=SMALL, leases=SHORT, cost=CostPolicy(), replay=None, name="run.db",
                 on_send=None) -> None:
        self.clock = Clock()
        self.path = tmp_path / name
        self.store = RunStore(self.path)
        self.t = InProcTransport(clock=self.clock, on_send=on_send)
        self.search = BeamSearch(cfg, PROBLEM, "naive", MENU, self.store, seeded=answers_from_seed)
        self.coord = Coordinator(self.t, self.store, self.search, leases, cost=cost, replay=replay, clock=self.clock,
                                 seeded=answers_from_seed)
        self.coord.begin()

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            self.coord.step()

    def serve(self, agents: list[bytes], max_steps: int = 500) -> None:
        """Answer every job the agents get until the search is done."""
        for _ in range(max_steps):
            if self.search.done:
                return
            self.step()
            for a in agents:
                for job in self.t.jobs_for(a):
                    self.t.reply(a, result(job))
        raise AssertionError("search did not finish")

    def only_evaluator_declared_dead_with_its_job(self) -> tuple[bytes, Job]:
        """The run's one evaluator takes the first job, then falls silent (SIGSTOP, a cut link) past dead_s."""
        a = self.t.join("evaluator", target="t", capacity=1)
        self.step()
        [job] = self.t.jobs_for(a)
        self.t.freeze(a)
        self.clock.advance(self.t.timing.dead_s + 1)
        self.step()
        return a, job

    def standard_agents(self, models=("synthetic",)) -> list[bytes]:
        return [self.t.join("evaluator", target="t", capacity=2),
                self.t.join("planner", models=list(models), capacity=2),
                self.t.join("coder", models=list(models), capacity=2)]

    def committed_state(self, job_id: str) -> str | None:
        """The job's state as another connection sees it: only what has been committed."""
        db = sqlite3.connect(self.path)
        try:
            row = db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
        finally:
            db.close()
        return row[0] if row else None


def test_both_transports_satisfy_the_protocol():
    assert isinstance(InProcTransport(), Transport)
    for name in ("poll", "send", "alive", "close"):             # the Router without opening a socket
        params = list(inspect.signature(getattr(Router, name)).parameters)
        assert params[:len(list(inspect.signature(getattr(Transport, name)).parameters))] == \
            list(inspect.signature(getattr(Transport, name)).parameters)


def test_a_whole_search_runs_over_the_inproc_transport(tmp_path):
    rig = Rig(tmp_path)
    rig.serve(rig.standard_agents())
    s = rig.coord.stats
    assert rig.search.stop_reason == "finished 2 iterations"
    assert rig.search.best.latency < 1000
    assert s.duplicates == s.requeued == s.lost == 0 and not s.failed
    assert s.dispatched == len(rig.search.jobs) == rig.store.count("jobs", "state = 'done'")
    assert not rig.coord.in_flight and rig.coord.queued == 0


def test_dispatch_respects_credit_role_model_and_target(tmp_path):
    cfg = BeamConfig(iterations=1, beam=1, plans=5, codes=1, seed=1, plan_models=("synthetic",),
                       code_models=("synthetic",))
    rig = Rig(tmp_path, cfg=cfg)
    wrong_target = rig.t.join("evaluator", target="elsewhere", capacity=4)
    ev = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    assert rig.t.jobs_for(wrong_target) == []
    [base] = rig.t.jobs_for(ev)
    assert base.kind == "eval" and base.attempt == 1 and base.lease_s == 5.0
    rig.t.reply(ev, result(base))
    wrong_model = rig.t.join("planner", models=["other"], capacity=4)
    coder = rig.t.join("coder", models=["synthetic"], capacity=4)      # wrong role for plans
    planner = rig.t.join("planner", models=["synthetic"], capacity=2)
    rig.step()
    assert rig.t.jobs_for(wrong_model) == [] and rig.t.jobs_for(coder) == []
    plans = rig.t.jobs_for(planner)
    assert [j.kind for j in plans] == ["plan", "plan"]               # its capacity, no more
    assert rig.coord.queued == 3 and rig.t.peers[planner].credit == 0
    rig.step()
    assert rig.t.jobs_for(planner) == []                                # no credit: nothing new
    rig.t.reply(planner, result(plans[0]))
    rig.step()
    assert len(rig.t.jobs_for(planner)) == 1                            # one slot freed, one job
    assert [j.kind for j in rig.t.jobs_for(coder)] == ["code"]       # the answered plan's code
    assert rig.t.jobs_for(wrong_model) == []


def test_a_dead_agents_jobs_go_to_another_agent_never_back(tmp_path):
    rig = Rig(tmp_path)
    a = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    [job] = rig.t.jobs_for(a)
    b = rig.t.join("evaluator", target="t", capacity=1)
    rig.t.kill(a)
    rig.step()
    [again] = rig.t.jobs_for(b)
    assert again.job_id == job.job_id and again.attempt == 2
    assert rig.coord.stats.requeued == 1 and rig.coord.avoid[job.job_id] == {rig.t.peers[a].incarnation}
    assert rig.store.count("attempts") == 2


def test_an_expired_evaluation_lease_is_a_timeout_verdict_and_the_hung_evaluator_keeps_its_slot(tmp_path):
    """An evaluator alive past an evaluation's lease is hung by that kernel: sending the job on would hang
    the next evaluator too. The job settles as a timeout (the search sees a failed evaluation), and the
    hung evaluator gets no new work until it answers; its late answer is acknowledged and dropped."""
    rig = Rig(tmp_path)
    slow = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    [job] = rig.t.jobs_for(slow)
    rig.clock.advance(4.9)
    rig.step()
    assert job.job_id in rig.coord.in_flight
    rig.clock.advance(0.2)                                      # past the 5 s lease
    rig.step(3)
    assert job.job_id not in rig.coord.in_flight and rig.coord.stats.requeued == 0
    assert rig.search.evals_done == 1 and rig.coord.queued == 0
    ok, verdict, _ = rig.store.finished_job(job.job_id)
    assert ok and not verdict.correct and verdict.error_kind == "timeout" and "lease" in verdict.error
    assert rig.t.peers[slow].credit == 0                        # still busy with the kernel that hung it
    other = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    assert rig.t.jobs_for(other) == []                          # the job is settled, not sent on
    rig.t.reply(slow, result(job))
    rig.step()
    assert rig.coord.stats.duplicates == 1 and rig.search.evals_done == 1 and rig.t.peers[slow].credit == 1
    assert [b.job_id for b in rig.t.messages_for(slow, MessageType.ACK)] == [job.job_id]


def test_an_expired_model_lease_requeues_and_the_slow_agent_is_avoided_while_another_can_serve(tmp_path):
    rig = Rig(tmp_path)
    ev = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    rig.t.reply(ev, result(rig.t.jobs_for(ev)[0]))              # the starting kernel: correct
    slow = rig.t.join("planner", models=["synthetic"], capacity=4)
    rig.step(3)
    jobs = rig.t.jobs_for(slow)
    assert jobs and all(j.kind == "plan" for j in jobs)
    other = rig.t.join("planner", models=["synthetic"], capacity=4)
    rig.clock.advance(5.1)                                      # past the 5 s lease
    rig.step()
    assert rig.coord.stats.requeued == len(jobs) and rig.t.jobs_for(slow) == []     # not given back to it
    again = rig.t.jobs_for(other)
    assert sorted(j.job_id for j in again) == sorted(j.job_id for j in jobs) and {j.attempt for j in again} == {2}


def test_a_job_every_live_agent_lost_goes_back_to_one_of_them(tmp_path):
    """The only planner outlived a plan's lease: the job is not left for a planner that may never come;
    it goes back to that planner (attempt 2), max_attempts bounding the retries."""
    rig = Rig(tmp_path)
    ev = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    rig.t.reply(ev, result(rig.t.jobs_for(ev)[0]))
    slow = rig.t.join("planner", models=["synthetic"], capacity=4)
    rig.step(3)
    jobs = rig.t.jobs_for(slow)
    rig.clock.advance(5.1)
    rig.step()
    again = rig.t.jobs_for(slow)
    assert sorted(j.job_id for j in again) == sorted(j.job_id for j in jobs) and {j.attempt for j in again} == {2}


def test_a_job_lost_by_the_only_agent_of_its_role_goes_back_to_it_when_it_rejoins(tmp_path):
    """One evaluator, paused past dead_s (SIGSTOP, a cut link): declared dead, its job requeued. It comes
    back under its old identity as a new incarnation and gets the job again: nothing is stranded."""
    rig = Rig(tmp_path, leases=LeasePolicy())
    a, job = rig.only_evaluator_declared_dead_with_its_job()
    assert rig.coord.stats.requeued == 1 and rig.coord.queued == 1
    rig.t.rejoin(a)
    rig.step()
    [again] = rig.t.jobs_for(a)
    assert again.job_id == job.job_id and again.attempt == 2
    rig.t.reply(a, result(again))
    rig.step()
    assert rig.search.evals_done == 1 and rig.store.finished_job(job.job_id)[0]


def test_a_late_result_of_a_requeued_job_is_accepted_once(tmp_path):
    """The paused evaluator finishes the job it was declared dead with and re-sends the result as it
    rejoins: the job is still queued, so that result settles it (not dropped as a duplicate, not run again)."""
    rig = Rig(tmp_path, leases=LeasePolicy())
    a, job = rig.only_evaluator_declared_dead_with_its_job()
    assert rig.coord.queued == 1
    rig.t.rejoin(a)
    rig.t.reply(a, result(job))                                 # attempt 1's answer, re-sent after the HELLO
    rig.step()
    assert rig.search.evals_done == 1 and rig.coord.stats.duplicates == 0
    assert job.job_id not in [j.job_id for j in rig.t.jobs_for(a)]  # not run a second time
    assert rig.store.finished_job(job.job_id)[0]
    rig.t.reply(a, result(job))                                 # and once only
    rig.step()
    assert rig.coord.stats.duplicates == 1 and rig.search.evals_done == 1


def test_a_late_answer_replaces_the_worst_case_its_lost_attempt_was_counted_at(tmp_path):
    book = PriceBook({LLM: Price(input=0.0, output=10.0)})
    cfg = BeamConfig(iterations=1, beam=1, plans=1, codes=1, seed=2, plan_models=(LLM,), code_models=(LLM,))
    rig = Rig(tmp_path, cfg=cfg, cost=CostPolicy(5.0, *cost_functions(book, max_tokens=4000)),
              leases=LeasePolicy())
    ev = rig.t.join("evaluator", target="t", capacity=1)
    planner = rig.t.join("planner", models=[LLM], capacity=1)
    rig.step()
    rig.t.reply(ev, result(rig.t.jobs_for(ev)[0]))
    rig.step()
    [plan] = rig.t.jobs_for(planner)
    rig.t.freeze(planner)
    rig.clock.advance(rig.t.timing.dead_s + 1)
    rig.step()
    assert rig.coord.spent == pytest.approx(0.06)              # lost: counted at its worst case
    rig.t.rejoin(planner)
    paid = msgspec.structs.replace(answer(plan), calls=[ModelCall(model=LLM, tokens_out=1000)])
    rig.t.reply(planner, result(plan, paid))
    rig.step()
    assert rig.coord.spent == pytest.approx(0.01) == rig.store.total_cost()
    assert rig.store.count("model_calls") == 1 and rig.store.count("model_calls", "outcome LIKE 'lost%'") == 0


def test_a_frozen_agent_turns_dead_by_the_clock_and_loses_its_jobs(tmp_path):
    rig = Rig(tmp_path, leases=LeasePolicy())                   # 600 s leases: only liveness can requeue
    a = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    [job] = rig.t.jobs_for(a)
    rig.t.freeze(a)
    rig.clock.advance(rig.t.timing.suspect_s + 0.1)
    rig.step()
    assert rig.t.peers[a].state == "suspect" and rig.coord.stats.requeued == 0
    rig.clock.advance(rig.t.timing.dead_s)
    rig.step()
    assert rig.t.peers[a].state == "dead" and rig.coord.stats.requeued == 1
    b = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    assert [j.job_id for j in rig.t.jobs_for(b)] == [job.job_id]


def test_max_attempts_then_the_job_is_lost_and_counted(tmp_path):
    rig = Rig(tmp_path, leases=LeasePolicy(lease_s=SHORT.lease_s, max_attempts=2))
    a = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    [job] = rig.t.jobs_for(a)
    rig.t.kill(a)
    b = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    assert rig.t.jobs_for(b)[0].attempt == 2
    rig.t.kill(b)
    c = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    assert rig.t.jobs_for(c) == []                              # not a third attempt
    assert rig.coord.stats.lost == 1 and rig.coord.stats.requeued == 1
    ok, _, error = rig.store.finished_job(job.job_id)
    assert not ok and error.startswith("job lost after 2 attempts")
    assert rig.search.done and "not correct" in rig.search.stop_reason   # the baseline never evaluated


def test_duplicate_and_unknown_results_are_acknowledged_and_counted_once(tmp_path):
    rig = Rig(tmp_path)
    a = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    [job] = rig.t.jobs_for(a)
    rig.t.reply(a, result(job))
    rig.t.reply(a, result(job))                                 # re-sent after a reconnect
    rig.t.reply(a, msgspec.structs.replace(result(job), job_id="no-such-job"))
    rig.step()
    assert rig.search.evals_done == 1 and rig.coord.stats.duplicates == 2
    assert [b.job_id for b in rig.t.messages_for(a, MessageType.ACK)] == [job.job_id, job.job_id,
                                                                             "no-such-job"]
    assert rig.store.count("attempts") == 1


def test_a_result_is_committed_before_it_is_acknowledged(tmp_path):
    seen: dict[str, str | None] = {}
    rig = None

    def on_send(peer, body):
        if isinstance(body, Ack):
            seen[body.job_id] = rig.committed_state(body.job_id)

    rig = Rig(tmp_path, on_send=on_send)
    rig.serve(rig.standard_agents())
    assert len(seen) == len(rig.search.jobs) > 5
    assert set(seen.values()) == {"done"}


def test_the_cost_cap_is_a_hard_ceiling_that_waits_for_calls_in_flight(tmp_path):
    # input free, output $10 per million tokens: a job's worst case is its two tries, 2000 + 4000 tokens: $0.06
    book = PriceBook({LLM: Price(input=0.0, output=10.0)})
    cfg = BeamConfig(iterations=3, beam=1, plans=4, codes=1, seed=2, patience=10, plan_models=(LLM,),
                       code_models=(LLM,))
    rig = Rig(tmp_path, cfg=cfg, cost=CostPolicy(0.15, *cost_functions(book, max_tokens=4000)))
    ev = rig.t.join("evaluator", target="t", capacity=4)
    planner = rig.t.join("planner", models=[LLM], capacity=4)
    coder = rig.t.join("coder", models=[LLM], capacity=4)
    rig.step()
    [base] = rig.t.jobs_for(ev)
    rig.t.reply(ev, result(base))
    rig.step()
    plans = rig.t.jobs_for(planner)
    assert len(plans) == 2 and rig.coord.reserved[plans[0].job_id] == pytest.approx(0.06)   # a third: $0.18
    assert not rig.coord.cap_reached and rig.coord.queued == 2     # waiting, not dropped: calls may cost less
    pending = [(planner, job) for job in plans]
    for _ in range(200):
        if rig.search.done:
            break
        assert rig.coord.spent + sum(rig.coord.reserved.values()) <= 0.15 + 1e-12
        for a, job in pending:
            payload = answer(job)
            if job.kind != "eval":   # every call bills 1000 output tokens: $0.01
                payload = msgspec.structs.replace(payload, calls=[ModelCall(model=LLM, tokens_in=50_000,
                                                                            tokens_out=1000)])
            rig.t.reply(a, result(job, payload))
        rig.step()
        pending = [(a, job) for a in (ev, planner, coder) for job in rig.t.jobs_for(a)]
    assert rig.search.stop_reason.startswith("cost cap of $0.15 reached")
    assert rig.coord.spent == pytest.approx(0.01 * rig.store.count("model_calls")) and rig.coord.spent <= 0.15
    # it stopped when no job could start: spent + $0.06 > $0.15 with nothing in flight
    assert rig.coord.spent > 0.09 and not rig.coord.reserved
    assert rig.store.count("model_calls", "priced = 1 AND cost > 0.0099") == rig.store.count("model_calls")


def test_replay_answers_model_jobs_from_the_recorded_run(tmp_path):
    cfg = BeamConfig(iterations=2, beam=2, plans=2, codes=1, seed=4, patience=10, plan_models=(LLM,),
                       code_models=(LLM,))
    first = Rig(tmp_path, cfg=cfg, name="first.db")
    first.serve(first.standard_agents(models=(LLM,)))
    again = Rig(tmp_path, cfg=cfg, name="again.db", replay=first.store)
    ev = again.t.join("evaluator", target="t", capacity=2)      # no planner or coder at all
    again.serve([ev])
    assert [c.id for c in again.search.beam] == [c.id for c in first.search.beam]
    model_jobs = [j for j in again.search.jobs.values() if j.kind != "eval"]
    assert model_jobs and again.coord.stats.dispatched == len(again.search.jobs) - len(model_jobs)
    assert again.store.count("attempts") == again.coord.stats.dispatched   # evaluations only


def test_replay_without_a_recording_fails_the_job_clearly(tmp_path):
    cfg = BeamConfig(iterations=1, beam=1, plans=1, codes=1, plan_models=(LLM,), code_models=(LLM,))
    empty = RunStore(tmp_path / "empty.db")
    rig = Rig(tmp_path, cfg=cfg, replay=empty)
    ev = rig.t.join("evaluator", target="t", capacity=1)
    rig.serve([ev])
    [plan] = [j for j in rig.search.jobs.values() if j.kind == "plan"]
    ok, _, error = rig.store.finished_job(plan.id)
    assert not ok and "recorded run has no answer" in error


@pytest.mark.parametrize("payload", [{"correct": True, "latency": "lots"}, {"correct": "yes"}, None,
                                     {"correct": True, "latency": 1.0, "feedback": {"x": msgspec.msgpack.Ext(1, b"e")}}])
def test_a_malformed_result_becomes_a_failed_job(tmp_path, payload):
    rig = Rig(tmp_path)
    a = rig.t.join("evaluator", target="t", capacity=1)
    rig.step()
    [job] = rig.t.jobs_for(a)
    rig.t.reply(a, result(job, payload) if payload is not None else msgspec.structs.replace(result(job),
                                                                                            payload=NO_PAYLOAD))
    rig.step()
    ok, _, error = rig.store.finished_job(job.job_id)
    assert not ok and error.startswith("malformed result from evaluator/fake@inproc")
    assert rig.coord.stats.failed == {"eval": 1}
    assert [b.job_id for b in rig.t.messages_for(a, MessageType.ACK)] == [job.job_id]


def test_a_failed_send_tries_another_agent(tmp_path):
    rig = Rig(tmp_path)
    full = rig.t.join("evaluator", target="t", capacity=3)     # most credit: chosen first
    other = rig.t.join("evaluator", target="t", capacity=1)
    rig.t.unreachable(full)
    rig.step()
    assert rig.t.jobs_for(full) == [] and rig.coord.stats.dispatched == 0 and rig.coord.queued == 1
    rig.step()                                                  # the failed send got it reported dead
    assert rig.t.peers[full].state == "dead"
    [job] = rig.t.jobs_for(other)
    assert job.attempt == 1 and rig.coord.stats.dispatched == 1 and rig.coord.stats.requeued == 0


def test_no_agent_warning_only_after_jobs_lacked_one_for_the_whole_grace(tmp_path):
    from structlog.testing import capture_logs
    cfg = BeamConfig(iterations=1, beam=1, plans=2, codes=1, seed=1, plan_models=(LLM,), code_models=(LLM,))
    rig = Rig(tmp_path, cfg=cfg)
    ev = rig.t.join("evaluator", target="t", capacity=2)
    with capture_logs() as logs:
        rig.step()
        [base] = rig.t.jobs_for(ev)
        rig.t.reply(ev, result(base))
        for _ in range(29):              # 29 s of plan jobs waiting for a planner that is still starting
            rig.clock.advance(1.0)
            rig.step()
        assert not [e for e in logs if e["event"] == "no_agent_for_job"]
        for _ in range(2):
            rig.clock.advance(1.0)
            rig.step()
        warned = [e for e in logs if e["event"] == "no_agent_for_job"]
        assert [(e["role"], e["model"]) for e in warned] == [("planner", LLM)] and warned[0]["waiting_s"] >= 30


def test_evaluations_no_live_evaluator_can_serve_are_named_with_the_worker_to_start(tmp_path):
    from structlog.testing import capture_logs
    rig = Rig(tmp_path)
    rig.t.join("evaluator", target="other-target", capacity=2)        # alive, but for another target
    with capture_logs() as logs:
        for _ in range(32):
            rig.clock.advance(1.0)
            rig.step()
    warned = [e for e in logs if e["event"] == "no_agent_for_job"]
    assert [(e["role"], e["target"]) for e in warned] == [("evaluator", "t")]
    assert "--role evaluator --target t" in warned[0]["note"]


def test_an_answer_that_comes_after_another_attempt_settled_the_job_is_paid_for_once(tmp_path):
    """A plan whose lease expired on a slow planner is answered by a second planner; the slow one answers too,
    later. Before, that answer was dropped as a duplicate with its model calls: made, billed, never recorded."""
    book = PriceBook({LLM: Price(input=0.0, output=10.0)})
    cfg = BeamConfig(iterations=1, beam=1, plans=1, codes=1, seed=2, plan_models=(LLM,), code_models=(LLM,))
    rig = Rig(tmp_path, cfg=cfg, cost=CostPolicy(5.0, *cost_functions(book, max_tokens=4000)))
    ev = rig.t.join("evaluator", target="t", capacity=1)
    slow = rig.t.join("planner", models=[LLM], capacity=1)
    rig.step()
    rig.t.reply(ev, result(rig.t.jobs_for(ev)[0]))
    rig.step()
    [plan] = rig.t.jobs_for(slow)
    other = rig.t.join("planner", models=[LLM], capacity=1)
    rig.clock.advance(5.1)                                      # past the 5 s lease: the other planner gets it
    rig.step()
    [again] = rig.t.jobs_for(other)
    assert again.attempt == 2 and rig.coord.spent == pytest.approx(0.06)     # attempt 1 at its worst case
    paid = msgspec.structs.replace(answer(plan), calls=[ModelCall(model=LLM, tokens_out=1000)])
    rig.t.reply(other, result(again, paid))
    rig.step()
    rig.t.reply(slow, result(plan, paid))                       # attempt 1, after the job was settled
    rig.t.reply(slow, result(plan, paid))                       # and re-sent after a reconnect
    rig.t.reply(other, result(again, paid))
    rig.step()
    assert rig.coord.spent == pytest.approx(0.02) == rig.store.total_cost()    # two calls made, two charged
    assert rig.store.count("model_calls", "outcome LIKE '%not used%'") == 1
    assert rig.store.count("model_calls", "outcome LIKE 'lost%'") == 0 and rig.coord.stats.duplicates == 3
