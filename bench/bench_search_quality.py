"""Search quality of the offline heuristic agents on the ResNet-50 GEMMs of
gemmini-sim: best utilization and % of roofline after a budget of evaluated
candidates (default 100), against the naive starting kernel and the
hand-tuned reference. Goals: geomean >= 90% of roofline, >= 1.3x over the
hand-tuned kernels.

    python bench/bench_search_quality.py [--evals 100] [--problems a,b] [--evaluators N]
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from agents import logsetup  # noqa: E402
from agents.run import RunConfig, execute  # noqa: E402
from hw_runners import get_target  # noqa: E402


def geomean(xs: list[float]) -> float:
    return math.prod(xs) ** (1 / len(xs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evals", type=int, default=100, help="evaluation budget per problem")
    ap.add_argument("--problems", help="comma-separated problem names (default: the ResNet-50 GEMMs)")
    ap.add_argument("--evaluators", type=int, default=None, help="local evaluators (default: one per core)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logsetup.configure("WARNING")
    tgt = get_target("gemmini-sim")
    names = args.problems.split(",") if args.problems else [p.name for p in tgt.problems() if "resnet50" in p.tags]
    console = Console(width=max(140, Console().width))
    table = Table(title=f"Offline heuristic search on gemmini-sim, budget {args.evals} evaluations")
    for col in ("problem", "naive util", "hand-tuned util", "search util", "search % roofline",
                "vs naive", "vs hand-tuned", "evals", "wall s"):
        table.add_column(col, justify="right" if col != "problem" else "left")
    roofs, over_tuned = [], []
    for name in names:
        p = tgt.problem(name)
        naive = tgt.evaluate(p, p.kernel_source("naive"))
        tuned = tgt.evaluate(p, p.kernel_source("tuned"))
        cfg = RunConfig(problem=name, iterations=1000, beam=4, plans=4, codes=2, dropout=0.3, seed=args.seed,
                        patience=1000, max_evals=args.evals, evaluators=args.evaluators)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            s = execute(cfg, out=Path(tmp) / "run", live=False, progress=False)
            wall = time.perf_counter() - t0
        util = naive.utilization * s["speedup"]
        roofs.append(s["best_roofline"])
        over_tuned.append(tuned.latency / s["best_latency"])
        table.add_row(name, f"{naive.utilization:.1%}", f"{tuned.utilization:.1%}", f"{util:.1%}",
                      f"{s['best_roofline']:.1%}", f"{s['speedup']:.2f}x", f"{over_tuned[-1]:.2f}x",
                      str(s["evaluations"]), f"{wall:.1f}")
    table.add_row("geomean", "", "", "", f"{geomean(roofs):.1%}", "", f"{geomean(over_tuned):.2f}x", "", "")
    console.print(table)
    console.print(f"Goals: geomean >= 90% of roofline (got {geomean(roofs):.1%}), >= 1.3x over hand-tuned "
                  f"(got {geomean(over_tuned):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
