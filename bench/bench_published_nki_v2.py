"""Published NKI v2 kernels (`import nki`, Neuron SDK 2.27+), run unchanged on trainium-sim.

    python bench/bench_published_nki_v2.py --sdk-examples DIR [--nki-samples DIR] [--platform trn2 ...]
                                           [--only SUBSTR]

Where the folders come from (this script holds none of their code; it reads them from the folders given):

    git clone https://github.com/aws-neuron/aws-neuron-sdk     # --sdk-examples aws-neuron-sdk/nki/examples
    git clone https://github.com/aws-neuron/nki-samples        # --nki-samples nki-samples (main: its NKI v2
                                                               # tutorials; fc5c69f is the last NKI v1 commit,
                                                               # which bench_published_nki.py runs)

The NKI tutorials' kernels in their current (v2) form live in aws-neuron-sdk's nki/examples (tensor addition,
transpose2d, average pool, matrix multiplication, fused mamba, the getting-started and nki.simulate examples);
nki-samples' main keeps the v2 matrix multiplication tutorial and the MXFP matmul kernels. Each file is evaluated
as it stands with `solution = <kernel>` appended, against a numpy reference written here, at sizes chosen here
(the tutorials have no harness). The table says per kernel whether it traced (the sandboxed front end accepted
it), replayed (the trusted side executed the stream), whether the result was correct, the simulated latency on
each --platform (default: trn2, what NKI v2 kernels get by default) and the first line of the error.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from autocomp_zmq.hw_runners.base import Problem  # noqa: E402
from autocomp_zmq.hw_runners.trainium_sim.workloads import TensorSpec  # noqa: E402
from bench_published_nki import BenchSpec, TracingSim  # noqa: E402

F32, BF16 = "float32", "bfloat16"
HERE = Path(__file__).resolve().parent


# -- references (the computations the tutorials document) --------------------------------------------------
def _add(a_input, b_input):
    return a_input + b_input


def _transpose2d(in_tensor, shape2D):
    p = in_tensor.shape[0]
    return in_tensor.reshape(p, *shape2D).transpose(0, 2, 1).reshape(p, -1)


def _avgpool(in_tensor, pool_size):
    c, h, w = in_tensor.shape
    return in_tensor.reshape(c, h // pool_size, pool_size, w // pool_size, pool_size).mean(axis=(2, 4))


def _matmul(lhsT, rhs):
    return lhsT.astype(np.float64).T @ rhs.astype(np.float64)


def _mamba(delta, u, A, B, C):
    delta, u, A, B, C = (np.asarray(x, dtype=np.float64) for x in (delta, u, A, B, C))
    batch, channels, seq = delta.shape
    out = np.empty((batch, channels, seq))
    for b in range(batch):
        decay = np.exp(delta[b][:, None, :] * A[:, :, None])
        drive = (delta[b] * u[b])[:, None, :] * B[b][None, :, :]
        h = np.zeros(A.shape)
        for t in range(seq):
            h = decay[:, :, t] * h + drive[:, :, t]
            out[b, :, t] = h @ C[b, :, t]
    return out


def _mamba_inputs(rng, shapes):
    (b, c, s), n = shapes["delta"], shapes["A"][1]
    return {"delta": rng.uniform(0.005, 0.2, (b, c, s)).astype(np.float32),
            "u": rng.standard_normal((b, c, s)).astype(np.float32),
            "A": -rng.uniform(0.5, 8.0, (c, n)).astype(np.float32),
            "B": rng.standard_normal((b, n, s)).astype(np.float32),
            "C": rng.standard_normal((b, n, s)).astype(np.float32)}


class Own:
    """A reference module: make_inputs + reference (what ProblemSpec reads from a problem's reference.py)."""

    def __init__(self, reference, inputs=None) -> None:
        self.reference, self._inputs = reference, inputs

    def make_inputs(self, rng, shapes):
        if self._inputs:
            return self._inputs(rng, shapes)
        return {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


@dataclass
class Case:
    name: str
    source: str                  # sdk | samples
    kernel: str                  # path under the folder
    entry: str
    inputs: dict
    outputs: dict
    ref: Own
    call: list = field(default_factory=list)
    tol: tuple = (1e-4, 1e-3)


def _mm(name, entry, k, m, n, source="sdk", path="matrix_multiplication/matrix_multiplication_nki_kernels.py"):
    return Case(name, source, path, entry, {"lhsT": ((k, m), BF16), "rhs": ((k, n), BF16)}, {"out": ((m, n), BF16)},
                Own(_matmul), tol=(5e-2, 2e-2))


MAMBA = {"delta": ((1, 256, 512), F32), "u": ((1, 256, 512), F32), "A": ((256, 16), F32), "B": ((1, 16, 512), F32),
         "C": ((1, 16, 512), F32)}
SAMPLES_MM = "src/nki_samples/tutorials/matrix_multiplication/matrix_multiplication_nki_kernels.py"
CASES = [
    Case("tensor_add", "sdk", "tensor_addition/tensor_addition_nki_kernels.py", "nki_tensor_add",
         {"a_input": ((256, 1024), F32), "b_input": ((256, 1024), F32)}, {"out": ((256, 1024), F32)}, Own(_add)),
    Case("getting_started_add", "sdk", "getting_started_baremetal.py", "nki_tensor_add_kernel",
         {"a_input": ((128, 512), F32), "b_input": ((128, 512), F32)}, {"out": ((128, 512), F32)}, Own(_add)),
    Case("simulate_example_add", "sdk", "simulate/nki_simulate_example.py", "add_kernel",
         {"a_ptr": ((128, 512), F32), "b_ptr": ((128, 512), F32)}, {"out": ((128, 512), F32)}, Own(_add)),
    Case("transpose2d", "sdk", "transpose2d/transpose2d_nki_kernels.py", "tensor_transpose2D_kernel_",
         {"in_tensor": ((128, 8 * 16), F32)}, {"out": ((128, 8 * 16), F32)}, Own(_transpose2d),
         call=["in_tensor", [8, 16]]),
    Case("average_pool2d", "sdk", "average_pool2d/average_pool2d_nki_kernels.py", "tensor_avgpool_kernel",
         {"in_tensor": ((128, 64, 64), F32)}, {"out": ((128, 32, 32), F32)}, Own(_avgpool), call=["in_tensor", 2]),
    _mm("matmul_basic", "nki_matmul_basic_", 128, 64, 512),
    _mm("matmul_tiled", "nki_matmul_tiled_", 1024, 512, 1024),
    _mm("matmul_hoist_load", "nki_matmul_hoist_load_", 1024, 512, 1024),
    _mm("matmul_block_free", "nki_matmul_block_free_dimension_", 1024, 512, 2048),
    _mm("matmul_fully_optimized", "nki_matmul_fully_optimized_", 1024, 2048, 1024),
    Case("mamba_v1", "sdk", "fused_mamba/mamba_nki_kernels.py", "mamba_v1", MAMBA, {"out": ((1, 256, 512), F32)},
         Own(_mamba, _mamba_inputs), tol=(1e-2, 1e-2)),
    Case("mamba_v2", "sdk", "fused_mamba/mamba_nki_kernels.py", "mamba_v2", MAMBA, {"out": ((1, 256, 512), F32)},
         Own(_mamba, _mamba_inputs), tol=(1e-2, 1e-2)),
    Case("mamba_v3", "sdk", "fused_mamba/mamba_nki_kernels.py", "mamba_v3", MAMBA, {"out": ((1, 256, 512), F32)},
         Own(_mamba, _mamba_inputs), tol=(1e-2, 1e-2)),
    _mm("samples_matmul_tiled", "nki_matmul_tiled_", 1024, 512, 1024, "samples", SAMPLES_MM),
    _mm("samples_matmul_fully_optimized", "nki_matmul_fully_optimized_", 1024, 2048, 1024, "samples", SAMPLES_MM),
    Case("samples_mx_offline_quantized", "samples", "src/nki_samples/tutorials/mxfp-matmul/mx_kernels.py",
         "kernel_offline_quantized_mx_matmul", {"lhsT": ((128, 128), F32), "rhs": ((128, 512), F32)},
         {"out": ((128, 512), F32)}, Own(_matmul)),
]


@dataclass
class Row:
    case: Case
    traced: bool = False
    replayed: bool = False
    correct: bool = False
    latency: dict = field(default_factory=dict)
    wall: float = 0.0
    error: str = ""


def spec_of(case: Case) -> BenchSpec:
    call = case.call or list(case.inputs)
    names = list(case.ref.reference.__code__.co_varnames[:len(call)])
    return BenchSpec(name=case.name, directory=HERE, defined_in=HERE, signature=f"solution({', '.join(names)})",
                     inputs=tuple(TensorSpec(n, tuple(s), d) for n, (s, d) in case.inputs.items()),
                     outputs=tuple(TensorSpec(n, tuple(s), d) for n, (s, d) in case.outputs.items()),
                     call=tuple(call), kwargs={}, atol=case.tol[0], rtol=case.tol[1], flops=0, own=case.ref)


def run_case(sims: dict[str, TracingSim], case: Case, folder: Path) -> Row:
    row = Row(case)
    try:
        code = (folder / case.kernel).read_text() + f"\n\nsolution = {case.entry}\n"
    except OSError as exc:
        row.error = f"not found: {exc}"
        return row
    spec = spec_of(case)
    problem = Problem(name=case.name, target="trainium-sim", family=case.name, dims={}, description="", kernels={},
                      semantics=spec)
    for platform, sim in sims.items():
        sim.traced = False
        t0 = time.monotonic()
        r = sim.evaluate(problem, code)
        row.wall += time.monotonic() - t0
        row.traced = sim.traced
        row.replayed = bool(r.correct or r.error_kind == "wrong_result")
        row.correct = bool(r.correct)
        row.latency[platform] = r.latency if r.correct else None
        if not r.correct:
            row.error = (r.error or "").strip().split("\n")[0][:160]
            break
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdk-examples", type=Path, help="aws-neuron-sdk's nki/examples folder (checkout or export)")
    ap.add_argument("--nki-samples", type=Path, help="a checkout of github.com/aws-neuron/nki-samples (main)")
    ap.add_argument("--platform", action="append", choices=("trn1", "trn2", "trn3"),
                    help="simulate on this platform (repeat for a latency column each; default trn2)")
    ap.add_argument("--only", action="append", default=[], help="run the kernels whose name contains this")
    args = ap.parse_args()
    folders = {"sdk": args.sdk_examples, "samples": args.nki_samples}
    if not any(folders.values()):
        ap.error("give --sdk-examples and/or --nki-samples")
    platforms = args.platform or ["trn2"]
    sims = {p: TracingSim(platform=p, time_s=600.0) for p in platforms}
    table = Table(title="published NKI v2 kernels on trainium-sim")
    for col in ("kernel", "traced", "replayed", "correct", *(f"{p} us" for p in platforms), "wall s", "error"):
        table.add_column(col, overflow="fold")
    mark = {True: "yes", False: "no"}
    for case in CASES:
        folder = folders[case.source]
        if folder is None or (args.only and not any(s in case.name for s in args.only)):
            continue
        row = run_case(sims, case, folder)
        table.add_row(case.name, mark[row.traced], mark[row.replayed], mark[row.correct],
                      *(f"{row.latency[p]:,.2f}" if row.latency.get(p) is not None else "-" for p in platforms),
                      f"{row.wall:.1f}", row.error)
    Console(width=200).print(table)
    for sim in sims.values():
        sim.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
