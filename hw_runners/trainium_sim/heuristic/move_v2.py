"""The transpose and maxpool schedules of move.py rendered as NKI v2 kernels (the nki2 ISA profile): the same
methods, loads, PSUM groups, evictions, max chains and stores, written the v2 way. Every instruction writes
the dst it is given; the partition axis is first (a matrix's row blocks are one [128, BT, NN] tile instead of
BT par_dim tiles); the transposing DMA is nisa.dma_transpose; strided reads, scattered PSUM copies and
maxpool's overlapping row blocks are access patterns (`tensor.ap`) instead of index grids (NKI v2 removed
nl.arange and nl.mgrid). What a knob changes is said in move.py."""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.heuristic.gemm_v2 import _evict
from autocomp_zmq.hw_runners.trainium_sim.heuristic.move import POOL_HEAD, TR_HEAD, PoolSchedule, TrSchedule, pool_driver


def _matrix_loop(prefetch: bool, alloc: str, fill: str, body_indent: str = "        ") -> str:
    """The loop over the D0 matrices, up to the loaded matrix xs. With prefetch the next matrix's copies
    are issued before this matrix's transposes (DMAs start in program order), so the loop is unrolled."""
    if prefetch:
        return ((alloc + fill).format(i="    ", x="xs_next", d="0")
                + "    for d in nl.static_range(D0):\n        xs = xs_next\n"
                  "        if d + 1 < D0:                          # prefetch: the next matrix's copies go first\n"
                + (alloc + fill).format(i="            ", x="xs_next", d="d + 1"))
    return "    for d in nl.affine_range(D0):\n" + (alloc + fill).format(i=body_indent, x="xs", d="d")


def tr_body(s: TrSchedule) -> str:
    if s.method == "dma":
        return TR_HEAD + f"""    TB = {s.tb}
    assert B % TB == 0 and NN % 128 == 0
    for d in nl.affine_range(D0):
        for bi in nl.affine_range(B // TB):
            for ni in nl.affine_range(NN // 128):
                blk = nl.ndarray((128, TB), dtype=ref.dtype, buffer=nl.sbuf)
                nisa.dma_transpose(dst=blk, src=src[d, bi * TB:(bi + 1) * TB, ni * 128:(ni + 1) * 128])
                nisa.dma_copy(dst=dst[d, ni * 128:(ni + 1) * 128, bi * TB:(bi + 1) * TB], src=blk)
    return out
"""
    if s.rowgroup:
        return TR_HEAD + _rowgroup(s)
    if s.wide_load:
        fill = ("{i}for bi in nl.affine_range(BT):\n"
                "{i}    nisa.dma_copy(dst={x}[:, bi, :], src=src[{d}, bi * 128:(bi + 1) * 128, 0:NN])\n")
    else:
        fill = ("{i}for bi in nl.affine_range(BT):\n"
                "{i}    for ni in nl.affine_range(NT):\n"
                "{i}        nisa.dma_copy(dst={x}[:, bi, ni * 128:(ni + 1) * 128], "
                "src=src[{d}, bi * 128:(bi + 1) * 128, ni * 128:(ni + 1) * 128])\n")
    alloc = "{i}{x} = nl.ndarray((128, BT, NN), dtype=ref.dtype, buffer=nl.sbuf)\n"
    code = TR_HEAD + f"""    assert B % 128 == 0 and NN % 128 == 0
    BT, NT = B // 128, NN // 128
    G = {s.group}                                    # 128x128 transposes per PSUM bank
""" + _matrix_loop(s.prefetch, alloc, fill)
    loop_g = "nl.static_range" if s.evict == "alternate" else "nl.affine_range"
    code += "        for ni in nl.affine_range(NT):\n"
    if s.assemble:
        code += "            o = nl.ndarray((128, B), dtype=ref.dtype, buffer=nl.sbuf)\n"
    code += f"""            for g in {loop_g}(BT // G):
                ps = nl.ndarray((128, G * 128), dtype=nl.float32, buffer=nl.psum)
                for j in nl.affine_range(G):
                    nisa.nc_transpose(dst=ps[:, j * 128:(j + 1) * 128], data=xs[:, g * G + j, ni * 128:(ni + 1) * 128])
"""
    if s.assemble:
        return code + f"""                {_evict(s.evict, "o[:, g * G * 128:(g + 1) * G * 128]", "ps", "g")}
            nisa.dma_copy(dst=dst[d, ni * 128:(ni + 1) * 128, 0:B], src=o)
    return out
"""
    return code + f"""                ot = nl.ndarray((128, G * 128), dtype=ref.dtype, buffer=nl.sbuf)
                {_evict(s.evict, "ot", "ps", "g")}
                nisa.dma_copy(dst=dst[d, ni * 128:(ni + 1) * 128, g * G * 128:(g + 1) * G * 128], src=ot)
    return out
"""


