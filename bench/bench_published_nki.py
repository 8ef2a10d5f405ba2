"""Published trn1 NKI kernels (NKI v1 `neuronxcc.nki`, and Autocomp's NKI v2 `import nki` ports), run unchanged on
trainium-sim.

    python bench/bench_published_nki.py --autocomp DIR [--nki-samples DIR] [--only SUBSTR] [--quick]
                                        [--assembly substitute|imports] [--dialect nki1|nki2] [--as-problems]
                                        [--platform trn1|trn2|trn3]

Where the folders come from (this script holds none of their code; it reads them from the folders given):

    git clone https://github.com/ucb-bar/autocomp            # --autocomp autocomp
    git clone https://github.com/aws-neuron/nki-samples      # --nki-samples nki-samples
    git -C nki-samples checkout fc5c69f                        # the last commit with the NKI v1 tutorials
                                                               # (later ones moved to NKI v2, `import nki`)

An exported tree (`git archive`) works as well as a checkout.

Autocomp's trn1 benchmark: each starting kernel sols/trn-{tutorial,advanced}-nki1/N_*_ref.py defines
`solution`; its harness harnesses/trn-*-nki1/N_*_test.py holds `# SUBSTITUTE HERE` where Autocomp pastes
the kernel (`--assembly substitute`, the default: the harness file with the kernel in place, exactly the file
Autocomp runs one candidate in; its `if __name__ == "__main__"` block does not run here). With `--assembly
imports` the kernel gets only the harness's import lines, as Autocomp's parallel compile path writes it.
nki-samples: each tutorial module is evaluated as it stands, with `solution = <kernel>` appended.

Every kernel is judged against a trusted numpy reference: the reference.py of our own problem of the same
computation (hw_runners/trainium_sim/problems/<name>/), or a reference in this file where the published kernel computes
something else (noted under the table), at the harness's shapes; --quick runs the kernels whose harness size
takes a minute or more on the simulator at a smaller size (they read their sizes from their inputs), marked
"reduced". The tutorials run at sizes of our choosing (they have no harness).

--dialect nki2 runs Autocomp's NKI v2 starting kernels (sols/trn-*-nki2) in their harnesses
(harnesses/trn-*-nki2), which pass some problems other inputs than the nki1 ones: a host-built causal mask
(csa, mha), B and C pre-broadcast to 128 rows per state (mamba), the filter pre-transposed (conv2d), and no
mixed_precision flag (sd-attention); our problems define those as their [nki2] tables (problem.toml), picked by
the kernel's dialect, so --as-problems judges each v2 kernel by our problem as defined for NKI v2. Autocomp's v2
harnesses set NEURON_PLATFORM_TARGET_OVERRIDE=trn1: it ran its v2 kernels on trn1, as its v1 ones, so both
dialects are simulated on trn1 unless --platform says otherwise (the product's nki2 profile defaults to trn2).
With --as-problems --quick: 15 of 15 v2 kernels and 21 of 21 v1 kernels (15 starting, 6 optimized) correct.

The table says, per kernel,
whether it traced (the sandboxed front end accepted it), replayed (the trusted side executed the stream),
whether the result was correct, the simulated latency, the evaluation's wall time and the first line of the
error. The whole run at the harness's sizes takes a few minutes.
"""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from autocomp_zmq.hw_runners.base import Problem  # noqa: E402
from autocomp_zmq.hw_runners.trainium_sim.workloads import ProblemSpec, TensorSpec, load_specs  # noqa: E402
from autocomp_zmq.hw_runners.trainium_sim.target import TrainiumSim  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from published_references import OWN  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "hw_runners" / "trainium_sim" / "problems"
F32, BF16, U8 = "float32", "bfloat16", "uint8"


# -- the kernels ---------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    kernel: str                          # file, relative to its source folder
    problem: str                         # our problem (hw_runners/trainium_sim/problems/NAME) or an OWN reference
    source: str = "autocomp"             # "autocomp" | "nki-samples"
    harness: str | None = None           # autocomp: the harness the kernel is pasted into
    entry: str = "solution"              # nki-samples: the kernel function the module defines
    inputs: dict[str, tuple] | None = None     # name -> (shape, dtype); None: the problem's
    outputs: dict[str, tuple] | None = None
    call: list | None = None             # positional arguments (input names or literals); None: the problem's
    kwargs: dict | None = None
    reduced: dict[str, tuple] | None = None    # smaller shapes (name -> shape) that --quick uses
    tol: tuple[float, float] | None = None     # (atol, rtol); None: the problem's
    note: str = ""
    nki2: dict | None = None             # fields that differ for the case's NKI v2 kernel and harness (--dialect nki2)


