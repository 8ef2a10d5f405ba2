"""What a run's store costs on disk: one offline run of a given size, stopped after --seconds (Ctrl-C, as a user
would), then the bytes of run.db by table, per evaluation and per job.

    python bench/bench_store_size.py [--seconds 90] [--problem gemm-512x512x512] [--beam 32] [--plans 8]
                                     [--patience 200] [--iterations 400] [--keep DIR]

A long run whose search has stalled (a large beam, a large --patience) makes thousands of plan and code jobs that
change nothing: proposals of nothing and kernels already evaluated. Their rows are what this measures.
"""
from __future__ import annotations

import argparse
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def measure(run_dir: Path) -> tuple[dict[str, int], dict[str, int]]:
    """(bytes by table, counts) of a finished or interrupted run's store."""
    db = sqlite3.connect(f"file:{run_dir / 'run.db'}?mode=ro", uri=True)
    try:
        sizes = dict(db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall())
        counts = {"evaluations": db.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'eval' AND ok = 1").fetchone()[0],
                  "jobs": db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0],
                  "plans that led nowhere": db.execute(
                      "SELECT COUNT(*) FROM jobs j WHERE kind = 'plan' AND NOT EXISTS "
                      "(SELECT 1 FROM candidates c WHERE c.plan_job = j.id AND EXISTS "
                      "(SELECT 1 FROM evals e WHERE e.candidate_id = c.id AND e.job_id IS NOT NULL))").fetchone()[0]}
    finally:
        db.close()
    return sizes, counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--problem", default="gemm-512x512x512")
    ap.add_argument("--beam", type=int, default=32)
    ap.add_argument("--plans", type=int, default=8)
    ap.add_argument("--patience", type=int, default=200)
    ap.add_argument("--iterations", type=int, default=400)
    ap.add_argument("--keep", type=Path, help="run directory to keep (default: a temporary one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.keep or Path(tmp) / "run"
        cmd = [sys.executable, str(ROOT / "launch.py"), "run", "--problem", args.problem, "-B", str(args.beam),
               "-N", str(args.plans), "--patience", str(args.patience), "-T", str(args.iterations), "--out",
               str(run_dir)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.monotonic()
        try:
            proc.wait(timeout=args.seconds)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            proc.wait()
        elapsed = time.monotonic() - started
        sizes, counts = measure(run_dir)
    total = sum(sizes.values())
    table = Table(title=f"run store of {args.problem}, beam {args.beam}, plans {args.plans}, patience "
                        f"{args.patience}: {elapsed:.0f} s")
    table.add_column("table")
    table.add_column("bytes", justify="right")
    table.add_column("share", justify="right")
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[:8]:
        table.add_row(name, f"{size:,}", f"{size / total:.0%}")
    table.add_row("all", f"{total:,}", "100%")
    Console().print(table)
    evals, jobs = max(counts["evaluations"], 1), max(counts["jobs"], 1)
    print(f"{counts['evaluations']} evaluations, {counts['jobs']} jobs ({counts['plans that led nowhere']} plans led to "
          f"no kernel evaluated): {total / evals:,.0f} bytes per evaluation, {total / jobs:,.0f} per job")
    return 0


if __name__ == "__main__":
    sys.exit(main())
