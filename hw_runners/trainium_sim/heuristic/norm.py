"""RMSNorm and LayerNorm schedules (rows of a float32 [M, N] tensor on the 128 partitions) and kernels.

Both normalize each row by statistics over its N columns, then scale by a weight vector that must be
broadcast to all partitions. The knobs: how the statistics are computed (separate square and sum, or
one fused activation_reduce on the Scalar engine), which engine applies the per-row scale (Vector with
a broadcast tile, a Vector tensor_scalar, or a Scalar activation with a per-partition scale), which
engine multiplies by the weights (Vector or GpSimd), and whether the weights are broadcast once
outside the row loop (hoisted) by a Vector copy or by a ones-vector matmul on the Tensor engine.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import SBUF_LIMIT, ew_engine, row_loop

NORMS = ("broadcast", "tensor_scalar", "scalar")


def _bcast(mode: str, row: str, name: str, p: str, indent: str, whole: bool = False) -> str:
    """Code broadcasting the [1, N] HBM view `row` to a [P, N] SBUF tile `name`, GB columns at a time
    (small [1, GB] staging tiles instead of a whole [1, N] row in SBUF), or with `whole` from the whole
    row loaded by one DMA (one transfer instead of N / GB; the Vector broadcast then also runs once)."""
    if whole:
        src = f"{name}1[0:1, c * GB:(c + 1) * GB]"
        if mode == "vector":
            return (f"{indent}{name}1 = nl.load({row}[0:1, 0:N])              # the whole row in one DMA\n"
                    f"{indent}{name} = nl.ndarray(({p}, N), dtype=nl.float32, buffer=nl.sbuf)\n"
                    f"{indent}{name}[...] = nl.broadcast_to({name}1, shape=({p}, N))\n")
        return (f"{indent}{name}1 = nl.load({row}[0:1, 0:N])              # the whole row in one DMA\n"
                f"{indent}{name} = nl.ndarray(({p}, N), dtype=nl.float32, buffer=nl.sbuf)\n"
                f"{indent}for c in nl.affine_range(N // GB):\n"
                f"{indent}    {name}[:, c * GB:(c + 1) * GB] = "
                f"nisa.activation(op=nl.copy, data=nisa.nc_matmul(ones_row, {src}))\n")
    if mode == "vector":
        put = f"nl.broadcast_to({name}1, shape=({p}, GB))"
    else:   # Tensor engine: ones[1, P].T @ row[1, GB] puts the row on every partition (one PSUM bank)
        put = f"nisa.activation(op=nl.copy, data=nisa.nc_matmul(ones_row, {name}1))"
    return (f"{indent}{name} = nl.ndarray(({p}, N), dtype=nl.float32, buffer=nl.sbuf)\n"
            f"{indent}for c in nl.affine_range(N // GB):\n"
            f"{indent}    {name}1 = nl.load({row}[0:1, c * GB:(c + 1) * GB])\n"
            f"{indent}    {name}[:, c * GB:(c + 1) * GB] = {put}\n")


def _hoisted(loop: str, weights: str, prefetch: bool) -> str:
    """The row loop with the hoisted weight broadcast `weights` ahead of it; with prefetching, after the first
    row tile's load (DMAs start in program order: the big load should not wait behind the weights)."""
    if not prefetch:
        return weights + loop
    count, first, rest = loop.split("\n", 2)
    return count + "\n" + first + "\n" + weights + rest


def _bcast_setup(s, p: str) -> str:
    ones = f"    ones_row = nl.ones((1, {p}), dtype=nl.float32)\n" if s.bcast == "tensor" else ""
    return ("    GB = min(N, 512)                         # weight columns per broadcast step (one PSUM bank)\n"
            "    assert N % GB == 0\n" + ones)


def _scale(norm: str, src: str, col: str) -> str:
    """`src` times a per-row [P, 1] column."""
    return {"broadcast": f"nl.multiply({src}, {col})",
            "tensor_scalar": f"nisa.tensor_scalar({src}, nl.multiply, {col})",
            "scalar": f"nisa.activation(op=nl.copy, data={src}, scale={col})"}[norm]


