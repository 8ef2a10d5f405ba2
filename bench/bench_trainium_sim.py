"""trainium-sim per problem: evaluation wall time and the simulated latency of the starting (naive) kernel
against the hand-tuned one.

The speed goal is relative: a full evaluation (sandboxed tracing, decoding and checking every instruction,
the cost model, the value check on the public and hidden input sets) within 3x the time numpy takes to
compute the problem's reference once, measured here in the same run on the same machine ("x ref" columns).
An evaluator draws a problem's input sets and computes their references once, before its first evaluation
of that problem (TrainiumSim.prepare); that is shown apart ("prep s") and not counted in an evaluation. The
public set and its expected outputs come from the preparation cache on disk once an earlier process kept them
(prepcache.py): a second run shows the warm figure, the hidden sets' draw and references.

    python bench/bench_trainium_sim.py [--problems a,b] [--skip TAG] [--repeat N] [--isa nki2]
    python bench/bench_trainium_sim.py --calibration [--group matmul,mamba,...] [--chains AUTOCOMP_DIR]

--isa nki2 compares the NKI v2 kernels (naive_nki2, tuned_nki2) on the profile's platform (trn2) instead.
Wall time is the whole evaluation; the best of --repeat runs is shown, and the reference time is the best of
as many runs too. An evaluation over the goal is listed with the share of its time spent computing the kernel's
values (feedback["seconds"]: trace, decode, values, timing), which the kernel's own arithmetic on two input sets
bounds from below. "checked" is the share of output
elements whose values the evaluation compared (slicing.py: the last writes at every corner, on every face and
at random points, drawn after tracing; every element's coverage is checked exactly). The last line is the
fixed cost of an evaluation: the best of max(3, --repeat) evaluations of a one-tile rmsnorm's naive kernel.

--calibration prints the calibration table instead: AWS's published trn1 latencies and ratios (matmul
tutorial, fused mamba, layernorm, performance-guide micro-benchmarks, DMA guides) against the simulator,
per kernel and per optimization step, with the goal (absolute within 30%, step ratios in the right
direction and within 25%); tests/trainium_sim/calibration/harness.py holds the numbers and their sources.
Kernels run at the published shapes through a timing-only replay (no values computed); about 2 minutes.
With --chains DIR (a checkout or exported tree of ucb-bar/autocomp) the table of Autocomp's published trn1
optimization chains follows it, step by step (bench_trainium_chains.py; about 6 minutes more).
"""
from __future__ import annotations

import argparse
import sys
import time

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from autocomp_zmq.hw_runners import get_target  # noqa: E402


def calibration(groups: list[str] | None) -> int:
    from tests.trainium_sim.calibration import harness
    rows = [r for r in harness.rows() if not groups or r.group in groups]
    table = Table(title="trainium-sim calibration against published trn1 measurements "
                        "(timing-only replay: values not computed)")
    for col in ("group", "kernel / step", "published", "simulated", "unit", "error", "goal", "within goal", "source"):
        table.add_column(col, justify="right" if col in ("published", "simulated", "error", "goal") else "left")
    counted = passed = 0
    notes = []
    for r in rows:
        e = r.evaluate()
        counted += 1
        passed += bool(e["ok"])
        fmt = (lambda v: f"{v:,.3g}") if abs(e["published"]) < 100 else (lambda v: f"{v:,.0f}")
        goal = f"{e['goal']:.0%}" + (" ratio" if e["kind"] == "ratio" else "")
        ok = "yes" if e["ok"] else ("NO (known)" if e["miss"] else "NO")
        for what in ("note", "miss"):
            if e[what]:
                notes.append(f"{e['group']} / {e['name']}: {'known miss: ' if what == 'miss' else ''}{e[what]}")
        table.add_row(e["group"], e["name"], fmt(e["published"]), fmt(e["sim"]), e["unit"], f"{e['error']:+.0%}",
                      goal, ok, e["source"])
    Console(width=max(140, Console().width)).print(table)
    print(f"within goal: {passed} of {counted} rows (every row counted)")
    for n in notes:
        print("note: " + n)
    for key, src in harness.SOURCES.items():
        print(f"{key}: {src}")
    return 0


def _checked(r) -> str:
    """The share of output elements the evaluation compared, from its feedback."""
    text = (r.feedback or {}).get("value_check", "") if r else ""
    if text.startswith("every"):
        return "all"
    if "values checked on " not in text:
        return "-"
    a, b = text.split("values checked on ")[1].split(" output")[0].split(" of ")
    return f"{int(a.replace(',', '')) / int(b.replace(',', '')):.1%}"


def fixed_cost(tgt, isa: str, repeat: int) -> str:
    """What every evaluation pays whatever its kernel does: the best of `repeat` evaluations of the naive
    kernel of the smallest rmsnorm (one 128 x 128 tile: a few instructions on 16 K elements)."""
    p = tgt.parametric("rmsnorm-128x128")
    p = tgt.problem(p.name, isa) if any(q.name == p.name for q in tgt.problems()) else p
    role = "naive" if isa == "nki1" or "naive_nki2" not in p.kernels else "naive_nki2"
    tgt.evaluate(p, p.kernel_source(role))
    best = min(_timed(lambda: tgt.evaluate(p, p.kernel_source(role))) for _ in range(repeat))
    return f"fixed cost per evaluation: {best * 1000:.1f} ms (best of {repeat}: {p.name}, its {role} kernel)"


