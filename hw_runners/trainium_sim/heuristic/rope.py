"""Rotary-position-embedding schedules (head-dim-major x_in [d_head, S], cos/sin [d_head/2, S]) and kernels.

out[:h] = first * cos - second * sin and out[h:] = second * cos + first * sin, where (first, second) are the
two halves of every rotation pair (rows i and i + h, or 2i and 2i + 1 when interleaved). Two methods:
"halves" keeps each half on h partitions, as the naive kernel does: four products and two sums per column
step, all on the Vector engine with both inputs in SBUF, on half the partitions. "pe" keeps x on all
d_head partitions as [first; second] and computes out = x * cos2 + W @ (x * sin2): the Tensor engine
repeats cos and sin onto both halves (a 0/1 matmul into PSUM) and applies the signed swap W, so every
Vector instruction has one operand in PSUM (N cycles instead of 1.3N) and covers all partitions.

Knobs: the columns per step / DMA piece (2 KiB rows at 512 columns, 4 KiB at 1024, ...), how far the loads
run ahead of the compute (an unrolled software pipeline; "whole": every input in one SBUF tile, filled
piece by piece), whether the sin product goes first on the Tensor engine (so the Vector product and the swap
matmul follow while the cos repeat runs), and whether the final sum is accumulated in PSUM by an identity
matmul and evicted by the Scalar engine instead of a Vector add.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import SBUF_LIMIT, step_choices

METHODS = ("halves", "pe")
COLS = (256, 512, 1024, 2048, 4096)
DEPTHS = (0, 1, 2, 3)


@dataclass(frozen=True)
class Schedule:
    method: str = "halves"     # halves: h-partition tiles, all Vector; pe: d_head partitions, Tensor repeats/swaps
    cols: int = 512            # columns per DMA piece (pe: a multiple of the 512-column matmul width)
    depth: int = 0             # pieces loaded ahead of the compute (unrolled); 0: a plain affine loop
    whole: bool = False        # every input in one SBUF tile, filled piece by piece (no buffer reuse)
    sin_first: bool = False    # pe: repeat sin first, so x * sin2 and the swap overlap the cos repeat
    tables_first: bool = False  # pe: load each piece's cos and sin before its x (the first matmuls need only them)
    psum_sum: bool = False     # pe: accumulate x * cos2 into the swap's PSUM bank (identity matmul), evict on Scalar
    family: str = "rope"


DIMS = ("D", "S")


def default(dims: dict) -> Schedule:
    return Schedule(cols=min(512, dims["S"]))


def fits(s: Schedule, d: dict) -> bool:
    dh, n = d["D"], d["S"]
    if s.method not in METHODS or s.depth not in DEPTHS or dh > 128 or dh % 2 or s.cols not in COLS:
        return False
    if n % s.cols:
        return False
    if s.method == "halves" and (s.sin_first or s.psum_sum or s.tables_first):
        return False
    if s.method == "pe" and s.cols % min(512, s.cols) or (s.whole and s.depth == 0):
        return False
    # bytes per partition: x (two halves or one tile), cos, sin, result; per piece with depth + 1 in flight
    per_col = 4 * (2 + 2 + 2) if s.method == "halves" else 4 * (1 + 1 + 1 + 1)
    if s.whole:
        return n * per_col + 3 * 512 * 4 <= SBUF_LIMIT
    return (s.depth + 2) * s.cols * per_col <= SBUF_LIMIT


def _head(s: Schedule) -> str:
    return f"""@nki.jit
def solution(x_in, cos, sin, lnc_shard=False, first_second_half_impl=True):
    d_head, S = x_in.shape
    h = d_head // 2
    assert d_head <= 128 and tuple(cos.shape) == (h, S) and cos.shape == sin.shape
    out = nl.ndarray((d_head, S), dtype=x_in.dtype, buffer=nl.shared_hbm)
    PC = {s.cols}                      # columns per DMA piece
    assert S % PC == 0
    NP = S // PC
    f32 = nl.float32
"""


def _halves(s: Schedule) -> str:
    code = _head(s) + """    i_h, i_f = nl.mgrid[0:h, 0:PC]
    first_rows = i_h if first_second_half_impl else 2 * i_h       # the two halves of every rotation pair
    second_rows = i_h + h if first_second_half_impl else 2 * i_h + 1
