"""Read-only views of a run directory for `show`, `report` and `runs`.

Everything is read from RUN_DIR/run.db through a read-only connection inside one
transaction, so a run that is still being written (WAL) is seen as one consistent
snapshot and is never modified. Runs that crashed or were interrupted have no
`summary` meta; every number here is therefore derived from the tables
themselves, and the summary is only used for the stop reason.
"""
from __future__ import annotations

import json
import re
import sqlite3
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from autocomp_zmq.agents.views.callview import CandidateIndex, Usage, detached_index, load_calls, usage as usage_of
from autocomp_zmq.agents.engine.failures import is_noop
from autocomp_zmq.agents.run.rundir import is_locked
from autocomp_zmq.agents.run.runconfig import flat_view
from autocomp_zmq.agents import store


class RunViewError(RuntimeError):
    """The directory cannot be shown; the message is one line that says why."""


@dataclass
class Step:
    """One kernel on the lineage from the starting kernel to the best one."""
    id: str
    iteration: int
    option_id: str | None
    plan: str | None          # first line of the plan text
    model: str | None
    cycles: float | None
    vs_start: float | None    # start cycles / these cycles
    vs_parent: float | None   # parent cycles / these cycles
    code: str
    parent_code: str | None


@dataclass
class IterationBest:
    iteration: int
    cycles: float
    speedup: float | None
    beam: int                 # candidates kept
    candidates: int           # candidates generated in this iteration
    correct: int


@dataclass
class OptionStats:
    option_id: str
    plans: int = 0
    candidates: int = 0
    correct: int = 0
    accepted: int = 0
    ratios: list[float] = field(default_factory=list)   # child cycles / parent cycles, correct children

    @property
    def best_gain(self) -> float | None:
        return 1 / min(self.ratios) if self.ratios else None


@dataclass
class FailureGroup:
    kind: str                 # plan | code | repair | eval
    error_kind: str
    message: str              # normalised first line
    count: int
    example: str              # one full first line, unnormalised


@dataclass
class Node:
    """A candidate in the search tree."""
    id: str
    parent_id: str | None
    iteration: int
    state: str                # in-beam | correct | incorrect | pending
    cycles: float | None
    on_lineage: bool


@dataclass
class RunView:
    run_dir: Path
    config: dict
    summary: dict | None
    status: str
    unit: str
    started: float | None
    baseline: float | None
    best_cycles: float | None
    evaluations: int
    cost: float
    in_flight: int            # jobs leased to an agent and not finished (a live or crashed run)
    queued: int               # jobs waiting for an agent
    lineage: list[Step]
    iterations: list[IterationBest]
    options: list[OptionStats]
    failures: list[FailureGroup]
    usage: list[Usage]
    calls: list[tuple[float, float]]   # (created, cost) of every model call, in time order
    nodes: list[Node]
    reused: dict | None = None   # the optimization trace the run's first iterations reused (--reuse)
    continued: dict | None = None   # the run whose final beam this one started from (--continue-from)
    index: CandidateIndex | None = None   # load(details=True): every candidate in full, for the report
    kernels: int = 0             # evaluated kernels: `evaluations` and those that shared an identical one's
    noops: int = 0               # plans that proposed nothing (not failures: agents/engine/failures.py)
    plan_choices: dict[str, dict[str, int]] = field(default_factory=dict)   # model -> how plans named options
    duration_s: float | None = None   # wall time of the run's sessions (None: unknown, e.g. a crashed run)

    @property
    def problem(self) -> str:
        return str(self.config.get("problem", "?"))

    @property
    def target(self) -> str:
        return str(self.config.get("target", "?"))

    @property
    def speedup(self) -> float | None:
        return self.baseline / self.best_cycles if self.baseline and self.best_cycles else None

    def models(self, role: str) -> list[str]:
        """Configured models (flat_view gives every version's config the names model and code_model)."""
        value = self.config.get("model" if role == "plan" else "code_model")
        if value:
            return [value] if isinstance(value, str) else list(value)
        return self.models("plan") if role == "code" else []


@dataclass
class RunRow:
    """One line of `runs`; only the status is known for a store that cannot be read."""
    run_dir: Path
    problem: str = ""
    target: str = ""
    speedup: float | None = None
    evaluations: int | None = None
    cost: float | None = None
    status: str = ""
    started: float | None = None
    kernels: int | None = None
    duration_s: float | None = None


