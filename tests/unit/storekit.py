"""Run stores made without processes: the real BeamSearch writing through the real RunStore, answered by a
deterministic stand-in for the agents whose model calls carry texts (a shared prefix, a prompt, an answer)."""
from __future__ import annotations

import hashlib
import sqlite3
import zlib
from pathlib import Path

from autocomp_zmq.agents.store import RunStore
from autocomp_zmq.agents.engine.search import BeamSearch, BeamConfig
from autocomp_zmq.protocols.jobs import CodeResult, EvalReport, MenuOption, ModelCall, Plan, PlanResult, ProblemRef

PROBLEM = ProblemRef(target="t", name="p", family="gemm")
MENU = [MenuOption(id=f"opt-{i}", title=f"Option {i}", description="d") for i in range(12)]
PREFIX = "You are an expert [bold]performance[/bold] engineer. <script>alert(1)</script>\n" + "reference line\n" * 2000
MODEL = "openai:fake-model"
NAIVE = "\n".join(f"  naive_step({i}, A[i][k]);" for i in range(60)) + "\n"


def kernel(seed: int) -> str:
    """About 60 lines; a fifth of them depend on the seed, so a diff against the parent is a few hunks."""
    lines = [f"  step({i}, A[i][k], {seed % (i + 7) if i % 5 == 0 else i});" for i in range(60)]
    return f"// kernel {seed}\n" + "\n".join(lines) + "\n"


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def answer(job):
    p = job.payload
    if job.kind == "plan":
        text = f"Plan {p.seed}: block the loops [bold]A[i][k]</pre><b>x"
        return PlanResult(plan=Plan(text=text, option_id=p.menu[0].id), model=job.model)
    if job.kind in ("code", "repair"):
        return CodeResult(code=kernel(p.seed), model=job.model)
    h = _h(p.code)
    if h % 6 == 0:
        return EvalReport(correct=False, error=f"compile error:\nkernel.c:{h % 50}: error: no [-Werror] </pre>",
                          error_kind="compile")
    latency = 1000 if p.code == NAIVE else 300 + h % 700
    return EvalReport(correct=True, latency=latency, feedback={"cycles": latency},
                      feedback_text=f"Latency: {latency} cycles. Main stall <b>loads</b> [red]x[/red].")


def call_of(job, answer_obj, texts: bool, n: int) -> ModelCall:
    body = answer_obj.code if hasattr(answer_obj, "code") else f"OPTION: x\nPLAN:\n{answer_obj.plan.text}"
    extra = dict(prefix=PREFIX, prompt=f"# Your role: {job.kind}\nseed {job.payload.seed} <tag>\n",
                 answer=body, reasoning="thinking [bold]hard[/bold]" if job.kind == "plan" else "") if texts else {}
    return ModelCall(model=MODEL, prompt_hash=f"h{n}", tokens_in=9000, tokens_out=500, cost=0.01 * (n % 3),
                     latency=1.5, tokens_cached=8000, tokens_reasoning=100 if job.kind == "plan" else 0,
                     finish="stop", **extra)


def build(run_dir: Path, iterations: int = 2, beam: int = 2, plans: int = 2, codes: int = 1,
          texts: bool = True, truncated_retry: bool = True) -> Path:
    """A finished run in run_dir; the first code job's call is truncated and asked again (two calls)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    store = RunStore(run_dir / "run.db")
    cfg = BeamConfig(iterations=iterations, beam=beam, plans=plans, codes=codes, seed=5, patience=100,
                       plan_models=(MODEL,), code_models=(MODEL,))
    search = BeamSearch(cfg, PROBLEM, NAIVE, MENU, store=store)
    role = {"plan": "planner", "code": "coder", "repair": "repairer"}
    n = 0
    with store.tx():
        store.set_meta("config", {"problem": "p", "target": "t", "iterations": iterations})
        search.start()
        while not search.done:
            jobs = search.next_jobs()
            assert jobs, "search stalled"
            for job in jobs:
                result = answer(job)
                if job.kind != "eval":
                    if truncated_retry and job.kind == "code" and n < 1000:
                        truncated = ModelCall(model=MODEL, tokens_in=9000, tokens_out=16000, finish="length",
                                              outcome="truncated (asked again with a larger limit)",
                                              prompt="truncated prompt" if texts else "",
                                              answer="```c\n// cut off" if texts else "")
                        store.add_model_call(job.id, role[job.kind], truncated, priced=False)
                        truncated_retry = False
                    n += 1
                    store.add_model_call(job.id, role[job.kind], call_of(job, result, texts, n))
                store.finish_job(job.id, True, result, None)
                search.on_result(job.id, True, result, None)
        store.set_meta("summary", {"stop_reason": search.stop_reason})
    store.close()
    return run_dir


def make_old(run_dir: Path) -> None:
    """Turn a store into one written before calls kept texts and full token counts (format < 3), and whose
    latency columns were still named `cycles`."""
    db = sqlite3.connect(run_dir / "run.db")
    for table in ("evals", "beams"):
        db.execute(f"ALTER TABLE {table} RENAME COLUMN latency TO cycles")
    for column in ("tokens_cached", "tokens_cache_write", "tokens_reasoning", "max_tokens", "finish", "priced",
                   "prefix_id", "prompt_id", "answer_id", "reasoning_id", "billing"):
        db.execute(f"ALTER TABLE model_calls DROP COLUMN {column}")
    # kernels and plan texts inline, as they were kept then
    for table, column in (("candidates", "code"), ("plans", "text")):
        for rid, tid in db.execute(f"SELECT rowid, {column}_id FROM {table} WHERE {column}_id IS NOT NULL").fetchall():
            body = zlib.decompress(db.execute("SELECT body FROM texts WHERE id = ?", (tid,)).fetchone()[0]).decode()
            db.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (body, rid))
        db.execute(f"ALTER TABLE {table} DROP COLUMN {column}_id")
    db.execute("ALTER TABLE plans DROP COLUMN choice")
    db.execute("DROP TABLE texts")
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("PRAGMA journal_mode=DELETE")
    db.close()
