"""What a short LLM run costs before its first model call and in all: `run -T 1 -B 1 -N 1 -K 1` with an
OpenAI-compatible model served by a local provider (tests/llm/fake_servers.py, answering at once), repeated;
per run the seconds from launch to the provider's first request, the wall time to exit, and the CPU seconds
of the run and every process it started (RUSAGE_CHILDREN: the coordinator, its agents and evaluators).

    python bench/bench_llm_startup.py [--runs 3] [--problem gemm-256x256x256]
"""
from __future__ import annotations

import argparse
import resource
import statistics
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

from tests.llm.fake_servers import FakeLLM  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def one_run(problem: str) -> dict:
    fake = FakeLLM()
    first: list[float] = []
    script = fake.script

    def timed(prompt, n):
        if not first:
            first.append(time.monotonic())
        return script(prompt, n)

    fake.script = timed
    try:
        with tempfile.TemporaryDirectory() as tmp:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, str(ROOT / "launch.py"), "run", "--problem", problem, "-T", "1", "-B", "1", "-N",
                 "1", "-K", "1", "--model", f"openai-compat@{fake.url}/v1:m", "--no-live", "--out", f"{tmp}/run"],
                capture_output=True, text=True, cwd=ROOT)
            wall = time.monotonic() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        fake.close()
    if done.returncode != 0:
        raise SystemExit(f"the run failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"first": first[0] - started if first else float("nan"), "wall": wall, "cpu": cpu}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--problem", default="gemm-256x256x256")
    args = ap.parse_args()
    runs = [one_run(args.problem) for _ in range(args.runs)]
    t = Table(title=f"A short LLM run (T=1 B=1 N=1 K=1, {args.problem}) against a local provider, {args.runs} runs")
    for col in ("", "launch to first request s", "wall s", "CPU s (all processes)"):
        t.add_column(col, justify="right")
    for name, pick in (("median", statistics.median), ("min", min), ("max", max)):
        t.add_row(name, *(f"{pick(r[k] for r in runs):.2f}" for k in ("first", "wall", "cpu")))
    Console(width=120).print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
