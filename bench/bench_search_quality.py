"""Search quality of the offline heuristic agents on gemmini-sim.

Default (--isa full): the ResNet-50 GEMMs from the naive kernel; best utilization and % of roofline after a
budget of evaluated candidates (default 100), against the naive and hand-tuned kernels.

--isa fine (the paper's rules: no loop FSMs or library calls): the six ResNet-50 GEMMs and the four convs
from the compiler-style baseline kernel; best cycles, % of the hardware loop (its cycles / the best's),
speedup over the start and over the hand-tuned kernel. Goals: geomean >= 90% of the hardware loop on the
GEMMs, >= 1.3x over hand-tuned.

--reuse (schedule reuse, under --isa fine): for each pair of similar workloads, a search of the first
records its trace; the second is then searched with and without --reuse of that run; the best speedup over
the start within 25, 50 and 100 evaluations (the first N evaluations a run emits are exactly those of a run
with --max-evals N), and the mean improvement from reuse (the paper: +24% at 100).

    python bench/bench_search_quality.py [--isa fine] [--evals 100] [--problems a,b] [--evaluators N]
    python bench/bench_search_quality.py --reuse [--pairs SRC:DST,...]

--target trainium-sim: the paper problems of trainium-sim (or --problems) from the naive kernel; best latency
within 25/50/100 evaluations against the naive and hand-tuned kernels (bench/trainium_quality.py).

    python bench/bench_search_quality.py --target trainium-sim [--problems gemm-1024x1024x1024,conv1d]
"""
from __future__ import annotations

import argparse
import math
import sqlite3
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

from autocomp_zmq.agents.run import logsetup  # noqa: E402
from autocomp_zmq.agents.run.execute import RunConfig, execute  # noqa: E402
from autocomp_zmq.hw_runners import get_target  # noqa: E402


def geomean(xs: list[float]) -> float:
    return math.prod(xs) ** (1 / len(xs)) if xs else float("nan")


PAIRS = ("gemm-1024x1024x1024:gemm-512x512x512,gemm-12544x256x64:gemm-12544x128x64,"
         "gemm-128x1024x1024:gemm-64x1024x1024,gemm-32x2048x2048:gemm-32x1024x1024,"
         "gemm-12544x256x128:gemm-12544x256x64")
BUDGETS = (25, 50, 100)


def search(name: str, args, out: Path | None = None, **options) -> tuple[dict, float]:
    """One offline search of `name` at the budget of args (in `out`, else a temporary directory, gone when
    this returns); its summary and wall time."""
    cfg = RunConfig.of(problem=name, iterations=1000, beam=4, plans=4, codes=2, dropout=0.7, seed=args.seed,
                    patience=1000, max_evals=args.evals, evaluators=args.evaluators, **options)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        s = execute(cfg, out=out or Path(tmp) / "run", live=False, progress=False)
        return s, time.perf_counter() - t0


def best_within(run_dir: Path, budgets: tuple[int, ...]) -> list[float]:
    """The best latency among the first N evaluations the run emitted, for each N."""
    db = sqlite3.connect(run_dir / "run.db")
    rows = db.execute("SELECT json_extract(result, '$.correct'), json_extract(result, '$.latency') FROM jobs "
                      "WHERE kind = 'eval' ORDER BY rowid").fetchall()
    db.close()
    return [min((lat for ok, lat in rows[:n] if ok and lat), default=float("nan")) for n in budgets]


def reuse_pairs(args, tgt, console: Console) -> None:
    table = Table(title="Schedule reuse on gemmini-sim --isa fine: best speedup over the compiler-style start")
    for col in ("source -> target", "source best", *(f"{b} evals: plain / reuse" for b in BUDGETS),
                "wall s"):
        table.add_column(col, justify="right" if col != "source -> target" else "left")
    gains: list[list[float]] = [[] for _ in BUDGETS]
    with tempfile.TemporaryDirectory() as tmp:
        for pair in args.pairs.split(","):
            src, dst = pair.split(":")
            t0 = time.perf_counter()
            s, _ = search(src, args, out=Path(tmp) / f"src-{src}", isa="fine")
            plain, _ = search(dst, args, out=Path(tmp) / f"plain-{dst}", isa="fine")
            reused, _ = search(dst, args, out=Path(tmp) / f"reuse-{src}-{dst}", isa="fine",
                               reuse=str(Path(tmp) / f"src-{src}"))
            start = plain["baseline_latency"]
            cells = []
            for i, (p, r) in enumerate(zip(best_within(Path(plain["run_dir"]), BUDGETS),
                                           best_within(Path(reused["run_dir"]), BUDGETS))):
                gains[i].append(p / r - 1)
                cells.append(f"{start / p:.2f}x / {start / r:.2f}x ({p / r - 1:+.0%})")
            table.add_row(f"{src} -> {dst}", f"{s['speedup']:.2f}x", *cells, f"{time.perf_counter() - t0:.0f}")
    table.add_row("mean improvement", "", *(f"{sum(g) / len(g):+.1%}" for g in gains), "")
    console.print(table)
    console.print("Improvement = plain best latency / reuse best latency - 1 at the same budget "
                  "(the paper: +24% on average at 100 samples).")


