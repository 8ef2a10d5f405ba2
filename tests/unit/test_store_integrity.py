"""The run store keeps itself small and refuses to be written when damaged: a job's request and answer keep their
large members once each in the texts table (read back whole), and the integrity check resume runs first finds
overwritten pages and malformed JSON without writing anything."""
from __future__ import annotations

import json
import random

import msgspec

from autocomp_zmq.agents.store import (RunStore, candidate_rows, damage_of, expand, expand_request,
                                       finished_evaluations, plan_rows, trace_step)
from autocomp_zmq.protocols.jobs import MenuOption, Parent, Plan, PlanRequest, PlanResult, ProblemRef

PROBLEM = ProblemRef(target="t", name="p", family="gemm", description="a long description " * 50)
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


def test_candidates_and_plans_that_repeat_a_kernel_or_a_plan_store_it_once(tmp_path):
    """Before, each candidate row held its kernel and each plan row its text and parameters inline: a stalled search
    repeating a few kernels and plans wrote them again in every row (5.7 MB of a 27 MB store in 90 s)."""
    store = RunStore(tmp_path / "run.db")
    plan = Plan(text="Tile the loops by 64. " * 40, option_id="opt-1",
                params={"variants": [{"ti": i, "tj": 8, "order": "ij"} for i in range(20)]})
    with store.tx():
        for n in range(100):      # 100 candidates of one kernel from 100 plans of one text
            store.add_plan(f"plan-{n}", "p1", 1, "heuristic", plan, ["opt-1", "opt-2"])
            store.add_candidate(f"c{n}", "p1", 1, f"plan-{n}", "llm", "heuristic", PARENT.code)
    code_bytes, text_bytes, params_bytes = store.db.execute(
        "SELECT SUM(LENGTH(c.code)), SUM(LENGTH(p.text)), MAX(LENGTH(p.params)) FROM candidates c "
        "JOIN plans p ON p.job_id = c.plan_job").fetchone()
    assert code_bytes == 0 and text_bytes == 0 and params_bytes < 100
    assert store.count("texts") == 3                    # the kernel, the plan's text, its variants
    [row] = [r for r in candidate_rows(store.db) if r[0] == "c7"]
    assert row[6] == PARENT.code
    assert {r[2] for r in plan_rows(store.db)} == {plan.text}
    step = trace_step(store.db, "c7")
    assert step[4] == plan.text and json.loads(step[5]) == plan.params


def test_candidates_and_plans_stored_inline_by_earlier_versions_read_the_same(tmp_path):
    store = RunStore(tmp_path / "run.db")
    store.db.execute("INSERT INTO candidates (id, parent_id, iteration, plan_job, origin, model, code, created) "
                     "VALUES ('c0', NULL, 0, 'j', 'initial', NULL, 'old kernel', 0)")
    store.db.execute("INSERT INTO plans (job_id, parent_id, iteration, model, option_id, text, params, menu) "
                     "VALUES ('j', 'c0', 1, 'm', 'opt-1', 'old plan', '{\"a\": 1}', '[]')")
    assert candidate_rows(store.db)[0][6] == "old kernel" and plan_rows(store.db)[0][2] == "old plan"
    assert trace_step(store.db, "c0")[4:6] == ("old plan", '{"a": 1}')
    store.db.execute("ALTER TABLE candidates DROP COLUMN code_id")   # a store written before the id columns
    assert candidate_rows(store.db)[0][6] == "old kernel"


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
