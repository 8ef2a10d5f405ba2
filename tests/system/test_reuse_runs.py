"""Schedule reuse with real runs: a run records the optimization trace of its best kernel in its run store
and in the schedule library; a run with --reuse offers that trace's plans, in order, to its planner as its
first iterations' plans (recorded in its run store), and every kernel it gets is written by its coder for
its own problem and evaluated like any other."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from autocomp_zmq.agents.run.execute import RunConfig, RunError, execute
from autocomp_zmq.agents.store import RunStore, expand

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]
SMALL = dict(isa="fine", beam=2, plans=2, codes=1, evaluators=1, patience=10, seed=3)


def chain_options(store: RunStore, best_id: str) -> list[str]:
    options, cid = [], best_id
    while cid:
        parent, option = store.db.execute("SELECT c.parent_id, p.option_id FROM candidates c LEFT JOIN plans p "
                                          "ON p.job_id = c.plan_job WHERE c.id = ?", (cid,)).fetchone()
        if parent:
            options.append(option)
        cid = parent
    return options[::-1]


def plan_jobs(store: RunStore, iteration: int) -> list[dict]:
    return [expand(store.db, p) for (p,) in store.db.execute("SELECT payload FROM jobs WHERE kind = 'plan' AND iteration = ?",
                                                        (iteration,))]


def test_a_run_records_its_trace_and_a_reusing_run_offers_it_to_the_planner(tmp_path):
    lib = tmp_path / "library"
    src = execute(RunConfig.of(problem="gemm-256x256x256", iterations=3, schedule_library=str(lib), **SMALL),
                  out=tmp_path / "src", live=False, progress=False)
    store = RunStore(tmp_path / "src" / "run.db")
    trace = store.meta("schedule_trace")
    steps = trace["steps"]
    assert [s["option_id"] for s in steps] == chain_options(store, src["best_id"]) and steps
    assert steps[-1]["latency"] == src["best_latency"] and trace["start_latency"] == src["baseline_latency"]
    assert trace["problem"]["dims"] == {"I": 256, "J": 256, "K": 256} and trace["isa"] == "fine"
    assert "code" not in json.dumps(trace).replace("coder", "")      # plans and shapes only, never kernels
    # keyed by the run's identity (kept in its store), not its folder's name alone
    assert Path(src["schedule_trace"]) == lib / "gemmini-sim" / "fine" / \
        f"gemm-256x256x256--src-{store.meta('run_id')}.json"
    assert json.loads(Path(src["schedule_trace"]).read_text())["steps"] == steps
    store.close()

    dst = execute(RunConfig.of(problem="gemm-512x512x512", reuse=str(tmp_path / "src"), iterations=len(steps) + 1,
                            schedule_library=str(lib), **SMALL), out=tmp_path / "dst", live=False, progress=False)
    store = RunStore(tmp_path / "dst" / "run.db")
    assert store.meta("reused_trace")["steps"] == steps
    for t, step in enumerate(steps, 1):
        jobs = plan_jobs(store, t)
        assert jobs and all(j["prior"]["option_id"] == step["option_id"] and j["prior"]["text"] == step["text"]
                            and [o["id"] for o in j["menu"]] == [step["option_id"]]
                            and j["prior_problem"]["name"] == "gemm-256x256x256" for j in jobs)
    assert all("prior" not in j for j in plan_jobs(store, len(steps) + 1))   # then the normal search
    # every kernel of the reusing run was written by its coder and evaluated for its own problem
    rows = store.db.execute("SELECT c.origin, e.correct, j.payload FROM candidates c JOIN evals e ON e.candidate_id "
                            "= c.id JOIN jobs j ON j.id = e.job_id").fetchall()
    assert len(rows) == store.db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]
    assert {origin for origin, _, _ in rows} <= {"initial", "code", "repair"}
    assert all(expand(store.db, p)["problem"]["name"] == "gemm-512x512x512" for _, _, p in rows)
    assert dst["speedup"] > 1
    jobs_before = store.db.execute("SELECT COUNT(*) FROM jobs WHERE iteration <= ?", (len(steps),)).fetchone()[0]
    store.close()

    # a resumed reusing run offers the same steps (read back from its store) and replays their results
    more = execute(None, resume=tmp_path / "dst", given={"iterations": len(steps) + 2}, live=False, progress=False)
    store = RunStore(tmp_path / "dst" / "run.db")
    assert more["replayed_results"] >= jobs_before
    assert store.db.execute("SELECT COUNT(*) FROM jobs WHERE iteration <= ?", (len(steps),)).fetchone()[0] \
        == jobs_before
    store.close()

    # `show` says what was reused
    from rich.console import Console
    from autocomp_zmq.agents.cli.inspect import print_view
    from autocomp_zmq.agents.views.runview import load
    console = Console(record=True, width=200)
    print_view(console, load(tmp_path / "dst"))
    shown = console.export_text()
    assert "gemm-512x512x512 on gemmini-sim --isa fine" in shown
    assert (f"Reused the optimization trace of gemm-256x256x256 ({tmp_path / 'src'}) as the plans of iterations "
            f"1-{len(steps)}: " + ", ".join(s["option_id"] for s in steps)) in shown


def test_reuse_auto_without_a_recorded_workload_fails_before_starting(tmp_path):
    with pytest.raises(RunError, match="--reuse auto: the schedule library .* holds no trace of a gemm problem"):
        execute(RunConfig.of(problem="gemm-512x512x512", reuse="auto", schedule_library=str(tmp_path / "empty"),
                          **SMALL), out=tmp_path / "run", live=False, progress=False)
    assert not (tmp_path / "run").exists()


def test_reuse_across_families_is_refused(tmp_path):
    execute(RunConfig.of(problem="conv3x3-14-128", iterations=1, schedule_library=str(tmp_path / "lib"), **SMALL),
            out=tmp_path / "conv", live=False, progress=False)
    with pytest.raises(RunError, match="its trace is for conv3x3-14-128 on gemmini-sim .* needs a gemm problem"):
        execute(RunConfig.of(problem="gemm-512x512x512", reuse=str(tmp_path / "conv"), **SMALL),
                out=tmp_path / "run", live=False, progress=False)
