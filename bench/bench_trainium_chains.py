"""Autocomp's published optimization chains replayed step by step on trainium-sim, against what each step
measured on a trn1.2xlarge.

    python bench/bench_trainium_chains.py --autocomp DIR [--only SUBSTR] [--quick] [--dma-figures aws]

DIR is a checkout or exported tree of github.com/ucb-bar/autocomp (this script holds none of its code). Each of
its traces examples/trn-{tutorial,advanced}/N_*_trace.py is the chain of kernels one search kept, from the
starting kernel to the best, each with the latency the authors measured on hardware (the `Latency: X ms (P99)`
of neuron-profile, or the candidate's `score`, in ms). Every step's kernel is pasted into the problem's harness as
Autocomp pastes candidates (bench_published_nki.py, `--assembly substitute`) and evaluated on trainium-sim at the
harness's shapes (--quick: gemm at a smaller size, marked), with the DMA figures these measurements imply
(--dma-figures, default autocomp: params_dma_autocomp.toml; aws: the simulator's default). The table gives, per step, the published and the
simulated latency and each step's ratio to the one before (published, simulated, and whether the simulated ratio
is within 25% of the published one, the goal, with the same direction); per chain, the end-to-end speedup both
ways and how far the steps' simulated latencies are from their measurements (the geometric mean of the factor,
1.00x = every step exact). A step the simulator refuses or judges wrong is shown with its error and counted as missed. A few published
steps' texts are damaged (DAMAGED: cut-off names and lines that fail in Python too, so they are not the kernels
that were measured): they are shown, not counted, and the next step is compared with the last one that runs.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import math
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_published_nki import AUTOCOMP, Case, TracingSim, run_case  # noqa: E402
from autocomp_zmq.hw_runners.trainium_sim.platforms import DMA_FIGURES  # noqa: E402

QUOTES = "'" * 3
GOAL = 0.25      # a step's (and a chain's) simulated ratio within 25% of the published one


@dataclass(frozen=True)
class Chain:
    name: str
    trace: str           # relative to the Autocomp tree
    case: str            # the bench_published_nki case whose harness, problem and arguments its steps share


CHAINS = [
    Chain("gemm", "examples/trn-tutorial/2_gemm_trace.py", "ac-opt/2_gemm"),
    Chain("mamba", "examples/trn-tutorial/3_mamba_trace.py", "ac-opt/3_mamba"),
    Chain("attention", "examples/trn-tutorial/4_attention_trace.py", "ac-opt/4_attention"),
    Chain("sd-attention", "examples/trn-tutorial/5_sd_attention_trace.py", "ac-opt/5_sd_attention"),
    Chain("conv1d", "examples/trn-advanced/4_conv1d_trace.py", "ac-opt/4_conv1d"),
]


# Steps whose published text cannot be the kernel that was measured (a name it never defines, a line cut off): not
# counted; the next step's ratios are taken from the last step that runs. Found by reading each failing step.
DAMAGED = {
    ("mamba", 1): "its text uses `i_chann`, a name cut off mid-word that it never defines (NameError in Python too)",
    ("mamba", 4): "its text uses `nchunks`, which it never defines (NameError in Python too)",
    ("mamba", 5): "its text mixes indentation levels (IndentationError in Python too)",
    ("mamba", 7): "its `if tail > 0:` line is cut into the comment before it, so the tail chunk runs empty",
}


# What the misses are, with the evidence found (printed under the table). A miss stays counted.
KNOWN = {
    "gemm": "its starting kernel is AWS's matmul tutorial kernel `tiled` at the tutorial's shapes, which AWS "
            "published at 51.80 ms (the calibration table's row; simulated 52.4 ms with AWS's DMA figures) and "
            "Autocomp measured at 20.99 ms: the same source 2.47x faster, at AWS's `block_free` latency (22.07 ms), "
            "and its step 1 (two N tiles per LHS load, by hand, fewer bytes) measured slower (28.68 ms): a compiler "
            "that rewrote step 0's loops, which the simulator (following the source as written) does not model, so "
            "steps 0-2's ratios and the end-to-end ratio compare two compilers (step 0 with its lhsT loads hoisted "
            "out of the n loop by hand simulates at 22.5 ms, as written 25.2: a compiler that hoists them fits; "
            "step 1, measured slower still, it does not explain). Steps 2-5 run with the DMA figures "
            "these measurements imply (dma_figures=autocomp, params_dma_autocomp.toml) and are each within 12% of "
            "their measurement.",
    "conv1d": "steps 3 -> 5 measured below the ISA's per-instruction minimum (step 4: three [128, <=3] Vector "
              "instructions per output in 96 cycles; step 5: two in 85), which no published cost formula gives "
              "(max(MIN_II = 64, N)); the simulator charges the minimum.",
    "sd-attention": "step 3 adds an fp32 -> bf16 copy of every exp result and measured 2.4% faster than step 2 (0.434 "
                    "-> 0.424 ms); the simulator merges the copy into the exp (rewrites.merged_copies, fitted to this "
                    "step) and finds the two within 0.3%, short of the 2% that counts as a direction. What else made "
                    "step 3 faster on the device (its other changes: a Vector transpose of the [128, 64] divisor, "
                    "renamed copies) is not known.",
    "attention": "step 8 is judged against the exact result with its harness's inputs and np.allclose(atol=1e-2): "
                 "1,573 of 524,288 elements miss, by up to 0.030 (against the reference kernel's own simulated "
                 "result, the harness's comparison, 1,368). The error is the algorithm's: it caches QK in bf16 before "
                 "the exp (|QK| up to ~21, rounded by up to 0.06), and numpy with that one rounding puts 162 of the "
                 "first 512 rows' 65,536 elements over 1e-2 (up to 0.018); the device run, which passed, cannot have "
                 "rounded QK as NKI documents tensor_copy(dtype=bfloat16), and how it did differ is not known. "
                 "Step 7 issues the same instructions as step 6 (renamed variables, comments, a branch for fp32 v "
                 "that bf16 v skips; the same engines, counts and busy time per line) yet measured 1.18x faster: the "
                 "hardware's run-to-run spread or the compiler's, which no model of the kernel can give.",
}


def steps_of(trace: str) -> list[tuple[str, float]]:
    """(kernel code, published ms) of each step, from the starting kernel to the best. A trace is the repr of
    the best candidate, whose parent chain nests inside it, so the starting kernel's text comes first."""
    codes = list(re.finditer(r"code='''(.*?)'''", trace, re.S))
    out = []
    for i, m in enumerate(codes):
        rest = trace[m.end():codes[i + 1].start() if i + 1 < len(codes) else len(trace)]
        measured = re.search(r"Latency: ([\d.]+) ms|score=([\d.]+)", rest)
        if measured is None:
            raise ValueError(f"step {i} has no measured latency")
        # the text is a Python string literal in the trace's source (escapes such as \' inside): read it as one
        out.append((ast.literal_eval(QUOTES + m.group(1) + QUOTES), float(measured.group(1) or measured.group(2))))
    return out