def _mul(engine: str, a: str, b: str, op: str = "multiply") -> str:
    if engine == "vector":
        return f"nl.{op}({a}, {b})"
    return f"nisa.tensor_tensor({a}, {b}, nl.{op}{ew_engine(engine)})"


# ---------------------------------------------------------------------------- RMSNorm
@dataclass(frozen=True)
class RmsSchedule:
    rows: int = 128            # partitions per row tile
    fuse: bool = False         # square + row sum in one activation_reduce (Scalar) instead of square + nl.sum
    norm: str = "broadcast"    # how x * rinv is applied (see _scale)
    gmul: str = "vector"       # engine of the weight multiply: vector or gpsimd
    hoist: bool = False        # broadcast g once, outside the row loop
    bcast: str = "vector"      # how g reaches all partitions: vector copy or ones-matmul on Tensor
    prefetch: bool = False     # issue the next row tile's load before this tile's compute and store
    chunk: int = 0             # columns per scale/weight/store step (0: the whole row)
    wrow: bool = False         # load the weight row with one DMA (else one [1, 512] DMA per broadcast step)
    gfirst: bool = False       # multiply by the weights first: it needs no statistics, so it overlaps them
    family: str = "rmsnorm"


def _rms_fits(s: RmsSchedule, d: dict) -> bool:
    if s.rows not in (32, 64, 128) or d["M"] % s.rows or s.norm not in NORMS or s.gmul not in ("vector", "gpsimd"):
        return False
    if s.bcast not in ("vector", "tensor") or d["N"] % min(d["N"], 512):
        return False
    if s.chunk and (s.chunk >= d["N"] or d["N"] % s.chunk):
        return False
    # x (two more when prefetching: the first tile and the next one), square, g, and the step tiles
    return ((3 + 2 * s.prefetch + s.wrow) * d["N"] + 2 * (s.chunk or d["N"])) * 4 <= SBUF_LIMIT


def _rms_body(s: RmsSchedule) -> str:
    p = "P"
    g = _bcast(s.bcast, "g_row", "g_b", p, "    " if s.hoist else "        ", s.wrow)
    if s.fuse:
        stats = ("        ss = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
                 "        sq = nisa.activation_reduce(op=nl.square, data=x, reduce_op=nl.add, reduce_res=ss)\n")
    else:
        stats = ("        sq = nl.square(x)\n"
                 "        ss = nl.sum(sq, axis=1, keepdims=True)\n")
    loop = row_loop(s.prefetch, "M // P", "x", "a_tensor[{t} * P:({t} + 1) * P, 0:N]")
    cols = "c * CW:(c + 1) * CW"
    if s.gfirst:
        steps = (f"            y = {_mul(s.gmul, 'x[:, ' + cols + ']', 'g_b[:, ' + cols + ']')}\n"
                 f"            z = {_scale(s.norm, 'y', 'rinv')}\n")
    else:
        steps = (f"            y = {_scale(s.norm, 'x[:, ' + cols + ']', 'rinv')}\n"
                 f"            z = {_mul(s.gmul, 'y', 'g_b[:, ' + cols + ']')}\n")
    return f"""@nki.jit
def solution(a_tensor, g_tensor):
    M, N = a_tensor.shape
    P = {s.rows}                              # rows per tile, one per partition
    CW = {s.chunk or "N"}                               # columns per scale/weight/store step
    assert M % P == 0 and N % CW == 0
    out = nl.ndarray((M, N), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    g_row = g_tensor.reshape((1, N))
{_bcast_setup(s, p)}{_hoisted(loop, g, s.prefetch) if s.hoist else loop + g}{stats}\
        rinv = nisa.activation(op=nl.rsqrt, data=ss, scale=1.0 / N)     # 1 / sqrt(mean(x^2))
        for c in nl.affine_range(N // CW):
{steps}
            nl.store(out[t * P:(t + 1) * P, {cols}], value=z)
    return out
"""


