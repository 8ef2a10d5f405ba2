"""bench_search_quality.py --target trainium-sim: the offline heuristic on trainium-sim's paper problems.

For each problem (default: those tagged "paper"; any name the target knows, parametric ones included, with
--problems): the naive and hand-tuned kernels' latencies, then one offline search from the naive kernel and
the best latency among its first 25, 50 and 100 evaluations (the first N evaluations a run emits are exactly
those of a run with --max-evals N), its speedup over naive against the hand-tuned kernel's, and whether it
reached the hand-tuned latency. A problem whose family the heuristic does not cover is listed as such
(no search is run); one whose search fails shows the error.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from autocomp_zmq.agents.workers.heuristic import unsupported  # noqa: E402
from autocomp_zmq.agents.run.problemsource import wire  # noqa: E402
from autocomp_zmq.agents.run.execute import RunError  # noqa: E402

BUDGETS = (25, 50, 100)


def _shape(p) -> str:
    dims = ", ".join(f"{k}={v}" for k, v in sorted((p.dims or {}).items()))
    return f"{p.name} ({dims})" if dims else p.name


def _latency(tgt, p, role: str) -> float | None:
    if role not in p.kernels:
        return None
    r = tgt.evaluate(p, p.kernel_source(role))
    return r.latency if r.correct else None


def _us(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.1f}"


def trainium_profile(args, tgt, console: Console, search, best_within) -> int:
    """The table; `search` and `best_within` are bench_search_quality's (one offline run, best of its first N).
    Returns the number of covered problems that did not reach the hand-tuned latency."""
    if args.problems:
        names = args.problems.split(",")
    else:
        names = sorted(p.name for p in tgt.problems() if "paper" in p.tags)
    budgets = tuple(b for b in BUDGETS if b < args.evals) + (args.evals,)
    table = Table(title=f"Offline heuristic search on trainium-sim from the naive kernel, budget {args.evals} "
                        f"evaluations (latencies in us)")
    for col in ("problem (dims)", "naive", "hand-tuned", *(f"best @{b}" for b in budgets), "best vs naive",
                "tuned vs naive", "reached tuned", "evals", "wall s"):
        table.add_column(col, justify="left" if col.startswith("problem") else "right")
    short = 0
    for name in names:
        t0 = time.perf_counter()
        p = tgt.problem(name)
        why = unsupported(wire(p, "us", None))
        if why:
            table.add_row(_shape(p), "", "", *([""] * len(budgets)), "", "", "no offline family", "", "")
            console.print(f"[dim]{name}: {why}[/dim]")
            continue
        naive, tuned = _latency(tgt, p, "naive"), _latency(tgt, p, "tuned")
        try:
            s, _ = search(name, args, target="trainium-sim")
        except RunError as exc:
            table.add_row(_shape(p), _us(naive), _us(tuned), *([""] * len(budgets)), "", "",
                          f"search failed: {exc}"[:60], "", f"{time.perf_counter() - t0:.0f}")
            short += 1
            continue
        start = s["baseline_latency"]
        # the start itself counts: a budget whose evaluations all lost to it keeps the naive latency
        bests = [min(start, b) if not math.isnan(b) else start for b in best_within(Path(s["run_dir"]), budgets)]
        reached = tuned is not None and bests[-1] <= tuned
        short += not reached
        table.add_row(_shape(p), _us(naive), _us(tuned), *(_us(b) for b in bests), f"{start / bests[-1]:.2f}x",
                      f"{start / tuned:.2f}x" if tuned else "-",
                      "[green]yes[/green]" if reached else ("[red]no[/red]" if tuned else "no tuned kernel"),
                      str(s["evaluations"]), f"{time.perf_counter() - t0:.0f}")
        console.print(f"[dim]{name}: done in {time.perf_counter() - t0:.0f} s[/dim]")
    console.print(table)
    console.print("best @N: the best correct latency among the search's first N evaluations (the naive start if "
                  "none beat it); reached tuned: best @" f"{args.evals} <= the hand-tuned kernel's latency.")
    return short
