"""Helpers for tests that drive real runs: launch.py in subprocesses, fast
timing constants through a TOML config, and read-only looks at run.db."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"problem": "gemm-256x256x256", "iterations": 3, "beam": 2, "plans": 2, "codes": 1, "seed": 7,
         "patience": 3, "heartbeat_s": 0.1}


def plugin_env(tmp_path: Path, dist: str, entry_points: str) -> dict:
    """An environment in which a plug-in package is installed as `pip install` would leave it: a dist-info with
    its entry points on PYTHONPATH (its code is in this checkout's tests/)."""
    info = tmp_path / "site" / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)]),
            "AUTOCOMP_LOG_LEVEL": "WARNING"}


def write_config(path: Path, **values) -> Path:
    lines = []
    for k, v in {**SMALL, **values}.items():
        lines.append(f"{k} = {json.dumps(v)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def launch(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "launch.py"), *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "AUTOCOMP_LOG_LEVEL": "WARNING", **(env or {})})


def finish(proc: subprocess.Popen, timeout: float = 240) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, _ = proc.communicate()
        raise AssertionError(f"process did not finish in {timeout} s:\n{out[-3000:]}")
    return out


def kill_tree(pid: int) -> None:
    try:
        procs = psutil.Process(pid).children(recursive=True) + [psutil.Process(pid)]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def wait_for(pred, timeout: float = 60, every: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def query(run_dir: Path, sql: str, *args):
    if not (run_dir / "run.db").exists():
        return []
    db = sqlite3.connect(f"file:{run_dir / 'run.db'}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def stored(run_dir: Path, job_id: str, column: str = "result"):
    """A job's request (column "payload") or answer as data, whole (the store keeps large members apart)."""
    from autocomp_zmq.agents.store import expand
    db = sqlite3.connect(f"file:{run_dir / 'run.db'}?mode=ro", uri=True, timeout=5)
    try:
        return expand(db, db.execute(f"SELECT {column} FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])
    finally:
        db.close()


def candidate_codes(run_dir: Path) -> dict[str, str]:
    """Every candidate's kernel, whole (the store keeps kernels in its texts table)."""
    from autocomp_zmq.agents.store import candidate_rows
    db = sqlite3.connect(f"file:{run_dir / 'run.db'}?mode=ro", uri=True, timeout=5)
    try:
        return {row[0]: row[6] for row in candidate_rows(db)}
    finally:
        db.close()


def plan_texts(run_dir: Path) -> dict[str, tuple[str, str]]:
    """Every plan job's (option id, text), the text whole."""
    from autocomp_zmq.agents.store import plan_rows
    db = sqlite3.connect(f"file:{run_dir / 'run.db'}?mode=ro", uri=True, timeout=5)
    try:
        return {job: (option, text) for job, option, text, _ in plan_rows(db)}
    finally:
        db.close()


def endpoint_of(run_dir: Path, timeout: float = 60) -> str:
    """The endpoint a run actually bound (e.g. with --bind tcp://127.0.0.1:*), once it has recorded it."""
    rows = wait_for(lambda: query(run_dir, "SELECT value FROM meta WHERE key = 'endpoint'"), timeout=timeout,
                    what=f"the endpoint of {run_dir}")
    return json.loads(rows[0][0])


def summary(run_dir: Path) -> dict:
    rows = query(run_dir, "SELECT value FROM meta WHERE key = 'summary'")
    assert rows, f"no summary in {run_dir}"
    return json.loads(rows[0][0])


def agents_of(pid: int, role: str) -> list[psutil.Process]:
    try:
        kids = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    found = []
    for p in kids:
        try:        # a child that has exited (a zombie not yet reaped, or gone) is no agent
            argv = p.cmdline()
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
        if "--role" in argv and role in argv:
            found.append(p)
    return found


def processes_mentioning(text: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if any(text in part for part in (p.info["cmdline"] or [])):
            found.append(p)
    return found


SLOW_GEMM = (ROOT / "hw_runners" / "gemmini_sim" / "problems" / "gemm_naive.c").read_text().replace(
    "  config_ex(WEIGHT_STATIONARY", "  for (volatile unsigned long spin = 0; spin < 150000000UL; spin++) {}\n"
    "  config_ex(WEIGHT_STATIONARY", 1)
