"""SQLite run store (WAL), one database per run directory.

Holds everything needed to audit a run and to resume it: the configuration,
every job (content-derived id, payload, attempts, result), every candidate
(content-hash id, parent, plan, code, iteration), every evaluation, every
model call and the beam after each iteration. The coordinator commits a
result before acknowledging it, so an acknowledged result is never lost.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import quote

from autocomp_zmq.protocols.jobs import Answer, EvalReport, Failure, ModelCall, Payload, Plan, stored_result, to_json

# What resume can read back: 2 = typed payloads, evaluation results with latency + latency_unit; 3 = model
# jobs identified by their sample index, model calls with their texts and full token counts. Stores without
# the mark were written before (format 1); show, report and runs still read every format.
STORE_FORMAT = 3

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, iteration INTEGER NOT NULL, payload TEXT NOT NULL,
    state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, ok INTEGER, result TEXT, error TEXT,
    created REAL NOT NULL, finished REAL);
CREATE TABLE IF NOT EXISTS attempts (
    job_id TEXT NOT NULL, attempt INTEGER NOT NULL, agent TEXT NOT NULL, started REAL NOT NULL,
    finished REAL, outcome TEXT, PRIMARY KEY (job_id, attempt));
CREATE TABLE IF NOT EXISTS candidates (
    id TEXT PRIMARY KEY, parent_id TEXT, iteration INTEGER NOT NULL, plan_job TEXT, origin TEXT NOT NULL,
    model TEXT, code TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS evals (
    candidate_id TEXT PRIMARY KEY, correct INTEGER NOT NULL, latency REAL, utilization REAL,
    roofline REAL, error_kind TEXT, error TEXT, feedback TEXT, job_id TEXT);
CREATE TABLE IF NOT EXISTS plans (
    job_id TEXT PRIMARY KEY, parent_id TEXT NOT NULL, iteration INTEGER NOT NULL, model TEXT,
    option_id TEXT, text TEXT, params TEXT, menu TEXT);
CREATE TABLE IF NOT EXISTS model_calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT, role TEXT, model TEXT, prompt_hash TEXT,
    tokens_in INTEGER, tokens_out INTEGER, cost REAL, latency REAL, outcome TEXT, created REAL);
CREATE TABLE IF NOT EXISTS texts (id TEXT PRIMARY KEY, body BLOB NOT NULL);   -- zlib(UTF-8), id = sha256
CREATE TABLE IF NOT EXISTS beams (
    iteration INTEGER NOT NULL, rank INTEGER NOT NULL, candidate_id TEXT NOT NULL, latency REAL,
    PRIMARY KEY (iteration, rank));
"""


# model_calls columns added in format 3: the provider's token counts, why the answer ended, whether the
# call's price was known, and the ids of its texts in the texts table (the prompt's stable prefix is one
# row however many calls share it)
CALL_COLUMNS = (("tokens_cached", "INTEGER DEFAULT 0"), ("tokens_cache_write", "INTEGER DEFAULT 0"),
                ("tokens_reasoning", "INTEGER DEFAULT 0"), ("max_tokens", "INTEGER DEFAULT 0"), ("finish", "TEXT"),
                ("priced", "INTEGER DEFAULT 1"), ("prefix_id", "TEXT"), ("prompt_id", "TEXT"),
                ("answer_id", "TEXT"), ("reasoning_id", "TEXT"))

# Latencies are in the problem's unit (cycles, us, ...); stores written before the rename call the column
# `cycles`. A store opened to write (resume) is migrated in place; a reader never writes, and sees the old
# tables through temporary views of the new names (read_views).
RENAMED = {"evals": ("cycles", "latency"), "beams": ("cycles", "latency")}


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def read_views(db: sqlite3.Connection) -> None:
    """On a read-only connection to a store of any age: temporary views named like the tables, with the
    current column names, over tables that still have old ones (unqualified names find the temp schema
    first). Nothing is written to the store."""
    for table, (old, new) in RENAMED.items():
        cols = _columns(db, table)
        if old in cols and new not in cols:
            select = ", ".join(f"{c} AS {new}" if c == old else c for c in cols)
            db.execute(f"CREATE TEMP VIEW IF NOT EXISTS {table} AS SELECT {select} FROM main.{table}")


class RunStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")   # WAL + NORMAL: durable at checkpoints, safe on crash
        for table, (old, new) in RENAMED.items():   # before SCHEMA's indexes or views could name them
            if old in _columns(self.db, table):
                self.db.execute(f"ALTER TABLE {table} RENAME COLUMN {old} TO {new}")
        self.db.executescript(SCHEMA)
        have = set(_columns(self.db, "model_calls"))
        for column, sql_type in CALL_COLUMNS:   # stores written before these columns existed get them
            if column not in have:
                self.db.execute(f"ALTER TABLE model_calls ADD COLUMN {column} {sql_type}")
        self._tx_depth = 0

    def close(self) -> None:
        self.db.close()

    def tx(self):
        """`with store.tx():` groups writes into one transaction; nested uses join the outer one."""
        return _Tx(self)

    # -- meta -----------------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def meta(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    # -- jobs -----------------------------------------------------------------------------
    def add_job(self, job_id: str, kind: str, iteration: int, request: Payload) -> None:
        self.db.execute("INSERT OR IGNORE INTO jobs (id, kind, iteration, payload, state, created) "
                        "VALUES (?, ?, ?, ?, 'pending', ?)", (job_id, kind, iteration, to_json(request), time.time()))

    def finished_job(self, job_id: str) -> tuple[bool, Answer | Failure | None, str | None] | None:
        """(ok, result, error) of a finished job, its result decoded into its type (a Failure, with the
        calls it paid for, when the job failed); None if the job has not finished."""
        row = self.db.execute("SELECT kind, ok, result, error FROM jobs WHERE id = ? AND state IN ('done', 'failed')",
                              (job_id,)).fetchone()
        if row is None:
            return None
        kind, ok, result, error = row
        return bool(ok), stored_result(kind, bool(ok), result), error

    def start_attempt(self, job_id: str, attempt: int, agent: str) -> None:
        self.db.execute("UPDATE jobs SET state = 'leased', attempts = ? WHERE id = ?", (attempt, job_id))
        self.db.execute("INSERT OR REPLACE INTO attempts VALUES (?, ?, ?, ?, NULL, NULL)",
                        (job_id, attempt, agent, time.time()))

    def end_attempt(self, job_id: str, attempt: int, outcome: str) -> None:
        self.db.execute("UPDATE attempts SET finished = ?, outcome = ? WHERE job_id = ? AND attempt = ?",
                        (time.time(), outcome, job_id, attempt))

    def finish_job(self, job_id: str, ok: bool, result: Payload | None, error: str | None,
                   state: str = "done") -> None:
        self.db.execute("UPDATE jobs SET state = ?, ok = ?, result = ?, error = ?, finished = ? WHERE id = ?",
                        (state, int(ok), to_json(result) if result is not None else None, error, time.time(), job_id))

    def requeue_job(self, job_id: str) -> None:
        self.db.execute("UPDATE jobs SET state = 'pending' WHERE id = ?", (job_id,))

    # -- search records -----------------------------------------------------------------
    def add_candidate(self, cid: str, parent_id: str | None, iteration: int, plan_job: str | None,
                      origin: str, model: str | None, code: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO candidates VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (cid, parent_id, iteration, plan_job, origin, model, code, time.time()))

    def add_eval(self, cid: str, job_id: str, r: EvalReport) -> None:
        self.db.execute("INSERT OR REPLACE INTO evals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (cid, int(r.correct), r.latency, r.utilization, r.roofline_fraction,
                         r.error_kind, r.error, json.dumps(r.feedback), job_id))

    def add_plan(self, job_id: str, parent_id: str, iteration: int, model: str, plan: Plan, menu: list[str]) -> None:
        self.db.execute("INSERT OR REPLACE INTO plans VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (job_id, parent_id, iteration, model, plan.option_id, plan.text,
                         json.dumps(plan.params), json.dumps(menu)))

    def add_model_call(self, job_id: str, role: str, call: ModelCall, priced: bool = True) -> None:
        texts = [self.add_text(t) for t in (call.prefix, call.prompt, call.answer, call.reasoning)]
        self.db.execute("INSERT INTO model_calls (job_id, role, model, prompt_hash, tokens_in, tokens_out, cost, "
                        "latency, outcome, created, tokens_cached, tokens_cache_write, tokens_reasoning, max_tokens, "
                        "finish, priced, prefix_id, prompt_id, answer_id, reasoning_id) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (job_id, role, call.model, call.prompt_hash, call.tokens_in, call.tokens_out, call.cost,
                         call.latency, call.outcome, time.time(), call.tokens_cached, call.tokens_cache_write,
                         call.tokens_reasoning, call.max_tokens, call.finish, int(priced), *texts))

    def add_text(self, text: str) -> str | None:
        """Keep a text once (compressed); its id, or None for an empty text."""
        if not text:
            return None
        data = text.encode()
        tid = hashlib.sha256(data).hexdigest()[:32]
        self.db.execute("INSERT OR IGNORE INTO texts VALUES (?, ?)", (tid, zlib.compress(data, 6)))
        return tid

    def total_cost(self) -> float:
        return self.db.execute("SELECT COALESCE(SUM(cost), 0) FROM model_calls").fetchone()[0]

    def cost_by(self) -> dict[tuple[str, str], float]:
        """USD spent per (model, role)."""
        return {(m, r): c for m, r, c in self.db.execute(
            "SELECT model, role, SUM(cost) FROM model_calls GROUP BY model, role")}

    def set_beam(self, iteration: int, beam: list[tuple[str, float]]) -> None:
        self.db.execute("DELETE FROM beams WHERE iteration = ?", (iteration,))
        self.db.executemany("INSERT INTO beams VALUES (?, ?, ?, ?)",
                            [(iteration, rank, cid, latency) for rank, (cid, latency) in enumerate(beam)])

    def beam(self, iteration: int | None = None) -> list[tuple[str, float]]:
        if iteration is None:
            row = self.db.execute("SELECT MAX(iteration) FROM beams").fetchone()
            iteration = row[0]
        return [(r[0], r[1]) for r in self.db.execute(
            "SELECT candidate_id, latency FROM beams WHERE iteration = ? ORDER BY rank", (iteration,))]

    def count(self, table: str, where: str = "1=1") -> int:
        return self.db.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}").fetchone()[0]


