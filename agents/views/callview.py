"""Every model call of a run, and what each candidate came from: the data behind `show --calls`,
`show --candidate` and the report's candidate details.

Read from a read-only connection (agents/views/runview.py opens it). Stores written before calls kept their
texts and full token counts (format < 3) lack those columns and the texts table: their calls read with
those fields None, which the views print as "-" or "not recorded".

Which job produced a candidate is found from the data, not from how ids are made: a code job's answer
(jobs.result's code) with the parent its request named (payload.parent.id) is the candidate with that
parent and code; a repair job's request names the failed kernel's code and plan, and its answer is the
candidate with the failed kernel's parent and the repaired code.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field

from autocomp_zmq.agents import store
from autocomp_zmq.agents.store import text_of

NEW_COLUMNS = ("tokens_cached", "tokens_cache_write", "tokens_reasoning", "max_tokens", "finish", "priced",
               "prefix_id", "prompt_id", "answer_id", "reasoning_id", "billing", "tier")
MIN_PREFIX = 6   # characters of a candidate id that `show --candidate` needs


@dataclass
class Call:
    n: int                        # position among all the run's calls, in time order, from 1
    id: int
    job_id: str | None
    role: str
    model: str
    kind: str | None              # the job's kind (plan, code, repair, eval) and iteration
    iteration: int | None
    tokens_in: int
    tokens_out: int
    cost: float
    latency: float | None
    outcome: str
    created: float | None
    # None: not recorded (a store written before these columns existed)
    tokens_cached: int | None = None
    tokens_cache_write: int | None = None
    tokens_reasoning: int | None = None
    max_tokens: int | None = None
    finish: str | None = None
    priced: bool | None = None
    prefix_id: str | None = None
    prompt_id: str | None = None
    answer_id: str | None = None
    reasoning_id: str | None = None
    billing: str | None = None    # reported | none (not billed) | unknown (lost after sending: cost is its worst case)
    tier: str | None = None       # the price list applied: "" standard, flex, priority, batch
    candidates: list[str] = field(default_factory=list)   # what its job led to

    @property
    def texts_recorded(self) -> bool:
        return any((self.prefix_id, self.prompt_id, self.answer_id, self.reasoning_id))


@dataclass
class Usage:
    """Calls, tokens and cost of one (model, role); token kinds a store lacks stay None."""
    model: str
    role: str
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    tokens_cached: int | None = None
    tokens_cache_write: int | None = None
    tokens_reasoning: int | None = None
    latency: float = 0.0
    unpriced: int | None = None   # calls whose price was unknown (cost as the agent reported it)

    def add(self, c: Call) -> None:
        self.calls += 1
        self.tokens_in += c.tokens_in
        self.tokens_out += c.tokens_out
        self.cost += c.cost
        self.latency += c.latency or 0.0
        for name in ("tokens_cached", "tokens_cache_write", "tokens_reasoning"):
            if getattr(c, name) is not None:
                setattr(self, name, (getattr(self, name) or 0) + getattr(c, name))
        if c.priced is not None:
            self.unpriced = (self.unpriced or 0) + (not c.priced)


def load_calls(db: sqlite3.Connection) -> list[Call]:
    """Every model call in time order, with its job's kind and iteration (texts not read)."""
    rows = store.model_call_rows(db, NEW_COLUMNS)
    calls = []
    for n, r in enumerate(rows, 1):
        call = Call(n, *r)
        call.priced = None if call.priced is None else bool(call.priced)
        calls.append(call)
    return calls


def usage(calls: list[Call]) -> list[Usage]:
    """Per (model, role), the most expensive first."""
    by: dict[tuple[str, str], Usage] = {}
    for c in calls:
        by.setdefault((c.model, c.role), Usage(c.model, c.role)).add(c)
    return sorted(by.values(), key=lambda u: (-u.cost, u.model, u.role))


def total(calls: list[Call]) -> Usage:
    t = Usage("all", "all")
    for c in calls:
        t.add(c)
    return t


def combined(rows: list[Usage]) -> Usage:
    """The sum of usage rows."""
    t = Usage("all", "all")
    for u in rows:
        t.calls += u.calls
        t.tokens_in += u.tokens_in
        t.tokens_out += u.tokens_out
        t.cost += u.cost
        t.latency += u.latency
        for name in ("tokens_cached", "tokens_cache_write", "tokens_reasoning", "unpriced"):
            if getattr(u, name) is not None:
                setattr(t, name, (getattr(t, name) or 0) + getattr(u, name))
    return t


