"""Depthwise 1-D convolution schedules (img (N, C, 1, W), filter (C, 1, 1, WF), zero padding along W).

Channels go on the partitions, so each tap is a multiply of a shifted window by a per-partition filter
column. A tile holds nb images of one 128-channel block side by side on the free axis, each with its
padding ([P, nb * (W + pl + pr)]), so one instruction per tap covers all nb images (the few columns
where a window straddles two images are computed and never stored); loads and stores stay one DMA per
image with whole contiguous rows. Taps run either on Vector/Scalar
(multiply per tap, add the products) or on the Tensor engine as matmuls with diagonal matrices
diag(filter[:, w]) accumulated in PSUM (fp32 operands keep the result exact within tolerance).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import SBUF_LIMIT, evict, ew_engine

DIMS = ("N", "C", "W", "WF")          # problem.toml dims the schedules need
NB_CHOICES = (1, 2, 4, 8)


@dataclass(frozen=True)
class Schedule:
    nb: int = 1                # images per tile
    method: str = "vector"     # vector: multiply + add per tap; tensor: diagonal matmuls into PSUM
    mul: str = "vector"        # vector method: engine of the per-tap multiply (vector or scalar)
    add: str = "vector"        # vector method: engine of the adds (vector, gpsimd, or split between them)
    hoist: bool = False        # load all filters (and build the diagonal matrices) once, before the loops
    bufs: int = 2              # 2: a padded tile per step (pads zeroed each time); 1: one tile, pads zeroed once
    prefetch: bool = False     # issue the next tile's load before this tile's taps and store
    evict: str = "scalar"      # tensor method: engine of the PSUM -> SBUF copies
    merged: bool = False       # one DMA per tile for all nb images (a [P, nb, W] view) instead of one per image
    family: str = "conv1d"


OPTIONS = {"fewer-bigger-instructions": "batch", "block-bigger": "batch",
           "engine-balance": "engine", "hoist-loads": "hoist", "remove-redundant": "hoist",
           "multi-buffer": "bufs", "spread-dma": "prefetch", "reduce-on-tensor": "method",
           "swap-stationary-moving": "method", "psum-accumulate": "method", "evict-efficiently": "evict",
           "combine-vector-ops": "engine", "fuse-activation": "engine", "max-tiles": "batch",
           "large-dma": "merge"}
SAFER = ({"merged": False}, {"prefetch": False}, {"evict": "scalar"}, {"add": "vector"}, {"mul": "vector"}, {"bufs": 2},
         {"method": "vector"}, {"nb": 1}, {"hoist": False})


def default(dims: dict) -> Schedule:
    return Schedule()


def sbuf_bytes(s: Schedule, d: dict) -> int:
    row = s.nb * (d["W"] + d["WF"] - 1 + 2) * 4          # padding of at most (WF - 1) + 2 columns assumed
    tiles = 3 + (1 if s.prefetch else 0)                  # padded input, sum, product (+ a third input)
    return tiles * row + (d["C"] // 128) * d["WF"] * (4 + 128 * 4 * (s.method == "tensor"))


def fits(s: Schedule, d: dict) -> bool:
    if s.nb not in NB_CHOICES or d["N"] % s.nb or d["C"] % min(128, d["C"]) or s.bufs not in (1, 2):
        return False
    if s.method not in ("vector", "tensor") or s.mul not in ("vector", "scalar") \
            or s.add not in ("vector", "gpsimd", "split") or s.evict not in ("scalar", "vector", "alternate"):
        return False
    if s.method == "tensor" and (s.mul, s.add) != ("vector", "vector"):
        return False              # the vector-method engines mean nothing here: one canonical form
    if s.method == "vector" and s.evict != "scalar":
        return False
    if s.prefetch and s.bufs == 1:
        return False              # one buffer cannot be loaded while it is being read
    if s.merged and s.nb == 1:
        return False              # one image per tile: already one DMA per tile
    return sbuf_bytes(s, d) <= SBUF_LIMIT


def describe(s: Schedule) -> str:
    if s.method == "tensor":
        how = f"taps as diagonal fp32 matmuls accumulated in PSUM, evicted on {s.evict}"
    else:
        how = f"tap multiplies on {s.mul}, adds on {s.add}"
    return (f"{s.nb} image(s) x 128 channels per tile, {how}, filters {'hoisted' if s.hoist else 'loaded per tile'}, "
            f"{'double' if s.bufs == 2 else 'single'}-buffered padded tile"
            f"{', next tile prefetched' if s.prefetch else ''}"
            f"{', one DMA per tile for all its images' if s.merged else ''}")


def candidates(mutation: str, s: Schedule, d: dict) -> list[Schedule]:
    if mutation == "batch":
        return [replace(s, nb=v) for v in NB_CHOICES if v > s.nb][:2]
    if mutation == "merge":
        return [] if s.merged else [replace(s, merged=True, nb=v) for v in NB_CHOICES if v >= max(2, s.nb)][:2]
    if mutation == "engine":
        if s.method == "tensor":
            return [replace(s, method="vector", mul="scalar")]
        return [replace(s, mul=m, add=a) for m in ("vector", "scalar") for a in ("vector", "gpsimd", "split")
                if (m, a) != (s.mul, s.add)]
    if mutation == "method":
        if s.method == "tensor":
            return [replace(s, method="vector", evict="scalar")]
        return [replace(s, method="tensor", mul="vector", add="vector", hoist=True),
                replace(s, method="tensor", mul="vector", add="vector", hoist=True, evict="alternate")]
    if mutation == "hoist":
        return [replace(s, hoist=True)] if not s.hoist else []
    if mutation == "bufs":
        return [replace(s, bufs=2)] if s.bufs == 1 else [replace(s, bufs=1, prefetch=False)]
    if mutation == "prefetch":
        return [replace(s, prefetch=True, bufs=2)] if not s.prefetch else []
    if mutation == "evict":
        return [replace(s, evict=e) for e in ("alternate", "vector", "scalar") if e != s.evict] \
            if s.method == "tensor" else []
    return []


def head(s: Schedule) -> str:
    """The kernel's head in both NKI dialects: sizes, the output and the [C, WF] filter view."""
    return f"""@nki.jit
def solution(img_ref, filter_ref, **kwargs):
    (pt, pb), (pl, pr) = kwargs.get("padding", ((0, 0), (0, 0)))
    N, C, H, W = img_ref.shape
    _, _, HF, WF = filter_ref.shape
    assert H == 1 and HF == 1 and pt == 0 and pb == 0
    WP = W + pl + pr                             # padded width of one image
    WO = WP - WF + 1
    P = min(C, 128)                              # channels per tile, one per partition
    NB = {s.nb}                                       # images per tile, side by side on the free axis
    L = NB * WP - WF + 1                         # output columns computed per tile (a few straddle images)
    assert C % P == 0 and N % NB == 0
    out = nl.ndarray((N, C, 1, WO), dtype=img_ref.dtype, buffer=nl.shared_hbm)
    filt = filter_ref.reshape((C, WF))
"""


