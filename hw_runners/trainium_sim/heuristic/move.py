"""Data-movement-bound families: transpose (swap an axis with everything after it) and 2-D max pooling.

transpose: the naive kernel transposes 128 x TB blocks with transposing DMAs (element-wise descriptors,
~1% of DMA bandwidth). The "pe" method loads whole row blocks with contiguous DMAs and transposes
128x128 blocks on the Tensor engine into PSUM (G per bank, so one eviction moves G blocks), then
stores whole output rows.
maxpool: "shift" loads K row-shifted copies of each 128-row tile (K x the input traffic); "block" gives
each partition R consecutive output rows and loads their R + K - 1 input rows in one overlapping DMA,
so the vertical max runs along the free axis and the input is read (R + K - 1) / R times.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import SBUF_LIMIT, evict, ew_engine, step_choices

ENGINES = ("vector", "gpsimd")


# ---------------------------------------------------------------------------- transpose
@dataclass(frozen=True)
class TrSchedule:
    method: str = "pe"         # pe: nc_transpose on the Tensor engine; dma: load_transpose2d blocks
    tb: int = 128              # dma: source rows (output columns) per transposing load
    group: int = 1             # pe: 128x128 transposes per PSUM tile (<= 4: one 2 KiB bank of fp32)
    evict: str = "scalar"      # pe: engine of the PSUM -> SBUF copies
    assemble: bool = False     # pe: gather a whole output row block in SBUF and store it with one DMA
    wide_load: bool = False    # pe: load whole source rows (one contiguous DMA per 128 rows)
    prefetch: bool = False     # pe: issue the next matrix's loads before this matrix's transposes
    rowgroup: bool = False     # pe: partition p holds B/128 consecutive rows (one contiguous load and store
                               # per matrix); strided-view transposes, reordered while evicting PSUM
    family: str = "transpose"


def _tr_fits(s: TrSchedule, d: dict) -> bool:
    b, n = d["B"], d["N"]
    if b % 128 or n % 128 or s.method not in ("dma", "pe") or s.evict not in ("scalar", "vector", "alternate"):
        return False
    if s.method == "dma":
        return s.tb in (128, 256, 512) and b % s.tb == 0 and s == TrSchedule(method="dma", tb=s.tb)
    if s.group not in (1, 2, 4) or (b // 128) % s.group:
        return False
    if s.rowgroup:      # the B/128 transposes of one output row group share a PSUM bank (<= 512 fp32)
        return (b <= 512 and (s.group, s.assemble, s.wide_load) == (1, False, False)
                and ((1 + s.prefetch) * b * n // 128 + n * b // 128) * 4 <= SBUF_LIMIT)
    return ((1 + 2 * s.prefetch) * (b // 128) * n + 2 * b) * 4 <= SBUF_LIMIT


# the kernel's head in both NKI dialects: the (D0, B, NN) view of the input and the (D0, NN, B) output
TR_HEAD = """@nki.jit
def solution(ref, dim):
    shape = ref.shape
    D0, B, NN = 1, shape[dim], 1              # view the input as (D0, B, NN) around `dim`
    for v in shape[:dim]:
        D0 *= v
    for v in shape[dim + 1:]:
        NN *= v
    out = nl.ndarray(tuple(shape[:dim]) + tuple(shape[dim + 1:]) + (B,), dtype=ref.dtype, buffer=nl.shared_hbm)
    src = ref.reshape((D0, B, NN))
    dst = out.reshape((D0, NN, B))
