"""gemmini-sim benchmark: per problem, the evaluation wall time and the
cycles / utilization / % of roofline of the naive, hand-tuned and
hardware-loop kernels; then the single-core evaluation time of the largest
ResNet-50 GEMM's naive kernel (goal: <= 3 s, compile + run + check + timing).

    python bench/bench_gemmini_sim.py [--problems gemm-512x512x512,...] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core: keep numpy's BLAS single-threaded
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from hw_runners import get_target  # noqa: E402
from hw_runners.gemmini_sim import target as gemmini_target  # noqa: E402

ROLES = ("naive", "tuned", "hwloop")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", help="comma-separated problem names (default: all)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    console = Console(width=max(160, Console().width))
    tgt = get_target("gemmini-sim")
    probs = tgt.problems()
    if args.problems:
        wanted = args.problems.split(",")
        probs = [tgt.problem(n) for n in wanted]
    gemmini_target.shim_library()  # build once, outside the timings

    table = Table(title="gemmini-sim: naive / hand-tuned / hardware-loop kernels (one core)")
    table.add_column("problem")
    for role in ROLES:
        table.add_column(f"{role}: cycles  util  roofline  eval s", justify="right")
    table.add_column("naive<tuned<hwloop")
    rows = []
    for p in probs:
        row = {"problem": p.name}
        cells = [p.name]
        for role in ROLES:
            t0 = time.perf_counter()
            r = tgt.evaluate(p, p.kernel_source(role))
            wall = time.perf_counter() - t0
            row[role] = {"correct": r.correct, "cycles": r.cycles, "utilization": r.utilization,
                         "roofline_fraction": r.roofline_fraction, "eval_s": wall, "error": r.error}
            cells.append(f"{r.cycles:>11,}  {r.utilization:6.1%}  {r.roofline_fraction:6.1%}  {wall:5.2f}"
                         if r.correct else f"FAIL ({r.error_kind})  {wall:5.2f}")
        utils = [row[role]["utilization"] or 0 for role in ROLES]
        row["order_ok"] = all(row[r]["correct"] for r in ROLES) and utils[0] < utils[1] < utils[2]
        cells.append("yes" if row["order_ok"] else "NO")
        table.add_row(*cells)
        rows.append(row)
    console.print(table)

    resnet = [r for r in rows if "resnet50" in tgt.problem(r["problem"]).tags]
    if resnet:
        fr = [r["hwloop"]["roofline_fraction"] or 0 for r in resnet]
        console.print(f"ResNet-50 GEMMs: hardware loop reaches {min(fr):.1%} (min) / "
                      f"{math.prod(fr) ** (1 / len(fr)):.1%} (geomean) of roofline (goal >= 95%)")

    # Largest ResNet-50 GEMM by data volume, naive kernel, cold (inputs + reference not cached) and warm.
    big = max((p for p in tgt.problems() if "resnet50" in p.tags),
              key=lambda p: sum(a.nbytes for a in gemmini_target.FAMILIES[p.family].args(p.dims)))
    gemmini_target._inputs_and_expected.cache_clear()
    t0 = time.perf_counter()
    r = tgt.evaluate(big, big.kernel_source("naive"))
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    tgt.evaluate(big, big.kernel_source("naive"))
    warm = time.perf_counter() - t0
    console.print(f"Full evaluation of {big.name} naive ({r.cycles:,} cycles, correct={r.correct}): "
                  f"{cold:.2f} s cold, {warm:.2f} s warm on one core (goal <= 3 s)")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "largest": {"problem": big.name, "cold_s": cold,
                                                                   "warm_s": warm}}, indent=1))
    return 0 if all(r["order_ok"] or r["problem"].startswith("conv") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
