"""The RoPE schedules of rope.py rendered as NKI v2 kernels (the nki2 ISA profile): the same methods, pieces,
pipelines and Tensor-engine repeats and swaps, written the v2 way. Every instruction writes the dst it is
given; a PSUM tile's first matmul overwrites and the next accumulates (the psum_sum identity matmul needs no
zeroed tile); the constant matrices are nisa.affine_select patterns over (partition k, column m) instead of
index-grid predicates; the rows of a rotation half are a slice (strided when interleaved) instead of an index
grid (NKI v2 removed nl.mgrid). What a knob changes is said in rope.py."""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.heuristic.rope import Schedule, _head, _piece_loop

# the HBM rows of half k (0: first, 1: second) of every rotation pair, as a view the kernel can copy
HALF = """    def half(t, k, cols):       # rows of half k (0: first, 1: second) of every rotation pair
        return t[k * h:(k + 1) * h, cols] if first_second_half_impl else t[k:d_head:2, cols]
"""


def _tile(name: str, shape: str, dtype: str = "x_in.dtype", buf: str = "sbuf", ind: str = "        ") -> str:
    return f"{ind}{name} = nl.ndarray({shape}, dtype={dtype}, buffer=nl.{buf})\n"


def _tt(dst: str, a: str, b: str, op: str, ind: str = "        ") -> str:
    return f"{ind}nisa.tensor_tensor(dst={dst}, data1={a}, data2={b}, op=nl.{op})\n"


def _halves(s: Schedule) -> str:
    code = _head(s) + HALF
    loads = (("first", "half(x_in, 0, cols)"), ("second", "half(x_in, 1, cols)"), ("c", "cos[:, cols]"),
             ("s", "sin[:, cols]"))
    if s.depth == 0:
        code += "    for j in nl.affine_range(NP):\n        cols = slice(j * PC, (j + 1) * PC)\n"
        code += "".join(_tile(t, "(h, PC)") + f"        nisa.dma_copy(dst={t}, src={src})\n" for t, src in loads)
    else:
        if s.whole:     # every input in one SBUF tile, filled piece by piece
            code += "".join(_tile(f"{t}_t", "(h, S)", ind="    ") for t, _ in loads)
            code += ("    def load(j):\n        cols = slice(j * PC, (j + 1) * PC)\n"
                     + "".join(f"        nisa.dma_copy(dst={t}_t[:, cols], src={src})\n" for t, src in loads)
                     + "        return None\n")
            pick = ("        first, second = first_t[:, cols], second_t[:, cols]\n"
                    "        c, s = c_t[:, cols], s_t[:, cols]\n")
        else:
            code += ("    def load(j):\n        cols = slice(j * PC, (j + 1) * PC)\n"
                     + "".join(_tile(t, "(h, PC)") + f"        nisa.dma_copy(dst={t}, src={src})\n"
                               for t, src in loads)
                     + "        return first, second, c, s\n")
            pick = "        first, second, c, s = loaded[j]\n"
        code += f"""
    D = {s.depth}                                   # pieces loaded ahead of the compute
    loaded = [load(j) for j in range(min(D, NP))]
    for j in nl.static_range(NP):
        if j + D < NP:
            loaded.append(load(j + D))
        cols = slice(j * PC, (j + 1) * PC)
{pick}"""
    prods = (("first_cos", "first", "c"), ("second_sin", "second", "s"), ("second_cos", "second", "c"),
             ("first_sin", "first", "s"))
    code += "".join(_tile(p, "(h, PC)", "f32") + _tt(p, a, b, "multiply") for p, a, b in prods)
    code += (_tile("out_first", "(h, PC)") + _tt("out_first", "first_cos", "second_sin", "subtract")
             + _tile("out_second", "(h, PC)") + _tt("out_second", "second_cos", "first_sin", "add"))
    return code + """        nisa.dma_copy(dst=half(out, 0, cols), src=out_first)
        nisa.dma_copy(dst=half(out, 1, cols), src=out_second)
    return out
"""


def _select(name: str, rows: str, step: int, cm: int, offset: str) -> str:
    """name [rows, d_head] = 1 where offset + cm * k + step * m == 0 (partition k, column m), else 0."""
    return (_tile(name, f"({rows}, d_head)", "f32", ind="    ")
            + f"    nisa.affine_select(dst={name}, pattern=[[{step}, d_head]], channel_multiplier={cm}, "
              f"on_true_tile=ones[0:{rows}, :],\n                       on_false_value=0.0, cmp_op=nl.equal, "
              f"offset={offset})\n")