"""


def _tr_body(s: TrSchedule) -> str:
    head = TR_HEAD
    if s.method == "dma":
        return head + f"""    TB = {s.tb}
    assert B % TB == 0 and NN % 128 == 0
    for d in nl.affine_range(D0):
        for bi in nl.affine_range(B // TB):
            for ni in nl.affine_range(NN // 128):
                blk = nl.load_transpose2d(src[d, bi * TB:(bi + 1) * TB, ni * 128:(ni + 1) * 128])   # [128, TB]
                nl.store(dst[d, ni * 128:(ni + 1) * 128, bi * TB:(bi + 1) * TB], value=blk)
    return out
"""
    if s.rowgroup:
        return head + _tr_rowgroup(s)
    if s.wide_load:
        fill = ("{i}for bi in nl.affine_range(BT):\n"
                "{i}    {x}[bi] = nl.load(src[{d}, bi * 128:(bi + 1) * 128, 0:NN])\n")
    else:
        fill = ("{i}for bi in nl.affine_range(BT):\n"
                "{i}    for ni in nl.affine_range(NT):\n"
                "{i}        {x}[bi, :, ni * 128:(ni + 1) * 128] = "
                "nl.load(src[{d}, bi * 128:(bi + 1) * 128, ni * 128:(ni + 1) * 128])\n")
    alloc = "{i}{x} = nl.ndarray((BT, nl.par_dim(128), NN), dtype=ref.dtype, buffer=nl.sbuf)\n"
    code = head + f"""    assert B % 128 == 0 and NN % 128 == 0
    BT, NT = B // 128, NN // 128
    G = {s.group}                                    # 128x128 transposes per PSUM bank
"""
    if s.prefetch:
        code += (alloc + fill).format(i="    ", x="xs_next", d="0")
        code += ("    for d in nl.static_range(D0):\n        xs = xs_next\n        if d + 1 < D0:\n"
                 + (alloc + fill).format(i="            ", x="xs_next", d="d + 1"))
    else:
        code += "    for d in nl.affine_range(D0):\n" + (alloc + fill).format(i="        ", x="xs", d="d")
    loop_g = "nl.static_range" if s.evict == "alternate" else "nl.affine_range"
    code += "        for ni in nl.affine_range(NT):\n"
    if s.assemble:
        code += "            o = nl.ndarray((nl.par_dim(128), B), dtype=ref.dtype, buffer=nl.sbuf)\n"
    code += f"""            for g in {loop_g}(BT // G):
                ps = nl.ndarray((128, G * 128), dtype=nl.float32, buffer=nl.psum)
                for j in nl.affine_range(G):
                    ps[:, j * 128:(j + 1) * 128] = nisa.nc_transpose(xs[g * G + j, :, ni * 128:(ni + 1) * 128])
"""
    ev = evict(s.evict, "ps", "ref.dtype", "g")
    if s.assemble:
        code += f"""                o[:, g * G * 128:(g + 1) * G * 128] = {ev}
            nl.store(dst[d, ni * 128:(ni + 1) * 128, 0:B], value=o)
    return out
"""
    else:
        code += f"""                ot = {ev}
                nl.store(dst[d, ni * 128:(ni + 1) * 128, g * G * 128:(g + 1) * G * 128], value=ot)
    return out
"""
    return code


def _tr_rowgroup(s: TrSchedule) -> str:
    """Partition p loads rows GB*p .. GB*p + GB - 1 of a matrix (one contiguous run per partition) and
    stores output rows GN*q .. GN*q + GN - 1; the Tensor engine transposes column-strided views
    (n = GN*q + r) and the PSUM -> SBUF copy puts column b = GB*p + s in place."""
    load = "xs_next[...] = nl.load(srcg[{d}])"
    alloc = "xs_next = nl.ndarray((128, GB * NN), dtype=ref.dtype, buffer=nl.sbuf)"
    code = """    assert B % 128 == 0 and NN % 128 == 0
    GB, GN = B // 128, NN // 128                # rows per partition: load side, store side
    assert GB * 128 <= 512                      # GB transposes fill one PSUM bank
    srcg = src.reshape((D0, 128, GB * NN))      # [d, p, s*NN + n] = src[d, GB*p + s, n]
    dstg = dst.reshape((D0, 128, GN * B))       # [d, q, r*B + b] = dst[d, GN*q + r, b]
    i_q, i_s, i_p = nl.mgrid[0:128, 0:GB, 0:128]
"""
    if s.prefetch:
        code += f"""    {alloc}
    {load.format(d="0")}
    for d in nl.static_range(D0):
        xs = xs_next
        if d + 1 < D0:                          # prefetch: the next matrix's load goes first
            {alloc}
            {load.format(d="d + 1")}
"""
    else:
        code += f"""    for d in nl.affine_range(D0):
        {alloc}
        {load.format(d="d")}
        xs = xs_next
"""
    ev = evict(s.evict, "ps[i_q, i_s * 128 + i_p]", "ref.dtype", "r")
    return code + f"""        res = nl.ndarray((128, GN * B), dtype=ref.dtype, buffer=nl.sbuf)
        for r in nl.static_range(GN):
            ps = nl.ndarray((128, GB * 128), dtype=nl.float32, buffer=nl.psum)
            for s in nl.static_range(GB):       # columns n = GN*q + r of rows b = GB*p + s -> [q, p]
                ps[:, s * 128:(s + 1) * 128] = nisa.nc_transpose(xs[:, s * NN + r:(s + 1) * NN:GN])
            res[i_q, r * B + GB * i_p + i_s] = {ev}
        nl.store(dstg[d], value=res)
    return out
"""


def _tr_describe(s: TrSchedule) -> str:
    if s.method == "dma":
        return f"transposing DMAs (load_transpose2d) of {s.tb}x128 blocks"
    if s.rowgroup:
        return (f"Tensor-engine transposes of strided views, B/128 consecutive rows per partition (one "
                f"contiguous load and store per matrix), evicted on {s.evict}"
                f"{', next matrix prefetched' if s.prefetch else ''}")
    return (f"Tensor-engine transposes, {s.group} per PSUM bank evicted on {s.evict}, "
            f"{'whole-row' if s.wide_load else '128-column'} loads, "
            f"{'assembled whole-row' if s.assemble else 'per-bank'} stores"
            f"{', next matrix prefetched' if s.prefetch else ''}")


def _tr_candidates(mutation: str, s: TrSchedule, d: dict) -> list:
    if s.method == "dma":
        if mutation == "method":
            return [TrSchedule(), TrSchedule(group=4), TrSchedule(wide_load=True), TrSchedule(rowgroup=True)]
        if mutation == "max_tiles":
            return [replace(s, tb=v) for v in (256, 512) if v > s.tb]
        return []
    grouped = replace(s, rowgroup=True, group=1, assemble=False, wide_load=False)
    if mutation == "max_tiles":
        return [replace(s, group=g) for g in step_choices(s.group, (1, 2, 4)) if g > s.group] + \
            [grouped] * (not s.rowgroup)
    if mutation == "evict":
        return [replace(s, evict=e) for e in ("alternate", "vector", "scalar") if e != s.evict]
    if mutation == "large_dma":
        if s.rowgroup:
            return []
        return [replace(s, wide_load=True)] * (not s.wide_load) + [replace(s, assemble=True)] * (not s.assemble) \
            + [grouped]
    if mutation == "prefetch":
        return [replace(s, prefetch=True)] if not s.prefetch else []
    return []


TRANSPOSE = SimpleNamespace(
    DIMS=("B", "N"), Schedule=TrSchedule, default=lambda dims: TrSchedule(), fits=_tr_fits,
    # a kernel with transposing DMAs starts from the dma method; any other from 128x128 Tensor transposes
    guess=lambda code, dims: TrSchedule(method="dma") if "load_transpose2d" in code else TrSchedule(),
    body=_tr_body, describe=_tr_describe,
    candidates=_tr_candidates,
    OPTIONS={"pre-transposed-operands": "method", "engine-balance": "evict", "evict-efficiently": "evict",
             "fewer-bigger-instructions": "max_tiles", "max-tiles": "max_tiles", "block-bigger": "max_tiles",
             "large-dma": "large_dma", "hoist-loads": "large_dma", "multi-buffer": "prefetch",
             "spread-dma": "prefetch"},
    SAFER=({"prefetch": False}, {"evict": "scalar"}, {"rowgroup": False}, {"assemble": False}, {"wide_load": False}, {"group": 1}))


# ---------------------------------------------------------------------------- maxpool
@dataclass(frozen=True)
class PoolSchedule:
    layout: str = "shift"      # shift: K shifted row tiles per 128 rows; block: R rows per partition
    rows: int = 1              # block: output rows per partition
    cw: int = 0                # block: output columns per step (0: whole rows)
    veng: str = "vector"       # engine of the vertical max (across rows)
    heng: str = "vector"       # engine of the horizontal max (along a row)
    prefetch: bool = False     # issue the next block's load before this block's max and store
    family: str = "maxpool"


def _pool_sbuf(s: PoolSchedule, d: dict) -> int:
    k = d["K"]
    cw = s.cw or (d["W"] - k + 1)
    if s.layout == "shift":
        return (k + 1 + k * s.prefetch) * d["W"] * 4 + cw * 4
    x = (s.rows + k - 1) * (cw + k - 1)                      # input block (two when prefetching)
    return (x * (1 + s.prefetch) + s.rows * (cw + k - 1) + s.rows * cw) * 4


def _pool_fits(s: PoolSchedule, d: dict) -> bool:
    if s.layout not in ("shift", "block") or s.veng not in ENGINES or s.heng not in ENGINES or d["K"] < 2:
        return False
    if s.layout == "shift" and (s.rows, s.cw) != (1, 0):
        return False
    if s.rows not in (1, 2, 4, 8, 16, 32) or s.cw not in (0, 512, 1024, 2048) or s.cw >= d["W"] - d["K"] + 1:
        return False
    return _pool_sbuf(s, d) <= SBUF_LIMIT


def _maxes(eng: str, name: str, first: str, rest: list[str], indent: str) -> str:
    def mx(a: str, b: str) -> str:
        return f"nl.maximum({a}, {b})" if eng == "vector" else \
            f"nisa.tensor_tensor({a}, {b}, nl.maximum{ew_engine(eng)})"
    # later window offsets update the tile in place: one buffer per chain, not one per offset
    return f"{indent}{name} = {mx(first, rest[0])}\n" + "".join(
        f"{indent}for a in nl.static_range(2, K):\n{indent}    {name}[...] = {mx(name, r)}\n" for r in rest[1:])


# the kernel's head in both NKI dialects
POOL_HEAD = """@nki.jit
def solution(in_tensor, pool_size):
    H, W = in_tensor.shape
    K = pool_size
    HO, WO = H - K + 1, W - K + 1
    assert K >= 2
    out = nl.ndarray((HO, WO), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    P = 128
"""


def _pool_body(s: PoolSchedule) -> str:
    head = POOL_HEAD
    # Every block is (first output row, first column, partitions, rows per partition, columns); ragged
    # edges get their own smaller blocks, so every access stays in bounds without masks.
    if s.layout == "shift":
        code = head + f"""    R, CW = 1, WO

    def load(r0, c0, n, rr, cw):                # K row-shifted copies of rows r0 .. r0+n-1
        return [nl.load(in_tensor[r0 + a:r0 + a + n, 0:W]) for a in nl.static_range(K)]

    def finish(xs, r0, c0, n, rr, cw):
        v = xs[0]
        for a in nl.static_range(1, K):
            r = xs[a]
{_maxes(s.veng, "v", "v", ["r"], "            ")}\
{_maxes(s.heng, "m", "v[:, 0:WO]", ["v[:, 1:WO + 1]", "v[:, a:a + WO]"], "        ")}\
        nl.store(out[r0:r0 + n, 0:WO], value=m)
"""
    else:
        code = head + f"""    R, CW = {s.rows}, {s.cw or "WO"}          # output rows per partition, columns per step

    def load(r0, c0, np_, rr, cw):              # partition p: output rows r0+p*rr .. +rr-1, columns c0 .. +cw-1
        i_p = nl.arange(np_)[:, None, None]
        i_r = nl.arange(rr + K - 1)[None, :, None]
        i_c = nl.arange(cw + K - 1)[None, None, :]
        # the rr + K - 1 input rows of a partition overlap the next partition's: one DMA reads them all
        return nl.load(in_tensor[r0 + i_p * rr + i_r, c0 + i_c])

    def finish(x, r0, c0, np_, rr, cw):
        i_p = nl.arange(np_)[:, None, None]
        o_r = nl.arange(rr)[None, :, None]
        o_c = nl.arange(cw)[None, None, :]
{_maxes(s.veng, "v", "x[:, 0:rr, :]", ["x[:, 1:rr + 1, :]", "x[:, a:a + rr, :]"], "        ")}\
{_maxes(s.heng, "m", "v[:, :, 0:cw]", ["v[:, :, 1:cw + 1]", "v[:, :, a:a + cw]"], "        ")}\
        nl.store(out[r0 + i_p * rr + o_r, c0 + o_c], value=m)
"""
    return code + pool_driver(s.prefetch)


def pool_driver(prefetch: bool, loop: str = "nl.affine_range") -> str:
    """The kernel's tail in both NKI dialects: the blocks it cuts the output into, each loaded (`load`) and
    pooled and stored (`finish`) by the functions defined before it. `loop`: the plain loops' kind (NKI v2's
    access patterns need Python-int offsets, so static loops)."""
    if not prefetch:
        return f"""
    def rows(r0, np_, rr):
        for c in {loop}(WO // CW):
            finish(load(r0, c * CW, np_, rr, CW), r0, c * CW, np_, rr, CW)
        if WO % CW:
            finish(load(r0, WO - WO % CW, np_, rr, WO % CW), r0, WO - WO % CW, np_, rr, WO % CW)

    for t in {loop}(HO // (P * R)):
        rows(t * P * R, P, R)
    rest = HO % (P * R)                         # leftover rows: full partitions of R rows, then single rows
    if rest // R:
        rows(HO - rest, rest // R, R)
    if rest % R:
        rows(HO - rest % R, rest % R, 1)
    return out
"""
    return """
    blocks = []                                 # all blocks, known at trace time
    rest = HO % (P * R)
    groups = [(t * P * R, P, R) for t in range(HO // P // R)]
    groups += [(HO - rest, rest // R, R)] * (rest // R > 0) + [(HO - rest % R, rest % R, 1)] * (rest % R > 0)
    for r0, np_, rr in groups:
        blocks += [(r0, c * CW, np_, rr, CW) for c in range(WO // CW)]
        blocks += [(r0, WO - WO % CW, np_, rr, WO % CW)] * (WO % CW > 0)
    x_next = load(*blocks[0])
    for i in nl.static_range(len(blocks)):
        x = x_next
        if i + 1 < len(blocks):                 # prefetch: the next block's load goes before this store
            x_next = load(*blocks[i + 1])
        finish(x, *blocks[i])
    return out
"""


def _pool_describe(s: PoolSchedule) -> str:
    eng = f"vertical max on {s.veng}, horizontal on {s.heng}" + (", next block prefetched" if s.prefetch else "")
    if s.layout == "shift":
        return f"128-row tiles loaded K times (row-shifted), {eng}"
    cols = f"{s.cw}-column steps" if s.cw else "whole rows"
    return f"{s.rows} output rows per partition from one overlapping DMA, {cols}, {eng}"


def _pool_candidates(mutation: str, s: PoolSchedule, d: dict) -> list:
    if mutation == "block":
        if s.layout == "shift":
            return [replace(s, layout="block", rows=r) for r in (2, 4, 8)] + \
                   [replace(s, layout="block", rows=r, cw=1024) for r in (8, 16)]
        return [replace(s, rows=r) for r in step_choices(s.rows, (1, 2, 4, 8, 16, 32))]
    if mutation == "engine":
        return [replace(s, veng=v, heng=h) for v in ENGINES for h in ENGINES if (v, h) != (s.veng, s.heng)]
    if mutation == "chunk":
        if s.layout == "shift":
            return []
        return [replace(s, cw=c) for c in (0, 512, 1024, 2048) if c != s.cw] + \
               [replace(s, cw=c, rows=s.rows * 2) for c in (512, 1024) if c != s.cw]
    if mutation == "large_dma":
        return [replace(s, layout="block", rows=r, cw=0) for r in (2, 4)] if s.layout == "shift" else \
            ([replace(s, cw=0)] if s.cw else []) + [replace(s, rows=s.rows * 2)]
    if mutation == "prefetch":
        if s.prefetch:
            return []
        wide = s.cw or d["W"]
        return [replace(s, prefetch=True)] + [replace(s, prefetch=True, cw=c) for c in (512, 1024) if wide > c
                                              and s.layout == "block"]
    return []


MAXPOOL = SimpleNamespace(
    DIMS=("H", "W", "K"), Schedule=PoolSchedule, default=lambda dims: PoolSchedule(), fits=_pool_fits, body=_pool_body,
    describe=_pool_describe, candidates=_pool_candidates,
    OPTIONS={"hoist-loads": "block", "block-bigger": "block", "remove-redundant": "block", "max-tiles": "block",
             "engine-balance": "engine", "fewer-bigger-instructions": "chunk", "multi-buffer": "prefetch",
             "large-dma": "large_dma", "spread-dma": "prefetch"},
    SAFER=({"prefetch": False}, {"veng": "vector"}, {"heng": "vector"}, {"cw": 0},
           {"rows": 1, "layout": "shift", "cw": 0}))
