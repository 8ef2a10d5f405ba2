"""A run tried as a new user would, and under real faults: every failure is loud (a one-line error and a
non-zero exit, nothing half-made left behind, nothing stored lost) and resume keeps what it must."""
from __future__ import annotations

import json
import random
import re
import signal
import sqlite3

import pytest
import zmq

from autocomp_zmq.agents.run.rundir import is_locked
from tests.llm.fake_servers import FakeLLM
from tests.system.runkit import (SLOW_GEMM, finish, launch, query, summary, wait_for, write_config)

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def _one_line_error(out: str, *fragments: str) -> None:
    assert "Traceback" not in out and "╭" not in out, out[-3000:]
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out[-3000:]
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def _run(*args: str, env: dict | None = None) -> tuple[int, str]:
    proc = launch("run", *args, env=env)
    out = finish(proc)
    return proc.returncode, out


# -- models that do not answer -------------------------------------------------------------------
def test_unreachable_model_server_fails_before_anything_starts(tmp_path):
    run = tmp_path / "run"
    code, out = _run("--problem", "gemm-256x256x256", "--model", "openai-compat@http://127.0.0.1:9/v1:x",
                     "--out", str(run))
    assert code == 2
    _one_line_error(out, "openai-compat@http://127.0.0.1:9/v1:x", "does not answer: connection refused")
    assert not run.exists()
    # the model has no known price: said in a line of its own, not as a raw JSON record above the error
    assert not [ln for ln in out.splitlines() if ln.lstrip().startswith("{")], out
    assert any(ln.startswith("warning: price_unknown") for ln in out.splitlines()), out


def test_run_whose_every_model_call_fails_ends_non_zero_with_the_reason(tmp_path):
    cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=3, codes=1, call_retries=0,
                       model=["openai-compat@http://127.0.0.1:9/v1:x"], preflight=False)
    run = tmp_path / "run"
    code, out = _run("--config", str(cfg), "--evaluators", "1", "--out", str(run))
    assert code == 1, out
    assert "Speedup" not in out
    _one_line_error(out, "all 3 planning calls to openai-compat@http://127.0.0.1:9/v1:x failed",
                    "(connection refused)")
    s = summary(run)
    assert s["error"].startswith("the models produced no candidate")
    assert list(s["failures"].values()) == [3]


def test_failures_by_reason_in_the_progress_lines_and_the_summary(tmp_path):
    fake = FakeLLM(script=lambda prompt, n: (200, {}, "no plan here"))   # every answer is unusable
    try:
        model = f"openai-compat@{fake.url}/v1:m"
        cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=2, codes=1, model=[model])
        code, out = _run("--config", str(cfg), "--evaluators", "1", "--out", str(tmp_path / "run"))
    finally:
        fake.close()
    assert code == 1
    assert "Failures by reason: plan " + model + ": unusable answer" in out, out
    # the progress line names the top reason as far as the line's width allows
    assert re.search(r"failed 2 \(plan/" + re.escape(model[:20]), out), out


# -- resume ---------------------------------------------------------------------------------------
def test_resume_keeps_curve_and_extends_the_run(tmp_path):
    cfg = write_config(tmp_path / "cfg.toml", iterations=2, beam=2, plans=2, codes=1, patience=5)
    run = tmp_path / "run"
    code, out = _run("--config", str(cfg), "--curve", "--evaluators", "1", "--out", str(run))
    assert code == 0, out
    first = summary(run)
    assert first["iterations"] == 2

    code, out = _run("--resume", str(run), "--no-curve")
    assert code == 2
    _one_line_error(out, "--curve False conflicts")
    code, out = _run("--resume", str(run), "--beam", "3")
    _one_line_error(out, "--beam cannot change on resume")

    code, out = _run("--resume", str(run), "-T", "3")
    assert code == 0, out
    resumed = summary(run)
    session = json.loads(query(run, "SELECT value FROM meta WHERE key = 'session'")[0][0])
    assert session["curve"] is True and session["evaluators"] == 1 and session["iterations"] == 3
    assert resumed["iterations"] == 3 and resumed["replayed_results"] >= first["evaluations"]
    assert resumed["best_latency"] <= first["best_latency"]
    # -T is the run's total, as the help says: below what the run has done it is refused, not "finished"
    code, out = _run("--resume", str(run), "-T", "2")
    assert code == 2
    _one_line_error(out, "-T 2: the run has done 3 iterations, and -T is its new total: give at least 3")
    assert summary(run)["iterations"] == 3