def _ac(n: str, kind: str = "tutorial") -> dict[str, str]:
    return {"kernel": f"sols/trn-{kind}-nki1/{n}_ref.py", "harness": f"harnesses/trn-{kind}-nki1/{n}_test.py"}


_CSA_KW = {"kernel_dtype": "nl.bfloat16", "acc_type": "nl.float32"}
AUTOCOMP = [
    Case("ac/0_rmsnorm", **_ac("0_rmsnorm"), problem="rmsnorm"),
    Case("ac/1_layernorm", **_ac("1_layernorm"), problem="layernorm"),
    Case("ac/2_gemm", **_ac("2_gemm"), problem="gemm", reduced={"lhsT": (1024, 512), "rhs": (1024, 1024),
                                                                 "result": (512, 1024)}),
    Case("ac/3_mamba", **_ac("3_mamba"), problem="mamba"),
    Case("ac/4_attention", **_ac("4_attention"), problem="attention"),
    Case("ac/5_sdattention", **_ac("5_sdattention"), problem="sd-attention"),
    Case("ac/0_cumsum", **_ac("0_cumsum", "advanced"), problem="cumsum"),
    Case("ac/1_transpose", **_ac("1_transpose", "advanced"), problem="transpose",
         reduced={"ref": (32, 512, 512), "out": (32, 512, 512)}),
    Case("ac/2_maxpool", **_ac("2_maxpool", "advanced"), problem="maxpool"),
    Case("ac/3_rope", **_ac("3_rope", "advanced"), problem="rope"),
    Case("ac/4_conv1d", **_ac("4_conv1d", "advanced"), problem="conv1d", kwargs={"padding": ((0, 0), (1, 1))}),
    Case("ac/5_conv2d", **_ac("5_conv2d", "advanced"), problem="conv2d",
         kwargs={"padding": ((1, 1), (1, 1)), "stride": (1, 1), "rhs_dilation": (1, 1), "in_perm": [0, 1, 2, 3],
                 "kern_perm": [0, 1, 2, 3], "out_perm": [0, 1, 2, 3]},
         reduced={"img_ref": (2, 128, 32, 32), "filter_ref": (256, 128, 3, 3), "out": (2, 256, 32, 32)},
         # the v2 harness passes the filter pre-transposed (C_in, H_f, W_f, C_out): our problem's [nki2] inputs
         nki2={"reduced": {"img_ref": (2, 128, 32, 32), "filter_T_ref": (128, 3, 3, 256), "out": (2, 256, 32, 32)}}),
    Case("ac/6_csa_2048", **_ac("6_csa_2048", "advanced"), problem="csa-2048", call=["q", "k", "v"],
         kwargs={**_CSA_KW, "seq_len": 2048, "d_head": 128},
         outputs={"o": ((2048, 128), BF16), "l": ((2048, 1), F32), "m": ((2048, 1), F32)},
         nki2={"call": ["q", "k", "v", "causal_mask"]}),        # the v2 harness's host-built causal mask
    Case("ac/7_csa_16384", kernel="sols/trn-advanced-nki1/7_csa_16384_ref.py", problem="csa-tile",
         harness="harnesses/trn-advanced-nki1/7_csa_16384.py",
         inputs={"q": ((128, 16384), F32), "k": ((128, 16384), F32), "v": ((128, 128, 128), F32),
                 "olm_prev": ((128, 130), F32), "tile_mask": ((128, 16384), U8)},
         outputs={"olm": ((128, 130), BF16)}, call=["q", "k", "v", "olm_prev"],
         kwargs={**_CSA_KW, "tile_mask": "tile_mask", "q_tile_idx": 64, "Q_TILE_SIZE": 128,
                 "LARGE_KV_TILE_SIZE": 16384, "B_P_SIZE": 128, "B_F_SIZE": 512, "B_D_SIZE": 128},
         tol=(5e-2, 2e-2), note="bf16 result"),
    Case("ac/8_mha", **_ac("8_mha", "advanced"), problem="mha-as-published", call=["q", "k", "v"],
         inputs={"q": ((8, 2048, 128), F32), "k": ((8, 128, 2048), F32), "v": ((8, 2048, 128), F32)},
         outputs={"o": ((8, 2048, 128), BF16), "l": ((8, 2048, 1), BF16), "m": ((8, 2048, 1), BF16)},
         kwargs={**_CSA_KW, "num_heads": 8, "seq_len": 2048, "d_head": 128}, tol=(2e-2, 2e-2),
         note="scores per query tile are q_tile.T @ k, as in the harness's reference kernel",
         # the v2 kernel transposes each query tile (scores q_tile @ k, our mha) and takes the harness's causal
         # mask; it returns l and m in float32 (our mha's [nki2] outputs)
         nki2={"problem": "mha", "call": ["q", "k", "v", "causal_mask"], "inputs": None, "outputs": None, "tol": None,
               "note": ""}),
]