def _timed(fn) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", help="comma-separated problem names (default: all)")
    ap.add_argument("--skip", action="append", default=[], help="skip problems with this tag (repeatable)")
    ap.add_argument("--repeat", type=int, default=1, help="evaluations per kernel; the fastest wall time is shown")
    ap.add_argument("--goal", type=float, default=3.0, help="goal: evaluation time / reference time")
    ap.add_argument("--isa", default="nki1", help="ISA profile: nki1 (NKI v1 on trn1) or nki2 (NKI v2 on trn2)")
    ap.add_argument("--calibration", action="store_true",
                    help="print the calibration table against published trn1 measurements instead")
    ap.add_argument("--group", help="with --calibration: comma-separated groups (matmul, mamba, layernorm, micro, "
                                    "dma)")
    ap.add_argument("--chains", metavar="AUTOCOMP_DIR", help="with --calibration: Autocomp's published chains too")
    args = ap.parse_args()
    if args.calibration:
        status = calibration(args.group.split(",") if args.group else None)
        if args.chains:
            try:
                from . import bench_trainium_chains as chains
            except ImportError:
                import bench_trainium_chains as chains
            status = chains.main(["--autocomp", args.chains]) or status
        return status
    tgt = get_target("trainium-sim")
    names = args.problems.split(",") if args.problems else [p.name for p in tgt.problems()]
    problems = [tgt.problem(n, args.isa) for n in names]
    # the profile's starting and hand-tuned kernels: naive/tuned, or naive_nki2/tuned_nki2
    roles = dict(zip(("naive", "tuned"), ("naive", "tuned") if args.isa == "nki1" else ("naive_nki2", "tuned_nki2")))
    problems = [p for p in problems if not set(args.skip) & set(p.tags)]
    # problems with neither kernel (Autocomp's newer workloads: bench_autocomp_workloads.py runs Autocomp's own)
    # have nothing to time here
    problems = [p for p in problems if set(roles.values()) & set(p.kernels)]
    table = Table(title=f"trainium-sim ({args.isa}): starting vs hand-tuned kernels")
    for col in ("problem", "tags", "naive us", "tuned us", "speedup", "ref s", "prep s", "naive eval s",
                "tuned eval s", "naive x ref", "tuned x ref", "checked", "binding (tuned)"):
        table.add_column(col, justify="left" if col in ("problem", "tags", "binding (tuned)") else "right")
    over, failures, floor = [], 0, 0
    for p in problems:
        row, walls, results = [p.name, ",".join(p.tags)], {}, {}
        spec = tgt.spec(p).for_dialect("v2" if args.isa == "nki2" else "v1")     # the profile's definition
        inputs = spec.make_inputs([1, 0])
        ref_s = None
        for _ in range(max(1, args.repeat)):     # best of --repeat, as the evaluations: both on a warm heap
            t0 = time.monotonic()
            spec.reference(inputs)
            ref_s = min(ref_s or float("inf"), time.monotonic() - t0)
        t0 = time.monotonic()
        tgt.prepare(p)
        prep_s = time.monotonic() - t0
        for role in ("naive", "tuned"):
            if roles[role] not in p.kernels:
                results[role] = None
                continue
            best = None
            for _ in range(max(1, args.repeat)):
                t0 = time.monotonic()
                r = tgt.evaluate(p, p.kernel_source(roles[role]))
                wall = time.monotonic() - t0
                if best is None or wall < best:
                    best, stages = wall, (r.feedback or {}).get("seconds", {})
            results[role], walls[role] = r, best
            if best > args.goal * ref_s:
                values = stages.get("values", 0.0) / ref_s
                floor += values > args.goal
                over.append(f"{p.name} {role} {best / ref_s:.1f}x (values {values:.1f}x)")
        for role in ("naive", "tuned"):
            r = results[role]
            if r is None:
                row.append("-")
            elif r.correct:
                row.append(f"{r.latency:,.1f}")
            else:
                failures += 1
                row.append(f"FAILED ({r.error_kind})")
        n, t = results["naive"], results["tuned"]
        row.append(f"{n.latency / t.latency:.2f}x" if n and t and n.correct and t.correct else "-")
        row += [f"{ref_s:.3f}", f"{prep_s:.2f}"]
        row += [f"{walls[r]:.2f}" if r in walls else "-" for r in ("naive", "tuned")]
        row += [f"{walls[r] / ref_s:.1f}" if r in walls else "-" for r in ("naive", "tuned")]
        row.append(_checked(t))
        row.append(t.bound if t and t.correct else "-")
        table.add_row(*row)
    Console(width=max(120, Console().width)).print(table)   # full names in logs and pipes too
    print(f"evaluations over {args.goal:g}x the reference time: " + ("; ".join(over) if over else "none"))
    print(f"of these, over {args.goal:g}x on computing the kernel's values alone (the public and hidden input sets, "
          f"feedback['seconds']['values']): {floor}")
    print(fixed_cost(tgt, args.isa, max(3, args.repeat)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
