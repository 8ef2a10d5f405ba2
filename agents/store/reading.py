"""Reading a run store from any connection (read-only ones included): every query of show, report, runs and the run's
own summaries, the integrity check resume runs first, and a stored request made whole again."""
from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import quote

from autocomp_zmq.agents.store.schema import TEXT_REF, _columns, read_views

def text_of(db: sqlite3.Connection, tid: str | None) -> str:
    """A text kept by RunStore.add_text ("" for None or a store without it), from any connection."""
    if not tid:
        return ""
    try:
        row = db.execute("SELECT body FROM texts WHERE id = ?", (tid,)).fetchone()
    except sqlite3.OperationalError:   # a store written before texts were kept
        return ""
    return zlib.decompress(row[0]).decode(errors="replace") if row else ""


# -- reading: every query of show, report, runs and the run's own summaries, on any connection to a store
# (read-only ones included; read_views makes older stores answer with today's column names)
def open_read(path: Path) -> sqlite3.Connection:
    """A read-only connection to a store of any age inside one read transaction (one snapshot, even while
    the coordinator writes). Raises sqlite3.Error for a file that is not a readable store."""
    # mode=ro never writes the store, but on a WAL database it would still create run.db-wal and -shm next to
    # it. No WAL file means no connection has the store open and the main file holds everything: read it as
    # immutable, which creates nothing. With a WAL file (a live run, or one that crashed) read through it.
    # quote() keeps a '?' or '#' in the path from becoming URI syntax.
    wal = path.with_name(path.name + "-wal")
    params = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    db = sqlite3.connect(f"file:{quote(str(path.resolve()))}?{params}", uri=True, timeout=10, isolation_level=None)
    try:
        db.execute("BEGIN")
        db.execute("SELECT key, value FROM meta LIMIT 1").fetchall()
        read_views(db)
    except sqlite3.Error:
        db.close()
        raise
    return db


def damage_of(path: Path) -> str | None:
    """What is wrong with a store (None: nothing): SQLite's integrity check of every page and index, and the JSON
    of every job and setting. Read-only: run before anything writes to a store (resume, replay), so that a
    damaged one is refused instead of being written into."""
    try:
        db = open_read(path)
        try:
            problems = [row[0] for row in db.execute("PRAGMA integrity_check(5)")]
            if problems == ["ok"]:
                problems = [f"{n} {what} not valid JSON" for what, n in db.execute(
                    "SELECT 'settings', COUNT(*) FROM meta WHERE NOT json_valid(value) UNION ALL "
                    "SELECT 'jobs', COUNT(*) FROM jobs WHERE NOT json_valid(payload) "
                    "OR (result IS NOT NULL AND NOT json_valid(result))") if n]
        finally:
            db.close()
    except sqlite3.Error as exc:
        return str(exc)
    return "; ".join(problems)[:400] or None


def expand(db: sqlite3.Connection, stored: str | None) -> Any:
    """A job's stored request or answer whole again, as data (members kept in `texts` read back); None for one
    that is missing or not JSON."""
    try:
        data = json.loads(stored or "")
    except ValueError:
        return None
    for key, value in data.items() if isinstance(data, dict) else ():
        if isinstance(value, dict) and set(value) == {TEXT_REF}:
            try:
                data[key] = json.loads(text_of(db, value[TEXT_REF]))
            except ValueError:
                data[key] = None
    return data


def expand_json(db: sqlite3.Connection, stored: str | None) -> str | None:
    """expand(), as JSON text (what a decoder into the job's types reads)."""
    return None if stored is None else json.dumps(expand(db, stored))


def expand_request(db: sqlite3.Connection, stored: str | None) -> dict[str, Any]:
    """A job's request whole, as a dict ({} for one that is not a JSON object)."""
    data = expand(db, stored)
    return data if isinstance(data, dict) else {}


def meta_of(db: sqlite3.Connection, key: str) -> Any:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return json.loads(row[0]) if row else None


def first_job_created(db: sqlite3.Connection) -> float | None:
    return db.execute("SELECT MIN(created) FROM jobs").fetchone()[0]


def finished_evaluations(db: sqlite3.Connection) -> int:
    """Finished evaluation jobs: what the coordinator counts, and all there is for a crashed run."""
    return db.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'eval' AND state IN ('done', 'failed')").fetchone()[0]


def evaluated_kernels(db: sqlite3.Connection) -> int:
    """Candidates with an evaluation: more than the evaluations run, since identical kernels share one."""
    return db.execute("SELECT COUNT(*) FROM evals").fetchone()[0]


def job_states(db: sqlite3.Connection) -> dict[str, int]:
    return dict(db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())


def job_kinds(db: sqlite3.Connection) -> dict[str, tuple[str, int]]:
    """job id -> (kind, iteration)."""
    return {r[0]: (r[1], r[2]) for r in db.execute("SELECT id, kind, iteration FROM jobs")}