# Autocomp's published optimized trn1 kernels (examples/trn-*/N_*_opt.py, each defining `test`)
_EX = "examples/trn-tutorial/"
_GEMM_QUICK = {"lhsT": (1024, 512), "rhs": (1024, 1024), "result": (512, 1024)}
AUTOCOMP += [
    Case("ac-opt/1_gemm", _EX + "1_gemm_opt.py", "gemm", entry="test", reduced=_GEMM_QUICK),
    Case("ac-opt/2_gemm", _EX + "2_gemm_opt.py", "gemm", entry="test", harness=_ac("2_gemm")["harness"],
         reduced=_GEMM_QUICK),
    Case("ac-opt/3_mamba", _EX + "3_mamba_opt.py", "mamba", entry="test", harness=_ac("3_mamba")["harness"]),
    Case("ac-opt/4_attention", _EX + "4_attention_opt.py", "attention-harness-inputs", entry="test",
         harness=_ac("4_attention")["harness"], call=["q", "k", "v"], kwargs={},
         inputs={n: ((128, 4096), BF16) for n in "qkv"}, outputs={"out": ((4096, 128), BF16)}, tol=(1e-2, 1e-5),
         note="judged as its harness judges it: inputs in [-1, 1) and np.allclose(atol=1e-2), numpy's rtol 1e-5 "
         "(our attention problem draws v with std 3, where a published step's bf16 rounding exceeds 1e-2)"),
    Case("ac-opt/5_sd_attention", _EX + "5_sd_attention_opt.py", "sd-attention-harness-inputs", entry="test",
         harness=_ac("5_sdattention")["harness"], call=["q_ref", "k_ref", "v_ref"], kwargs={},
         inputs={n: ((4096, 64), F32) for n in ("q_ref", "k_ref", "v_ref")}, outputs={"out": ((4096, 64), F32)},
         tol=(1e-4, 1e-3), note="inputs drawn as its harness draws them (uniform [0, 1)) and the harness's "
         "tolerance: it keeps scores in bf16, too coarse for our sd-attention problem's inputs"),
    Case("ac-opt/4_conv1d", "examples/trn-advanced/4_conv1d_opt.py", "conv1d", entry="test",
         harness=_ac("4_conv1d", "advanced")["harness"], kwargs={"padding": ((0, 0), (1, 1))}),
]