class _Tx:
    def __init__(self, store: RunStore) -> None:
        self.store = store

    def __enter__(self):
        if self.store._tx_depth == 0:
            self.store.db.execute("BEGIN")
        self.store._tx_depth += 1
        return self

    def __exit__(self, exc_type, *_):
        self.store._tx_depth -= 1
        if self.store._tx_depth == 0:
            self.store.db.execute("ROLLBACK" if exc_type else "COMMIT")


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


def job_result(db: sqlite3.Connection, job_id: str) -> str | None:
    row = db.execute("SELECT result FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return row[0] if row else None


def eval_results(db: sqlite3.Connection, limit: int | None = None) -> list[tuple[str, str]]:
    """(job id, result JSON) of the evaluations that answered, oldest first."""
    return db.execute("SELECT id, result FROM jobs WHERE kind = 'eval' AND ok = 1 ORDER BY created, id"
                      + (f" LIMIT {int(limit)}" if limit else "")).fetchall()


def answered_code_jobs(db: sqlite3.Connection) -> list[tuple[str, str, str, str]]:
    """(id, kind, request JSON, answer JSON) of the code and repair jobs that answered, oldest first."""
    return db.execute("SELECT id, kind, payload, result FROM jobs WHERE kind IN ('code', 'repair') AND ok = 1 "
                      "ORDER BY created, id").fetchall()


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


def candidate_rows(db: sqlite3.Connection) -> list[tuple]:
    """Every candidate with its evaluation (None where it has no row of its own), oldest first: id, parent_id,
    iteration, plan_job, origin, model, code, correct, latency, error_kind, error, feedback, eval job."""
    return db.execute(
        "SELECT c.id, c.parent_id, c.iteration, c.plan_job, c.origin, c.model, c.code, e.correct, e.latency, "
        "e.error_kind, e.error, e.feedback, e.job_id FROM candidates c LEFT JOIN evals e ON e.candidate_id = c.id "
        "ORDER BY c.iteration, c.created, c.id").fetchall()


def trace_step(db: sqlite3.Connection, cid: str) -> tuple | None:
    """(parent_id, iteration, model, option_id, plan text, plan params, latency) of one candidate."""
    return db.execute("SELECT c.parent_id, c.iteration, c.model, p.option_id, p.text, p.params, e.latency "
                      "FROM candidates c LEFT JOIN plans p ON p.job_id = c.plan_job "
                      "LEFT JOIN evals e ON e.candidate_id = c.id WHERE c.id = ?", (cid,)).fetchone()


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


def frontier_members(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT DISTINCT candidate_id FROM beams")}


def frontier_bests(db: sqlite3.Connection) -> list[tuple[int, float, int]]:
    """(iteration, best latency, frontier size) per iteration."""
    return db.execute("SELECT iteration, MIN(latency), COUNT(*) FROM beams GROUP BY iteration ORDER BY iteration"
                      ).fetchall()


def plan_rows(db: sqlite3.Connection) -> list[tuple[str, str | None, str | None, str | None]]:
    """(job id, option id, text, model) of every plan."""
    return db.execute("SELECT job_id, option_id, text, model FROM plans").fetchall()


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
