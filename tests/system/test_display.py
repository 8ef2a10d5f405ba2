"""What a person reads: program text is never taken for markup, output piped to a file is not wrapped,
logs go to the run's log file instead of through the progress display, --help shows every default."""
from __future__ import annotations

import json
import re

import pytest

from tests.system.runkit import ROOT, finish, launch, write_config

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

BAD = '#include "gemmini.h"\nvoid solution(int8_t A[256][256]) { mvin(&A[i][k], 0, 16, 16); }\n'
HANG = (ROOT / "hw_runners" / "gemmini_sim" / "problems" / "gemm_naive.c").read_text().replace(
    "  config_ex(WEIGHT_STATIONARY", "  for (volatile int forever = 1; forever;) {}\n  config_ex(WEIGHT_STATIONARY", 1)


def test_eval_prints_compiler_errors_with_their_brackets(tmp_path):
    kernel = tmp_path / "bad.c"
    kernel.write_text(BAD)
    proc = launch("eval", "--problem", "gemm-256x256x256", str(kernel))
    out = finish(proc)
    assert proc.returncode == 1
    assert "failed gemm-256x256x256 (compile)" in out and "mvin(&A[i][k], 0, 16, 16)" in out, out


def test_eval_timeout_option_bounds_a_hanging_kernel(tmp_path):
    kernel = tmp_path / "hang.c"
    kernel.write_text(HANG)
    proc = launch("eval", "--problem", "gemm-256x256x256", "--timeout", "2", "--json", str(kernel))
    out = finish(proc, timeout=100)
    result = json.loads(out.strip().splitlines()[-1])
    assert proc.returncode == 1 and result["error_kind"] == "timeout", out
    assert result["wall_s"] < 60          # the default limit is 120 s
    proc = launch("eval", "--problem", "gemm-256x256x256", "--timeout", "0", str(kernel))
    assert "error: --timeout must be > 0" in finish(proc) and proc.returncode == 2


def test_eval_trace_has_a_header_saying_what_and_whence(tmp_path):
    trace = tmp_path / "timing.txt"
    proc = launch("eval", "--problem", "gemm-256x256x256", "--trace", str(trace), "builtin:naive")
    finish(proc)
    assert proc.returncode == 0
    lines = trace.read_text().splitlines()
    header = [ln for ln in lines[:8] if ln.startswith("# ")]
    assert header[0].startswith("# gemmini-sim timing trace (autocomp-zmq eval --trace), written 20"), header
    assert any("kernel sha256 " in ln for ln in header) and any(
        "problem gemm-256x256x256 (gemm I=256 J=256 K=256), target gemmini-sim" in ln for ln in header), header
    assert any(ln.startswith("# columns: instruction number;") for ln in header), header
    assert lines[len(header)].split()[:3] == ["1", "config", "cpu"], lines[:8]


def test_run_output_progress_logs_and_best_json(tmp_path):
    run = tmp_path / ("a-run-directory-with-a-long-name-" + "x" * 80)
    cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1)
    proc = launch("run", "--config", str(cfg), "--evaluators", "1", "--out", str(run),
                  env={"AUTOCOMP_LOG_LEVEL": "INFO"})
    out = finish(proc)
    assert proc.returncode == 0, out
    assert re.search(r"^\[gemm-256x256x256\] iteration 1/1 ", out, re.M), out       # not eaten as markup
    assert f"Written to {run}/best.c" in out.splitlines()[-2] or f"Written to {run}/best.c" in out, out
    assert not any(line.startswith("{") for line in out.splitlines()), out      # no log lines in the output
    events = [json.loads(line) for line in (run / "logs" / "coordinator.log").read_text().splitlines()]
    # who joined, from where (before, no address)
    assert any(e["event"] == "agent_joined" and e["address"] == "127.0.0.1" for e in events), events
    best = json.loads((run / "best.json").read_text())
    assert (best["problem"], best["target"], best["models"], best["seed"]) == \
        ("gemm-256x256x256", "gemmini-sim", ["heuristic"], 7)


def test_help_shows_defaults_and_readable_metavars():
    proc = launch("run", "--help", env={"COLUMNS": "200"})
    out = finish(proc)
    assert "<list[str]>" not in out and "--curve/--no-curve" not in out
    lines = {m.group(1): line for line in out.splitlines() if (m := re.search(r"(--[a-z-]+)\s", line))}
    assert "[default: (4)]" in lines["--beam"] and "[default: (heuristic)]" in lines["--model"]
    assert "[default: (off)]" in lines["--curve"] and "<bool>" not in lines["--curve"]
    assert "[default: (none)]" in lines["--max-evals"]
    for flag in ("--max-repairs", "--stop-roofline", "--call-timeout-s", "--heartbeat-s", "--out"):
        assert flag in lines, f"{flag} missing: every TOML key is a flag too"


def test_worker_accepts_what_the_coordinator_passes():
    from autocomp_zmq.agents.run.runflags import WORKER_OPTIONS
    out = finish(launch("worker", "--help", env={"COLUMNS": "200"}))
    for name in WORKER_OPTIONS:
        assert "--" + name.replace("_", "-") in out, name
