"""trainium-sim's judge against kernels built to stall it: every evaluation must end within its time limit.

    python bench/bench_judge_bounds.py [--limit-s 10] [--only NAME] [--max-size N]

A search proposes whatever scores well, and a kernel that keeps an evaluator busy past its limit takes that
core from every other candidate. Each attack below is an ordinary NKI v1 kernel for the cumsum problem
(x float32 [2048, 2048]) whose judging work grows with one number it chooses; the table runs each at growing
sizes through the whole evaluation (sandboxed tracing, decoding, placing tiles, choosing what to check,
replaying, timing) and shows the verdict and the wall time. An attack passes when every size ends within the
limit plus a small margin for the sandbox's start and the last unit of work (--margin-s, default 2 s),
with `timeout` when the work does not fit. The kernels compute the wrong values on purpose: what is measured
is whether judging them ends, not their verdict on values.

Attacks:
  spilled-blocks   two SBUF tensors of (16384, par_dim(128), 2) fp32 (256 KiB per partition together, more than
                   SBUF holds, so the layout spills one); then N DMAs that each write all 16,384 blocks of one.
                   Timing each spilled block's share of an access looked up the access's blocks once per block
                   (quadratic): 8,192 blocks of one access took 18 s.
  output-rewrites  N HBM-to-HBM copies of the whole input onto the whole output, transposed (an index-array
                   access); choosing the output elements to check marks each copy's 4 Mi elements (16,000 copies took 176 s under a 10 s limit).
  many-small       N one-row DMAs into the output, then N tiny Vector copies: the instruction count itself.
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

HEADER = """\
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def solution(x, axis=None, p_size=None, f_size=None, acc_dtype=None):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
"""

ATTACKS = {
    "spilled-blocks": ("""\
    src = x.reshape((16384, 128, 2))
    a = nl.ndarray((16384, nl.par_dim(128), 2), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((16384, nl.par_dim(128), 2), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.sequential_range({n}):
        nisa.dma_copy(dst=a, src=src)
        nisa.dma_copy(dst=b, src=src)
    nisa.dma_copy(dst=out.reshape((16384, 128, 2)), src=a)
    nisa.dma_copy(dst=x.reshape((16384, 128, 2)), src=b)
    return out
""", (1, 2, 8, 32)),
    "output-rewrites": ("""\
    i_p = nl.arange(2048)[:, None]
    i_f = nl.arange(2048)[None, :]
    for i in nl.sequential_range({n}):
        nisa.dma_copy(dst=out[i_f, i_p], src=x)
    return out
""", (100, 1_000, 4_000, 16_000)),
    "many-small": ("""\
    t = nl.ndarray((nl.par_dim(1), 2048), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:1, 0:2048])
    for i in nl.sequential_range({n}):
        nisa.dma_copy(dst=out[i % 2048:i % 2048 + 1, 0:2048], src=t)
        t[...] = nl.copy(t)
    return out
""", (10_000, 100_000, 400_000)),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit-s", type=float, default=10.0, help="the evaluation's time limit (time_s)")
    ap.add_argument("--margin-s", type=float, default=2.0, help="allowed past the limit (sandbox start, last unit)")
    ap.add_argument("--only", action="append", default=[], help="run the attacks whose name contains this")
    ap.add_argument("--max-size", type=int, default=None, help="skip sizes above this")
    args = ap.parse_args()
    sim = get_target("trainium-sim", time_s=args.limit_s)
    problem = sim.problem("cumsum")
    sim.prepare(problem)
    table = Table(title=f"adversarial kernels on trainium-sim (time limit {args.limit_s:g} s)")
    for col in ("attack", "size", "verdict", "wall s", "within limit", "message (first line)"):
        table.add_column(col, justify="right" if col in ("size", "wall s") else "left",
                         overflow="fold" if col.startswith("message") else "ellipsis")
    failed = 0
    for name, (body, sizes) in ATTACKS.items():
        if args.only and not any(s in name for s in args.only):
            continue
        for n in sizes:
            if args.max_size is not None and n > args.max_size:
                continue
            code = HEADER + body.format(n=n)
            t0 = time.monotonic()
            r = sim.evaluate(problem, code)
            wall = time.monotonic() - t0
            ok = wall <= args.limit_s + args.margin_s
            failed += not ok
            verdict = "correct" if r.correct else r.error_kind
            first = next((ln for ln in (r.error or "").splitlines() if ln.strip()), "")
            table.add_row(name, f"{n:,}", verdict, f"{wall:.1f}", "yes" if ok else "[red]NO[/red]", first[:160])
            print(f"{name} {n}: {verdict} in {wall:.1f} s", file=sys.stderr, flush=True)
    sim.close()
    Console(width=200).print(table)
    print(f"{failed} evaluation(s) ran past the limit" if failed else "every evaluation ended within its limit")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