def _rms_describe(s: RmsSchedule) -> str:
    return (f"{s.rows}-row tiles, {'fused activation_reduce' if s.fuse else 'separate square + sum'} statistics, "
            f"row scale by {s.norm}, weight multiply on {s.gmul}, g broadcast by {s.bcast}"
            f"{' once (hoisted)' if s.hoist else ' per tile'}{', next tile prefetched' if s.prefetch else ''}"
            f"{f', {s.chunk}-column steps' if s.chunk else ''}{', weight row loaded by one DMA' if s.wrow else ''}"
            f"{', weights multiplied before the row scale' if s.gfirst else ''}")


def _rms_candidates(mutation: str, s: RmsSchedule, d: dict) -> list:
    if mutation == "max_tiles":
        return [replace(s, rows=128)] if s.rows < 128 else []
    if mutation == "fuse":
        return [replace(s, fuse=True)] if not s.fuse else []
    if mutation == "hoist":
        return [replace(s, hoist=True), replace(s, hoist=True, bcast="tensor")] if not s.hoist else []
    if mutation == "bcast":
        return [replace(s, bcast="tensor" if s.bcast == "vector" else "vector")]
    if mutation == "norm":
        return [replace(s, norm=n) for n in NORMS if n != s.norm] + [replace(s, gfirst=not s.gfirst)]
    if mutation == "engine":
        return ([replace(s, norm=n) for n in ("scalar", "tensor_scalar") if n != s.norm]
                + [replace(s, gfirst=not s.gfirst)]
                + [replace(s, gmul="gpsimd" if s.gmul == "vector" else "vector")]
                + ([replace(s, fuse=True)] if not s.fuse else []))
    if mutation == "prefetch":
        return [replace(s, prefetch=True)] if not s.prefetch else []
    if mutation == "chunk":
        return [replace(s, chunk=c) for c in (0, 512, 1024, 2048) if c != s.chunk]
    if mutation == "large_dma":
        return [replace(s, wrow=True)] + _rms_candidates("chunk", s, d)[:1] if not s.wrow else \
            _rms_candidates("chunk", s, d)
    return []


RMSNORM = SimpleNamespace(
    DIMS=("M", "N"), Schedule=RmsSchedule, default=lambda dims: RmsSchedule(), fits=_rms_fits, body=_rms_body,
    describe=_rms_describe, candidates=_rms_candidates,
    OPTIONS={"fuse-activation": "fuse", "fuse-through-sbuf": "fuse", "hoist-loads": "hoist",
             "remove-redundant": "hoist", "reduce-on-tensor": "bcast", "combine-vector-ops": "norm",
             "engine-balance": "engine", "max-tiles": "max_tiles", "fewer-bigger-instructions": "max_tiles",
             "spread-dma": "prefetch", "multi-buffer": "prefetch", "large-dma": "large_dma"},
    SAFER=({"gfirst": False}, {"wrow": False}, {"prefetch": False}, {"chunk": 0}, {"gmul": "vector"}, {"bcast": "vector"}, {"norm": "broadcast"},
           {"fuse": False}, {"hoist": False}))


# ---------------------------------------------------------------------------- LayerNorm
# one_pass_scalar: both sums on Scalar; bn_stats: Vector's batch-norm statistics per 512 columns, aggregated
STATS = ("two_pass", "two_pass_fused", "one_pass", "one_pass_scalar", "bn_stats")
AFFINES = ("vector", "gpsimd_mul", "gpsimd_add")


@dataclass(frozen=True)
class LnSchedule:
    stats: str = "two_pass"    # two_pass: mean, then centred squares; one_pass: E[x^2] - E[x]^2 (see STATS)
    norm: str = "broadcast"    # how (x - mean) * rstd is applied (see _scale)
    affine: str = "vector"     # which of the gamma multiply / beta add runs on GpSimd (see AFFINES)
    hoist: bool = True         # broadcast gamma and beta once, outside the row loop (as the naive kernel does)
    bcast: str = "vector"      # vector/tensor: [P, N] broadcast tiles; psum: per step, ones-matmuls into PSUM
    chunk: int = 0             # columns per normalize/affine/store step (0: the whole row)
    prefetch: bool = False     # issue the next row tile's load before this tile's compute and store
    wrow: bool = False         # load gamma and beta with one DMA each (else one [1, 512] DMA per broadcast step)
    rowstore: bool = False     # chunked steps write back into the row tile, stored whole (one DMA per tile)
    family: str = "layernorm"


