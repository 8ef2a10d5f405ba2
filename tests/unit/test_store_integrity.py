"""The run store keeps itself small and refuses to be written when damaged: a job's request and answer keep their
large members once each in the texts table (read back whole), and the integrity check resume runs first finds
overwritten pages and malformed JSON without writing anything."""
from __future__ import annotations

import json
import random

import msgspec

from autocomp_zmq.agents.runstore import RunStore, damage_of, expand, expand_request, finished_evaluations
from autocomp_zmq.protocols.jobs import MenuOption, Parent, Plan, PlanRequest, PlanResult, Problem

PROBLEM = Problem(target="t", name="p", family="gemm", description="a long description " * 50)
MENU = [MenuOption(id=f"opt-{i}", title=f"Option {i}", description="what it does " * 20) for i in range(12)]
PARENT = Parent(id="p1", code="  step(A[i][k]);\n" * 300, latency=1000.0)


def request(seed: int) -> PlanRequest:
    return PlanRequest(problem=PROBLEM, parent=PARENT, menu=MENU, model="heuristic", iteration=1, iterations=8,
                       seed=seed)


def test_jobs_that_share_a_problem_menu_and_parent_store_them_once(tmp_path):
    store = RunStore(tmp_path / "run.db")
    whole = len(msgspec.json.encode(request(0)))
    with store.tx():
        for seed in range(200):       # 200 plan jobs on one parent, as a stalled search makes them
            store.add_job(f"job-{seed}", "plan", 1, request(seed))
            answer = PlanResult(plan=Plan(text=f"plan {seed}: " + "tile the loops " * 40, option_id="opt-1"),
                                model="heuristic")
            store.finish_job(f"job-{seed}", True, answer, None)
    rows = store.db.execute("SELECT payload, result FROM jobs").fetchall()
    assert max(len(payload) for payload, _ in rows) < 400 < whole        # a row of small fields, not 20 KB
    assert store.count("texts") == 3 + 200                               # problem, menu, parent; each answer's plan
    stored = store.db.execute("SELECT payload FROM jobs WHERE id = 'job-7'").fetchone()[0]
    assert expand_request(store.db, stored) == json.loads(msgspec.json.encode(request(7)))
    assert store.finished_job("job-7")[1].plan.text.startswith("plan 7: tile")   # resume reads its answers whole
    assert expand(store.db, None) is None and expand_request(store.db, "not json") == {}


def test_a_store_with_overwritten_pages_or_bad_json_is_named_damaged_and_left_as_it_was(tmp_path):
    path = tmp_path / "run.db"
    store = RunStore(path)
    with store.tx():
        for seed in range(300):
            store.add_job(f"job-{seed}", "eval", 0, request(seed))
    store.checkpoint()
    store.close()
    assert damage_of(path) is None
    data = bytearray(path.read_bytes())
    data[2 * 4096:5 * 4096] = random.Random(1).randbytes(3 * 4096)
    path.write_bytes(bytes(data))
    assert damage_of(path)                       # SQLite's own words: "database disk image is malformed", ...
    assert path.read_bytes() == bytes(data) and not path.with_name("run.db-wal").exists()

    other = tmp_path / "other.db"
    store = RunStore(other)
    store.db.execute("INSERT INTO jobs (id, kind, iteration, payload, state, created) VALUES "
                     "('j', 'eval', 0, '{\"cut off', 'pending', 0)")
    store.checkpoint()
    store.close()
    assert damage_of(other) == "1 jobs not valid JSON"


def test_checkpoint_leaves_run_db_complete_on_its_own(tmp_path):
    store = RunStore(tmp_path / "run.db")
    with store.tx():
        for seed in range(50):
            store.add_job(f"job-{seed}", "eval", 0, request(seed))
            store.finish_job(f"job-{seed}", False, None, "failed", "failed")
    store.checkpoint()
    copy = tmp_path / "copy.db"
    copy.write_bytes((tmp_path / "run.db").read_bytes())      # run.db alone, without run.db-wal
    store.close()
    import sqlite3
    db = sqlite3.connect(copy)
    assert finished_evaluations(db) == 50
