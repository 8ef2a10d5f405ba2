"""The gemm schedules of gemm.py rendered as NKI v2 kernels (the nki2 ISA profile): the same loops, panels and
evictions (gemm.blocks, shared with v1), written the v2 way. Every instruction writes the dst it is given
(nisa.dma_copy, nisa.nc_matmul, nisa.tensor_copy / nisa.activation); the partition axis is always first (no par_dim), so an output block is
one [TM, BM, WN] tile; a PSUM tile's first matmul overwrites and the later ones accumulate (nc_matmul's
accumulate=None), so no zeroing is needed; a [128, dk, width] panel transfer is an access pattern
(`tensor.ap`) instead of index grids (NKI v2 removed nl.arange / nl.mgrid), so its loops are static."""
from __future__ import annotations

import textwrap
from types import SimpleNamespace

from autocomp_zmq.hw_runners.trainium_sim.heuristic.gemm import Schedule, blocks


def _evict(engine: str, dst: str, src: str, parity: str) -> str:
    """A statement moving PSUM tile `src` into SBUF `dst` (with the cast) on the chosen engine."""
    scalar = f"nisa.activation(dst={dst}, op=nl.copy, data={src})"
    vector = f"nisa.tensor_copy(dst={dst}, src={src})"
    if engine == "scalar":
        return scalar
    if engine == "vector":
        return vector
    return f"{scalar} if ({parity}) % 2 == 0 else {vector}"


def _level0(s: Schedule) -> str:
    loop_j = "nl.static_range" if s.evict == "alternate" else "nl.affine_range"
    return f"""    for m in nl.affine_range(M // TM):
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


def _grids(s: Schedule) -> str:
    return f"    DK = {s.dk}                             # k-tiles per panel DMA\n" if s.dk > 1 else ""


# NKI v2: the partition axis first (no par_dim), access-pattern panel copies, static block loops when those
# copies' offsets must be Python ints
V2 = SimpleNamespace(level0=_level0, panel="(128, KT, {})", out_b="(TM, BM, WN)", grids=_grids, fill=_fill,
                     block=_block, range=_range)


def body(s: Schedule) -> str:
    return blocks(s, V2)
