"""The run store's tables: their schema, the format mark resume checks, and how stores of earlier formats are read
(temporary views under today's names) or migrated."""
from __future__ import annotations

import sqlite3

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


# A job's request and answer are stored with their large members (over SHARED_BYTES of JSON: the problem, the menu,
# the parent, kernels, plans, errors) kept once each in the texts table, {"$text": id} in their
# place: the thousands of plan and code jobs of a long run share one problem, a few menus and their parents' kernels,
# and a job that changed nothing (a proposal of nothing, a kernel already evaluated) costs a row of small fields.
# reading.expand_json puts them back; a store written before keeps its members in place, and reads the same.
SHARED_BYTES = 256
TEXT_REF = "$text"

# model_calls columns added in format 3: the provider's token counts, why the answer ended, whether the
# call's price was known, and the ids of its texts in the texts table (the prompt's stable prefix is one
# row however many calls share it)
CALL_COLUMNS = (("tokens_cached", "INTEGER DEFAULT 0"), ("tokens_cache_write", "INTEGER DEFAULT 0"),
                ("tokens_reasoning", "INTEGER DEFAULT 0"), ("max_tokens", "INTEGER DEFAULT 0"), ("finish", "TEXT"),
                ("priced", "INTEGER DEFAULT 1"), ("prefix_id", "TEXT"), ("prompt_id", "TEXT"),
                ("answer_id", "TEXT"), ("reasoning_id", "TEXT"))

# Columns added since: a candidate's kernel and a plan's text kept in the texts table (the inline column left empty),
# since the many candidates and plans of a stalled search repeat a few kernels and plans. Stores written before
# keep them inline; readers take whichever a row has.
ADDED_COLUMNS = {"model_calls": CALL_COLUMNS + (("billing", "TEXT DEFAULT 'reported'"), ("tier", "TEXT DEFAULT ''")),
                 "candidates": (("code_id", "TEXT"),), "plans": (("text_id", "TEXT"), ("choice", "TEXT"))}

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