def driver(prefetch: bool, loop: str = "nl.affine_range") -> str:
    """The kernel's tail in both NKI dialects: every (images, channel block) tile loaded (`load`) and computed
    and stored (`finish`) by the functions defined before it. `loop`: the plain loops' kind (NKI v2's access
    patterns need Python-int offsets, so static loops)."""
    if prefetch:
        return """
    steps = [(nt * NB, cb) for cb in range(C // P) for nt in range(N // NB)]
    x_next = load(*steps[0])
    for i in nl.static_range(len(steps)):
        x = x_next
        if i + 1 < len(steps):                   # prefetch: the next tile's load goes before this store
            x_next = load(*steps[i + 1])
        finish(x, *steps[i])
    return out
"""
    return f"""
    for cb in {loop}(C // P):
        for nt in {loop}(N // NB):
            finish(load(nt * NB, cb), nt * NB, cb)
    return out
"""


def body(s: Schedule) -> str:
    fcol = "fl_all[cb, :, {w}:{w} + 1]" if s.hoist else "fl[:, {w}:{w} + 1]"
    code = head(s)
    if s.hoist:
        code += """    fl_all = nl.ndarray((C // P, nl.par_dim(P), WF), dtype=nl.float32, buffer=nl.sbuf)
    for cb in nl.affine_range(C // P):
        fl_all[cb] = nl.load(filt[cb * P:(cb + 1) * P, 0:WF])
"""
    if s.method == "tensor":
        code += """    i_q = nl.arange(P)[:, None]
    i_f = nl.arange(P)[None, :]
    ident = nisa.affine_select(i_q - i_f == 0, nl.ones((P, P), dtype=nl.float32), 0.0)
"""
        if s.hoist:
            code += """    diags = nl.ndarray((C // P, WF, nl.par_dim(P), P), dtype=nl.float32, buffer=nl.sbuf)
    for cb in nl.affine_range(C // P):
        for w in nl.static_range(WF):        # diag(filter[:, w]): a matmul with it scales each channel
            diags[cb, w] = nisa.tensor_scalar(ident, nl.multiply, fl_all[cb, :, w:w + 1])
"""
    pads = ("        for j in nl.static_range(NB):          # zero the padding columns of every image\n"
            "            if pl:\n                xp[:, j * WP:j * WP + pl] = 0.0\n"
            "            if pr:\n                xp[:, j * WP + pl + W:(j + 1) * WP] = 0.0\n")
    alloc = "        xp = nl.ndarray((nl.par_dim(P), NB * WP), dtype=nl.float32, buffer=nl.sbuf)\n"
    if s.bufs == 1:
        code += "    def new_tile():\n" + alloc + pads + "        return xp\n\n    xp_one = new_tile()\n"
    else:
        code += "    def new_tile():\n" + alloc + pads + "        return xp\n"
    # one DMA per image: whole contiguous rows on both sides (the taps still cover all NB images at once)
    fill = ("        for j in nl.static_range(NB):\n"
            "            xp[:, j * WP + pl:j * WP + pl + W] = nl.load(img_ref[n0 + j, cb * P:(cb + 1) * P, 0, 0:W])\n")
    if s.merged:      # the NB images' rows in one transfer: a [P, NB, W] view of the padded tile
        fill = ("        xp[i_p, i_n * WP + pl + i_w] = nl.load(img_ref[n0 + i_n, cb * P + i_p, 0, i_w])\n")
        code += ("    i_p, i_n = nl.arange(P)[:, None, None], nl.arange(NB)[None, :, None]\n"
                 "    i_w, i_o = nl.arange(W)[None, None, :], nl.arange(WO)[None, None, :]\n")
    code += f"""
    def load(n0, cb):                            # images n0 .. n0+NB-1, channels cb*P .. cb*P+P-1
        xp = {"xp_one" if s.bufs == 1 else "new_tile()"}
{fill}        return xp

    def finish(xp, n0, cb):
"""
    if not s.hoist:
        code += "        fl = nl.load(filt[cb * P:(cb + 1) * P, 0:WF])\n"
    if s.method == "vector":
        def tap(w: str) -> str:
            col = fcol.format(w=w)
            if s.mul == "scalar":
                return f"nisa.activation(op=nl.copy, data=xp[:, {w}:{w} + L], scale={col})"
            return f"nisa.tensor_scalar(xp[:, {w}:{w} + L], nl.multiply, {col})"

        def add(eng: str) -> str:
            return "nl.add(acc, prod)" if eng == "vector" else f"nisa.tensor_tensor(acc, prod, nl.add{ew_engine(eng)})"
        if s.add == "split":
            accum = (f"            if w % 2:\n                acc[...] = {add('vector')}\n"
                     f"            else:\n                acc[...] = {add('gpsimd')}\n")
        else:
            accum = f"            acc[...] = {add(s.add)}\n"
        code += (f"        acc = {tap('0')}\n"
                 f"        for w in nl.static_range(1, WF):\n"
                 f"            prod = {tap('w')}\n" + accum)
    else:
        diag = "diags[cb, w]" if s.hoist else "dg[w]"
        if not s.hoist:
            code += ("        dg = nl.ndarray((WF, nl.par_dim(P), P), dtype=nl.float32, buffer=nl.sbuf)\n"
                     "        for w in nl.static_range(WF):\n"
                     "            dg[w] = nisa.tensor_scalar(ident, nl.multiply, fl[:, w:w + 1])\n")
        code += f"""        acc = nl.ndarray((nl.par_dim(P), L), dtype=nl.float32, buffer=nl.sbuf)
        for c0 in nl.static_range(0, L, 512):          # one PSUM bank of output columns at a time
            sz = min(512, L - c0)
            ps = nl.zeros((P, sz), nl.float32, buffer=nl.psum)
            for w in nl.static_range(WF):
                ps += nisa.nc_matmul({diag}, xp[:, c0 + w:c0 + w + sz])
            acc[:, c0:c0 + sz] = {evict(s.evict, "ps", "nl.float32", "c0 // 512")}
"""
    if s.merged:
        code += "        nl.store(out[n0 + i_n, cb * P + i_p, 0, i_o], value=acc[i_p, i_n * WP + i_o])\n"
    else:
        code += ("        for j in nl.static_range(NB):\n"
                 "            nl.store(out[n0 + j, cb * P:(cb + 1) * P, 0, 0:WO], value=acc[:, j * WP:j * WP + WO])\n")
    return code + driver(s.prefetch)
