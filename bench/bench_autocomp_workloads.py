"""Autocomp's newer Trainium workloads (beyond its paper), its own kernels run unchanged against our problems.

    python bench/bench_autocomp_workloads.py --autocomp DIR [--only SUBSTR] [--platform trn1|trn2|trn3]

DIR is a checkout or exported tree (`git archive`) of github.com/ucb-bar/autocomp; this script holds none of its
code. The kernels:

  sols/trn-e2e/{3,5,7,9,11,13}_*nki*.py   Llama-3.2-1B decode (NKI v1): MLP, attention, logits at batch 1 and 32;
                                          harnesses/trn-e2e/N_*_nki.py, context N.txt gives the shapes
  sols/trn-internal/N_*_ref.py            NKI v2: OpenFold3 / Boltz-2 triangle attention and multiplication,
                                          FlashVSR attention, Mamba-2 scan, DeltaNet recurrence, 256-point FFT,
                                          TFIM Trotter steps, GEMM; harnesses/trn-internal/N_*_test.py

Each kernel is pasted into its harness at `# SUBSTITUTE HERE` (the file Autocomp runs a candidate in; its
`__main__` block does not run here) and judged by our problem of that workload
(hw_runners/trainium_sim/problems/<name>/, tagged autocomp-e2e / autocomp-internal) as `eval --problem NAME` would:
the problem's inputs (drawn as the harness draws them), its numpy reference and its tolerance. The e2e kernels are
simulated on trn1 and the internal ones on trn2 (15_gemm's header names NeuronCore-v3) unless --platform says
otherwise.

The table says, per kernel, whether it traced (the sandboxed front end accepted it), replayed (the trusted side
executed the stream), whether the result was correct, the simulated latency, the evaluation's wall time and the
first line of the error. 15 of 15 run unchanged and correctly (about a minute and a half in all; the batch-32 MLP
and the logits take 10-20 s each); a week before these problems existed, 8 of the 15 ran as written.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

if __package__:
    from . import _checkout  # noqa: F401
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_published_nki import Case, TracingSim, run_case  # noqa: E402


@dataclass(frozen=True)
class Workload:
    name: str
    kernel: str                 # relative to the Autocomp tree
    harness: str
    problem: str                # hw_runners/trainium_sim/problems/<problem>
    platform: str               # where Autocomp ran it (overridden by --platform)


def _e2e(n: int, stem: str, problem: str, kernel: str | None = None) -> Workload:
    return Workload(f"e2e/{n}_{stem}", f"sols/trn-e2e/{kernel or f'{n}_{stem}'}.py",
                    f"harnesses/trn-e2e/{n}_{stem}.py", problem, "trn1")


def _internal(n: int, stem: str, problem: str) -> Workload:
    return Workload(f"internal/{n}_{stem}", f"sols/trn-internal/{n}_{stem}_ref.py",
                    f"harnesses/trn-internal/{n}_{stem}_test.py", problem, "trn2")


WORKLOADS = [
    _e2e(3, "llama_mlp_decode_nki", "llama-mlp-decode"),
    _e2e(5, "llama_attention_nki", "llama-attention-decode"),
    _e2e(7, "llama_logits_nki", "llama-logits-decode", kernel="7_llama_logits.nki"),   # sic: its file name
    _e2e(9, "llama_attention_b32_nki", "llama-attention-decode-b32"),
    _e2e(11, "llama_mlp_decode_b32_nki", "llama-mlp-decode-b32"),
    _e2e(13, "llama_logits_b32_nki", "llama-logits-decode-b32"),
    _internal(3, "triattn", "triangle-attention"),
    _internal(4, "trimul", "triangle-multiply"),
    _internal(5, "fft256", "fft256"),
    _internal(6, "mamba_scan", "mamba-scan"),
    _internal(7, "trotter", "trotter-tfim"),
    _internal(8, "deltanet_recurrent", "deltanet-recurrent"),
    _internal(10, "openfold3_trimul", "openfold3-trimul"),
    _internal(12, "flashvsr_fp32attn", "flashvsr-attention"),
    _internal(15, "gemm", "gemm-bf16"),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--autocomp", type=Path, required=True,
                    help="a checkout (or exported tree) of github.com/ucb-bar/autocomp")
    ap.add_argument("--only", action="append", default=[], help="run the kernels whose name contains this")
    ap.add_argument("--platform", choices=("trn1", "trn2", "trn3"),
                    help="simulate every kernel on this NeuronCore (default: trn1 for e2e, trn2 for internal)")
    args = ap.parse_args()
    todo = [w for w in WORKLOADS if not args.only or any(s in w.name for s in args.only)]
    sims: dict[str, TracingSim] = {}
    table = Table(title="Autocomp's newer Trainium kernels on trainium-sim, unchanged, judged by our problems")
    for col in ("kernel", "problem", "platform", "traced", "replayed", "correct", "latency us", "eval s",
                "error (first line)"):
        table.add_column(col, justify="right" if col in ("latency us", "eval s") else "left",
                         overflow="fold" if col.startswith("error") else "ellipsis")
    rows = []
    for w in todo:
        platform = args.platform or w.platform
        sim = sims.setdefault(platform, TracingSim(hidden_sets=1, time_s=900.0, platform=platform))
        case = Case(w.name, w.kernel, w.problem, harness=w.harness)
        row = run_case(sim, case, args.autocomp, "substitute", quick=False)
        rows.append((w, row))
        mark = lambda b: "yes" if b else "[red]no[/red]"  # noqa: E731
        table.add_row(w.name, w.problem, platform, mark(row.traced), mark(row.replayed), mark(row.correct),
                      f"{row.latency:,.1f}" if row.latency else "-", f"{row.wall:.1f}", row.error[:300])
        print(f"{w.name}: {'ok' if row.correct else 'FAILED'} ({row.wall:.1f} s) {row.error[:200]}",
              file=sys.stderr, flush=True)
    Console(width=max(160, Console().width)).print(table)
    ok = sum(row.correct for _, row in rows)
    print(f"{ok} of {len(rows)} run unchanged and correctly on trainium-sim")
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