"""
    if s.depth == 0:
        code += """    for j in nl.affine_range(NP):
        cols = j * PC + i_f
        first = nl.load(x_in[first_rows, cols])
        second = nl.load(x_in[second_rows, cols])
        c = nl.load(cos[i_h, cols])
        s = nl.load(sin[i_h, cols])
"""
    else:
        if s.whole:
            alloc = ("    first_t = nl.ndarray((h, S), dtype=x_in.dtype, buffer=nl.sbuf)\n"
                     "    second_t = nl.ndarray((h, S), dtype=x_in.dtype, buffer=nl.sbuf)\n"
                     "    c_t = nl.ndarray((h, S), dtype=x_in.dtype, buffer=nl.sbuf)\n"
                     "    s_t = nl.ndarray((h, S), dtype=x_in.dtype, buffer=nl.sbuf)\n")
            part = "[:, j * PC:(j + 1) * PC]"
            ret = "    def load(j):\n        cols = j * PC + i_f\n"
            pick = ("        first, second = first_t[:, j * PC:(j + 1) * PC], second_t[:, j * PC:(j + 1) * PC]\n"
                    "        c, s = c_t[:, j * PC:(j + 1) * PC], s_t[:, j * PC:(j + 1) * PC]\n")
            code += alloc + ret + "".join(
                f"        {t}_t{part} = nl.load({src})\n" for t, src in
                (("first", "x_in[first_rows, cols]"), ("second", "x_in[second_rows, cols]"),
                 ("c", "cos[i_h, cols]"), ("s", "sin[i_h, cols]"))) + "        return None\n"
        else:
            code += """    def load(j):
        cols = j * PC + i_f
        return (nl.load(x_in[first_rows, cols]), nl.load(x_in[second_rows, cols]),
                nl.load(cos[i_h, cols]), nl.load(sin[i_h, cols]))
"""
            pick = "        first, second, c, s = loaded[j]\n"
        code += f"""
    D = {s.depth}                                   # pieces loaded ahead of the compute
    loaded = [load(j) for j in range(min(D, NP))]
    for j in nl.static_range(NP):
        if j + D < NP:
            loaded.append(load(j + D))
        cols = j * PC + i_f
{pick}"""
    return code + """        first_cos = nisa.tensor_tensor(first, c, nl.multiply)
        second_sin = nisa.tensor_tensor(second, s, nl.multiply)
        second_cos = nisa.tensor_tensor(second, c, nl.multiply)
        first_sin = nisa.tensor_tensor(first, s, nl.multiply)
        out_first = nisa.tensor_tensor(first_cos, second_sin, nl.subtract)
        out_second = nisa.tensor_tensor(second_cos, first_sin, nl.add)
        nl.store(out[first_rows, cols], value=out_first)
        nl.store(out[second_rows, cols], value=out_second)
    return out