def _pe(s: Schedule) -> str:
    code = _head(s) + HALF + """    F = min(PC, nl.tile_size.gemm_moving_fmax)   # columns per matmul (one PSUM bank of fp32)
    G = PC // F
    # constant matrices, built once on GpSimd from affine predicates over (partition k, column m)
    ones = nl.ndarray((d_head, d_head), dtype=f32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
""" + _select("to_second", "d_head", 1, -1, "-h") + _select("to_first", "d_head", -1, 1, "-h") + """\
    swap = nl.ndarray((d_head, d_head), dtype=f32, buffer=nl.sbuf)  # W @ v = [-second(v); first(v)]
    nisa.tensor_tensor(dst=swap, data1=to_second, data2=to_first, op=nl.subtract)
""" + _select("low", "h", 1, -1, "0") + _select("high", "h", 1, -1, "-h") + """\
    rep = nl.ndarray((h, d_head), dtype=f32, buffer=nl.sbuf)        # rep.T @ c = [c; c]
    nisa.tensor_tensor(dst=rep, data1=low, data2=high, op=nl.add)
"""
    if s.psum_sum:     # identity: adds x * cos2 into the swap's PSUM bank
        code += _select("ident", "d_head", 1, -1, "0")
    fill_x = ("        nisa.dma_copy(dst={x}[0:h, {cols}], src=half(x_in, 0, slice(q * PC, (q + 1) * PC)))\n"
              "        nisa.dma_copy(dst={x}[h:d_head, {cols}], src=half(x_in, 1, slice(q * PC, (q + 1) * PC)))\n")
    fill_c = "        nisa.dma_copy(dst={c}[:, {cols}], src=cos[:, q * PC:(q + 1) * PC])\n"
    fill_s = "        nisa.dma_copy(dst={s}[:, {cols}], src=sin[:, q * PC:(q + 1) * PC])\n"
    if not s.tables_first:
        fill = fill_x + fill_c + fill_s
    else:    # the tables first (the first matmuls need only them), in the order the matmuls use them
        fill = (fill_s + fill_c if s.sin_first else fill_c + fill_s) + fill_x
    if s.whole:
        code += ("\n" + _tile("x", "(d_head, S)", ind="    ") + _tile("c", "(h, S)", ind="    ")
                 + _tile("s", "(h, S)", ind="    ") + _tile("res", "(d_head, S)", ind="    ")
                 + "\n    def load(q):\n" + fill.format(x="x", c="c", s="s", cols="q * PC:(q + 1) * PC")
                 + "        return q * PC\n")
    else:
        code += ("\n    def load(q):\n" + _tile("xq", "(d_head, PC)") + _tile("cq", "(h, PC)") + _tile("sq", "(h, PC)")
                 + fill.format(x="xq", c="cq", s="sq", cols="0:PC") + "        return xq, cq, sq\n")
    code += _piece_loop(s)
    if s.whole:
        xv, cv, sv, rv = (f"{t}[:, o + g * F:o + (g + 1) * F]" for t in ("x", "c", "s", "res"))
    else:
        code += _tile("resq", "(d_head, PC)")
        xv, cv, sv, rv = (f"{t}[:, g * F:(g + 1) * F]" for t in ("xq", "cq", "sq", "resq"))
    ind = "            "
    c2 = _tile("c2", "(d_head, F)", "f32", "psum", ind) + f"{ind}nisa.nc_matmul(dst=c2, stationary=rep, moving={cv})\n"
    s2 = _tile("s2", "(d_head, F)", "f32", "psum", ind) + f"{ind}nisa.nc_matmul(dst=s2, stationary=rep, moving={sv})\n"
    code += "        for g in nl.static_range(G):\n" + (s2 + c2 if s.sin_first else c2 + s2)
    code += _tile("xs", "(d_head, F)", "f32", ind=ind) + _tt("xs", xv, "s2", "multiply", ind)
    xc = _tile("xc", "(d_head, F)", "f32", ind=ind) + _tt("xc", xv, "c2", "multiply", ind)
    rot = _tile("rot", "(d_head, F)", "f32", "psum", ind) + f"{ind}nisa.nc_matmul(dst=rot, stationary=swap, moving=xs)\n"
    if s.psum_sum:     # the second matmul into rot accumulates (accumulate=None)
        code += (xc + rot + f"{ind}nisa.nc_matmul(dst=rot, stationary=ident, moving=xc)\n"
                 f"{ind}nisa.activation(dst={rv}, op=nl.copy, data=rot)\n")
    else:
        code += rot + xc + _tt(rv, "xc", "rot", "add", ind)
    src = ("res[0:h, o:o + PC]", "res[h:d_head, o:o + PC]") if s.whole else ("resq[0:h, :]", "resq[h:d_head, :]")
    return code + f"""        nisa.dma_copy(dst=half(out, 0, slice(q * PC, (q + 1) * PC)), src={src[0]})
        nisa.dma_copy(dst=half(out, 1, slice(q * PC, (q + 1) * PC)), src={src[1]})
    return out
"""


def body(s: Schedule) -> str:
    return _pe(s) if s.method == "pe" else _halves(s)