def _ln_sbuf(s: LnSchedule, d: dict) -> int:
    """Bytes per partition with one buffer per tile: whole-row tiles, the step tile, gamma and beta, and two
    more rows when prefetching. Checked against the simulator's allocation at 4096 x 8192: a prefetching
    kernel keeps three row tiles live (with bn_stats 102.8 KiB -> 134.8 KiB with prefetch, where extra
    buffers are only taken when there is room; one_pass with [P, N] gamma/beta and prefetch, five rows
    with one extra, spills). What kept Scalar-summed statistics from prefetching was their second
    scratch row, now shared."""
    full = {"two_pass": 2, "two_pass_fused": 3, "one_pass": 2, "one_pass_scalar": 2,
            "bn_stats": 1}[s.stats]
    steps = 2 if s.norm == "broadcast" and not s.stats.startswith("two_pass") else 1   # (x - mean) temporary
    weights = 1 if s.bcast == "psum" else 2 + 2 * s.wrow      # psum: only the [2, N] gamma/beta rows
    return (full + weights + 2 * s.prefetch) * d["N"] * 4 + steps * (s.chunk or d["N"]) * 4


def _ln_fits(s: LnSchedule, d: dict) -> bool:
    if s.stats not in STATS or s.norm not in NORMS or s.affine not in AFFINES \
            or s.bcast not in ("vector", "tensor", "psum"):
        return False
    if s.bcast == "psum" and (not s.hoist or s.wrow or s.affine != "vector" or not s.chunk or s.chunk > 512):
        return False                # one PSUM bank per step, read by Vector: rows loaded once, whole
    if d["M"] % 128 or (s.chunk and (s.chunk > d["N"] or d["N"] % s.chunk)):
        return False
    if s.rowstore and not s.chunk:
        return False                # whole-row steps already store whole rows
    if d["N"] % min(d["N"], 512):
        return False
    return _ln_sbuf(s, d) <= SBUF_LIMIT