# -- opening --------------------------------------------------------------------------------------
def connect(run_dir: Path) -> sqlite3.Connection:
    """A read-only connection to RUN_DIR/run.db inside one read transaction (one snapshot)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunViewError(f"{run_dir} is not a directory")
    path = run_dir / "run.db"
    if not path.is_file():
        raise RunViewError(f"{run_dir} is not a run directory (no run.db)")
    try:
        return store.open_read(path)
    except sqlite3.Error as exc:
        raise RunViewError(f"{path} is unreadable: {exc}") from None


def _meta(db: sqlite3.Connection, key: str):
    return store.meta_of(db, key)


def _status(run_dir: Path, summary: dict | None) -> str:
    if is_locked(run_dir):
        return "running"
    if summary is None:
        return "incomplete (resume with --resume)"
    reason = clip(first_line(str(summary.get("stop_reason") or "")), 100) or "unknown reason"
    if reason == "interrupted":
        return "interrupted"
    return "finished" if reason.startswith("finished") else f"stopped: {reason}"


def _started(db: sqlite3.Connection, run_dir: Path) -> float | None:
    first = store.first_job_created(db)
    return first if first is not None else (run_dir / "run.db").stat().st_mtime


def _evaluations(db: sqlite3.Connection) -> int:
    return store.finished_evaluations(db)


def _baseline_and_best(db: sqlite3.Connection) -> tuple[float | None, str | None, float | None]:
    """Start cycles, and the best candidate so far: rank 0 of the latest beam."""
    best = store.best_in_latest_frontier(db)
    return store.baseline_latency(db), (best[0] if best else None), (best[1] if best else None)


# -- `runs` -------------------------------------------------------------------------------------
def list_runs(parent: Path) -> list[RunRow]:
    """Every direct subdirectory of parent that holds a run.db, newest first."""
    parent = Path(parent)
    if not parent.is_dir():
        raise RunViewError(f"{parent} is not a directory")
    rows = [run_row(d) for d in sorted(parent.iterdir()) if d.is_dir() and (d / "run.db").is_file()]
    return sorted(rows, key=lambda r: r.started or 0, reverse=True)


def run_row(run_dir: Path) -> RunRow:
    try:
        v = load(run_dir)
    except RunViewError as exc:
        return RunRow(run_dir, status="unreadable: " + str(exc).rsplit(" is unreadable: ", 1)[-1])
    return RunRow(run_dir, v.problem, v.target, v.speedup, v.evaluations, v.cost, v.status, v.started, v.kernels,
                  v.duration_s)


# -- `show` and `report` ------------------------------------------------------------------------
def load(run_dir: Path, details: bool = False) -> RunView:
    """The run's view; with details also every candidate's plan, evaluation and model calls (view.index)."""
    run_dir = Path(run_dir)
    db = connect(run_dir)
    try:
        return _load(db, run_dir, details)
    except (sqlite3.Error, ValueError) as exc:   # a store with missing tables or garbled JSON
        raise RunViewError(f"{run_dir / 'run.db'} is unreadable: {exc}") from None
    finally:
        db.close()


class _Cand(NamedTuple):
    id: str
    parent_id: str | None
    iteration: int
    plan_job: str | None
    model: str | None
    code: str
    correct: int | None       # None: not evaluated (yet)
    cycles: float | None


def _candidates(db: sqlite3.Connection) -> dict[str, _Cand]:
    cands = {r[0]: _Cand(*r[:4], *r[5:9]) for r in store.candidate_rows(db)}   # (origin and errors not needed)
    # A candidate whose code was already evaluated for another parent shares that evaluation and may have
    # no evals row of its own: the result depends only on the code, so take it from the twin.
    by_code = {c.code: c for c in cands.values() if c.correct is not None}
    for cid, c in cands.items():
        if c.correct is None and c.code in by_code:
            cands[cid] = c._replace(correct=by_code[c.code].correct, cycles=by_code[c.code].cycles)
    return cands


def latency_unit(db: sqlite3.Connection) -> str:
    rows = store.eval_results(db, limit=1)
    return (json.loads(rows[0][1]) or {}).get("latency_unit", "cycles") if rows and rows[0][1] else "cycles"


def _load(db: sqlite3.Connection, run_dir: Path, details: bool = False) -> RunView:
    summary = _meta(db, "summary")
    unit = latency_unit(db)
    base, best_id, best_cycles = _baseline_and_best(db)
    cands = _candidates(db)
    plans = {r[0]: r for r in store.plan_rows(db)}
    in_beam = store.frontier_members(db)

    def cycles_of(cid: str | None) -> float | None:
        c = cands.get(cid)
        return c.cycles if c and c.correct == 1 else None

    # lineage: follow parents back from the best candidate (guarding against a cycle in a corrupt store)
    chain, cid = [], best_id
    while cid in cands and cid not in chain:
        chain.append(cid)
        cid = cands[cid].parent_id
    lineage = []
    for c in (cands[cid] for cid in reversed(chain)):
        _, option_id, text, plan_model = plans.get(c.plan_job) or (None, None, None, None)
        cyc, parent_cyc = cycles_of(c.id), cycles_of(c.parent_id)
        lineage.append(Step(c.id, c.iteration, option_id, clip(first_line(text), 100) if text else None,
                            c.model if plan_model in (None, c.model) else f"{plan_model} / {c.model}",
                            cyc, base / cyc if base and cyc else None, parent_cyc / cyc if parent_cyc and cyc else None,
                            c.code, cands[c.parent_id].code if c.parent_id in cands else None))

    per_it = defaultdict(lambda: [0, 0])   # iteration -> [candidates, correct ones]
    for c in cands.values():
        per_it[c.iteration][0] += 1
        per_it[c.iteration][1] += c.correct == 1
    iterations = [IterationBest(it, cyc, base / cyc if base and cyc else None, size, *per_it[it])
                  for it, cyc, size in store.frontier_bests(db)]

    options: dict[str, OptionStats] = {}
    option_of = {job_id: option_id or "(none)" for job_id, option_id, _, _ in plans.values()}
    for option_id in option_of.values():
        options.setdefault(option_id, OptionStats(option_id)).plans += 1
    for c in cands.values():
        if c.plan_job in option_of:
            stats = options[option_of[c.plan_job]]
            stats.candidates += 1
            stats.correct += c.correct == 1
            stats.accepted += c.id in in_beam
            if c.correct == 1 and cycles_of(c.parent_id):
                stats.ratios.append(c.cycles / cycles_of(c.parent_id))

    nodes = [Node(c.id, c.parent_id, c.iteration, _node_state(c.correct, c.id in in_beam), cycles_of(c.id),
                  c.id in chain) for c in cands.values()]
    all_calls = load_calls(db)
    usage = usage_of(all_calls)
    calls = [(c.created, c.cost) for c in all_calls if c.created is not None]
    states = store.job_states(db)
    return RunView(run_dir=run_dir, config=flat_view(_meta(db, "config") or {}), summary=summary,
                   status=_status(run_dir, summary), unit=unit, started=_started(db, run_dir), baseline=base,
                   best_cycles=best_cycles, evaluations=_evaluations(db), cost=sum(u.cost for u in usage),
                   in_flight=states.get("leased", 0), queued=states.get("pending", 0),
                   lineage=lineage, iterations=iterations,
                   options=sorted(options.values(), key=lambda o: (-o.accepted, -o.plans, o.option_id)),
                   failures=_failures(db), usage=usage, calls=calls, nodes=nodes, reused=_meta(db, "reused_trace"),
                   continued=_meta(db, "continued_from"),
                   index=detached_index(db, all_calls, set(chain)) if details else None,
                   kernels=store.evaluated_kernels(db), duration_s=_duration(db, summary, is_locked(run_dir)),
                   noops=sum(is_noop(error) for _, error in store.failed_jobs(db)), plan_choices=store.plan_choices(db))


def _duration(db: sqlite3.Connection, summary: dict | None, running: bool) -> float | None:
    """The run's wall time: for a run going on now, so far; else its summary's (None: it has none)."""
    before = (summary or {}).get("duration_s")
    session = _meta(db, "session") or {}
    if running and session.get("started"):
        return (before or 0.0) + time.time() - session["started"]
    return before


def _node_state(correct: int | None, in_beam: bool) -> str:
    if in_beam:
        return "in-beam"
    return {1: "correct", 0: "incorrect"}.get(correct, "pending")


def _failures(db: sqlite3.Connection) -> list[FailureGroup]:
    """Failed jobs and incorrect candidates, grouped by what went wrong. An evaluation job that itself
    failed also leaves an incorrect eval row ('lost'); it is counted once, as the job."""
    found = []
    for kind, error in store.failed_jobs(db):
        if is_noop(error):      # counted apart (RunView.noops)
            continue
        first = first_line(error) or "(no error text)"
        # agents report exceptions as 'ClassName: message': the class is the kind of error
        m = re.match(r"([A-Za-z_][\w.]*(?:Error|Exception|Timeout|Exit)\w*):\s*(.*)", first)
        found.append((kind, m.group(1) if m else "-", m.group(2) if m else first))
    for error_kind, error in store.failed_evaluations(db):
        found.append(("eval", error_kind or "-", first_line(error) or "(no error text)"))
    groups: Counter = Counter()
    examples = {}
    for kind, error_kind, first in found:
        key = (kind, error_kind, normalise(first))
        groups[key] += 1
        examples.setdefault(key, first)
    return [FailureGroup(k, ek, msg, n, examples[(k, ek, msg)])
            for (k, ek, msg), n in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))]


def first_line(text: str | None) -> str:
    """The line that says what happened. Compiler errors start with a header line ('compile error:',
    "In function 'solution':"): then the first line that mentions an error is the informative one."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return ""
    first = lines[0]
    if first.endswith(":") and len(lines) > 1:
        detail = next((ln for ln in lines[1:] if "error" in ln.lower()), lines[1])
        first = f"{first} {detail}"
    return first


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def clip(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def normalise(line: str) -> str:
    """Make lines that differ only in ids, numbers, names or listed values equal, so they group."""
    line = re.sub(r"\b[0-9a-f]{12,}\b", "<id>", line)
    while True:                                              # option lists, schedules (innermost first)
        shorter = re.sub(r"\([^()]*\)", "<…>", line)
        if shorter == line:
            break
        line = shorter
    line = line.replace("<…>", "(…)")
    line = re.sub(r"'[^']*'|\"[^\"]*\"|‘[^’]*’", "'…'", line)  # quoted identifiers
    return re.sub(r"\d+(?:\.\d+)?", "N", line)