def test_one_coordinator_per_run_directory(tmp_path):
    # no evaluator and no start check: the first coordinator holds the run, waiting, until it is stopped
    # (a slow kernel only held it for as long as the resume below took to start: a race)
    cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1, check_start=False)
    run = tmp_path / "run"
    first = launch("run", "--config", str(cfg), "--evaluators", "0", "--out", str(run))
    try:
        wait_for(lambda: is_locked(run), timeout=120, what="the first coordinator to hold the run")
        code, out = _run("--resume", str(run))
        assert code == 2
        _one_line_error(out, f"is in use by another coordinator (pid {first.pid})")
    finally:
        first.send_signal(signal.SIGTERM)
        finish(first)


# -- storage faults ---------------------------------------------------------------------------------
def test_run_directory_removed_mid_run_rescues_the_results(tmp_path):
    cfg = write_config(tmp_path / "cfg.toml", iterations=3, beam=2, plans=2, codes=2, patience=5)
    run = tmp_path / "run"
    data = tmp_path / "data"
    proc = launch("run", "--config", str(cfg), "--evaluators", "1", "--out", str(run),
                  env={"XDG_DATA_HOME": str(data)})
    wait_for(lambda: (query(run, "SELECT COUNT(*) FROM evals") or [(0,)])[0][0] >= 2, timeout=120,
             what="two evaluations")
    import shutil
    shutil.rmtree(run)
    out = finish(proc)
    assert proc.returncode == 0, out
    rescued = list((data / "autocomp" / "rescued").iterdir())
    assert len(rescued) == 1 and str(rescued[0]) in out.replace("\n", "")
    best = json.loads((rescued[0] / "best.json").read_text())
    assert (rescued[0] / "best.c").read_text() and best["speedup"] >= 1.0
    assert summary(rescued[0])["best_id"] == best["best_id"]    # the whole store was rescued


def test_store_failure_mid_run_is_one_line_and_resume_finishes(tmp_path):
    kernel = tmp_path / "slow.c"
    kernel.write_text(SLOW_GEMM)   # evaluated by an agent (check_start off): a job in flight for a while
    cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1, check_start=False)
    run = tmp_path / "run"
    proc = launch("run", "--config", str(cfg), "--kernel", str(kernel), "--evaluators", "1", "--out", str(run))
    wait_for(lambda: query(run, "SELECT COUNT(*) FROM attempts WHERE finished IS NULL") not in ([], [(0,)]),
             timeout=120, what="a job in flight")
    blocker = sqlite3.connect(run / "run.db", timeout=30)
    blocker.execute("BEGIN EXCLUSIVE")            # another program holds the store: writes fail
    try:
        out = finish(proc)
    finally:
        blocker.rollback()
        blocker.close()
    assert proc.returncode == 2
    _one_line_error(out, "the run store failed (database is locked)", f"--resume {run}")
    code, out = _run("--resume", str(run))
    assert code == 0, out
    assert summary(run)["evaluations"] >= 1