def _ln_body(s: LnSchedule) -> str:
    ind = "    " if s.hoist else "        "
    if s.bcast == "psum":
        # gamma and beta rows side by side on two partitions; a ones-row selecting one of them, as the
        # stationary of a matmul, puts that row's step on every partition of a PSUM bank
        gb = ("    gb_rows = nl.ndarray((2, N), dtype=nl.float32, buffer=nl.sbuf)\n"
              "    gb_rows[0:1, :] = nl.load(gam_row[0:1, 0:N])\n"
              "    gb_rows[1:2, :] = nl.load(bet_row[0:1, 0:N])\n"
              "    i_k, i_m = nl.mgrid[0:2, 0:P]\n"
              "    pick_g = nisa.affine_select(i_k == 0, nl.ones((2, P), dtype=nl.float32), 0.0)\n"
              "    pick_b = nisa.affine_select(i_k == 1, nl.ones((2, P), dtype=nl.float32), 0.0)\n")
    else:
        gb = (_bcast(s.bcast, "gam_row", "gam_b", "P", ind, s.wrow)
              + _bcast(s.bcast, "bet_row", "bet_b", "P", ind, s.wrow))
    two = s.stats.startswith("two_pass")
    if two:
        centre = ("nl.subtract(x, mean)" if s.norm == "broadcast" else "nisa.tensor_scalar(x, nl.subtract, mean)")
        if s.stats == "two_pass_fused":
            square = ("        ss = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
                      "        junk = nisa.activation_reduce(op=nl.square, data=xc, reduce_op=nl.add, reduce_res=ss)\n"
                      "        var = nisa.tensor_scalar(ss, nl.multiply, 1.0 / N)\n")
        else:
            square = ("        x[...] = nl.square(xc)                # x is no longer needed: reuse its buffer\n"
                      "        var = nl.mean(x, axis=1, keepdims=True)\n")
        stats = (f"        mean = nl.mean(x, axis=1, keepdims=True)\n"
                 f"        xc = {centre}\n" + square)
        norm = _scale(s.norm, "xc[:, c * CW:(c + 1) * CW]", "rstd")
    else:
        if s.stats == "bn_stats":     # mean and variance straight from the Vector engine, no scratch row
            stats = ("        BN = min(N, 512)                         # bn_stats takes at most 512 columns\n"
                     "        st = nl.ndarray((P, 6 * (N // BN)), dtype=nl.float32, buffer=nl.sbuf)\n"
                     "        for c in nl.static_range(N // BN):\n"
                     "            st[:, 6 * c:6 * (c + 1)] = nisa.bn_stats(x[:, c * BN:(c + 1) * BN])\n"
                     "        mv = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)\n"
                     "        mv[...] = nisa.bn_aggr(st)\n"
                     "        mean = mv[:, 0:1]\n"
                     "        var = mv[:, 1:2]\n")
        elif s.stats == "one_pass_scalar":
            # both Scalar passes write their (unused) elementwise results into one scratch row
            s1 = ("        s1 = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
                  "        junk = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.sbuf)\n"
                  "        junk[...] = nisa.activation_reduce(op=nl.copy, data=x, reduce_op=nl.add, reduce_res=s1)\n")
            sq = "        junk[...] = nisa.activation_reduce(op=nl.square, data=x, reduce_op=nl.add, reduce_res=s2)\n"
        else:
            s1 = "        s1 = nl.sum(x, axis=1, keepdims=True)\n"
            sq = "        junk = nisa.activation_reduce(op=nl.square, data=x, reduce_op=nl.add, reduce_res=s2)\n"
        if s.stats != "bn_stats":
            stats = (s1 + "        s2 = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)\n" + sq +
                     "        mean = nisa.tensor_scalar(s1, nl.multiply, 1.0 / N)\n"
                     "        msq = nl.multiply(mean, mean)\n"
                     "        var = nisa.tensor_scalar(s2, nl.multiply, 1.0 / N, op1=nl.subtract, operand1=msq)\n")
        xs = "x[:, c * CW:(c + 1) * CW]"
        norm = {"broadcast": f"nl.multiply(nl.subtract({xs}, mean), rstd)",
                "tensor_scalar": f"nisa.tensor_scalar({xs}, nl.subtract, mean, op1=nl.multiply, operand1=rstd)",
                "scalar": f"nisa.activation(op=nl.copy, data={xs}, scale=rstd, bias=nbias)"}[s.norm]
    nbias = ""
    if s.norm == "scalar" and not two:
        nbias = "        nbias = nisa.tensor_scalar(mean, nl.multiply, rstd, op1=nl.multiply, operand1=-1.0)\n"
    loop = row_loop(s.prefetch, "M // P", "x", "input_tensor[{t} * P:({t} + 1) * P, 0:N]")
    gm = "vector" if s.affine != "gpsimd_mul" else "gpsimd"
    ba = "vector" if s.affine != "gpsimd_add" else "gpsimd"
    cols = "c * CW:(c + 1) * CW"
    last = f"x[:, {cols}]" if s.rowstore else "w[...]"
    if s.rowstore:     # each step's result back into the row tile (x is no longer read), one store per tile
        store = f"        nl.store(out[t * P:(t + 1) * P, 0:N], value=x)\n"
    else:
        store = f"            nl.store(out[t * P:(t + 1) * P, {cols}], value=w)\n"
    if s.bcast == "psum":
        affine = (f"            w[...] = nl.multiply(w, nisa.nc_matmul(pick_g, gb_rows[:, {cols}]))\n"
                  f"            {last} = nl.add(w, nisa.nc_matmul(pick_b, gb_rows[:, {cols}]))\n")
    else:
        affine = (f"            w[...] = {_mul(gm, 'w', 'gam_b[:, ' + cols + ']')}\n"
                  f"            {last} = {_mul(ba, 'w', 'bet_b[:, ' + cols + ']', 'add')}\n")
    return f"""@nki.jit
def solution(input_tensor, epsilon, gamma_vector, beta_vector):
    M, N = input_tensor.shape
    P = 128                                  # rows per tile, one per partition
    CW = {s.chunk or "N"}                               # columns per normalize/affine/store step
    assert M % P == 0 and N % CW == 0
    out = nl.ndarray((M, N), dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    gam_row = gamma_vector.reshape((1, N))
    bet_row = beta_vector.reshape((1, N))
{_bcast_setup(s, "P")}{_hoisted(loop, gb, s.prefetch) if s.hoist else loop + gb}{stats}\
        rstd = nisa.activation(op=nl.rsqrt, data=nisa.tensor_scalar(var, nl.add, epsilon))
{nbias}        for c in nl.affine_range(N // CW):
            w = {norm}
{affine}
{store}    return out
"""


