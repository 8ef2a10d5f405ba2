"""GEMM schedules of the cuda heuristic: a tiled tl.dot kernel for C = A @ B, batched C[b] = A[b] @ B[b], and
nn.Linear y = x @ W^T + b with its epilogue (GELU, ReLU, scaling, residual adds), in fp32, fp16 or bf16.

The knobs are the ones a Triton GEMM on an H100 is tuned by: the output tile (BLOCK_M x BLOCK_N: reuse of every
loaded element, accumulators per thread), the K slab (BLOCK_K: MMAs per loop trip), GROUP_M (programs in flight
share A row panels and B column panels in the 50 MB L2), num_warps (two warpgroups of wgmma for 128-row tiles),
num_stages (the depth of the asynchronous copy pipeline, within 227 KB of shared memory), the fp32 product
precision (IEEE on the FP32 cores, 3xTF32 or TF32 on the tensor cores), the epilogue fused onto the fp32
accumulator, a persistent grid of one program per SM, and TMA descriptor loads.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass, replace

from autocomp_zmq.hw_runners.cuda.heuristic import gemm_body

SMS = 132                      # H100 SXM
SMEM_LIMIT = 200 * 1024        # of the 227 KB a block may use: Triton keeps some for layout conversions
TILES = (16, 32, 64, 128, 256)
KS = (16, 32, 64, 128)
GROUPS = (1, 4, 8, 16)
PRECISIONS = ("ieee", "tf32x3", "tf32")     # fp32 operands, slowest and most exact first

# known-good H100 configurations (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): Triton's matmul tutorial
# and the problems' tuned kernels; fp32 tiles hold half the K slab of fp16/bf16 ones in the same shared memory
CONFIGS = {
    "half": ((128, 256, 64, 8, 3), (128, 128, 64, 8, 4), (128, 128, 64, 4, 4), (64, 128, 64, 4, 4),
             (128, 64, 64, 4, 4), (256, 128, 64, 8, 3)),
    "float32": ((128, 128, 32, 8, 3), (64, 128, 32, 4, 4), (128, 64, 32, 4, 4), (64, 64, 32, 4, 4),
                (128, 128, 16, 8, 4)),
}


@dataclass(frozen=True)
class Schedule:
    family: str = "gemm"
    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    group_m: int = 1
    num_warps: int = 4
    num_stages: int = 2
    precision: str = "ieee"            # fp32 operands: ieee | tf32x3 | tf32; fp16/bf16 operands: native
    fuse_epilogue: bool = False        # nn.Linear problems: the epilogue on the accumulator, not in torch
    persistent: bool = False           # one program per SM looping over tiles
    tma: bool = False                  # tiles loaded through host TensorDescriptors (Hopper TMA)


def default(w) -> Schedule:
    """The first Triton GEMM one writes: 64x64x32 tiles, 4 warps, double-buffered, row-major tile order, the
    reference's epilogue left to torch, IEEE fp32 products (Triton's own default, TF32, would be a precision
    change the tolerance must allow)."""
    z = w.sizes
    return Schedule(block_m=min(64, _cap(z["M"])), block_n=min(64, _cap(z["N"])), block_k=min(32, _cap(z["K"])),
                    precision="ieee" if w.dtype == "float32" else "native")


def _cap(n: int) -> int:
    """The largest tile side worth using for a dimension of n: n rounded up to a power of two, 16 at least."""
    return max(16, 1 << (n - 1).bit_length())


def smem(s: Schedule, w) -> int:
    return max(1, s.num_stages) * (s.block_m + s.block_n) * s.block_k * w.itemsize


def acc_per_thread(s: Schedule) -> float:
    return s.block_m * s.block_n / (32 * s.num_warps)


def tiles(s: Schedule, w) -> int:
    z = w.sizes
    return z["BATCH"] * math.ceil(z["M"] / s.block_m) * math.ceil(z["N"] / s.block_n)


def wave_efficiency(s: Schedule, w) -> float:
    """Share of the SM slots of all waves that hold a tile (1 program per SM: big tiles fill one)."""
    n = tiles(s, w)
    return n / (math.ceil(n / SMS) * SMS)


def precisions(w) -> tuple[str, ...]:
    if w.dtype != "float32":
        return ("native",)
    # 3xTF32 keeps near-fp32 accuracy (error about 2^-21 per product, far below fp32 summation-order noise at
    # the problems' tolerances); one-pass TF32 (10-bit mantissa) only where the problem says its tolerance admits it
    return PRECISIONS if w.tf32_ok else PRECISIONS[:2]


def fits(s: Schedule, w) -> bool:
    z = w.sizes
    aligned = (z["K"] * w.itemsize) % 16 == 0 and (z["N"] * w.itemsize) % 16 == 0
    return (s.family == "gemm" and s.block_m in TILES and s.block_n in TILES and s.block_k in KS
            and (w.dtype != "float32" or s.block_k <= 64) and s.group_m in GROUPS and s.num_warps in (4, 8)
            and 1 <= s.num_stages <= 6 and s.precision in precisions(w)
            # accumulators per thread (max_acc); below 4 the warps idle
            and 4 <= acc_per_thread(s) <= max_acc(s) and smem(s, w) <= SMEM_LIMIT
            # tiles no larger than the problem
            and s.block_m <= _cap(z["M"]) and s.block_n <= _cap(z["N"]) and s.block_k <= _cap(z["K"])
            and (not s.fuse_epilogue or (w.kind == "linear" and bool(w.epilogue)))
            and (not s.tma or aligned))      # TMA descriptors need 16-byte aligned row strides


def max_acc(s: Schedule) -> int:
    # accumulators per thread: above 128 fp32 registers the tile spills (64 on the FP32-core path, whose operand
    # fragments live in registers too)
    return 64 if s.precision == "ieee" else 128


def _fitted(s: Schedule, w) -> Schedule:
    """`s` with the warps, tile and stages a change needs: 8 warps once a tile holds too many accumulators per
    thread at 4 (then a halved longer side), and fewer stages (not below 2) until the pipeline fits shared memory."""
    while acc_per_thread(s) > max_acc(s):
        if s.num_warps == 4:
            s = replace(s, num_warps=8)
        elif s.block_n >= s.block_m:
            s = replace(s, block_n=s.block_n // 2)
        else:
            s = replace(s, block_m=s.block_m // 2)
    while smem(s, w) > SMEM_LIMIT and s.num_stages > 2:
        s = replace(s, num_stages=s.num_stages - 1)
    return s


def _retile(s: Schedule, w, bm: int, bn: int, bk: int | None = None) -> Schedule:
    return _fitted(replace(s, block_m=bm, block_n=bn, block_k=s.block_k if bk is None else bk), w)


def _tile_changes(s: Schedule, w, grow: bool = True, shrink: bool = False) -> list[Schedule]:
    out = []
    for f in ((2,) if grow else ()) + ((0.5,) if shrink else ()):
        out += [_retile(s, w, int(s.block_m * f), s.block_n), _retile(s, w, s.block_m, int(s.block_n * f))]
    return out


def candidates(mutation: str, s: Schedule, w) -> list[Schedule]:
    """Schedules one step of `mutation` away from `s` (unfiltered: the agent keeps those that fit)."""
    if mutation == "tile":              # bigger output tiles: each loaded element feeds more MMAs; the smaller
        # side first (traffic per MMA goes as 1/BLOCK_M + 1/BLOCK_N: square tiles move the least)
        grown = _tile_changes(s, w)
        return grown if s.block_m == s.block_n else [grown[0] if s.block_m < s.block_n else grown[1]]
    if mutation == "coarsen":           # more accumulators per thread: fewer warps, or a bigger tile on as many
        return ([replace(s, num_warps=4)] if s.num_warps == 8 else []) + [
            replace(s, block_m=s.block_m * 2), replace(s, block_n=s.block_n * 2)]
    if mutation == "grid":              # tile shapes whose tile count fills the 132 SMs in fuller waves
        here, n = wave_efficiency(s, w), tiles(s, w)
        return [c for c in _tile_changes(s, w, grow=True, shrink=True)
                if wave_efficiency(c, w) > here + 0.03 or (n < SMS <= tiles(c, w))]
    if mutation == "block_k":           # longer K slabs: more MMAs per loop trip between barriers
        return [_retile(s, w, s.block_m, s.block_n, s.block_k * 2), replace(s, block_k=s.block_k // 2)]
    if mutation == "warps":
        return [replace(s, num_warps=8 if s.num_warps == 4 else 4)]
    if mutation == "stages":            # deeper pipeline first: it hides HBM latency behind the MMAs
        return [replace(s, num_stages=n) for n in (s.num_stages + 1, s.num_stages - 1) if 2 <= n <= 5]
    if mutation == "group":
        if math.ceil(w.sizes["M"] / s.block_m) == 1:
            return []
        return [replace(s, group_m=g) for g in (8, 4, 16, 1) if g != s.group_m]
    if mutation == "precision":         # faster fp32 products first
        order = precisions(w)
        return [replace(s, precision=p) for p in order[order.index(s.precision) + 1:]] if s.precision in order else []
    if mutation == "fuse":
        return [replace(s, fuse_epilogue=True)]
    if mutation == "persistent":
        return [replace(s, persistent=True)]
    if mutation == "tma":
        return [replace(s, tma=True)]
    if mutation == "config":
        table = CONFIGS["float32" if w.dtype == "float32" else "half"]
        return [_fitted(replace(s, block_m=m, block_n=n, block_k=k, num_warps=nw, num_stages=ns,
                                group_m=max(s.group_m, 8)), w) for m, n, k, nw, ns in table]
    return []


# menu option id (prompts/cuda/menu.toml) -> mutation
OPTIONS = {
    "smem-tiling": "tile",
    "register-tiling": "coarsen",
    "grid-shape": "grid",
    "ilp-unroll": "block_k",
    "occupancy": "warps",
    "async-pipeline": "stages",
    "l2-tile-order": "group",
    "tensor-cores": "precision",
    "precision": "precision",
    "fuse-epilogue": "fuse",
    "fuse-ops": "fuse",
    "persistent": "persistent",
    "tma": "tma",
    "autotune": "config",
}

# fields to reset, in order, when a kernel must be repaired: the newest machinery first, then the numerics, then
# the resources (shared memory, registers), then the tile order
SAFER = ({"tma": False}, {"persistent": False}, {"precision": "ieee"}, {"fuse_epilogue": False},
         {"num_stages": 2}, {"block_k": 32}, {"num_warps": 4, "block_m": 64, "block_n": 64}, {"group_m": 1})
# what a repair resets first when the error names it
ERROR_FIRST = {"wrong_result": ({"precision": "ieee"}, {"fuse_epilogue": False}, {"tma": False}),
               "resources": ({"num_stages": 2}, {"block_k": 32}, {"num_warps": 4, "block_m": 64, "block_n": 64})}


def normalize(s: Schedule, w) -> Schedule:
    """`s` made to fit the registers and shared memory (applied to every candidate and repair)."""
    return _fitted(s, w)


def _score_tile(f, s, w):
    # compute-bound GEMMs want big tiles; at 64x64 every element is re-read from L2 M/64 + N/64 times
    small = 1.0 - min(1.0, s.block_m * s.block_n / (128 * 256))
    return 0.3 + 0.6 * f["gap"] * f["compute"] + 0.5 * small


SCORES = {
    "tile": _score_tile,
    "coarsen": lambda f, s, w: 0.2 + 0.3 * f["gap"] + 0.3 * f["low_sm"],
    "grid": lambda f, s, w: 0.1 + 1.5 * (1.0 - wave_efficiency(s, w)),
    "block_k": lambda f, s, w: 0.2 + 0.2 * f["gap"],
    "warps": lambda f, s, w: 0.2 + 0.4 * f["low_occupancy"],
    "stages": lambda f, s, w: 0.3 + 0.5 * f["gap"] * (1.0 if s.num_stages <= 3 else 0.4) + 0.3 * f["low_sm"],
    "group": lambda f, s, w: 0.2 + 0.6 * f["l2_miss"] + (0.3 if s.group_m == 1 else 0.0),
    # fp32 on the FP32 cores peaks at 67 TFLOPS, 3xTF32 on the tensor cores at about 165
    "precision": lambda f, s, w: 0.6 + 1.0 * f["gap"],
    # unfused, the (M, N) output makes extra round trips to HBM, one per torch op of the epilogue
    "fuse": lambda f, s, w: 0.6 + 0.4 * len(w.epilogue) + 0.5 * f["gap"],
    "persistent": lambda f, s, w: 0.2 + 0.3 * f["gap"] + 0.4 * (1.0 - wave_efficiency(s, w)),
    "tma": lambda f, s, w: 0.2 + 0.4 * f["gap"] * f["compute"],
    "config": lambda f, s, w: 0.3 + 0.5 * f["gap"],
}


def describe(s: Schedule, w=None) -> str:
    prec = {"ieee": "IEEE fp32 products on the FP32 cores", "tf32x3": "3xTF32 products on the tensor cores",
            "tf32": "TF32 products on the tensor cores", "native": "tensor-core products"}[s.precision]
    extra = [t for flag, t in ((s.fuse_epilogue, "epilogue fused on the accumulator"),
                               (s.persistent, "persistent (one program per SM)"), (s.tma, "TMA loads")) if flag]
    return (f"{s.block_m}x{s.block_n}x{s.block_k} tiles (BLOCK_M x BLOCK_N x BLOCK_K), GROUP_M {s.group_m}, "
            f"{s.num_warps} warps, {s.num_stages} stages, {prec}" + "".join(", " + t for t in extra))


def _constants(code: str) -> dict[str, int]:
    """Module-level integer constants (`NAME = 1` and `A, B = 1, 2`) of a kernel, read without running it."""
    try:
        tree = ast.parse(code or "")
    except SyntaxError:
        return {}
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t, v = node.targets[0], node.value
            pairs = zip(t.elts, v.elts) if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) else [(t, v)]
            for name, value in pairs:
                if isinstance(name, ast.Name) and isinstance(value, ast.Constant) and type(value.value) is int:
                    out[name.id] = value.value
    return out


def guess(code: str, w) -> Schedule | None:
    """The schedule closest to another author's Triton GEMM (a problem's tuned.py): its tile and launch constants."""
    found = _constants(code)
    names = {"block_m": "BLOCK_M", "block_n": "BLOCK_N", "block_k": "BLOCK_K", "group_m": "GROUP_M",
             "num_warps": "NUM_WARPS", "num_stages": "NUM_STAGES"}
    picked = {k: found[n] for k, n in names.items() if n in found}
    return replace(default(w), **picked) if picked and "triton" in code else None


def render(s: Schedule, w) -> str:
    return gemm_body.render(s, w, describe(s, w))