# -- bad input: one line, exit 2, nothing left behind ---------------------------------------------------------
def test_bad_inputs_are_one_line_errors(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('beam = "four"\n')
    _one_line_error(_run("--config", str(cfg))[1], "beam must be an integer, not 'four'")
    latin = tmp_path / "latin1.c"
    latin.write_bytes(b"// caf\xe9\nvoid solution() {}\n")
    _one_line_error(_run("--kernel", str(latin), "--out", str(tmp_path / "r1"))[1], "not UTF-8 text (byte 0xe9")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    _one_line_error(_run("--out", str(a_file))[1], "exists and is not a directory")
    _one_line_error(_run("--out", "/proc/autocomp/run")[1], "cannot create the run directory /proc/autocomp/run")
    for args, fragment in ((["--evaluators", "-1"], "evaluators must be an integer >= 0, not -1"),
                           (["--evaluators", "100000"], "evaluators must be between 0 and"),
                           (["--max-evals", "0"], "max_evals must be an integer >= 1, not 0")):
        code, out = _run(*args, "--out", str(tmp_path / "never"))
        assert code == 2
        _one_line_error(out, fragment)
    assert not (tmp_path / "never").exists() and not (tmp_path / "r1").exists()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "run.db").write_bytes(b"this is not a database" * 100)
    _one_line_error(_run("--resume", str(broken))[1], "is damaged (file is not a database)")


def test_a_damaged_store_is_refused_before_anything_writes_to_it(tmp_path):
    cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1)
    run = tmp_path / "run"
    code, out = _run("--config", str(cfg), "--out", str(run))
    assert code == 0, out
    db = run / "run.db"
    data = bytearray(db.read_bytes())
    assert len(data) >= 6 * 4096 and not (run / "run.db-wal").exists()    # a copied run.db alone is complete
    data[2 * 4096:5 * 4096] = random.Random(1).randbytes(3 * 4096)           # three pages overwritten
    db.write_bytes(bytes(data))
    code, out = _run("--resume", str(run), "--iterations", "3")
    assert code == 2
    _one_line_error(out, f"its store {db} is damaged", "nothing was written to it")
    assert db.read_bytes() == bytes(data) and not (run / "run.db-wal").exists()


def test_wrong_starting_kernel_fails_before_agents_start(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text('#include "gemmini.h"\nvoid solution(int8_t A[256][256]) { mvin(&A[i][k], 0, 16, 16); }\n')
    code, out = _run("--problem", "gemm-256x256x256", "--kernel", str(bad), "--out", str(tmp_path / "run"))
    assert code == 2
    _one_line_error(out, "the starting kernel is not correct (compile)")
    assert "mvin(&A[i][k], 0, 16, 16)" in out     # the compiler's message follows, brackets intact
    assert not (tmp_path / "run").exists()


def test_bad_or_busy_bind_leaves_nothing_and_the_corrected_command_works(tmp_path):
    run = tmp_path / "run"
    code, out = _run("--problem", "gemm-256x256x256", "--bind", "bogus://x", "--out", str(run))
    assert code == 2
    _one_line_error(out, "cannot listen on --bind bogus://x")
    holder = zmq.Context.instance().socket(zmq.ROUTER)
    holder.bind("tcp://127.0.0.1:*")
    busy = holder.getsockopt_string(zmq.LAST_ENDPOINT)
    try:
        code, out = _run("--problem", "gemm-256x256x256", "--bind", busy, "--out", str(run))
    finally:
        holder.close(linger=0)
    assert code == 2
    _one_line_error(out, f"cannot listen on --bind {busy}", "Address already in use")
    assert not run.exists()
    cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1)
    code, out = _run("--config", str(cfg), "--evaluators", "1", "--out", str(run))
    assert code == 0 and "Speedup:" in out, out


def test_prepared_run_directory_with_a_secret_is_used(tmp_path):
    from autocomp_zmq.bus.auth import create_secret
    run = tmp_path / "run"
    run.mkdir()
    key = create_secret(run / "secret")       # handed to remote workers before the run starts
    cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1)
    code, out = _run("--config", str(cfg), "--evaluators", "1", "--out", str(run))
    assert code == 0, out
    assert (run / "secret").read_text().strip() == key.hex()
