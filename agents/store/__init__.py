"""SQLite run store (WAL), one database per run directory.

Holds everything needed to audit a run and to resume it: the configuration,
every job (content-derived id, payload, attempts, result), every candidate
(content-hash id, parent, plan, code, iteration), every evaluation, every
model call and the beam after each iteration. The coordinator commits a
result before acknowledging it, so an acknowledged result is never lost.

Writing is here (RunStore); reading, for show, report, runs and the run's own summaries, in .reading; the
tables in .schema. Every SQL statement of the project is in this package.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import zlib
from pathlib import Path
from typing import Any

import msgspec

from autocomp_zmq.agents.store.reading import *  # noqa: F401,F403  (the readers, by their old names)
from autocomp_zmq.agents.store.reading import expand_json
from autocomp_zmq.agents.store.schema import (ADDED_COLUMNS, CALL_COLUMNS, RENAMED, SCHEMA, SHARED_BYTES,  # noqa: F401
                                                 STORE_FORMAT, TEXT_REF, _columns, read_views)
from autocomp_zmq.protocols.jobs import Answer, EvalReport, Failure, ModelCall, Payload, Plan, stored_result


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
        for table, columns in ADDED_COLUMNS.items():   # stores written before these columns existed get them
            have = set(_columns(self.db, table))
            for column, sql_type in columns:
                if column not in have:
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}")
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
                        "VALUES (?, ?, ?, ?, 'pending', ?)", (job_id, kind, iteration, self._compact(request),
                                                              time.time()))

    def _compact(self, payload: Payload) -> str:
        """The payload as JSON with each member larger than SHARED_BYTES kept once in `texts` and named there
        ({"$text": id}); reading.expand puts them back."""
        data = msgspec.to_builtins(payload)
        for key, value in data.items():
            if isinstance(value, (str, list, dict)) and value:
                text = json.dumps(value, sort_keys=True)
                if len(text) > SHARED_BYTES:
                    data[key] = {TEXT_REF: self.add_text(text)}
        return json.dumps(data)

    def finished_job(self, job_id: str) -> tuple[bool, Answer | Failure | None, str | None] | None:
        """(ok, result, error) of a finished job, its result decoded into its type (a Failure, with the
        calls it paid for, when the job failed); None if the job has not finished."""
        row = self.db.execute("SELECT kind, ok, result, error FROM jobs WHERE id = ? AND state IN ('done', 'failed')",
                              (job_id,)).fetchone()
        if row is None:
            return None
        kind, ok, result, error = row
        return bool(ok), stored_result(kind, bool(ok), expand_json(self.db, result)), error

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
                        (state, int(ok), self._compact(result) if result is not None else None, error, time.time(),
                         job_id))

    def requeue_job(self, job_id: str) -> None:
        self.db.execute("UPDATE jobs SET state = 'pending' WHERE id = ?", (job_id,))

    # -- search records -----------------------------------------------------------------
    def add_candidate(self, cid: str, parent_id: str | None, iteration: int, plan_job: str | None,
                      origin: str, model: str | None, code: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO candidates (id, parent_id, iteration, plan_job, origin, model, code, "
                        "created, code_id) VALUES (?, ?, ?, ?, ?, ?, '', ?, ?)",
                        (cid, parent_id, iteration, plan_job, origin, model, time.time(), self.add_text(code)))

    def add_eval(self, cid: str, job_id: str, r: EvalReport) -> None:
        self.db.execute("INSERT OR REPLACE INTO evals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (cid, int(r.correct), r.latency, r.utilization, r.roofline_fraction,
                         r.error_kind, r.error, json.dumps(r.feedback), job_id))

    def add_plan(self, job_id: str, parent_id: str, iteration: int, model: str, plan: Plan, menu: list[str]) -> None:
        self.db.execute("INSERT OR REPLACE INTO plans (job_id, parent_id, iteration, model, option_id, text, params, "
                        "menu, text_id, choice) VALUES (?, ?, ?, ?, ?, '', ?, ?, ?, ?)",
                        (job_id, parent_id, iteration, model, plan.option_id, self._compact(plan.params),
                         json.dumps(menu), self.add_text(plan.text), plan.choice))

    def add_model_call(self, job_id: str, role: str, call: ModelCall, priced: bool = True) -> None:
        texts = [self.add_text(t) for t in (call.prefix, call.prompt, call.answer, call.reasoning)]
        self.db.execute("INSERT INTO model_calls (job_id, role, model, prompt_hash, tokens_in, tokens_out, cost, "
                        "latency, outcome, created, tokens_cached, tokens_cache_write, tokens_reasoning, max_tokens, "
                        "finish, priced, prefix_id, prompt_id, answer_id, reasoning_id, billing, tier) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (job_id, role, call.model, call.prompt_hash, call.tokens_in, call.tokens_out, call.cost,
                         call.latency, call.outcome, time.time(), call.tokens_cached, call.tokens_cache_write,
                         call.tokens_reasoning, call.max_tokens, call.finish, int(priced), *texts, call.billing,
                         call.tier))

    def drop_model_calls(self, job_id: str, outcome: str) -> list[tuple[str, str, float]]:
        """Remove a job's calls recorded with this outcome (a placeholder); (model, role, cost) of each."""
        rows = self.db.execute("SELECT model, role, cost FROM model_calls WHERE job_id = ? AND outcome = ?",
                               (job_id, outcome)).fetchall()
        self.db.execute("DELETE FROM model_calls WHERE job_id = ? AND outcome = ?", (job_id, outcome))
        return rows

    def add_text(self, text: str) -> str | None:
        """Keep a text once (compressed); its id, or None for an empty text."""
        if not text:
            return None
        data = text.encode()
        tid = hashlib.sha256(data).hexdigest()[:32]
        self.db.execute("INSERT OR IGNORE INTO texts VALUES (?, ?)", (tid, zlib.compress(data, 6)))
        return tid

    def checkpoint(self, final: bool = True) -> None:
        """Move what the write-ahead log holds into run.db itself (a copy of run.db alone is then complete); final:
        also empty the log, and raise when a reader kept that from finishing (a run must not end with its results
        only in run.db-wal). Raises sqlite3.Error when run.db cannot take it (unwritable, disk full)."""
        busy, _, _ = self.db.execute(f"PRAGMA wal_checkpoint({'TRUNCATE' if final else 'PASSIVE'})").fetchone()
        if busy and final:
            raise sqlite3.OperationalError(f"{self.path}: its write-ahead log could not be moved into it (a reader "
                                           f"holds it); copy {self.path.name}-wal with it")

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
