"""gemmini-sim benchmark.

1. Per problem: cycles and utilization of the naive, hand-tuned, hardware-loop
   and software-library (tiled_matmul_auto / tiled_conv_auto) kernels, and
   whether naive < hand-tuned < hardware loop.
2. Every timing parameter with the RTL fact it comes from.
3. Sensitivity to the two estimated parameters (CPU issue cycles per
   instruction, DMA latency): the ordering on every problem at the ends of
   their plausible ranges.
4. Full evaluation time (compile, run, replay on public and hidden sets,
   check, timing) of the largest ResNet-50 GEMM's naive kernel, cold and
   warm, on one core (goal: <= 1 s warm).

    python bench/bench_gemmini_sim.py [--problems gemm-512x512x512,...] [--no-sweep] [--json FILE]

--calibration prints the calibration table instead: the speedups over Gemmini's
software library that the Autocomp paper published (hw_runners/gemmini_sim/
published.toml, with sources) beside the simulated ones, for the kernels that
were measured: Autocomp's Exo-unoptimized and Exo-optimized GEMMs and
convolutions, read from --autocomp-src (a git mirror or a checkout of
ucb-bar/autocomp; default /work/.mirror/ucb-bar+autocomp/repo), and this
project's hardware-loop kernels. Exit status 0 when every row is within 25%.
--timing KEY=VALUE,... evaluates with other timing parameters (timing.py), e.g.
the model before calibration: library_hwloop=1,cpu_issue_cycles=6,dma_latency=64.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core: keep numpy's BLAS single-threaded
os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from autocomp_zmq.hw_runners import get_target  # noqa: E402
from autocomp_zmq.hw_runners.gemmini_sim import target as gemmini_target  # noqa: E402
from autocomp_zmq.hw_runners.gemmini_sim.timing import TimingConfig  # noqa: E402

ROLES = ("naive", "tuned", "hwloop", "library")
ORDERED = ("naive", "tuned", "hwloop")
LIBRARY = {"gemm": ROOT / "hw_runners" / "gemmini_sim" / "problems" / "gemm_library.c",
           "conv3x3": ROOT / "hw_runners" / "gemmini_sim" / "problems" / "conv_library.c"}
SWEEP = [("cpu_issue_cycles", 3), ("cpu_issue_cycles", 12), ("dma_latency", 32), ("dma_latency", 128)]
PUBLISHED = ROOT / "hw_runners" / "gemmini_sim" / "published.toml"
AUTOCOMP_MIRROR = Path("/work/.mirror/ucb-bar+autocomp/repo")
GOAL = 0.25   # every simulated ratio within 25% of the published one


def source(problem, role: str) -> str:
    return LIBRARY[problem.family].read_text() if role == "library" else problem.kernel_source(role)


def run_roles(tgt, problem, roles=ROLES) -> dict:
    row = {}
    for role in roles:
        t0 = time.perf_counter()
        r = tgt.evaluate(problem, source(problem, role))
        row[role] = {"correct": r.correct, "cycles": r.latency, "utilization": r.utilization,
                     "eval_s": time.perf_counter() - t0, "error": r.error}
    utils = [row[r]["utilization"] or 0 for r in ORDERED if r in row]
    row["order_ok"] = all(row[r]["correct"] for r in row) and all(a < b for a, b in zip(utils, utils[1:]))
    return row


def kernels_table(console, tgt, probs) -> list[dict]:
    table = Table(title="gemmini-sim: utilization (MACs / 256 per cycle) of the shipped kernels, one core")
    table.add_column("problem")
    for role in ROLES:
        table.add_column(f"{role}: cycles  util", justify="right")
    table.add_column("naive<tuned<hwloop")
    rows = []
    for p in probs:
        row = run_roles(tgt, p)
        row["problem"] = p.name
        cells = [p.name]
        for role in ROLES:
            e = row[role]
            cells.append(f"{e['cycles']:>11,}  {e['utilization']:6.1%}" if e["correct"] else f"FAIL: {e['error'][:40]}")
        cells.append("yes" if row["order_ok"] else "NO")
        table.add_row(*cells)
        rows.append(row)
    console.print(table)
    resnet = [r for r in rows if "resnet50" in tgt.problem(r["problem"]).tags]
    if resnet:
        for role in ("hwloop", "library"):
            u = [r[role]["utilization"] or 0 for r in resnet]
            console.print(f"ResNet-50 GEMMs, {role}: {min(u):.1%} (min) / {math.prod(u) ** (1 / len(u)):.1%} "
                          f"(geomean) / {max(u):.1%} (max) utilization")
    return rows


def parameters_table(console) -> None:
    table = Table(title="gemmini-sim timing parameters and where they come from", show_lines=False)
    table.add_column("parameter")
    table.add_column("value", justify="right")
    table.add_column("source")
    for name, value, text in TimingConfig.sources():
        table.add_row(name, f"{value:,}", text)
    table.add_row("array_latency (derived)", str(TimingConfig().array_latency),
                  " ".join(TimingConfig.array_latency.__doc__.split()))
    console.print(table)


def sweep_table(console, probs) -> list[dict]:
    table = Table(title="Ordering naive < tuned < hwloop with the estimated parameters at the ends of their ranges")
    table.add_column("parameter = value")
    table.add_column("problems ordered", justify="right")
    table.add_column("utilization naive / tuned / hwloop (geomean)", justify="right")
    out = []
    for name, value in SWEEP:
        tgt = get_target("gemmini-sim", timing={name: value})
        rows = [run_roles(tgt, p, ORDERED) for p in probs]
        ok = sum(r["order_ok"] for r in rows)
        geo = [math.prod(r[role]["utilization"] or 1e-9 for r in rows) ** (1 / len(rows)) for role in ORDERED]
        table.add_row(f"{name} = {value}", f"{ok} / {len(rows)}", " / ".join(f"{g:.1%}" for g in geo))
        out.append({"parameter": name, "value": value, "ordered": ok, "problems": len(rows),
                    "geomean": dict(zip(ORDERED, geo))})
    console.print(table)
    return out


def evaluation_time(console, tgt) -> dict:
    big = max((p for p in tgt.problems() if "resnet50" in p.tags),
              key=lambda p: sum(a.nbytes for a in gemmini_target.FAMILIES[p.family].args(p.dims)))
    gemmini_target._inputs_and_expected.cache_clear()
    t0 = time.perf_counter()
    r = tgt.evaluate(big, big.kernel_source("naive"))
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(3):
        t0 = time.perf_counter()
        tgt.evaluate(big, big.kernel_source("naive"))
        warm.append(time.perf_counter() - t0)
    console.print(f"Full evaluation of {big.name} naive ({r.latency:,} cycles, correct={r.correct}, "
                  f"{sum(r.feedback['instructions'].values()):,} instructions, 3 public + 1 hidden input sets): "
                  f"{cold:.2f} s cold, {min(warm):.2f} s warm (best of 3) on one core (goal <= 1 s warm)")
    return {"problem": big.name, "cold_s": cold, "warm_s": min(warm)}


def autocomp_sols(source: Path | None, tmp: Path) -> Path | None:
    """Autocomp's sols/ directory: from a checkout, or extracted with `git archive` from a (mirror) git dir."""
    source = source or AUTOCOMP_MIRROR
    if (source / "sols" / "exo").is_dir():
        return source / "sols"
    if not source.exists():
        return None
    archive = subprocess.run(["git", "--git-dir", str(source), "archive", "HEAD", "sols"], capture_output=True,
                             check=False)
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
    return tmp / "sols"