def _rowgroup(s: TrSchedule) -> str:
    """Partition p copies in rows GB*p .. GB*p + GB - 1 of a matrix (one contiguous run per partition) and out
    output rows GN*q .. GN*q + GN - 1; the Tensor engine transposes column-strided views (n = GN*q + r) and
    the PSUM -> SBUF copy puts column b = GB*p + s in place (both sides read as [q, s, p] access patterns)."""
    alloc = "{i}{x} = nl.ndarray((128, GB * NN), dtype=ref.dtype, buffer=nl.sbuf)\n"
    fill = "{i}nisa.dma_copy(dst={x}, src=srcg[{d}])\n"
    code = """    assert B % 128 == 0 and NN % 128 == 0
    GB, GN = B // 128, NN // 128                # rows per partition: load side, store side
    assert GB * 128 <= 512                      # GB transposes fill one PSUM bank
    srcg = ref.reshape((D0, 128, GB * NN))      # [d, p, s*NN + n] = src[d, GB*p + s, n]
    dstg = out.reshape((D0, 128, GN * B))       # [d, q, r*B + b] = dst[d, GN*q + r, b]
""" + _matrix_loop(s.prefetch, alloc, fill)
    ev = _evict(s.evict, "res.ap([[GN * B, 128], [1, GB], [GB, 128]], offset=r * B)",
                "ps.ap([[GB * 128, 128], [128, GB], [1, 128]])", "r")
    return code + f"""        res = nl.ndarray((128, GN * B), dtype=ref.dtype, buffer=nl.sbuf)
        for r in nl.static_range(GN):
            ps = nl.ndarray((128, GB * 128), dtype=nl.float32, buffer=nl.psum)
            for s in nl.static_range(GB):       # columns n = GN*q + r of rows b = GB*p + s -> [q, p]
                nisa.nc_transpose(dst=ps[:, s * 128:(s + 1) * 128], data=xs[:, s * NN + r:(s + 1) * NN:GN])
            {ev}
        nisa.dma_copy(dst=dstg[d], src=res)
    return out
"""


# ---------------------------------------------------------------------------- maxpool
def _maxes(eng: str, name: str, shape: str, first: str, rest: list[str], indent: str) -> str:
    """name = max(first, rest[0]), then max with each later window offset, in place (one buffer per chain);
    a new [shape] tile unless shape is empty (then `name` is an existing tile, updated in place)."""
    on = ", engine=nisa.gpsimd_engine" if eng == "gpsimd" else ""
    alloc = f"{indent}{name} = nl.ndarray({shape}, dtype=in_tensor.dtype, buffer=nl.sbuf)\n" if shape else ""
    return (alloc + f"{indent}nisa.tensor_tensor(dst={name}, data1={first}, data2={rest[0]}, op=nl.maximum{on})\n"
            + "".join(f"{indent}for a in nl.static_range(2, K):\n"
                      f"{indent}    nisa.tensor_tensor(dst={name}, data1={name}, data2={r}, op=nl.maximum{on})\n"
                      for r in rest[1:]))


def pool_body(s: PoolSchedule) -> str:
    # Every block is (first output row, first column, partitions, rows per partition, columns); ragged
    # edges get their own smaller blocks (pool_driver), so every access stays in bounds without masks.
    if s.layout == "shift":
        return POOL_HEAD + f"""    R, CW = 1, WO

    def load(r0, c0, n, rr, cw):                # K row-shifted copies of rows r0 .. r0+n-1
        xs = []
        for a in nl.static_range(K):
            t = nl.ndarray((n, W), dtype=in_tensor.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=in_tensor[r0 + a:r0 + a + n, 0:W])
            xs.append(t)
        return xs

    def finish(xs, r0, c0, n, rr, cw):
        v = xs[0]                               # the vertical max, in place in the first copy
        for a in nl.static_range(1, K):
            r = xs[a]
{_maxes(s.veng, "v", "", "v", ["r"], "            ")}\
{_maxes(s.heng, "m", "(n, WO)", "v[:, 0:WO]", ["v[:, 1:WO + 1]", "v[:, a:a + WO]"], "        ")}\
        nisa.dma_copy(dst=out[r0:r0 + n, 0:WO], src=m)
""" + pool_driver(s.prefetch)
    return POOL_HEAD + f"""    R, CW = {s.rows}, {s.cw or "WO"}          # output rows per partition, columns per step

    def load(r0, c0, np_, rr, cw):              # partition p: output rows r0+p*rr .. +rr-1, columns c0 .. +cw-1
        x = nl.ndarray((np_, rr + K - 1, cw + K - 1), dtype=in_tensor.dtype, buffer=nl.sbuf)
        # the rr + K - 1 input rows of a partition overlap the next partition's: one DMA reads them all
        nisa.dma_copy(dst=x, src=in_tensor.ap([[rr * W, np_], [W, rr + K - 1], [1, cw + K - 1]], offset=r0 * W + c0))
        return x

    def finish(x, r0, c0, np_, rr, cw):
{_maxes(s.veng, "v", "(np_, rr, cw + K - 1)", "x[:, 0:rr, :]", ["x[:, 1:rr + 1, :]", "x[:, a:a + rr, :]"], "        ")}\
{_maxes(s.heng, "m", "(np_, rr, cw)", "v[:, :, 0:cw]", ["v[:, :, 1:cw + 1]", "v[:, :, a:a + cw]"], "        ")}\
        nisa.dma_copy(dst=out.ap([[rr * WO, np_], [WO, rr], [1, cw]], offset=r0 * WO + c0), src=m)
""" + pool_driver(s.prefetch, "nl.static_range")      # access-pattern offsets are Python ints
