"""`show --candidate` and `show --calls` on a real run whose planner and coder talk to a scripted server in the
OpenAI wire format: a truncated answer asked again, a kernel that does not compile and its repair, reasoning
returned beside the answer, one model without a known price. Everything printed is checked against the run
store; a copy of the store without the newer columns and texts still shows."""
from __future__ import annotations

import hashlib
import itertools
import json
import re
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from autocomp_zmq.agents.store import text_of
from tests.llm.fake_servers import HWLOOP, FakeLLM, Reply, smart_answer
from tests.system.runkit import candidate_codes, finish, launch, plan_texts, query, stored, write_config
from tests.system.test_report import cli, table_rows
from tests.unit.storekit import make_old

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]

BROKEN = HWLOOP.replace("gemmini_loop_ws(", "gemmini_loop_ws_oops(", 1)   # does not compile
REPAIRED = HWLOOP + "\n// repaired: the loop call is gemmini_loop_ws\n"
THOUGHT = "The loads dominate; [bold]A[i][k] <b>is</b> reloaded."


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("views")
    codes, lock = itertools.count(), threading.Lock()

    def script(prompt, n):
        if "OPTION: <id" in prompt:
            return 200, {}, Reply(smart_answer(prompt), reasoning_tokens=40, thinking=THOUGHT)
        if "## The failing kernel" in prompt:
            return 200, {}, f"Fixed.\n```c\n{REPAIRED}```\n"
        with lock:
            k = next(codes)
        if k == 0:   # the first code answer runs out of tokens: asked again with the whole limit
            return 200, {}, Reply("```c\n" + HWLOOP[:300], finish="length")
        return 200, {}, f"```c\n{BROKEN if k == 1 else HWLOOP}```\n"

    fake = FakeLLM(script, usage=None)
    try:
        planner, coder = (f"openai-compat@{fake.url}/v1:{m}" for m in ("planner-a", "coder-b"))
        (base / "prices.toml").write_text(f'["{planner}"]\ninput = 2.5\noutput = 10.0\n')   # coder-b: unknown
        cfg = write_config(base / "run.toml", iterations=1, beam=1, plans=2, codes=1, model=[planner],
                           code_model=[coder])
        run_dir = base / "run"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--no-live", "--out", str(run_dir),
                            env={"AUTOCOMP_PRICES": str(base / "prices.toml")}))
    finally:
        fake.close()
    assert (run_dir / "best.json").exists(), out[-3000:]
    return run_dir


def texts(run_dir: Path, job_id: str) -> list[dict]:
    db = sqlite3.connect(f"file:{run_dir / 'run.db'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT id, finish, prefix_id, prompt_id, answer_id, reasoning_id FROM model_calls "
                          "WHERE job_id = ? ORDER BY id", (job_id,)).fetchall()
        return [{"id": r[0], "finish": r[1], **{k: text_of(db, t) for k, t in zip(
            ("prefix", "prompt", "answer", "reasoning"), r[2:])}} for r in rows]
    finally:
        db.close()