def job_error(db: sqlite3.Connection, job_id: str) -> str | None:
    row = db.execute("SELECT error FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return row[0] if row else None


def job_result(db: sqlite3.Connection, job_id: str) -> str | None:
    row = db.execute("SELECT result FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return expand_json(db, row[0]) if row else None


def eval_results(db: sqlite3.Connection, limit: int | None = None) -> list[tuple[str, str]]:
    """(job id, result JSON) of the evaluations that answered, oldest first."""
    rows = db.execute("SELECT id, result FROM jobs WHERE kind = 'eval' AND ok = 1 ORDER BY created, id"
                      + (f" LIMIT {int(limit)}" if limit else "")).fetchall()
    return [(job_id, expand_json(db, result)) for job_id, result in rows]


def answered_code_jobs(db: sqlite3.Connection) -> list[tuple[str, str, str, str]]:
    """(id, kind, request JSON, answer JSON) of the code and repair jobs that answered, oldest first."""
    rows = db.execute("SELECT id, kind, payload, result FROM jobs WHERE kind IN ('code', 'repair') AND ok = 1 "
                      "ORDER BY created, id").fetchall()
    return [(job_id, kind, payload, expand_json(db, result)) for job_id, kind, payload, result in rows]


def model_job_outcomes(db: sqlite3.Connection) -> list[tuple[str, str | None, int, str | None]]:
    """(kind, model, ok, error) of every finished plan, code and repair job."""
    return db.execute("SELECT kind, json_extract(payload, '$.model'), ok, error FROM jobs "
                      "WHERE kind IN ('plan', 'code', 'repair') AND state IN ('done', 'failed')").fetchall()


def failed_jobs(db: sqlite3.Connection) -> list[tuple[str, str | None]]:
    return db.execute("SELECT kind, error FROM jobs WHERE ok = 0").fetchall()


def failed_evaluations(db: sqlite3.Connection) -> list[tuple[str | None, str | None]]:
    """(error kind, error) of incorrect candidates whose evaluation job itself did not fail."""
    return db.execute("SELECT e.error_kind, e.error FROM evals e WHERE e.correct = 0 AND e.job_id NOT IN "
                      "(SELECT id FROM jobs WHERE ok = 0)").fetchall()


def _kept(db: sqlite3.Connection, table: str, column: str) -> str:
    """SQL for a text column that newer rows keep in `texts` (its id in COLUMN_id, the inline value empty): the
    inline value and the id, as two columns (NULL for a store written before the id column); _texts joins them."""
    alias = table[0]
    kept = f"{alias}.{column}_id" if f"{column}_id" in _columns(db, table) else "NULL"
    return f"{alias}.{column}, {kept}"


def _texts(db: sqlite3.Connection, rows: list[tuple], at: int) -> list[tuple]:
    """Rows with the two columns at `at` (inline value, id in `texts`) made one: the text (each read once)."""
    bodies: dict[str, str] = {}
    out = []
    for row in rows:
        inline, tid = row[at], row[at + 1]
        value = bodies.setdefault(tid, text_of(db, tid)) if tid else inline
        out.append(row[:at] + (value,) + row[at + 2:])
    return out


def candidate_rows(db: sqlite3.Connection) -> list[tuple]:
    """Every candidate with its evaluation (None where it has no row of its own), oldest first: id, parent_id,
    iteration, plan_job, origin, model, code, correct, latency, error_kind, error, feedback, eval job."""
    rows = db.execute(
        f"SELECT c.id, c.parent_id, c.iteration, c.plan_job, c.origin, c.model, {_kept(db, 'candidates', 'code')}, "
        "e.correct, e.latency, e.error_kind, e.error, e.feedback, e.job_id FROM candidates c "
        "LEFT JOIN evals e ON e.candidate_id = c.id ORDER BY c.iteration, c.created, c.id").fetchall()
    return _texts(db, rows, 6)


def trace_step(db: sqlite3.Connection, cid: str) -> tuple | None:
    """(parent_id, iteration, model, option_id, plan text, plan params, latency) of one candidate."""
    row = db.execute(f"SELECT c.parent_id, c.iteration, c.model, p.option_id, {_kept(db, 'plans', 'text')}, "
                     "p.params, e.latency FROM candidates c LEFT JOIN plans p ON p.job_id = c.plan_job "
                     "LEFT JOIN evals e ON e.candidate_id = c.id WHERE c.id = ?", (cid,)).fetchone()
    if row is None:
        return None
    [row] = _texts(db, [row], 4)
    return row[:5] + (expand_json(db, row[5]) if row[5] else row[5],) + row[6:]


def baseline_latency(db: sqlite3.Connection) -> float | None:
    row = db.execute("SELECT e.latency FROM candidates c JOIN evals e ON e.candidate_id = c.id "
                     "WHERE c.origin = 'initial' AND e.correct = 1").fetchone()
    return row[0] if row else None


def best_in_latest_frontier(db: sqlite3.Connection) -> tuple[str, float] | None:
    """(candidate, latency) at rank 0 of the latest iteration's frontier."""
    return db.execute("SELECT candidate_id, latency FROM beams WHERE rank = 0 ORDER BY iteration DESC LIMIT 1").fetchone()


def last_iteration(db: sqlite3.Connection) -> int | None:
    """The last iteration whose frontier was kept: how many iterations the run has completed."""
    return db.execute("SELECT MAX(iteration) FROM beams").fetchone()[0]


def final_frontier(db: sqlite3.Connection) -> list[tuple[str, str]]:
    """(candidate id, code) of every member of the latest iteration's frontier, best first."""
    rows = db.execute(f"SELECT b.candidate_id, {_kept(db, 'candidates', 'code')} FROM beams b JOIN candidates c "
                      "ON c.id = b.candidate_id WHERE b.iteration = (SELECT MAX(iteration) FROM beams) "
                      "ORDER BY b.rank").fetchall()
    return _texts(db, rows, 1)


def frontier_members(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT DISTINCT candidate_id FROM beams")}


def frontier_bests(db: sqlite3.Connection) -> list[tuple[int, float, int]]:
    """(iteration, best latency, frontier size) per iteration."""
    return db.execute("SELECT iteration, MIN(latency), COUNT(*) FROM beams GROUP BY iteration ORDER BY iteration"
                      ).fetchall()


def plan_rows(db: sqlite3.Connection) -> list[tuple[str, str | None, str | None, str | None]]:
    """(job id, option id, text, model) of every plan."""
    rows = db.execute(f"SELECT p.job_id, p.option_id, {_kept(db, 'plans', 'text')}, p.model FROM plans p").fetchall()
    return _texts(db, rows, 2)


def plan_choices(db: sqlite3.Connection) -> dict[str, dict[str, int]]:
    """{model: {how its plans named their option: plans}} (Plan.choice; stores before the column: {})."""
    if "choice" not in _columns(db, "plans"):
        return {}
    out: dict[str, dict[str, int]] = {}
    for model, choice, n in db.execute("SELECT model, choice, COUNT(*) FROM plans WHERE COALESCE(choice, '') != '' "
                                       "GROUP BY model, choice"):
        out.setdefault(model or "?", {})[choice] = n
    return out


def call_billing(db: sqlite3.Connection) -> dict[str, tuple[int, float]]:
    """{billing: (calls, USD)}: "reported" (priced from the provider's usage), "none" (not billed: 429, 5xx, no
    connection), "unknown" (lost after they were sent, at their worst case). Stores before the column: all reported."""
    if "billing" not in _columns(db, "model_calls"):
        row = db.execute("SELECT COUNT(*), COALESCE(SUM(cost), 0) FROM model_calls").fetchone()
        return {"reported": tuple(row)} if row[0] else {}
    return {b or "reported": (n, usd) for b, n, usd in db.execute(
        "SELECT billing, COUNT(*), COALESCE(SUM(cost), 0) FROM model_calls GROUP BY billing")}


def model_call_rows(db: sqlite3.Connection, optional: tuple[str, ...]) -> list[tuple]:
    """Every model call in time order with its job's kind and iteration: id, job_id, role, model, kind,
    iteration, tokens_in, tokens_out, cost, latency, outcome, created, then the `optional` columns (None
    where a store written before them lacks them)."""
    have = set(_columns(db, "model_calls"))
    extra = ", ".join(f"m.{c}" if c in have else "NULL" for c in optional)
    return db.execute(
        "SELECT m.id, m.job_id, COALESCE(m.role, '?'), COALESCE(m.model, '?'), j.kind, j.iteration, "
        "COALESCE(m.tokens_in, 0), COALESCE(m.tokens_out, 0), COALESCE(m.cost, 0), m.latency, "
        f"COALESCE(m.outcome, ''), m.created, {extra} FROM model_calls m LEFT JOIN jobs j ON j.id = m.job_id "
        "ORDER BY m.created IS NULL, m.created, m.id").fetchall()


__all__ = ['expand', 'expand_json', 'text_of', 'open_read', 'damage_of', 'expand_request', 'meta_of', 'first_job_created', 'finished_evaluations', 'evaluated_kernels', 'job_states', 'job_kinds', 'job_error', 'job_result', 'eval_results', 'answered_code_jobs', 'model_job_outcomes', 'failed_jobs', 'failed_evaluations', 'candidate_rows', 'trace_step', 'baseline_latency', 'best_in_latest_frontier', 'last_iteration', 'frontier_members', 'frontier_bests', 'plan_rows', 'plan_choices', 'call_billing', 'model_call_rows']
