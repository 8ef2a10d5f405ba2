"""2-D convolution schedules (NCHW image, OIHW filter, zero padding, stride 1) and their NKI kernels.

The convolution runs on the Tensor engine as shifted matmuls: with the C_in input channels on the
partitions (the contraction), output rows i0 .. i0+R-1 of 128 output channels are the PSUM sum over the
H_f x W_f taps (a, b) of W_ab[ci, co].T @ img_pad[ci, i0+a .. i0+a+R-1, b .. b+K1-1], the moving operand a
[C_in, R, K1] view of the zero-padded image (R * K1 <= 512 columns: one PSUM bank). The weights of each
tap are transposed to [C_in, C_out] on the Tensor engine, per image (the naive kernel) or once for all
images (hoisted). Knobs: output rows per matmul, fp32 or bf16 matmul operands (fp32 PSUM accumulation),
output rows staged per store, the PSUM eviction engine, how the image reaches its padded tile (one DMA of
short rows straight into it, or contiguous row chunks copied in by Scalar/Vector), and prefetching the next
image into a second padded tile whose zero border is written once.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import SBUF_LIMIT, evict, step_choices

DIMS = ("N", "CI", "H", "W", "CO", "HF", "WF")     # problem.toml dims the schedules need
ROW_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
GROUP_CHOICES = (1, 2, 4, 8, 16, 32, 64)
CHUNK_BYTES = 16 * 1024       # chunked image loads: about this many contiguous bytes per partition per DMA


@dataclass(frozen=True)
class Schedule:
    rows: int = 1              # output rows per matmul (moving operand [C_in, rows, K1])
    bf16: bool = False         # bf16 matmul operands (weights and image cast once), fp32 accumulation
    hoist: bool = False        # weights loaded and transposed once for all images, not per image
    group: int = 1             # matmul blocks (of `rows` output rows) staged per output store
    evict: str = "scalar"      # engine of the PSUM -> SBUF copies: scalar, vector or alternate
    chunked: bool = False      # image loaded as contiguous row chunks, copied into the padded tile on engines
    prefetch: bool = False     # two padded tiles zeroed once; the next image's load goes before this one's work
    family: str = "conv2d"


OPTIONS = {"max-tiles": "max_tiles", "fewer-bigger-instructions": "max_tiles", "block-bigger": "block",
           "mixed-precision": "precision", "hoist-loads": "hoist", "remove-redundant": "hoist",
           "large-dma": "large_dma", "evict-efficiently": "evict", "engine-balance": "evict",
           "spread-dma": "prefetch", "multi-buffer": "prefetch", "pre-transposed-operands": "hoist",
           "psum-accumulate": "max_tiles"}
SAFER = ({"prefetch": False}, {"chunked": False}, {"evict": "scalar"}, {"group": 1}, {"bf16": False},
         {"rows": 1}, {"hoist": False})


def _out(d: dict) -> tuple[int, int]:
    """Output rows and columns for "same" padding (the dims do not carry the padding; the kernel reads it
    and caps the rows per matmul at what one PSUM bank holds)."""
    return d["H"], d["W"]


def default(dims: dict) -> Schedule:
    return Schedule()


def max_rows(d: dict) -> int:
    k0, k1 = _out(d)
    return max(1, min(k0, 512 // max(1, k1)))


def row_choices(d: dict) -> list[int]:
    top = max_rows(d)
    return sorted({r for r in ROW_CHOICES if r < top} | {top})


def chunk_rows(d: dict) -> int:
    return max(1, min(d["H"], CHUNK_BYTES // (4 * d["W"])))


def sbuf_bytes(s: Schedule, d: dict) -> int:
    k0, k1 = _out(d)
    el = 2 if s.bf16 else 4
    ct, taps = max(1, d["CO"] // 128), d["HF"] * d["WF"]
    pad = (d["H"] + d["HF"] - 1) * (d["W"] + d["WF"] - 1) * el * (2 if s.prefetch else 1)
    raw = 2 * chunk_rows(d) * d["W"] * 4 if s.chunked else 0
    w_raw = 2 * d["CI"] * taps * 4
    w_t = (ct if s.hoist else 2) * taps * 128 * el
    stage = 2 * min(s.group * s.rows, k0) * k1 * 4
    return pad + raw + w_raw + w_t + stage


def fits(s: Schedule, d: dict) -> bool:
    k0, k1 = _out(d)
    if d["CI"] > 128 or d["CO"] % min(d["CO"], 128) or k1 > 512 or k0 < 1:
        return False
    if s.rows not in row_choices(d) or s.group not in GROUP_CHOICES or s.evict not in ("scalar", "vector", "alternate"):
        return False
    if s.group > 1 and (s.group // 2) * s.rows >= k0:
        return False              # a smaller group already covers every output row
    return sbuf_bytes(s, d) <= SBUF_LIMIT


def describe(s: Schedule) -> str:
    ev = {"scalar": "Scalar", "vector": "Vector", "alternate": "alternating Scalar/Vector"}[s.evict]
    return (f"{s.rows} output row(s) per matmul, {'bf16' if s.bf16 else 'fp32'} operands, weights "
            f"{'transposed once for all images' if s.hoist else 'loaded and transposed per image'}, "
            f"{s.group * s.rows} output row(s) per store, PSUM evicted on {ev}, image "
            f"{'loaded in contiguous row chunks and copied into its padded tile' if s.chunked else 'loaded straight into its padded tile'}"
            f"{', next image prefetched into a second padded tile (borders zeroed once)' if s.prefetch else ''}")


def candidates(mutation: str, s: Schedule, d: dict) -> list[Schedule]:
    rows = row_choices(d)
    if mutation == "max_tiles":       # wider matmuls: the most rows one PSUM bank holds, or one step up
        up = [r for r in rows if r > s.rows]
        return [replace(s, rows=r) for r in ([up[-1]] + up[:1] if up else [])]
    if mutation == "block":           # more output rows per matmul and per store
        up = [r for r in rows if r > s.rows]
        return ([replace(s, rows=up[0])] if up else []) + [replace(s, group=g) for g in step_choices(s.group, GROUP_CHOICES)
                                                           if g > s.group][:1] + \
            ([replace(s, rows=up[0], group=s.group * 2)] if up else [])
    if mutation == "precision":
        return [] if s.bf16 else [replace(s, bf16=True), replace(s, bf16=True, chunked=True)]
    if mutation == "hoist":
        out = [] if s.hoist else [replace(s, hoist=True)]
        return out + ([] if s.prefetch else [replace(s, hoist=True, prefetch=True)])
    if mutation == "large_dma":       # longer contiguous rows per transfer: stage more output rows, chunked loads
        bigger = [g for g in GROUP_CHOICES if g > s.group]
        out = [replace(s, group=g) for g in bigger[1:2] + bigger[:1]]
        if not s.chunked:
            out += [replace(s, chunked=True), replace(s, chunked=True, group=bigger[0] if bigger else s.group)]
        return out
    if mutation == "evict":
        return [replace(s, evict=e) for e in ("alternate", "vector", "scalar") if e != s.evict]
    if mutation == "prefetch":
        return [] if s.prefetch else [replace(s, prefetch=True), replace(s, prefetch=True, chunked=True)]
    return []


def head(s: Schedule) -> str:
    """The kernel's head in both NKI dialects: sizes, the output, the row blocks (of R output rows, one matmul
    each) and their groups (one store each)."""
    dt = "nl.bfloat16" if s.bf16 else "img_ref.dtype"
    return f"""@nki.jit