def _ratio_cell(pub: float, sim: float | None, rows: list) -> str:
    if sim is None:
        rows.append(False)
        return f"{pub:.2f} / FAIL"
    err = sim / pub - 1
    rows.append(abs(err) <= GOAL)
    return f"{pub:.2f} / {sim:.2f} ({err:+.0%})"


def calibration(console, tgt, sols: Path) -> bool:
    """The published ratios over the library beside the simulated ones; True when all are within GOAL."""
    pub = tomllib.loads(PUBLISHED.read_text())

    def cycles(problem, code: str) -> int | None:
        r = tgt.evaluate(problem, code)
        return r.latency if r.correct else None

    within: list[bool] = []
    table = Table(title="gemmini-sim calibration: speedup over Gemmini's software library, published / simulated "
                        f"(error); goal within {GOAL:.0%}. Source: {PUBLISHED.name} [sources]")
    for col in ("problem", "library cycles", "Exo unoptimized", "Exo optimized", "hardware loop",
                "Autocomp (published) / our tuned kernel"):
        table.add_column(col, justify="right")
    for row in pub["gemm"]:
        p = tgt.problem(row["problem"])
        lib = cycles(p, LIBRARY["gemm"].read_text())
        sim = {"exo_unopt": cycles(p, (sols / "exo" / f"sol{row['sol']}_exo_baseline.c").read_text()),
               "exo_opt": cycles(p, (sols / "exo" / f"sol{row['sol']}_exo_opt.c").read_text()),
               "hwloop": cycles(p, p.kernel_source("hwloop")), "tuned": cycles(p, p.kernel_source("tuned"))}
        ratio = {k: lib / v if lib and v else None for k, v in sim.items()}
        table.add_row(p.name, f"{lib:,}" if lib else "FAIL",
                      *(_ratio_cell(row[k], ratio[k], within) for k in ("exo_unopt", "exo_opt", "hwloop")),
                      f"{row['autocomp']:.2f} / {ratio['tuned'] or 0:.2f}")
    conv = pub["conv"]
    opt = []
    for name, sol in zip(conv["problems"], conv["sols"]):
        p = tgt.problem(name)
        lib = cycles(p, LIBRARY["conv3x3"].read_text())
        o = cycles(p, (sols / "exo-conv" / f"sol{sol}_exo_opt.c").read_text())
        opt.append(lib / o if lib and o else None)
        table.add_row(p.name, f"{lib:,}" if lib else "FAIL", "", f"(sim {opt[-1]:.2f})" if opt[-1] else "FAIL", "", "")
    geo = math.prod(opt) ** (1 / len(opt)) if all(opt) else None
    table.add_row("convolutions, geomean", "", "", _ratio_cell(conv["exo_opt"], geo, within), "",
                  f"{conv['autocomp']:.2f} / -")
    console.print(table)
    console.print(f"{sum(within)} of {len(within)} published ratios reproduced within {GOAL:.0%}")
    return all(within)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", help="comma-separated problem names (default: all)")
    ap.add_argument("--no-sweep", action="store_true", help="skip the sensitivity sweep")
    ap.add_argument("--json", type=Path, help="also write the results as JSON")
    ap.add_argument("--calibration", action="store_true", help="print the calibration table against the "
                                                                "published ratios instead")
    ap.add_argument("--autocomp-src", type=Path, help=f"Autocomp's git mirror or checkout (default {AUTOCOMP_MIRROR})")
    ap.add_argument("--timing", default="", help="timing parameters KEY=VALUE,... (timing.py)")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    console = Console(width=max(170, Console().width))
    timing = {k: int(v) for k, v in (kv.split("=") for kv in args.timing.split(",") if kv)}
    tgt = get_target("gemmini-sim", **({"timing": timing} if timing else {}))
    if args.calibration:
        with tempfile.TemporaryDirectory() as tmp:
            sols = autocomp_sols(args.autocomp_src, Path(tmp))
            if sols is None:
                console.print(f"no Autocomp source: give --autocomp-src (a git mirror or a checkout of "
                              f"ucb-bar/autocomp); {args.autocomp_src or AUTOCOMP_MIRROR} is not one")
                return 2
            return 0 if calibration(console, tgt, sols) else 1
    probs = [tgt.problem(n) for n in args.problems.split(",")] if args.problems else tgt.problems()
    gemmini_target.shim_library()  # build once, outside the timings
    gemmini_target.replayer()

    rows = kernels_table(console, tgt, probs)
    parameters_table(console)
    sweep = [] if args.no_sweep else sweep_table(console, probs)
    timing = evaluation_time(console, tgt)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "sweep": sweep, "largest": timing}, indent=1))
    ordered = all(r["order_ok"] for r in rows) and all(s["ordered"] == s["problems"] for s in sweep)
    return 0 if ordered else 1


if __name__ == "__main__":
    sys.exit(main())