def test_show_candidate_prints_code_plan_feedback_and_the_calls_that_made_it(run):
    [(cid, plan_job, parent)] = query(run, "SELECT id, plan_job, parent_id FROM candidates WHERE origin = 'repair'")
    codes = candidate_codes(run)
    code = codes[cid]
    [(failed, failed_code)] = [(c, k) for c, k in codes.items() if "gemmini_loop_ws_oops" in k]
    res = cli("show", str(run), "--candidate", cid[:8])
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert out.startswith(f"Candidate {cid}") and REPAIRED in out and code == REPAIRED
    option, plan_text = plan_texts(run)[plan_job]
    assert f"option {option}" in out and plan_text in out
    [(eval_job,)] = query(run, "SELECT job_id FROM evals WHERE candidate_id = ?", cid)
    feedback = stored(run, eval_job)["feedback_text"]
    assert feedback.splitlines()[0].startswith("Latency:") and feedback in out
    [(cycles,)] = query(run, "SELECT latency FROM evals WHERE candidate_id = ?", cid)
    assert f"correct, {cycles:,.0f} cycles" in out and f"parent: {parent}" in out

    # the plan call, the code call(s) that wrote the failed kernel, and the repair call: prompt and answer each
    jobs = [j for (j, kind) in query(run, "SELECT id, kind FROM jobs WHERE kind IN ('code', 'repair') AND ok = 1")
            if kind == "repair" or "gemmini_loop_ws_oops" in stored(run, j)["code"]]
    calls = [c for job in [plan_job, *jobs] for c in texts(run, job)]
    assert len(calls) >= 3
    for c in calls:
        assert c["prompt"] and c["prompt"] in out and c["answer"] in out, c["id"]
    plan_call = texts(run, plan_job)[0]
    assert plan_call["reasoning"] == THOUGHT and THOUGHT in out          # rich markup stays text
    # the shared prefix once, shortened: its first line and its size, not its body
    prefix = plan_call["prefix"]
    assert all(c["prefix"] == prefix for c in calls) and len(prefix) > 10000
    assert out.count(prefix.splitlines()[0]) == 1 and f"{len(prefix):,} characters" in out
    middle = len(prefix) // 2
    assert prefix[middle:middle + 400] not in out
    assert f"repair of {failed[:12]}" in out and "which was repaired" in out
    full = cli("show", str(run), "--candidate", cid, "--full").stdout
    assert prefix in full

    failed_out = cli("show", str(run), "--candidate", failed[:10]).stdout
    assert failed_code in failed_out and "incorrect (compile)" in failed_out and f"repaired into: {cid}" in failed_out
    assert "implicit declaration of function 'gemmini_loop_ws_oops'" in failed_out


def test_show_candidate_refuses_unknown_short_and_ambiguous_ids(run, tmp_path):
    for prefix, message in [("zzzzzz", "no candidate id starts with 'zzzzzz'"),
                            ("abc", "at least 6 characters")]:
        res = cli("show", str(run), "--candidate", prefix)
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and message in res.stderr, res.stderr
    copy = tmp_path / "copy"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("run.db-*"))
    cid = query(copy, "SELECT id FROM candidates WHERE origin = 'code' LIMIT 1")[0][0]
    twin = cid[:6] + ("0" if cid[6] != "0" else "1") + cid[7:]   # a candidate whose id shares 6 characters
    db = sqlite3.connect(copy / "run.db")
    db.execute("INSERT INTO candidates (id, parent_id, iteration, plan_job, origin, model, code, created, code_id) "
               "SELECT ?, parent_id, iteration, plan_job, origin, model, code, created, code_id FROM candidates "
               "WHERE id = ?", (twin, cid))
    db.commit()
    db.close()
    res = cli("show", str(copy), "--candidate", cid[:6])
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"'{cid[:6]}' matches 2 candidates" in res.stderr and twin in res.stderr


