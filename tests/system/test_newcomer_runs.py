"""A newcomer's runs, with real processes: `kill -INT` stops a run a script started in the background, the
liveness option reaches the coordinator's bus, two runs whose folders share a name keep their own schedule
library entries, and `--reuse auto` says which trace it picked."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from autocomp_zmq.agents.run.execute import RunConfig, execute
from tests.system.runkit import ROOT, endpoint_of, finish, summary, write_config

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]
SMALL = dict(isa="fine", beam=2, plans=2, codes=1, evaluators=1, patience=10, seed=3)


def test_kill_int_stops_a_run_a_script_started_in_the_background(tmp_path):
    """A non-interactive shell starts `cmd &` with SIGINT ignored; Python then installs no handler of its own,
    and before, `kill -INT` did nothing: the run went on to its end."""
    cfg = write_config(tmp_path / "cfg.toml", problem="gemm-512x512x512", iterations=8, patience=8, beam=4, plans=4,
                       codes=2)                  # about 25 s: still running when it is interrupted
    run = tmp_path / "run"
    script = f'"{sys.executable}" "{ROOT / "launch.py"}" run --config "{cfg}" --evaluators 1 --out "{run}" & wait $!'
    proc = subprocess.Popen(["bash", "-c", script], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env={**os.environ, "AUTOCOMP_LOG_LEVEL": "WARNING"})
    endpoint_of(run)                                   # it is running: its bus is up
    time.sleep(1.0)
    [coordinator] = [p for p in psutil.Process(proc.pid).children() if "launch.py" in " ".join(p.cmdline())]
    coordinator.send_signal(signal.SIGINT)
    out = finish(proc, timeout=60)
    assert summary(run)["stop_reason"] == "interrupted", out
    assert "Interrupted in iteration " in out and f"continue with --resume {run}" in out, out
    assert proc.returncode == 130, out            # saved and resumable, but not finished: 128 + SIGINT


def test_a_scripts_background_job_starts_with_sigint_ignored():
    """The premise of the test above: what `cmd &` in a script does to SIGINT."""
    proc = subprocess.Popen(["bash", "-c", "sleep 30 & wait"])
    try:
        sleeper = None
        for _ in range(100):
            kids = psutil.Process(proc.pid).children()
            if kids:
                sleeper = kids[0]
                break
            time.sleep(0.02)
        assert sleeper is not None and signal.SIGINT in _ignored(sleeper.pid)
    finally:
        for p in psutil.Process(proc.pid).children():
            p.kill()
        proc.kill()
        proc.wait()


def _ignored(pid: int) -> set[int]:
    mask = next(line.split()[1] for line in open(f"/proc/{pid}/status") if line.startswith("SigIgn:"))
    return {sig for sig in signal.Signals if int(mask, 16) >> (sig - 1) & 1}


def test_liveness_reaches_the_coordinators_bus():
    from autocomp_zmq.agents.run.execute import _bind
    router = _bind(RunConfig.of(liveness=4, heartbeat_s=0.5), b"k" * 32, "run", None)
    try:
        assert router.timing.dead_after == 4 and router.timing.dead_s == 2.0
    finally:
        router.close(grace_s=0)


def test_two_runs_in_folders_of_the_same_name_keep_their_own_traces_and_reuse_auto_names_its_pick(tmp_path,
                                                                                                   capsys):
    """Before, the library keyed a trace by problem and folder name: `--out a/run` and `--out b/run` overwrote
    each other's, and `--reuse auto` never said which trace it used."""
    lib = tmp_path / "library"
    firsts = [execute(RunConfig.of(problem="gemm-256x256x256", iterations=2, schedule_library=str(lib), **SMALL),
                      out=tmp_path / side / "run", live=False, progress=False) for side in ("a", "b")]
    entries = sorted((lib / "gemmini-sim" / "fine").glob("*.json"))
    assert len(entries) == 2, entries
    traces = [json.loads(e.read_text()) for e in entries]
    assert {t["run_dir"] for t in traces} == {s["run_dir"] for s in firsts}
    assert len({t["run_id"] for t in traces}) == 2 and all(t["project"] for t in traces)
    capsys.readouterr()
    execute(RunConfig.of(problem="gemm-512x512x512", reuse="auto", iterations=1, schedule_library=str(lib), **SMALL),
            out=tmp_path / "reuser", live=False, progress=False)
    said = capsys.readouterr().err
    assert "Reusing the optimization trace of gemm-256x256x256 from " in said, said
    assert any(t["run_dir"] in said for t in traces), said
