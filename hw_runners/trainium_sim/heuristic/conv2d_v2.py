"""The 2-D convolution schedules of conv2d.py rendered as NKI v2 kernels (the nki2 ISA profile): the same row
blocks, operand dtypes, weight transposes, staged stores, evictions, image loads and prefetching, written the v2
way. Every instruction writes the dst it is given (the weight transposes land in a PSUM tile that a
nisa.tensor_copy casts into the weights; the padded tile is zeroed by nisa.memset; the bf16 image is cast by its
DMA or by the copy out of a row chunk); the partition axis is first (the hoisted weights are one
[CI, CT, taps, MC] tile instead of a par_dim block); a PSUM tile's first matmul overwrites and the next
accumulate, so no zeroed PSUM tile. The head, the block loops and the image loop are conv2d.py's (head,
blocks_loop, driver). The filter arrives pre-transposed as the NKI v2 definition passes it (filter_T_ref
[CI, HF, WF, CO], problem.toml's [nki2]), so a weight tile is one DMA (casting to the operand dtype) with no
transposes. What a knob changes is said in conv2d.py."""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.heuristic.conv2d import CHUNKS, Schedule, blocks_loop, driver, head
from autocomp_zmq.hw_runners.trainium_sim.heuristic.gemm_v2 import _evict


def _evict_block(engine: str) -> str:
    """The block's PSUM -> SBUF stage copy on the chosen engine ('alternate': by the block counter e)."""
    dst, src = "stage[:, i0 - row0:i0 - row0 + r, :]", "ps[:, 0:r, :]"
    if engine != "alternate":
        return _evict(engine, dst, src, "e")
    ind = "                "
    return (f"if e % 2 == 0:\n{ind}    {_evict('scalar', dst, src, 'e')}\n"
            f"{ind}else:\n{ind}    {_evict('vector', dst, src, 'e')}")


def _head(s: Schedule) -> str:
    """conv2d.py's head, reading the sizes from filter_T_ref [CI, HF, WF, CO]."""
    code = head(s)
    for v1, v2 in (("def solution(img_ref, filter_ref, **kwargs):", "def solution(img_ref, filter_T_ref, **kwargs):"),
                   ("CO, CI2, HF, WF = filter_ref.shape", "CI2, HF, WF, CO = filter_T_ref.shape")):
        assert v1 in code
        code = code.replace(v1, v2)
    return code


def body(s: Schedule) -> str:
    code = _head(s) + """
    def weights(ct, w_t):                    # w_t[ci, tap, co] = filter[ct * MC + co, ci, tap]
        # filter_T_ref holds them in this order already: one DMA, no transposes
        nisa.dma_copy(dst=w_t, src=filter_T_ref.reshape((CI, HF * WF, CO))[:, :, ct * MC:(ct + 1) * MC])
"""
    if s.hoist:
        code += """
    w_all = nl.ndarray((CI, CT, HF * WF, MC), dtype=DT, buffer=nl.sbuf)
    for ct in nl.affine_range(CT):
        weights(ct, w_all[:, ct])
"""
    if s.chunked:
        code += CHUNKS + """
    def fill(n, img):                        # contiguous row chunks, copied into the padded tile
        for q in nl.static_range(len(chunks)):
            r0, nr = chunks[q]
            raw = nl.ndarray((CI, nr, W), dtype=img_ref.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=raw, src=img_ref[n, :, r0:r0 + nr, :])
            if q % 2 == 0:
                nisa.activation(dst=img[:, pt + r0:pt + r0 + nr, pl:pl + W], op=nl.copy, data=raw)
            else:
                nisa.tensor_copy(dst=img[:, pt + r0:pt + r0 + nr, pl:pl + W], src=raw, engine=nisa.vector_engine)
"""
    else:
        code += """
    def fill(n, img):                        # one DMA of short rows straight into the padded tile (casting to DT)
        nisa.dma_copy(dst=img[:, pt:pt + H, pl:pl + W], src=img_ref[n])
"""
    code += """
    def compute(n, img, ct):
"""
    if s.hoist:
        code += "        w_t = w_all[:, ct]\n"
    else:
        code += ("        w_t = nl.ndarray((CI, HF * WF, MC), dtype=DT, buffer=nl.sbuf)\n"
                 "        weights(ct, w_t)\n")
    code += blocks_loop(
        "stage = nl.ndarray((MC, G * R, K1), dtype=img_ref.dtype, buffer=nl.sbuf)",
        "ps = nl.ndarray((MC, R, K1), dtype=nl.float32, buffer=nl.psum)  # the first tap overwrites, the next add up",
        "nisa.nc_matmul(dst=ps[:, 0:r, :], stationary=w_t[:, a * WF + b, :],\n"
        "                                       moving=img[:, i0 + a:i0 + a + r, b:b + K1])",
        _evict_block(s.evict),
        "nisa.dma_copy(dst=out[n, ct * MC:(ct + 1) * MC, row0:row0 + nrows, :], src=stage[:, 0:nrows, :])")
    padded = ("{ind}{name} = nl.ndarray((CI, HP, WP), dtype=DT, buffer=nl.sbuf)\n"
              "{ind}nisa.memset(dst={name}, value=0.0)\n")
    return code + driver(s, padded)