# -- candidates -------------------------------------------------------------------------------
@dataclass
class Cand:
    id: str
    parent_id: str | None
    iteration: int
    plan_job: str | None
    origin: str
    model: str | None
    code: str
    correct: int | None = None    # None: not evaluated (yet)
    cycles: float | None = None
    error_kind: str | None = None
    error: str | None = None
    feedback: str | None = None   # evals.feedback (JSON metrics)
    eval_job: str | None = None


@dataclass
class PlanRow:
    job_id: str
    option_id: str | None
    text: str | None
    model: str | None


@dataclass
class Producer:
    """A job whose model calls led to a candidate, and why it is listed."""
    job_id: str
    kind: str
    iteration: int | None
    why: str
    calls: list[Call]


class CandidateIndex:
    """Candidates with their evaluation, plan and the jobs that produced them, read once."""

    def __init__(self, db: sqlite3.Connection, calls: list[Call] | None = None) -> None:
        self.db: sqlite3.Connection | None = db
        self._feedback: dict[str, str] | None = None   # eval job -> feedback text, once detached
        self._texts: dict[str, str] = {}
        self.cands: dict[str, Cand] = {r[0]: Cand(*r) for r in store.candidate_rows(db)}
        # a candidate whose code was evaluated for another parent shares that evaluation (see runview)
        by_code = {c.code: c for c in self.cands.values() if c.correct is not None}
        for c in self.cands.values():
            twin = by_code.get(c.code) if c.correct is None else None
            if twin is not None:
                c.correct, c.cycles, c.error_kind, c.error, c.feedback, c.eval_job = (
                    twin.correct, twin.cycles, twin.error_kind, twin.error, twin.feedback, twin.eval_job)
        self.plans = {r[0]: PlanRow(*r) for r in store.plan_rows(db)}
        self.jobs: dict[str, tuple[str, int]] = store.job_kinds(db)
        self.calls = calls if calls is not None else load_calls(db)
        self.calls_of: dict[str, list[Call]] = {}
        for c in self.calls:
            self.calls_of.setdefault(c.job_id or "", []).append(c)
        self.made_by: dict[str, list[str]] = {}      # candidate -> code/repair jobs whose answer it is
        self.repaired: dict[str, list[str]] = {}     # repair job -> the failed candidates it repaired
        self.led_to: dict[str, list[str]] = {}       # job -> candidates it led to
        self._link()
        base = [c for c in self.cands.values() if c.origin == "initial" and c.correct == 1]
        self.baseline = base[0].cycles if base else None

    def _link(self) -> None:
        by_parent_code = {(c.parent_id, c.code): c.id for c in self.cands.values()}
        by_code: dict[str, list[Cand]] = {}
        for c in self.cands.values():
            by_code.setdefault(c.code, []).append(c)
        for c in self.cands.values():
            if c.plan_job:
                self.led_to.setdefault(c.plan_job, []).append(c.id)
        for job_id, kind, payload, result in store.answered_code_jobs(self.db):
            request, answer = store.expand_request(self.db, payload), _json(result)
            code = answer.get("code")
            if not isinstance(code, str):
                continue
            plan = request.get("plan") if isinstance(request.get("plan"), dict) else {}
            found: list[str] = []
            if kind == "code":
                parent = request.get("parent") if isinstance(request.get("parent"), dict) else {}
                if parent.get("id") is not None:
                    found = [by_parent_code[k] for k in [(parent["id"], code)] if k in by_parent_code]
                else:   # an older request without the parent's id: the plan must match too
                    found = [c.id for c in by_code.get(code, []) if self._same_plan(c, plan)]
            else:
                failed = [b for b in by_code.get(str(request.get("code")), [])
                          if b.origin != "initial" and self._same_plan(b, plan)]
                self.repaired[job_id] = [b.id for b in failed]
                found = [by_parent_code[(b.parent_id, code)] for b in failed if (b.parent_id, code) in by_parent_code]
            for cid in dict.fromkeys(found):
                self.made_by.setdefault(cid, []).append(job_id)
                led = self.led_to.setdefault(job_id, [])
                if cid not in led:      # a one-phase code job is also the plan job of what it wrote
                    led.append(cid)
        for c in self.calls:
            c.candidates = self.led_to.get(c.job_id or "", [])

    def _same_plan(self, c: Cand, plan: dict) -> bool:
        """Whether a request's plan is the one the candidate's plan job wrote (true when either is unknown)."""
        row = self.plans.get(c.plan_job or "")
        if row is None or not plan:
            return True
        return (plan.get("text"), plan.get("option_id")) == (row.text, row.option_id)

    # -- lookups ---------------------------------------------------------------------------
    def resolve(self, prefix: str) -> str:
        """The candidate an id prefix names; LookupError with a one-line message otherwise."""
        prefix = prefix.strip().lower()
        if prefix in self.cands:
            return prefix
        if len(prefix) < MIN_PREFIX:
            raise LookupError(f"give at least {MIN_PREFIX} characters of a candidate id, not {prefix!r}")
        matches = [cid for cid in self.cands if cid.startswith(prefix)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise LookupError(f"no candidate id starts with {prefix!r} (the run has {len(self.cands)} candidates)")
        listed = ", ".join(f"{cid} (iteration {self.cands[cid].iteration})" for cid in matches[:8])
        more = f" and {len(matches) - 8} more" if len(matches) > 8 else ""
        raise LookupError(f"{prefix!r} matches {len(matches)} candidates: {listed}{more}")

    def detach(self, texts_of: set[str] = frozenset()) -> None:
        """Read every evaluation's feedback and the call texts of the candidates texts_of, then let go of
        the connection: later lookups answer from what was read (other texts read as "")."""
        self._feedback = {}
        for job_id, result in store.eval_results(self.db):
            text = _json(result).get("feedback_text")
            self._feedback[job_id] = text if isinstance(text, str) else ""
        for cid in texts_of:
            for p in self.producers(cid) if cid in self.cands else []:
                for c in p.calls:
                    for tid in (c.prefix_id, c.prompt_id, c.answer_id, c.reasoning_id):
                        if tid and tid not in self._texts:
                            self._texts[tid] = text_of(self.db, tid)
        self.db = None

    def feedback_text(self, cid: str) -> str:
        """The evaluation's feedback as the next prompt saw it; the stored metrics for stores without it."""
        c = self.cands[cid]
        if c.eval_job and self._feedback is not None:
            text = self._feedback.get(c.eval_job)
        elif c.eval_job:
            result = store.job_result(self.db, c.eval_job)
            text = _json(result).get("feedback_text") if result else None
        else:
            text = None
        if isinstance(text, str) and text:
            return text
        metrics = _json(c.feedback)
        return "\n".join(f"{k}: {json.dumps(v) if isinstance(v, (dict, list)) else v}" for k, v in metrics.items())

    def speedups(self, cid: str) -> tuple[float | None, float | None]:
        """(over the start, over the parent) of a correct candidate."""
        c = self.cands[cid]
        if c.correct != 1 or not c.cycles:
            return None, None
        parent = self.cands.get(c.parent_id or "")
        over_parent = parent.cycles / c.cycles if parent and parent.correct == 1 and parent.cycles else None
        return (self.baseline / c.cycles if self.baseline else None), over_parent

    def producers(self, cid: str) -> list[Producer]:
        """The jobs whose calls led to the candidate: its plan, the code or repair jobs that wrote it and, for
        a repaired kernel, the jobs that wrote the kernel it repaired (and so on back)."""
        out: list[Producer] = []
        seen: set[str] = set()

        def add(job_id: str, why: str) -> None:
            if job_id in seen:
                return
            seen.add(job_id)
            kind, iteration = self.jobs.get(job_id, ("?", None))
            out.append(Producer(job_id, kind, iteration, why, self.calls_of.get(job_id, [])))

        c = self.cands[cid]
        if c.plan_job:
            add(c.plan_job, "plan")
        todo, visited = [(cid, "")], set()
        while todo:
            target, of = todo.pop(0)
            if target in visited:
                continue
            visited.add(target)
            for job_id in self.made_by.get(target, []):
                kind = self.jobs.get(job_id, ("?",))[0]
                failed = self.repaired.get(job_id, []) if kind == "repair" else []
                add(job_id, (f"repair of {', '.join(b[:12] for b in failed)}" if kind == "repair" else "code") + of)
                for b in failed:
                    todo.append((b, f" (wrote {b[:12]}, which was repaired)"))
        return out

    def repaired_into(self, cid: str) -> list[str]:
        """Candidates that repairs of this (failed) candidate produced."""
        return [new for job, failed in self.repaired.items() if cid in failed for new in self.led_to.get(job, [])]

    def job_error(self, job_id: str | None) -> str | None:
        """Why a job failed (None for one that did not, or a detached index)."""
        return store.job_error(self.db, job_id) if job_id and self.db is not None else None

    def text(self, tid: str | None) -> str:
        if not tid:
            return ""
        if tid not in self._texts and self.db is not None:
            self._texts[tid] = text_of(self.db, tid)
        return self._texts.get(tid, "")


def detached_index(db: sqlite3.Connection, calls: list[Call], texts_of: set[str]) -> CandidateIndex:
    """Every candidate with its plan, evaluation and producing calls, read out so the store can close; the
    calls' texts only for the candidates texts_of (the report shows the lineage's)."""
    index = CandidateIndex(db, calls)
    index.detach(texts_of)
    return index


def _json(text) -> dict:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
