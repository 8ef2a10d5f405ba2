"""The gemm schedules of gemm.py rendered as NKI v2 kernels (the nki2 ISA profile): the same loops, panels and
evictions, written the v2 way. Every instruction writes the dst it is given (nisa.dma_copy, nisa.nc_matmul,
nisa.tensor_copy / nisa.activation); the partition axis is always first (no par_dim), so an output block is
one [TM, BM, WN] tile; a PSUM tile's first matmul overwrites and the later ones accumulate (nc_matmul's
accumulate=None), so no zeroing is needed; a [128, dk, width] panel transfer is an access pattern
(`tensor.ap`) instead of index grids (NKI v2 removed nl.arange / nl.mgrid), so its loops are static."""
from __future__ import annotations

import textwrap

from autocomp_zmq.hw_runners.trainium_sim.heuristic.gemm import Schedule


def _evict(engine: str, dst: str, src: str, parity: str) -> str:
    """A statement moving PSUM tile `src` into SBUF `dst` (with the cast) on the chosen engine."""
    scalar = f"nisa.activation(dst={dst}, op=nl.copy, data={src})"
    vector = f"nisa.tensor_copy(dst={dst}, src={src})"
    if engine == "scalar":
        return scalar
    if engine == "vector":
        return vector
    return f"{scalar} if ({parity}) % 2 == 0 else {vector}"


def body(s: Schedule) -> str:
    head = f"""@nki.jit
def solution(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    TM, TN = {s.tm}, {s.tn}              # output tile: TM partitions x TN fp32 columns (one PSUM bank)
    KT = K // 128                        # contraction tiles on the partition axis
    assert K % 128 == 0 and M % ({s.bm} * TM) == 0 and N % ({s.bn} * TN) == 0
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
"""
    if s.level == 0:
        loop_j = "nl.static_range" if s.evict == "alternate" else "nl.affine_range"
        return head + f"""    for m in nl.affine_range(M // TM):
        for n in {loop_j}(N // TN):
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(KT):
                a = nl.ndarray((128, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((128, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, m * TM:(m + 1) * TM])
                nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, n * TN:(n + 1) * TN])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            res = nl.ndarray((TM, TN), dtype=result.dtype, buffer=nl.sbuf)
            {_evict(s.evict, "res", "acc", "n")}
            nisa.dma_copy(dst=result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], src=res)
    return result
"""
    return head + (_pipelined(s) if s.prefetch else _blocked(s))


def _range(s: Schedule) -> str:
    """Block loops: static (Python ints) when panel transfers are access patterns, whose offsets are ints."""
    return "nl.static_range" if s.dk > 1 else "nl.affine_range"


def _fill(s: Schedule, name: str, src: str, width: str, col0: str, indent: str) -> str:
    """Code copying a whole-K panel `name` [128, KT, width] from columns col0.. of `src`, dk k-tiles per DMA:
    partition p, k-tile j of transfer c and column w is src[(c * DK + j) * 128 + p, col0 + w]."""
    if s.dk == 1:
        return (f"{indent}for k in nl.affine_range(KT):\n"
                f"{indent}    nisa.dma_copy(dst={name}[:, k, :], src={src}[k * 128:(k + 1) * 128, {col0}:{col0} + {width}])\n")
    cols = "M" if src == "lhsT" else "N"
    return (f"{indent}for c in nl.static_range(KT // DK):\n"
            f"{indent}    nisa.dma_copy(dst={name}[:, c * DK:(c + 1) * DK, :], src={src}.ap(\n"
            f"{indent}        [[{cols}, 128], [128 * {cols}, DK], [1, {width}]], offset=c * DK * 128 * {cols} + {col0}))\n")