_TUT = "src/nki_samples/tutorials/"
_MM = {"lhsT": ((1024, 2048), BF16), "rhs": ((1024, 1024), BF16)}   # fully_optimized's blocks: M 2048, N 1024, K 1024
NKI_SAMPLES = [
    Case("ns/tensor_add", _TUT + "tensor_addition/tensor_addition_nki_kernels.py", "add", "nki-samples",
         entry="nki_tensor_add", note="the tutorial's caller, which launches the kernel on an SPMD grid", inputs={"a_input": ((256, 1024), F32), "b_input": ((256, 1024), F32)},
         outputs={"c": ((256, 1024), F32)}, call=["a_input", "b_input"], kwargs={}, tol=(1e-5, 1e-5)),
    Case("ns/spmd_tensor_add", _TUT + "tensor_addition/spmd_tensor_addition_nki_kernels.py", "add",
         "nki-samples", entry="nki_tensor_add", inputs={"a_input": ((256, 1024), F32), "b_input": ((256, 1024), F32)},
         outputs={"c": ((256, 1024), F32)}, call=["a_input", "b_input"], kwargs={}, tol=(1e-5, 1e-5)),
    Case("ns/rotary", _TUT + "rotary/rotary_nki_kernels.py", "rotary", "nki-samples",
         entry="nki_apply_rotary_embedding[2, 4]", note="launched on its [batch, heads] grid, as its caller does",
         inputs={"q": ((2, 4, 300, 64), F32), "k": ((2, 4, 300, 64), F32), "cos": ((2, 300, 64), F32),
                 "sin": ((2, 300, 64), F32)},
         outputs={"out": ((2, 2, 4, 300, 64), F32)}, call=["q", "k", "cos", "sin"], kwargs={}, tol=(1e-5, 1e-4)),
    Case("ns/transpose2d", _TUT + "transpose2d/transpose2d_nki_kernels.py", "transpose2d", "nki-samples",
         entry="tensor_transpose2D_kernel_", inputs={"in_tensor": ((128, 512), F32)},
         outputs={"out": ((128, 512), F32)}, call=["in_tensor", (16, 32)], kwargs={}, tol=(1e-6, 1e-6)),
    *[Case(f"ns/matmul_{k}", _TUT + "matrix_multiplication/matrix_multiplication_nki_kernels.py", "gemm",
           "nki-samples", entry=f"nki_matmul_{k}_", inputs=_MM, outputs={"result": ((2048, 1024), BF16)})
      for k in ("tiled", "hoist_load", "block_free_dimension", "fully_optimized")],
    Case("ns/rmsnorm", _TUT + "rmsnorm/rmsnorm_nki_kernels.py", "rmsnorm", "nki-samples",
         entry="nki_rmsnorm_kernel", inputs={"a_tensor": ((300, 512), F32), "g_tensor": ((512,), F32)},
         outputs={"out": ((300, 512), F32)}),
    *[Case(f"ns/layernorm_{v}", _TUT + "layernorm/layernorm_nki_kernel.py", "layernorm", "nki-samples",
           entry=f"nki_layernorm_kernel_{v}", inputs={"input_tensor": ((250, 1000), F32),
                                                      "gamma_vector": ((1000,), F32), "beta_vector": ((1000,), F32)},
           outputs={"out": ((250, 1000), F32)}, tol=(1e-3, 1e-2)) for v in ("v1", "v2")],
    Case("ns/softmax", _TUT + "softmax/softmax_nki_kernels.py", "softmax", "nki-samples", entry="nki_softmax_kernel",
         inputs={"in_tensor": ((256, 1024), F32)}, outputs={"out": ((256, 1024), F32)}, call=["in_tensor"],
         kwargs={}, tol=(1e-5, 1e-3)),
    Case("ns/avgpool2d", _TUT + "average_pool2d/average_pool2d_nki_kernels.py", "avgpool", "nki-samples",
         entry="tensor_avgpool_kernel", inputs={"in_tensor": ((128, 64, 64), F32)},
         outputs={"out": ((128, 32, 32), F32)}, call=["in_tensor", 2], kwargs={}, tol=(1e-5, 1e-4)),
    *[Case(f"ns/mamba_{v}", _TUT + "fused_mamba/mamba_nki_kernels.py", "mamba", "nki-samples", entry=f"mamba_{v}")
      for v in ("v1", "v2", "v3")],
    Case("ns/sd_attention", _TUT + "sd_attention/sd_attention_nki_kernels.py", "sd-attention", "nki-samples",
         entry="fused_self_attn_for_SD_small_head_size", call=["q_ref", "k_ref", "v_ref"], kwargs={}),
]


# -- evaluating ------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class BenchSpec(ProblemSpec):
    """A problem spec whose reference module may be one of this file's (OWN)."""
    own: Any = None

    @property
    def module(self):
        return self.own if self.own is not None else super().module

    def reference(self, inputs):
        # keyword arguments may name input tensors too (csa_16384's tile_mask=)
        names = {t.name for t in self.inputs}
        kwargs = {k: inputs[v] if isinstance(v, str) and v in names else v for k, v in self.kwargs.items()}
        return ProblemSpec.reference(dataclasses.replace(self, kwargs=kwargs), inputs)


class TracingSim(TrainiumSim):
    """A TrainiumSim that remembers whether the last kernel traced (the sandboxed half succeeded)."""
    traced = False

    def _trace(self, *args, **kwargs):
        out, failure = super()._trace(*args, **kwargs)
        self.traced = failure is None
        return out, failure