"""


def _piece_loop(s: Schedule) -> str:
    """The loop over the pieces, loading each (depth 0) or `depth` pieces ahead of the compute; the same code in
    both NKI dialects (load() is the dialect's)."""
    if s.depth == 0:
        return "\n    for q in nl.affine_range(NP):\n        xq, cq, sq = load(q)\n"
    return f"""
    D = {s.depth}                                   # pieces loaded ahead of the compute
    loaded = [load(q) for q in range(min(D, NP))]
    for q in nl.static_range(NP):
        if q + D < NP:
            loaded.append(load(q + D))
""" + ("        o = loaded[q]\n" if s.whole else "        xq, cq, sq = loaded[q]\n")


def _pe(s: Schedule) -> str:
    code = _head(s) + """    F = min(PC, nl.tile_size.gemm_moving_fmax)   # columns per matmul (one PSUM bank of fp32)
    G = PC // F
    # constant matrices, built once on GpSimd from index predicates
    i_k, i_m = nl.mgrid[0:d_head, 0:d_head]
    ones = nl.ones((d_head, d_head), dtype=f32)
    to_second = nisa.affine_select(i_m - i_k == h, ones, 0.0)       # row k of first  -> row k + h
    to_first = nisa.affine_select(i_k - i_m == h, ones, 0.0)        # row k of second -> row k - h
    swap = nl.ndarray((d_head, d_head), dtype=f32, buffer=nl.sbuf)  # W @ v = [-second(v); first(v)]
    swap[...] = nisa.tensor_tensor(to_second, to_first, nl.subtract)
    j_k, j_m = nl.mgrid[0:h, 0:d_head]
    ones_h = nl.ones((h, d_head), dtype=f32)
    rep = nl.ndarray((h, d_head), dtype=f32, buffer=nl.sbuf)        # rep.T @ c = [c; c]
    rep[...] = nisa.tensor_tensor(nisa.affine_select(j_m - j_k == 0, ones_h, 0.0),
                                  nisa.affine_select(j_m - j_k == h, ones_h, 0.0), nl.add)
"""
    if s.psum_sum:
        code += ("    ident = nisa.affine_select(i_m - i_k == 0, ones, 0.0)          # identity: adds x * cos2 in PSUM\n")
    code += """    i_h, i_f = nl.mgrid[0:h, 0:PC]
    first = i_h if first_second_half_impl else 2 * i_h
    second = i_h + h if first_second_half_impl else 2 * i_h + 1

"""
    fill_x = """        if first_second_half_impl:
            {x}[:, {cols}] = nl.load(x_in[:, q * PC:(q + 1) * PC])
        else:
            {x}[0:h, {cols}] = nl.load(x_in[first, q * PC + i_f])
            {x}[h:d_head, {cols}] = nl.load(x_in[second, q * PC + i_f])
"""
    fill_c = "        {c}[:, {cols}] = nl.load(cos[:, q * PC:(q + 1) * PC])\n"
    fill_s = "        {s}[:, {cols}] = nl.load(sin[:, q * PC:(q + 1) * PC])\n"
    if not s.tables_first:
        fill = fill_x + fill_c + fill_s
    else:    # the tables first (the first matmuls need only them), in the order the matmuls use them
        fill = (fill_s + fill_c if s.sin_first else fill_c + fill_s) + fill_x

    if s.whole:
        code += """    x = nl.ndarray((d_head, S), dtype=x_in.dtype, buffer=nl.sbuf)
    c = nl.ndarray((h, S), dtype=x_in.dtype, buffer=nl.sbuf)
    s = nl.ndarray((h, S), dtype=x_in.dtype, buffer=nl.sbuf)
    res = nl.ndarray((d_head, S), dtype=x_in.dtype, buffer=nl.sbuf)

    def load(q):
""" + fill.format(x="x", c="c", s="s", cols="q * PC:(q + 1) * PC") + "        return q * PC\n"
    else:
        code += """    def load(q):
        xq = nl.ndarray((d_head, PC), dtype=x_in.dtype, buffer=nl.sbuf)
        cq = nl.ndarray((h, PC), dtype=x_in.dtype, buffer=nl.sbuf)
        sq = nl.ndarray((h, PC), dtype=x_in.dtype, buffer=nl.sbuf)
""" + fill.format(x="xq", c="cq", s="sq", cols="0:PC") + "        return xq, cq, sq\n"
    code += _piece_loop(s)
    if s.whole:
        xv, cv, sv, rv = "x[:, o + g * F:o + (g + 1) * F]", "c[:, o + g * F:o + (g + 1) * F]", \
            "s[:, o + g * F:o + (g + 1) * F]", "res[:, o + g * F:o + (g + 1) * F]"
    else:
        code += "        resq = nl.ndarray((d_head, PC), dtype=x_in.dtype, buffer=nl.sbuf)\n"
        xv, cv, sv, rv = "xq[:, g * F:(g + 1) * F]", "cq[:, g * F:(g + 1) * F]", "sq[:, g * F:(g + 1) * F]", \
            "resq[:, g * F:(g + 1) * F]"
    c2 = f"""            c2 = nl.ndarray((d_head, F), dtype=f32, buffer=nl.psum)
            c2[...] = nisa.nc_matmul(rep, {cv})
"""
    s2 = f"""            s2 = nl.ndarray((d_head, F), dtype=f32, buffer=nl.psum)
            s2[...] = nisa.nc_matmul(rep, {sv})
"""
    code += "        for g in nl.static_range(G):\n" + (s2 + c2 if s.sin_first else c2 + s2)
    code += f"""            xs = nl.ndarray((d_head, F), dtype=f32, buffer=nl.sbuf)
            xs[...] = nisa.tensor_tensor({xv}, s2, nl.multiply)
"""
    if s.psum_sum:
        code += f"""            xc = nl.ndarray((d_head, F), dtype=f32, buffer=nl.sbuf)
            xc[...] = nisa.tensor_tensor({xv}, c2, nl.multiply)
            rot = nl.zeros((d_head, F), dtype=f32, buffer=nl.psum)
            rot += nisa.nc_matmul(swap, xs)
            rot += nisa.nc_matmul(ident, xc)
            {rv} = nisa.activation(op=nl.copy, data=rot)
"""
    else:
        code += f"""            rot = nl.ndarray((d_head, F), dtype=f32, buffer=nl.psum)
            rot[...] = nisa.nc_matmul(swap, xs)
            xc = nl.ndarray((d_head, F), dtype=f32, buffer=nl.sbuf)
            xc[...] = nisa.tensor_tensor({xv}, c2, nl.multiply)
            {rv} = nisa.tensor_tensor(xc, rot, nl.add)
"""
    src = "res[:, o:o + PC]" if s.whole else "resq"
    src_h = ("res[0:h, o:o + PC]", "res[h:d_head, o:o + PC]") if s.whole else ("resq[0:h, :]", "resq[h:d_head, :]")
    code += f"""        if first_second_half_impl:
            nl.store(out[:, q * PC:(q + 1) * PC], value={src})
        else:
            nl.store(out[first, q * PC + i_f], value={src_h[0]})
            nl.store(out[second, q * PC + i_f], value={src_h[1]})
    return out
"""
    return code


def body(s: Schedule) -> str:
    return _pe(s) if s.method == "pe" else _halves(s)


def describe(s: Schedule) -> str:
    if s.method == "halves":
        how = "half-partition tiles, four products and two sums on Vector"
    else:
        how = ("x on all partitions, cos/sin repeated and halves swapped by Tensor-engine matmuls"
               f"{', sin first' if s.sin_first else ''}{', cos/sin loaded before x' if s.tables_first else ''}"
               f"{', x * cos2 accumulated in PSUM and evicted on Scalar' if s.psum_sum else ', sum on Vector'}")
    ahead = (f", loads {s.depth} piece(s) ahead" + (" into whole-input SBUF tiles" if s.whole else "")) \
        if s.depth else ", plain affine loop"
    return f"{how}, {s.cols}-column pieces{ahead}"


def candidates(mutation: str, s: Schedule, d: dict) -> list:
    if mutation == "chunk":          # columns per piece
        return [replace(s, cols=c) for c in step_choices(s.cols, COLS)]
    if mutation == "large_dma":
        return [replace(s, cols=c) for c in step_choices(s.cols, COLS) if c > s.cols]
    if mutation == "prefetch":
        out = [replace(s, depth=v, whole=s.whole and v > 0) for v in step_choices(s.depth, DEPTHS)]
        out.append(replace(s, whole=not s.whole, depth=max(1, s.depth)))
        return out + ([replace(s, tables_first=not s.tables_first)] if s.method == "pe" else [])
    if mutation == "method":
        return [replace(s, method="pe" if s.method == "halves" else "halves", sin_first=False, psum_sum=False,
                        tables_first=False)]
    if mutation == "order" and s.method == "pe":     # which table the Tensor engine and the DMA queue take first
        return [replace(s, sin_first=not s.sin_first), replace(s, tables_first=not s.tables_first)]
    if mutation == "engine":        # halves: move the cross-partition work to the Tensor engine
        if s.method == "halves":
            return [replace(s, method="pe")]
        # pe: the final sum on Tensor + Scalar instead of Vector, or the sin repeat first so that the Vector
        # product and the swap matmul overlap the cos repeat instead of waiting for it
        return [replace(s, psum_sum=not s.psum_sum), replace(s, sin_first=not s.sin_first)]
    return []


OPTIONS = {"large-dma": "large_dma", "fewer-bigger-instructions": "chunk", "max-tiles": "method",
           "reduce-on-tensor": "method", "multi-buffer": "prefetch", "spread-dma": "prefetch",
           "hoist-loads": "prefetch", "loop-order": "order", "engine-balance": "engine",
           "psum-accumulate": "engine"}

SAFER = ({"psum_sum": False}, {"tables_first": False}, {"sin_first": False}, {"whole": False}, {"depth": 0}, {"method": "halves"})