def test_show_calls_lists_every_call_with_the_stored_totals(run):
    digest = hashlib.sha256((run / "run.db").read_bytes()).hexdigest()
    files = sorted(p.name for p in run.iterdir())
    res = cli("show", str(run), "--calls")
    assert res.returncode == 0, res.stderr
    body = table_rows(res.stdout, "Model calls of")   # up to the line above the totals
    totals = next([c.strip() for c in line.strip("│").split("│")] for line in res.stdout.splitlines()
                  if line.startswith("│") and "│ total " in line)
    stored = query(run, "SELECT role, model, tokens_in, tokens_cached, tokens_out, tokens_reasoning, cost, priced, "
                        "outcome, finish FROM model_calls ORDER BY created, id")
    assert [int(r[0]) for r in body] == list(range(1, len(stored) + 1))
    for r, s in zip(body, stored):
        assert (r[1], r[2]) == s[:2]
        assert r[5] == f"{s[2]:,} ({s[3]:,})" and r[6] == f"{s[4]:,} ({s[5]:,})"
        assert r[7] == f"${s[6]:.4f}" + ("" if s[7] else "*") and r[9] == f"{s[8]} / {s[9]}"
    assert {r[1] for r in body} == {"planner", "coder", "repairer"}
    assert any(r[9].endswith("/ length") for r in body)      # the truncated answer is a call of its own
    [(n, tin, cached, tout, reasoning, cost, unpriced)] = query(
        run, "SELECT COUNT(*), SUM(tokens_in), SUM(tokens_cached), SUM(tokens_out), SUM(tokens_reasoning), "
             "SUM(cost), SUM(priced = 0) FROM model_calls")
    assert totals[1:3] == ["total", f"{n} calls"]
    assert totals[5] == f"{tin:,} ({cached:,})" and totals[6] == f"{tout:,} ({reasoning:,})"
    assert totals[7].startswith(f"${cost:.4f}") and cost > 0 and reasoning > 0
    assert unpriced and f"{unpriced} of {n} calls had no known price" in res.stdout
    per = {(r[0], r[1]): r for r in table_rows(res.stdout, "Per model and role")}
    for model, role, count, c in query(run, "SELECT model, role, COUNT(*), SUM(cost) FROM model_calls GROUP BY 1, 2"):
        assert int(per[model, role][2]) == count and per[model, role][7].rstrip("*") == f"${c:.4f}"
    # the candidate column names what each code or repair call produced
    produced = {r[4] for r in body if r[1] in ("coder", "repairer")}
    ids = {cid[:12] for (cid,) in query(run, "SELECT id FROM candidates")}
    assert produced and produced <= ids

    lines = cli("show", str(run), "--calls", "--json").stdout.splitlines()
    calls = [json.loads(line) for line in lines]
    assert len(calls) == n and sum(c["cost"] for c in calls) == pytest.approx(cost)
    # the plain show's table: cached and reasoning columns, and the count of unpriced calls
    plain = cli("show", str(run)).stdout
    usage = table_rows(plain, "Model calls")
    assert sum(int(r[4].replace(",", "")) for r in usage) == cached
    assert sum(int(r[6].replace(",", "")) for r in usage) == reasoning
    assert f"{unpriced} of {n} calls had no known price" in plain
    # read-only: --calls, --calls --json, the plain show and --candidate leave the store byte for byte the same
    # and create nothing next to it
    assert hashlib.sha256((run / "run.db").read_bytes()).hexdigest() == digest
    assert cli("show", str(run), "--candidate", query(run, "SELECT id FROM candidates")[0][0]).returncode == 0
    assert hashlib.sha256((run / "run.db").read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in run.iterdir()) == files


def test_a_store_without_texts_and_new_columns_still_shows(run, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(run, old, ignore=shutil.ignore_patterns("run.db-*"))
    make_old(old)
    cid = query(old, "SELECT id FROM candidates WHERE origin = 'repair'")[0][0]
    res = cli("show", str(old), "--candidate", cid[:8])
    assert res.returncode == 0, res.stderr
    assert REPAIRED in res.stdout and "prompt and answer: not recorded" in res.stdout
    assert "(cached -)" in res.stdout and "(reasoning -)" in res.stdout
    res = cli("show", str(old), "--calls")
    assert res.returncode == 0, res.stderr
    assert re.search(r"total\s*│\s*\d+ calls", res.stdout) and "not recorded in this store" in res.stdout
    plain = cli("show", str(old))
    assert plain.returncode == 0 and "Lineage of the best kernel" in plain.stdout
    assert {r[4] for r in table_rows(plain.stdout, "Model calls")} == {"-"}
    assert cli("report", str(old)).returncode == 0
    html = (old / "report.html").read_text()
    assert f"id='cand-{cid}'" in html and "prompt and answer not recorded" in html
