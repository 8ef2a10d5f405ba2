"""cuda target per problem, on this host's GPU: the naive and hand-tuned kernels' latency (median of CUDA-graph
replays, L2 flushed), the PyTorch reference's, % of the GPU's peak FLOP/s or DRAM bandwidth (whichever bounds the
problem), and the evaluation's wall time; with the GPU model, driver, PyTorch and Triton versions.

    python bench/bench_cuda.py [--problems a,b] [--iters N] [--markdown docs/cuda-bench.md]

--markdown also writes the table as a Markdown file (what docs/ keeps of a run on real hardware). Without a GPU it
prints one line saying so and exits 2; `--device cpu` runs the CPU functional check instead (correctness only: its
times are not GPU times, and the full-size problems are slow under Triton's interpreter).
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from autocomp_zmq.hw_runners import get_target  # noqa: E402
from autocomp_zmq.hw_runners.cuda import environment  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", help="comma-separated problem names (default: all)")
    ap.add_argument("--iters", type=int, default=50, help="timed runs per kernel (after 10 warm-up runs)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--markdown", type=Path, help="also write the table to this Markdown file")
    args = ap.parse_args()
    target = get_target("cuda", device=args.device, iters=args.iters)
    missing = target.unmet_requirements()
    if missing:
        print("error: the cuda target cannot run here: " + "; ".join(missing))
        return 2
    facts = environment.probe(target._python())
    names = args.problems.split(",") if args.problems else [p.name for p in target.problems()]
    cols = ("problem", "naive us", "tuned us", "speedup", "PyTorch us", "tuned vs PyTorch", "% peak (bound)",
            "naive eval s", "tuned eval s")
    table = Table(title="cuda: naive vs hand-tuned kernels")
    for col in cols:
        table.add_column(col, justify="left" if col == "problem" else "right")
    rows, device = [], "CPU functional check"
    for name in names:
        problem = target.problem(name)
        res, walls = {}, {}
        for role in ("naive", "tuned"):
            started = time.monotonic()
            res[role] = target.evaluate(problem, problem.kernel_source(role))
            walls[role] = time.monotonic() - started
        n, t = res["naive"], res["tuned"]
        cell = lambda r: f"{r.latency:,.1f}" if r.correct else f"FAILED ({r.error_kind})"  # noqa: E731
        m = t.feedback if t.correct else (n.feedback if n.correct else {})
        device = (m.get("gpu") or {}).get("name", device) if m else device
        peak = "-"
        if t.correct and "flops_fraction" in t.feedback:
            frac = t.feedback["flops_fraction"] if t.feedback["bound"] == "compute" else t.feedback["bandwidth_fraction"]
            peak = f"{frac:.0%} ({t.feedback['bound']})"
        ref = m.get("reference_us") if m else None
        row = [name, cell(n), cell(t), f"{n.latency / t.latency:.2f}x" if n.correct and t.correct else "-",
               f"{ref:,.1f}" if ref else "-", f"{ref / t.latency:.2f}x" if ref and t.correct else "-", peak,
               f"{walls['naive']:.1f}", f"{walls['tuned']:.1f}"]
        rows.append(row)
        table.add_row(*row)
        for role in ("naive", "tuned"):
            if not res[role].correct:
                print(f"{name} {role}: {res[role].error_kind}: {res[role].error.splitlines()[0][:300]}")
    header = (f"device: {device}; driver {(m.get('gpu') or {}).get('driver', '-') if rows else '-'}; torch "
              f"{facts.get('torch')} (CUDA {facts.get('torch_cuda')}); triton {facts.get('triton')}; "
              f"python {platform.python_version()}")
    Console(width=max(140, Console().width)).print(table)
    print(header)
    if args.markdown:
        lines = [f"# cuda target: naive vs hand-tuned kernels\n", header + "\n", "| " + " | ".join(cols) + " |",
                 "|" + "---|" * len(cols)] + ["| " + " | ".join(r) + " |" for r in rows]
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