def full_profile(args, tgt, console: Console) -> None:
    names = args.problems.split(",") if args.problems else [p.name for p in tgt.problems() if "resnet50" in p.tags]
    table = Table(title=f"Offline heuristic search on gemmini-sim, budget {args.evals} evaluations")
    for col in ("problem", "naive util", "hand-tuned util", "search util", "search % roofline",
                "vs naive", "vs hand-tuned", "evals", "wall s"):
        table.add_column(col, justify="right" if col != "problem" else "left")
    roofs, over_tuned = [], []
    for name in names:
        p = tgt.problem(name)
        naive = tgt.evaluate(p, p.kernel_source("naive"))
        tuned = tgt.evaluate(p, p.kernel_source("tuned"))
        s, wall = search(name, args)
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


def fine_profile(args, tgt, console: Console) -> None:
    if args.problems:
        names = args.problems.split(",")
    else:
        names = [p.name for p in tgt.problems() if "resnet50" in p.tags or p.family == "conv3x3"]
    table = Table(title=f"Offline heuristic search on gemmini-sim --isa fine from the compiler-style kernel, "
                        f"budget {args.evals} evaluations")
    for col in ("problem", "start cycles", "hand-tuned", "hw loop", "best cycles", "% of hw loop", "vs start",
                "vs hand-tuned", "tuned % of hw loop", "evals", "wall s"):
        table.add_column(col, justify="right" if col != "problem" else "left")
    by_family: dict[str, list[tuple[float, float, float, float]]] = {}
    for name in names:
        p = tgt.problem(name, "fine")
        tuned = tgt.evaluate(p, p.kernel_source("tuned")).latency
        hw = tgt.bound_cycles(p, "hwloop")
        s, wall = search(name, args, isa="fine")
        best = s["best_latency"]
        row = (hw / best, s["speedup"], tuned / best, hw / tuned)
        by_family.setdefault(p.family, []).append(row)
        table.add_row(name, f"{s['baseline_latency']:,.0f}", f"{tuned:,.0f}", f"{hw:,}", f"{best:,.0f}",
                      f"{row[0]:.1%}", f"{row[1]:.2f}x", f"{row[2]:.2f}x", f"{row[3]:.1%}", str(s["evaluations"]),
                      f"{wall:.0f}")
    for family, rows in by_family.items():
        cols = [geomean([r[i] for r in rows]) for i in range(4)]
        table.add_row(f"geomean ({family})", "", "", "", "", f"{cols[0]:.1%}", f"{cols[1]:.2f}x", f"{cols[2]:.2f}x",
                      f"{cols[3]:.1%}", "", "")
    console.print(table)
    gemms = by_family.get("gemm", [])
    if gemms:
        console.print(f"Goals on the GEMMs: geomean >= 90% of the hardware loop (got "
                      f"{geomean([r[0] for r in gemms]):.1%}), >= 1.3x over hand-tuned (got "
                      f"{geomean([r[2] for r in gemms]):.2f}x; the most any kernel could get is "
                      f"{1 / geomean([r[3] for r in gemms]):.2f}x, the hardware loop's speed)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=("gemmini-sim", "trainium-sim"), default="gemmini-sim",
                    help="target whose problems are searched (trainium-sim: its paper problems)")
    ap.add_argument("--isa", choices=("full", "fine"), default="full", help="ISA profile of the searches")
    ap.add_argument("--evals", type=int, default=100, help="evaluation budget per problem")
    ap.add_argument("--problems", help="comma-separated problem names (default: see above)")
    ap.add_argument("--evaluators", type=int, default=None, help="local evaluators (default: one per core)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reuse", action="store_true", help="measure schedule reuse on pairs of similar workloads")
    ap.add_argument("--pairs", default=PAIRS, help="SOURCE:TARGET problem pairs for --reuse, comma-separated")
    args = ap.parse_args()
    logsetup.configure("WARNING")
    console = Console(width=max(160, Console().width))
    tgt = get_target(args.target)
    if args.target == "trainium-sim":
        from bench.trainium_quality import trainium_profile

        def kept_search(name, args, **options):      # the run directory must outlive search() for best_within
            return search(name, args, out=Path(keep) / name, **options)
        with tempfile.TemporaryDirectory() as keep:
            trainium_profile(args, tgt, console, kept_search, best_within)
        return 0
    if args.reuse:
        args.evals = max(args.evals, max(BUDGETS))
        reuse_pairs(args, tgt, console)
    else:
        (fine_profile if args.isa == "fine" else full_profile)(args, tgt, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