def _tensors(d: dict) -> tuple[TensorSpec, ...]:
    return tuple(TensorSpec(n, tuple(s), dt) for n, (s, dt) in d.items())


def spec_for(case: Case, quick: bool, dialect: str = "v1") -> tuple[BenchSpec, str]:
    base = load_specs(PROBLEMS).get(case.problem)
    if base is not None:        # the problem as defined for kernels in this dialect (its [nki2] table for v2)
        base = base.for_dialect(dialect)
    if base is not None:
        ins = {t.name: (t.shape, t.dtype) for t in base.inputs}
        outs = {t.name: (t.shape, t.dtype) for t in base.outputs}
        call, kwargs, tol = list(base.call), dict(base.kwargs), (base.atol, base.rtol)
        directory, signature = base.directory, base.signature
    else:
        ins, outs, call, kwargs, tol, directory, signature = {}, {}, [], {}, (1e-4, 1e-2), PROBLEMS, ""
    ins, outs = dict(case.inputs or ins), dict(case.outputs or outs)
    shapes = "harness"
    if case.source == "nki-samples":
        shapes = "tutorial"
    if case.reduced and quick:
        for name, shape in case.reduced.items():
            for d in (ins, outs):
                if name in d:
                    d[name] = (shape, d[name][1])
        shapes = "reduced"
    call = case.call if case.call is not None else call
    kwargs = case.kwargs if case.kwargs is not None else kwargs
    params = [c if isinstance(c, str) and c in ins else f"arg{i}" for i, c in enumerate(call)]
    if case.problem in OWN or not signature or case.call is not None:
        own = OWN.get(case.problem)
        ref = own.reference if own else base.module.reference
        accepted = list(inspect.signature(ref).parameters)
        # an input the reference takes by its own name goes there (the v2 csa's causal_mask is the reference's
        # last parameter, the kernel's fourth); anything else by position
        names = [c if isinstance(c, str) and c in ins and c in accepted else accepted[i]
                 for i, c in enumerate(call) if i < len(accepted)]
        signature = f"solution({', '.join(names or params)})"
    atol, rtol = case.tol or tol
    flops = base.flops if base is not None and shapes == "harness" else 0
    spec = BenchSpec(name=case.name, directory=directory, defined_in=directory, signature=signature,
                     inputs=_tensors(ins), outputs=_tensors(outs), call=tuple(call), kwargs=kwargs, atol=atol,
                     rtol=rtol, flops=flops, own=OWN.get(case.problem))
    return spec, shapes


def import_lines(text: str) -> str:
    """The harness's import lines, as Autocomp's parallel compile path prepends them to a kernel."""
    lines = [ln for ln in text.split("\n") if ln.strip().startswith(("import ", "from "))]
    return "\n".join(lines) + "\n" if lines else ""


def assemble(case: Case, folder: Path, assembly: str) -> str:
    kernel = (folder / case.kernel).read_text()
    if case.harness is None:          # a module of its own: the tutorials, Autocomp's optimized examples
        return kernel + f"\n\nsolution = {case.entry}\n"
    harness = (folder / case.harness).read_text()
    if case.entry != "solution":      # an optimized example names its kernel `test`
        kernel += f"\n\nsolution = {case.entry}\n"
    if assembly == "imports":
        return import_lines(harness) + "\n" + kernel
    if "# SUBSTITUTE HERE" not in harness:
        raise ValueError(f"{case.harness} has no '# SUBSTITUTE HERE' line")
    return harness.replace("# SUBSTITUTE HERE", kernel)


@dataclass
class Row:
    case: Case
    shapes: str = ""
    traced: bool = False
    replayed: bool = False
    correct: bool = False
    latency: float | None = None
    wall: float = 0.0
    error: str = ""