def _ln_describe(s: LnSchedule) -> str:
    chunk = f"{s.chunk}-column steps" if s.chunk else "whole rows per step"
    return (f"128-row tiles, {s.stats} statistics, normalize by {s.norm}, affine on {s.affine}, "
            f"gamma/beta broadcast by {s.bcast}{' once (hoisted)' if s.hoist else ' per tile'}, {chunk}"
            f"{', next tile prefetched' if s.prefetch else ''}{', gamma/beta loaded by one DMA each' if s.wrow else ''}"
            f"{', steps written back into the row tile, stored whole' if s.rowstore else ''}")


def _ln_candidates(mutation: str, s: LnSchedule, d: dict) -> list:
    if mutation == "fuse":
        nxt = {"two_pass": ["two_pass_fused", "one_pass"], "two_pass_fused": ["one_pass", "bn_stats"],
               "one_pass": ["one_pass_scalar", "bn_stats"], "one_pass_scalar": ["bn_stats"], "bn_stats": []}[s.stats]
        return [replace(s, stats=v) for v in nxt]
    if mutation == "hoist":
        return [replace(s, hoist=True), replace(s, hoist=True, bcast="tensor")] if not s.hoist else []
    if mutation == "bcast":
        if s.bcast == "psum":
            return [replace(s, bcast="vector"), replace(s, bcast="tensor")]
        return [replace(s, bcast="tensor" if s.bcast == "vector" else "vector"),
                replace(s, bcast="psum", hoist=True, wrow=False, affine="vector", chunk=512),
                replace(s, bcast="psum", hoist=True, wrow=False, affine="vector", chunk=512, rowstore=True)]
    if mutation == "norm":
        return [replace(s, norm=n) for n in NORMS if n != s.norm]
    if mutation == "engine":
        return ([replace(s, affine=a) for a in AFFINES if a != s.affine]
                + [replace(s, norm="scalar")] * (s.norm != "scalar")
                + [replace(s, stats=v) for v in ("one_pass", "one_pass_scalar", "bn_stats")
                   if v != s.stats])
    if mutation == "chunk":
        return [replace(s, chunk=c) for c in (0, 512, 1024, 2048, 4096) if c != s.chunk]
    if mutation == "prefetch":
        return [replace(s, prefetch=True), replace(s, prefetch=True, chunk=2048)] if not s.prefetch else []
    if mutation == "large_dma":
        rows = [replace(s, rowstore=True)] if s.chunk and not s.rowstore else []
        if s.bcast == "psum":
            return rows
        return rows + ([replace(s, wrow=True)] + _ln_candidates("chunk", s, d)[:1] if not s.wrow else
                       _ln_candidates("chunk", s, d))
    return []


LAYERNORM = SimpleNamespace(
    DIMS=("M", "N"), Schedule=LnSchedule, default=lambda dims: LnSchedule(), fits=_ln_fits, body=_ln_body,
    describe=_ln_describe, candidates=_ln_candidates,
    OPTIONS={"fuse-activation": "fuse", "fuse-through-sbuf": "fuse", "hoist-loads": "hoist",
             "remove-redundant": "hoist", "reduce-on-tensor": "bcast", "combine-vector-ops": "norm",
             "engine-balance": "engine", "multi-buffer": "prefetch", "spread-dma": "prefetch",
             "fewer-bigger-instructions": "chunk", "large-dma": "large_dma"},
    SAFER=({"rowstore": False}, {"wrow": False}, {"prefetch": False}, {"affine": "vector"}, {"bcast": "vector"},
           {"chunk": 0}, {"norm": "broadcast"},
           {"stats": "two_pass"}, {"hoist": True}))
