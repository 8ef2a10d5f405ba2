"""GEMM schedules (result[M, N] = lhsT[K, M].T @ rhs[K, N], bf16 in and out) and their NKI kernels.

Level 0 loads one lhsT tile and one rhs tile per matmul (the naive kernel). Level 1 loads, per output
block of bm x bn tiles, the lhsT and rhs panels over all of K once and reuses them across the block.
Level 2 also keeps the outer loop's panel resident across the whole inner loop (order "mn": the lhsT
panel stays while the n blocks stream by; "nm": the rhs panel stays). A panel is [128, KT, width] (the
contraction tiles side by side on the free axis) and is loaded dk k-tiles per DMA: one transfer of a
[128, dk, width] view instead of dk transfers, since every transfer pays a fixed setup in its queue.
"""
from __future__ import annotations

import textwrap

from dataclasses import dataclass, replace
from types import SimpleNamespace

from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import SBUF_LIMIT, evict, step_choices

DIMS = ("K", "M", "N")                # problem.toml dims the schedules need
TM_CHOICES = (32, 64, 128)            # stationary free size (output partitions); <= gemm_stationary_fmax
TN_CHOICES = (128, 256, 512)          # moving free size (one PSUM bank of fp32); <= gemm_moving_fmax
BLOCK_CHOICES = (1, 2, 4, 8)
DK_CHOICES = (1, 2, 4, 8, 16, 32, 64)  # k-tiles per panel DMA


@dataclass(frozen=True)
class Schedule:
    tm: int = 128
    tn: int = 512
    bm: int = 1                # output tiles per block along M (level >= 1)
    bn: int = 1                # along N
    level: int = 0             # 0: per-matmul loads; 1: panels per block; 2: outer panel resident
    order: str = "mn"          # outer loop over M blocks ("mn") or N blocks ("nm")
    bufs: int = 2              # 2: panels allocated per iteration (DMA overlaps compute); 1: one buffer reused
    evict: str = "scalar"      # engine of the PSUM -> SBUF copy: scalar, vector or alternate
    prefetch: bool = False     # level >= 1: load the next block's panels before computing this block
    dk: int = 1                # level >= 1: k-tiles per panel DMA (a [128, dk, width] view per transfer)
    family: str = "gemm"


OPTIONS = {"max-tiles": "max_tiles", "hoist-loads": "hoist", "block-bigger": "block", "loop-order": "order",
           "multi-buffer": "multibuf", "engine-balance": "evict", "evict-efficiently": "evict",
           "large-dma": "large_dma", "spread-dma": "prefetch", "software-pipeline": "prefetch",
           "fewer-bigger-instructions": "max_tiles"}
SAFER = ({"dk": 1}, {"prefetch": False}, {"bufs": 1}, {"evict": "scalar"}, {"order": "mn"}, {"bn": 1}, {"bm": 1}, {"level": 0})


def default(dims: dict) -> Schedule:
    return Schedule()


def guess(code: str, dims: dict) -> Schedule:
    """The schedule closest to a kernel this module did not write: 128 x 512 tiles unless it never
    mentions the moving-tile maximum (then 128 x 128 tiles, the pmax-square naive choice)."""
    wide = "gemm_moving_fmax" in code or "512" in code
    return Schedule(tn=512 if wide else 128)


def sbuf_bytes(s: Schedule, d: dict) -> int:
    kt = d["K"] // 128
    if s.level == 0:
        return 2 * (s.tm + s.tn) * 2 + s.tn * 2 * 2
    panels = kt * s.bm * s.tm * 2 + kt * s.bn * s.tn * 2
    return panels * (2 if s.prefetch else 1) + s.bm * s.bn * s.tn * 2     # prefetch: next panels live too