def run_case(sim: TracingSim, case: Case, folder: Path, assembly: str, quick: bool, dialect: str = "v1") -> Row:
    row = Row(case)
    try:
        code = assemble(case, folder, assembly)
    except (OSError, ValueError) as exc:
        row.error = f"not found: {exc}"
        return row
    spec, row.shapes = spec_for(case, quick, dialect)
    problem = Problem(name=case.name, target="trainium-sim", family=case.problem, dims={}, description="",
                      kernels={}, semantics=spec)
    sim.traced = False
    t0 = time.monotonic()
    r = sim.evaluate(problem, code)
    row.wall = time.monotonic() - t0
    row.traced = sim.traced
    row.replayed = bool(r.correct or r.error_kind == "wrong_result")
    row.correct = bool(r.correct)
    row.latency = r.latency if r.correct else None
    if not r.correct:
        text = (r.error or r.stderr or "").strip()
        row.error = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--autocomp", type=Path, help="a checkout (or exported tree) of github.com/ucb-bar/autocomp")
    ap.add_argument("--nki-samples", type=Path, help="a checkout of github.com/aws-neuron/nki-samples at fc5c69f")
    ap.add_argument("--only", action="append", default=[], help="run the kernels whose name contains this")
    ap.add_argument("--quick", action="store_true", help="smaller sizes where the harness's take long (marked)")
    ap.add_argument("--assembly", choices=("substitute", "imports"), default="substitute",
                    help="how an Autocomp kernel meets its harness (see above)")
    ap.add_argument("--dialect", choices=("nki1", "nki2"), default="nki1",
                    help="nki2: Autocomp's NKI v2 starting kernels and harnesses (sols/trn-*-nki2)")
    ap.add_argument("--platform", choices=("trn1", "trn2", "trn3"), default="trn1",
                    help="the simulated NeuronCore (default trn1, where Autocomp ran both dialects' kernels)")
    ap.add_argument("--as-problems", action="store_true",
                    help="judge each kernel by its problem as the product defines it (as `eval --problem NAME` "
                         "would), without this file's per-kernel arguments, shapes, dtypes and tolerances")
    args = ap.parse_args()
    if not args.autocomp and not args.nki_samples:
        ap.error("give --autocomp DIR and/or --nki-samples DIR")
    cases = [(c, args.autocomp) for c in AUTOCOMP if args.autocomp] + \
        [(c, args.nki_samples) for c in NKI_SAMPLES if args.nki_samples]
    if args.only:
        cases = [(c, f) for c, f in cases if any(s in c.name for s in args.only)]
    if args.dialect == "nki2":        # the same kernels and harnesses, ported by Autocomp's authors to NKI v2
        v2 = lambda path: path.replace("-nki1/", "-nki2/") if path else path  # noqa: E731
        cases = [(dataclasses.replace(c, kernel=v2(c.kernel), harness=v2(c.harness), **(c.nki2 or {})), f)
                 for c, f in cases if c.name.startswith("ac/")]
    if args.as_problems:
        cases = [(dataclasses.replace(c, call=None, kwargs=None, inputs=None, outputs=None, tol=None, note="")
                  if c.problem not in OWN else c, f) for c, f in cases]
    sim = TracingSim(hidden_sets=1, time_s=900.0, platform=args.platform)
    dialect = "v2" if args.dialect == "nki2" else "v1"
    table = Table(title=f"published {args.dialect} kernels on trainium-sim {args.platform} (assembly: {args.assembly})")
    for col in ("kernel", "shapes", "traced", "replayed", "correct", "latency us", "eval s", "error (first line)"):
        table.add_column(col, justify="right" if col in ("latency us", "eval s") else "left",
                         overflow="fold" if col.startswith("error") else "ellipsis")
    rows = []
    for case, folder in cases:
        row = run_case(sim, case, folder, args.assembly, args.quick, dialect)
        rows.append(row)
        mark = lambda b: "yes" if b else "[red]no[/red]"  # noqa: E731
        table.add_row(case.name, row.shapes, mark(row.traced), mark(row.replayed), mark(row.correct),
                      f"{row.latency:,.1f}" if row.latency else "-", f"{row.wall:.1f}", row.error[:300])
        print(f"{case.name}: {'ok' if row.correct else 'FAILED'} ({row.wall:.1f} s) {row.error[:200]}",
              file=sys.stderr, flush=True)
    Console(width=max(160, Console().width)).print(table)
    for row in rows:
        notes = [row.case.note] if row.case.note else []
        if row.shapes == "reduced":
            notes.append("reduced sizes: " + ", ".join(f"{n} {tuple(s)}" for n, s in row.case.reduced.items()))
        if notes:
            print(f"  {row.case.name}: {'; '.join(notes)}")
    ok = sum(r.correct for r in rows)
    print(f"{ok} of {len(rows)} published kernels run unchanged and correctly on trainium-sim")
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