def _blocked(s: Schedule) -> str:
    """Levels 1 and 2: panels over all of K per block, bm x bn output tiles computed from them."""
    outer, inner = ("mb", "nb") if s.order == "mn" else ("nb", "mb")
    panel = {"mb": ("lhs_p", "lhsT", "WM", "mb"), "nb": ("rhs_p", "rhs", "WN", "nb")}

    def load(which: str, indent: str) -> str:
        name, src, width, var = panel[which]
        return (f"{indent}{name} = nl.ndarray((128, KT, {width}), dtype={src}.dtype, buffer=nl.sbuf)\n"
                if s.bufs == 2 else "") + _fill(s, name, src, width, f"{var} * {width}", indent)

    pre = ""
    if s.bufs == 1:   # one buffer per panel and for the output block, reused by every iteration
        pre = ("    lhs_p = nl.ndarray((128, KT, WM), dtype=lhsT.dtype, buffer=nl.sbuf)\n"
               "    rhs_p = nl.ndarray((128, KT, WN), dtype=rhs.dtype, buffer=nl.sbuf)\n"
               "    out_b = nl.ndarray((TM, BM, WN), dtype=result.dtype, buffer=nl.sbuf)\n")
    n_of = {"mb": "M // WM", "nb": "N // WN"}
    code = f"    BM, BN = {s.bm}, {s.bn}\n    WM, WN = BM * TM, BN * TN            # block width along M and N\n" + pre
    code += f"    DK = {s.dk}                             # k-tiles per panel DMA\n" if s.dk > 1 else ""
    code += f"    for {outer} in {_range(s)}({n_of[outer]}):\n"
    if s.level == 2:
        code += load(outer, "        ")
    code += f"        for {inner} in {_range(s)}({n_of[inner]}):\n"
    if s.level == 1:
        code += load("mb", "            ")
    code += load(inner if s.level == 2 else "nb", "            ")
    if s.bufs == 2:
        code += "            out_b = nl.ndarray((TM, BM, WN), dtype=result.dtype, buffer=nl.sbuf)\n"
    return code + _block(s, "            ")


def _block(s: Schedule, indent: str) -> str:
    """The matmuls of one (mb, nb) block from its panels lhs_p and rhs_p, evicted into out_b and copied out
    row block by row block, at `indent`; then the kernel's return."""
    loop_j = "nl.static_range" if s.evict == "alternate" else "nl.affine_range"
    dst = "out_b[:, i, j * TN:(j + 1) * TN]"
    body = f"""for i in {loop_j}(BM):
    for j in {loop_j}(BN):
        acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(KT):
            nisa.nc_matmul(dst=acc, stationary=lhs_p[:, k, i * TM:(i + 1) * TM], moving=rhs_p[:, k, j * TN:(j + 1) * TN])
        {_evict(s.evict, dst, "acc", "i + j")}
    nisa.dma_copy(dst=result[(mb * BM + i) * TM:(mb * BM + i + 1) * TM, nb * WN:(nb + 1) * WN], src=out_b[:, i, :])
"""
    return textwrap.indent(body, indent) + "    return result\n"


def _pipelined(s: Schedule) -> str:
    """Levels 1 and 2 with prefetching: the blocks are listed at trace time and the panels of block i + 1
    are copied in before block i is computed (DMAs run in program order, so a store that waits for block
    i's matmuls would otherwise hold back every later load)."""
    if s.order == "mn":
        order = "[(mb, nb) for mb in range(M // WM) for nb in range(N // WN)]"
        keep = "prev[0], rhs_panel(nb), mb"
    else:
        order = "[(mb, nb) for nb in range(N // WN) for mb in range(M // WM)]"
        keep = "lhs_panel(mb), prev[1], nb"
    outer = "mb" if s.order == "mn" else "nb"
    reuse = (f"        if prev is not None and prev[2] == {outer}:     # level 2: the outer panel stays resident\n"
             f"            return {keep}\n") if s.level == 2 else ""
    dk = f"    DK = {s.dk}                             # k-tiles per panel DMA\n" if s.dk > 1 else ""
    return f"""    BM, BN = {s.bm}, {s.bn}
    WM, WN = BM * TM, BN * TN            # block width along M and N
{dk}
    def lhs_panel(mb):                   # all K rows of lhsT's columns of M block mb
        p = nl.ndarray((128, KT, WM), dtype=lhsT.dtype, buffer=nl.sbuf)
{_fill(s, "p", "lhsT", "WM", "mb * WM", "        ")}        return p

    def rhs_panel(nb):                   # all K rows of rhs's columns of N block nb
        p = nl.ndarray((128, KT, WN), dtype=rhs.dtype, buffer=nl.sbuf)
{_fill(s, "p", "rhs", "WN", "nb * WN", "        ")}        return p

    def panels(mb, nb, prev):
{reuse}        return lhs_panel(mb), rhs_panel(nb), {outer}

    steps = {order}            # (mb, nb) blocks, known at trace time
    nxt = panels(steps[0][0], steps[0][1], None)
    for step in nl.static_range(len(steps)):
        mb, nb = steps[step]
        cur = nxt
        if step + 1 < len(steps):        # prefetch the next block's panels
            nxt = panels(steps[step + 1][0], steps[step + 1][1], cur)
        lhs_p, rhs_p = cur[0], cur[1]
        out_b = nl.ndarray((TM, BM, WN), dtype=result.dtype, buffer=nl.sbuf)
""" + _block(s, "        ")