def solution(img_ref, filter_ref, **kwargs):
    (pt, pb), (pl, pr) = kwargs["padding"]
    assert tuple(kwargs.get("stride", (1, 1))) == (1, 1)
    N, CI, H, W = img_ref.shape
    CO, CI2, HF, WF = filter_ref.shape
    assert CI == CI2 and CI <= 128
    MC = min(CO, 128)                        # output channels per matmul (PSUM partitions)
    assert CO % MC == 0
    CT = CO // MC
    HP, WP = H + pt + pb, W + pl + pr        # padded image
    K0, K1 = HP - HF + 1, WP - WF + 1        # output rows and columns
    assert K1 <= 512
    R = min({s.rows}, 512 // K1)                    # output rows per matmul: moving operand [CI, R, K1]
    G = {s.group}                                    # matmul blocks per output store
    DT = {dt}                 # matmul operand dtype (PSUM accumulates in fp32)
    out = nl.ndarray((N, CO, K0, K1), dtype=img_ref.dtype, buffer=nl.shared_hbm)
    blocks = [(i0, min(R, K0 - i0)) for i0 in range(0, K0, R)]
    groups = [blocks[g:g + G] for g in range(0, len(blocks), G)]
"""


CHUNKS = f"""
    CR = max(1, min(H, {CHUNK_BYTES} // (4 * W)))     # image rows per contiguous chunk load
    chunks = [(r0, min(CR, H - r0)) for r0 in range(0, H, CR)]
"""


def blocks_loop(stage: str, ps: str, matmul: str, evict_stmt: str, store: str) -> str:
    """compute()'s loops in both dialects around the dialect's statements: per group a `stage` tile, per block
    (rows i0 .. i0+r-1) a PSUM tile `ps`, the HF x WF tap `matmul`s into it, its eviction into the stage (the
    counter e alternates evictions), and the group's `store`."""
    return f"""        e = 0
        for g in nl.static_range(len(groups)):
            row0 = groups[g][0][0]
            nrows = sum(r for _, r in groups[g])
            {stage}
            for j in nl.static_range(len(groups[g])):
                i0, r = groups[g][j]
                {ps}
                for a in nl.static_range(HF):
                    for b in nl.static_range(WF):
                        {matmul}
                {evict_stmt}
                e += 1
            {store}
"""


def driver(s: Schedule, padded: str) -> str:
    """The image loop in both dialects: `padded` (with {name} and {ind}) allocates a zeroed padded tile."""
    if s.prefetch:
        return f"""
    pads = []
    for k in nl.static_range(2):             # two padded tiles; their zero borders are written once
{padded.format(name="buf", ind="        ")}        pads.append(buf)
    fill(0, pads[0])
    for n in nl.static_range(N):
        if n + 1 < N:                        # prefetch: the next image's load goes before this image's work
            fill(n + 1, pads[(n + 1) % 2])
        for ct in nl.static_range(CT):
            compute(n, pads[n % 2], ct)
    return out
"""
    return f"""
    for n in nl.affine_range(N):
{padded.format(name="img", ind="        ")}        fill(n, img)
        for ct in nl.affine_range(CT):
            compute(n, img, ct)
    return out
"""


def body(s: Schedule) -> str:
    code = head(s) + """
    def weights(ct, w_t):                    # w_t[ci, tap, co] = filter[ct * MC + co, ci, tap]
        w_raw = nl.load(filter_ref[ct * MC:(ct + 1) * MC])          # [co, ci, a, b]
        for a in nl.static_range(HF):
            for b in nl.static_range(WF):
                w_t[:, a * WF + b, :] = nl.copy(nisa.nc_transpose(w_raw[:, :, a, b]), dtype=DT)
"""
    if s.hoist:
        code += """
    w_all = nl.ndarray((CT, nl.par_dim(CI), HF * WF, MC), dtype=DT, buffer=nl.sbuf)
    for ct in nl.affine_range(CT):
        weights(ct, w_all[ct])
"""
    if s.chunked:
        code += CHUNKS + """
    def fill(n, img):                        # contiguous row chunks, copied into the padded tile
        for q in nl.static_range(len(chunks)):
            r0, nr = chunks[q]
            raw = nl.load(img_ref[n, :, r0:r0 + nr, :])
            if q % 2 == 0:
                img[:, pt + r0:pt + r0 + nr, pl:pl + W] = nl.copy(raw, dtype=DT)
            else:
                img[:, pt + r0:pt + r0 + nr, pl:pl + W] = nisa.tensor_copy(raw, dtype=DT, engine=nisa.engine.vector)
"""
    else:
        code += """
    def fill(n, img):                        # one DMA of short rows straight into the padded tile
        img[:, pt:pt + H, pl:pl + W] = nl.load(img_ref[n], dtype=DT)
"""
    ev = evict(s.evict, "ps", "img_ref.dtype", "e")
    code += f"""
    def compute(n, img, ct):
"""
    if s.hoist:
        code += "        w_t = w_all[ct]\n"
    else:
        code += ("        w_t = nl.ndarray((nl.par_dim(CI), HF * WF, MC), dtype=DT, buffer=nl.sbuf)\n"
                 "        weights(ct, w_t)\n")
    code += blocks_loop(
        "stage = nl.ndarray((nl.par_dim(MC), G * R, K1), dtype=img_ref.dtype, buffer=nl.sbuf)",
        "ps = nl.zeros((MC, R, K1), nl.float32, buffer=nl.psum)",
        "ps[:, 0:r, :] += nisa.nc_matmul(w_t[:, a * WF + b, :], img[:, i0 + a:i0 + a + r, b:b + K1])",
        f"stage[:, i0 - row0:i0 - row0 + r, :] = {ev.replace('ps', 'ps[:, 0:r, :]')}",
        "nl.store(out[n, ct * MC:(ct + 1) * MC, row0:row0 + nrows, :], value=stage[:, 0:nrows, :])")
    if s.prefetch:
        padded = ("{ind}{name} = nl.ndarray((nl.par_dim(CI), HP, WP), dtype=DT, buffer=nl.sbuf)\n"
                  "{ind}{name}[...] = 0.0\n")
    else:
        padded = "{ind}{name} = nl.zeros((nl.par_dim(CI), HP, WP), dtype=DT, buffer=nl.sbuf)\n"
    return code + driver(s, padded)