def fits(s: Schedule, d: dict) -> bool:
    if s.tm not in TM_CHOICES or s.tn not in TN_CHOICES or s.bm not in BLOCK_CHOICES or s.bn not in BLOCK_CHOICES:
        return False
    if s.level not in (0, 1, 2) or s.order not in ("mn", "nm") or s.bufs not in (1, 2) \
            or s.evict not in ("scalar", "vector", "alternate"):
        return False
    if s.dk not in DK_CHOICES or (d["K"] // 128) % s.dk:
        return False
    if s.level == 0 and (s.bm, s.bn, s.order, s.bufs, s.prefetch, s.dk) != (1, 1, "mn", 2, False, 1):
        return False                      # level 0 has no blocks: one canonical form
    if s.prefetch and s.bufs == 1:
        return False                      # one buffer cannot be loaded while it is being read
    if d["K"] % 128 or d["M"] % (s.tm * s.bm) or d["N"] % (s.tn * s.bn):
        return False
    return sbuf_bytes(s, d) <= SBUF_LIMIT


def describe(s: Schedule) -> str:
    tiles = f"{s.tm}x{s.tn} output tiles"
    ev = {"scalar": "Scalar", "vector": "Vector", "alternate": "alternating Scalar/Vector"}[s.evict]
    if s.level == 0:
        return f"{tiles}, lhsT/rhs tiles loaded per matmul, PSUM evicted on {ev}"
    outer = "lhsT" if s.order == "mn" else "rhs"
    reuse = f", the {outer} panel resident across the inner loop" if s.level == 2 else ""
    return (f"{tiles} in blocks of {s.bm}x{s.bn} ({s.bm * s.tm} x {s.bn * s.tn}), full-K panels loaded once per "
            f"block{reuse}, {s.dk} k-tile(s) per panel DMA, {'double' if s.bufs == 2 else 'single'}-buffered "
            f"panels, PSUM evicted on {ev}"
            f"{', next panels prefetched' if s.prefetch else ''}")


def candidates(mutation: str, s: Schedule, d: dict) -> list[Schedule]:
    lvl0 = s.level == 0
    if mutation == "max_tiles":
        if (s.tm, s.tn) == (128, 512):
            return []
        bm = max(1, s.bm * s.tm // 128)
        bn = max(1, s.bn * s.tn // 512)
        return [replace(s, tm=128, tn=512, bm=bm, bn=bn), replace(s, tm=128, tn=max(s.tn, 256), bm=bm)]
    if mutation == "hoist":
        if lvl0:
            return [replace(s, level=1, bm=bm, bn=bn, bufs=b) for bm in (1, 2, 4) for bn in (1, 2) for b in (2, 1)]
        if s.level == 1:
            return [replace(s, level=2), replace(s, level=2, order="nm" if s.order == "mn" else "mn")]
        return []
    if mutation == "block":
        if lvl0:      # blocks of output tiles need shared panels: the first blocked level
            return [replace(s, level=1, bm=2), replace(s, level=1, bn=2), replace(s, level=1, bm=2, bn=2)]
        return [replace(s, bm=s.bm * 2), replace(s, bn=s.bn * 2), replace(s, bm=s.bm * 2, bn=s.bn * 2),
                replace(s, bm=max(1, s.bm // 2), bn=s.bn * 2), replace(s, bm=s.bm * 2, bn=max(1, s.bn // 2))]
    if mutation == "order":
        return [] if lvl0 else [replace(s, order="nm" if s.order == "mn" else "mn")]
    if mutation == "multibuf":
        return [replace(s, bufs=2)] if s.bufs == 1 else []
    if mutation == "prefetch":
        if lvl0:      # per-matmul tiles have nothing to prefetch: prefetched per-block panels instead
            return [replace(s, level=1, prefetch=True), replace(s, level=1, bm=2, prefetch=True)]
        return [replace(s, prefetch=True, bufs=2)] if not s.prefetch else []
    if mutation == "evict":
        return [replace(s, evict=e) for e in ("alternate", "vector", "scalar") if e != s.evict]
    if mutation == "large_dma":
        if lvl0:
            return [replace(s, tn=v) for v in TN_CHOICES if v > s.tn] + candidates("hoist", s, d)[:2]
        # more k-tiles per transfer (fewer fixed setups), or widen whichever panel has the shorter rows
        merged = [replace(s, dk=v) for v in step_choices(s.dk, DK_CHOICES) + [s.dk * 4]
                  if v in DK_CHOICES and v != s.dk]
        if s.bm * s.tm <= s.bn * s.tn:
            return merged + [replace(s, bm=s.bm * 2), replace(s, bm=s.bm * 4)]
        return merged + [replace(s, bn=s.bn * 2), replace(s, bn=s.bn * 4)]
    return []


def head(s: Schedule) -> str:
    """The kernel's head in both NKI dialects: sizes and the output."""
    return f"""@nki.jit
def solution(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    TM, TN = {s.tm}, {s.tn}              # output tile: TM partitions x TN fp32 columns (one PSUM bank)
    KT = K // 128                        # contraction tiles on the partition axis
    assert K % 128 == 0 and M % ({s.bm} * TM) == 0 and N % ({s.bn} * TN) == 0
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
"""


def body(s: Schedule) -> str:
    return blocks(s, V1)


def blocks(s: Schedule, d) -> str:
    """The kernel of `s` in the dialect `d` (V1 here, gemm_v2.V2): the loops and panels are shared, the
    dialect gives the level-0 loop, the tile shapes, the panel fill and the block's matmuls."""
    if s.level == 0:
        return head(s) + d.level0(s)
    return head(s) + (_pipelined(s, d) if s.prefetch else _blocked(s, d))


def _level0(s: Schedule) -> str:
    loop_j = "nl.static_range" if s.evict == "alternate" else "nl.affine_range"
    return f"""    for m in nl.affine_range(M // TM):
        for n in {loop_j}(N // TN):
            acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(KT):
                a = nl.load(lhsT[k * 128:(k + 1) * 128, m * TM:(m + 1) * TM])
                b = nl.load(rhs[k * 128:(k + 1) * 128, n * TN:(n + 1) * TN])
                acc += nisa.nc_matmul(a, b)
            res = {evict(s.evict, "acc", "result.dtype", "n")}
            nl.store(result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], value=res)
    return result
"""


def _grids(s: Schedule) -> str:
    """Index grids of a [128, DK, width] panel view (one DMA moves DK k-tiles of a panel)."""
    if s.dk == 1:
        return ""
    return (f"    DK = {s.dk}                             # k-tiles per panel DMA\n"
            "    i_p = nl.arange(128)[:, None, None]\n    i_k = nl.arange(DK)[None, :, None]\n"
            "    i_wm = nl.arange(WM)[None, None, :]\n    i_wn = nl.arange(WN)[None, None, :]\n")


def _fill(s: Schedule, name: str, src: str, width: str, col0: str, indent: str) -> str:
    """Code loading a whole-K panel `name` [128, KT, width] from columns col0.. of `src`, dk k-tiles per DMA."""
    if s.dk == 1:
        return (f"{indent}for k in nl.affine_range(KT):\n"
                f"{indent}    {name}[:, k, :] = nl.load({src}[k * 128:(k + 1) * 128, {col0}:{col0} + {width}])\n")
    grid = "i_wm" if width == "WM" else "i_wn"
    return (f"{indent}for c in nl.affine_range(KT // DK):\n"
            f"{indent}    {name}[i_p, c * DK + i_k, {grid}] = nl.load({src}[(c * DK + i_k) * 128 + i_p, {col0} + {grid}])\n")


def _blocked(s: Schedule, d) -> str:
    """Levels 1 and 2: panels over all of K per block, bm x bn output tiles computed from them."""
    outer, inner = ("mb", "nb") if s.order == "mn" else ("nb", "mb")
    panel = {"mb": ("lhs_p", "lhsT", "WM", "mb"), "nb": ("rhs_p", "rhs", "WN", "nb")}

    def load(which: str, indent: str) -> str:
        name, src, width, var = panel[which]
        return (f"{indent}{name} = nl.ndarray({d.panel.format(width)}, dtype={src}.dtype, buffer=nl.sbuf)\n"
                if s.bufs == 2 else "") + d.fill(s, name, src, width, f"{var} * {width}", indent)

    pre = ""
    if s.bufs == 1:   # one buffer per panel and for the output block, reused by every iteration
        pre = (f"    lhs_p = nl.ndarray({d.panel.format('WM')}, dtype=lhsT.dtype, buffer=nl.sbuf)\n"
               f"    rhs_p = nl.ndarray({d.panel.format('WN')}, dtype=rhs.dtype, buffer=nl.sbuf)\n"
               f"    out_b = nl.ndarray({d.out_b}, dtype=result.dtype, buffer=nl.sbuf)\n")
    n_of = {"mb": "M // WM", "nb": "N // WN"}
    code = f"    BM, BN = {s.bm}, {s.bn}\n    WM, WN = BM * TM, BN * TN            # block width along M and N\n" + pre
    code += d.grids(s)
    code += f"    for {outer} in {d.range(s)}({n_of[outer]}):\n"
    if s.level == 2:
        code += load(outer, "        ")
    code += f"        for {inner} in {d.range(s)}({n_of[inner]}):\n"
    if s.level == 1:
        code += load("mb", "            ")
    code += load(inner if s.level == 2 else "nb", "            ")
    if s.bufs == 2:
        code += f"            out_b = nl.ndarray({d.out_b}, dtype=result.dtype, buffer=nl.sbuf)\n"
    return code + d.block(s, "            ")


def _block(s: Schedule, indent: str) -> str:
    """The matmuls of one (mb, nb) block from its panels lhs_p and rhs_p, evicted into out_b and stored row by
    row, at `indent`; then the kernel's return."""
    loop_j = "nl.static_range" if s.evict == "alternate" else "nl.affine_range"
    body = f"""for i in {loop_j}(BM):
    for j in {loop_j}(BN):
        acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(KT):
            acc += nisa.nc_matmul(lhs_p[:, k, i * TM:(i + 1) * TM], rhs_p[:, k, j * TN:(j + 1) * TN])
        out_b[i, :, j * TN:(j + 1) * TN] = {evict(s.evict, "acc", "result.dtype", "i + j")}
    nl.store(result[(mb * BM + i) * TM:(mb * BM + i + 1) * TM, nb * WN:(nb + 1) * WN], value=out_b[i])
"""
    return textwrap.indent(body, indent) + "    return result\n"


def _pipelined(s: Schedule, d) -> str:
    """Levels 1 and 2 with prefetching: the blocks are listed at trace time and the panels of block i + 1
    are loaded before block i is computed (DMAs run in program order, so a store that waits for block i's
    matmuls would otherwise hold back every later load)."""
    if s.order == "mn":
        order = "[(mb, nb) for mb in range(M // WM) for nb in range(N // WN)]"
        keep = "prev[0], rhs_panel(nb), mb"
    else:
        order = "[(mb, nb) for nb in range(N // WN) for mb in range(M // WM)]"
        keep = "lhs_panel(mb), prev[1], nb"
    outer = "mb" if s.order == "mn" else "nb"
    reuse = (f"        if prev is not None and prev[2] == {outer}:     # level 2: the outer panel stays resident\n"
             f"            return {keep}\n") if s.level == 2 else ""
    return f"""    BM, BN = {s.bm}, {s.bn}
    WM, WN = BM * TM, BN * TN            # block width along M and N
{d.grids(s)}
    def lhs_panel(mb):                   # all K rows of lhsT's columns of M block mb
        p = nl.ndarray({d.panel.format("WM")}, dtype=lhsT.dtype, buffer=nl.sbuf)
{d.fill(s, "p", "lhsT", "WM", "mb * WM", "        ")}        return p

    def rhs_panel(nb):                   # all K rows of rhs's columns of N block nb
        p = nl.ndarray({d.panel.format("WN")}, dtype=rhs.dtype, buffer=nl.sbuf)
{d.fill(s, "p", "rhs", "WN", "nb * WN", "        ")}        return p

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
        out_b = nl.ndarray({d.out_b}, dtype=result.dtype, buffer=nl.sbuf)
""" + d.block(s, "        ")


# NKI v1: panels and output blocks with a par_dim axis, index-grid panel loads, plain block loops
V1 = SimpleNamespace(level0=_level0, panel="(nl.par_dim(128), KT, {})", out_b="(BM, nl.par_dim(TM), WN)",
                     grids=_grids, fill=_fill, block=_block, range=lambda s: "nl.affine_range")