def within(sim: float, pub: float) -> bool:
    """Same direction (or both flat within 2%) and the simulated ratio within GOAL of the published one."""
    same = (sim > 1.02) == (pub > 1.02) and (sim < 0.98) == (pub < 0.98)
    return same and abs(sim / pub - 1) <= GOAL


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--autocomp", type=Path, required=True, help="a checkout or exported tree of ucb-bar/autocomp")
    ap.add_argument("--only", action="append", default=[], help="the chains whose name contains this")
    ap.add_argument("--quick", action="store_true", help="gemm at a smaller size than its harness's (marked)")
    ap.add_argument("--dma-figures", default="autocomp", choices=sorted(DMA_FIGURES),
                    help="whose trn1 DMA measurements the simulator follows (default: autocomp, the ones these chains "
                         "were measured with; aws: AWS's DMA guide and tutorials, the simulator's default)")
    args = ap.parse_args(argv)
    cases = {c.name: c for c in AUTOCOMP}
    sim = TracingSim(hidden_sets=1, time_s=900.0, dma_figures=args.dma_figures)
    print(f"DMA figures: {args.dma_figures} (hw_runners/trainium_sim/platforms.py DMA_FIGURES)", file=sys.stderr)
    table = Table(title="Autocomp's published trn1 chains on trainium-sim (ratio = previous step / this step)")
    for col in ("chain", "step", "published ms", "sim us", "published ratio", "sim ratio", "within 25%", "error"):
        table.add_column(col, justify="left" if col in ("chain", "error") else "right",
                         overflow="fold" if col == "error" else "ellipsis")
    met = counted = 0
    summary = []
    scratch = tempfile.mkdtemp(prefix="chains-")
    for chain in CHAINS:
        if args.only and not any(s in chain.name for s in args.only):
            continue
        steps = steps_of((args.autocomp / chain.trace).read_text())
        base = cases[chain.case]
        sims: list[float | None] = []
        last = None                     # the last step counted: what the next step's ratios are taken from
        for n, (code, published) in enumerate(steps):
            path = Path(scratch) / f"{chain.name}_{n}.py"        # run_case reads the kernel from a file
            path.write_text(code)
            case: Case = dataclasses.replace(base, name=f"{chain.name}/{n}", kernel=str(path))  # absolute: kept
            row = run_case(sim, case, args.autocomp, "substitute", args.quick)
            damaged = DAMAGED.get((chain.name, n))
            sims.append(None if damaged else row.latency)
            pub_ratio = steps[last][1] / published if last is not None and not damaged else None
            sim_ratio = sims[last] / row.latency if pub_ratio and row.latency and sims[last] else None
            ok = within(sim_ratio, pub_ratio) if pub_ratio and sim_ratio else None
            if pub_ratio is not None:
                counted += 1
                met += bool(ok)
            if damaged:
                row.error = f"published text damaged, not counted: {damaged}"
            elif row.latency or last is None:
                last = n
            table.add_row(chain.name if n == 0 else "", f"{n}" + (" (reduced)" if row.shapes == "reduced" else ""),
                          f"{published:,.3f}", f"{row.latency:,.1f}" if row.latency else "-",
                          f"{pub_ratio:.2f}x" if pub_ratio else "", f"{sim_ratio:.2f}x" if sim_ratio else "",
                          "" if pub_ratio is None else ("yes" if ok else "[red]no[/red]"), row.error[:160])
            print(f"{chain.name} step {n}: published {published} ms, sim {row.latency} us {row.error[:120]}",
                  file=sys.stderr, flush=True)
        end = max((i for i in range(len(steps)) if (chain.name, i) not in DAMAGED), default=0)  # the last usable
        pub_total = steps[0][1] / steps[end][1]
        sim_total = sims[0] / sims[end] if sims[0] and sims[end] else None
        # how far each step's simulated latency is from its measurement: the geometric mean of the factor
        agree = [abs(math.log(sim / 1000 / pub)) for sim, (_, pub) in zip(sims, steps) if sim]
        factor = math.exp(sum(agree) / len(agree)) if agree else None
        summary.append((chain.name + (f" (to step {end})" if end < len(steps) - 1 else ""), pub_total, sim_total,
                        factor))
        table.add_section()
    Console(width=max(160, Console().width)).print(table)
    ends = Table(title="end to end (starting kernel / best)")
    for col in ("chain", "published", "simulated", "within 25%", "steps' latency off by (geomean)"):
        ends.add_column(col, justify="left" if col == "chain" else "right")
    for name, pub, sim_total, factor in summary:
        ends.add_row(name, f"{pub:.2f}x", f"{sim_total:.2f}x" if sim_total else "-",
                     ("yes" if within(sim_total, pub) else "[red]no[/red]") if sim_total else "[red]no[/red]",
                     f"{factor:.2f}x" if factor else "-")
    Console(width=max(160, Console().width)).print(ends)
    for name, why in KNOWN.items():
        if not args.only or any(x in name for x in args.only):
            print(f"note: {name}: {why}")
    chains_met = sum(bool(s and within(s, p)) for _, p, s, _ in summary)
    print(f"{met} of {counted} steps and {chains_met} of {len(summary)} chains within {GOAL:.0%} of the published ratio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
