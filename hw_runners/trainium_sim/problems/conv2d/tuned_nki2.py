import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def solution(img_ref, filter_T_ref, **kwargs):
    # 2-D convolution (NCHW, stride 1) as shifted matmuls on the Tensor engine, in bfloat16 with
    # fp32 accumulation in PSUM (4x the fp32 matmul rate; the rounding error of the 1152-term sums stays
    # ~1e-4 relative, far inside the tolerance). NKI v2.
    # Layout trick: the zero-padded image of one batch element is kept FLAT per channel, [C_in, H_p * W_p].
    # Output (i, j) and its tap (a, b) then read flat position (i * W_p + j) + (a * W_p + b), so for R
    # output rows at once the moving operand of every tap is one contiguous slice of R * W_p columns: R
    # rows per matmul (3 for W_p = 130, up to the 512-column limit) with only 2 junk columns per row, which
    # the PSUM evacuation skips (an access pattern over the PSUM tile).
    # Weights: the filter arrives pre-transposed (the NKI v2 definition's filter_T_ref [C_in, H_f, W_f, C_out]),
    # so one contiguous copy and one cast to bf16 give every tap's [C_in, C_out] stationary operand.
    # Images: copied in row chunks and cast into one of two flat padded bf16 buffers, whose zero borders
    # are written once. Output rows are staged and stored in groups (long contiguous DMA rows); the PSUM
    # evacuation alternates between the Scalar and Vector engines.
    (H_pad_l, H_pad_r), (W_pad_l, W_pad_r) = kwargs["padding"]
    assert tuple(kwargs.get("stride", (1, 1))) == (1, 1)
    N, C_in, H, W = img_ref.shape
    C_in2, H_f, W_f, C_out = filter_T_ref.shape
    P = nl.tile_size.pmax
    assert C_in == C_in2 == P and C_out % P == 0
    H_p, W_p = H + H_pad_l + H_pad_r, W + W_pad_l + W_pad_r
    K0, K1 = H_p - H_f + 1, W_p - W_f + 1
    CT, TAPS = C_out // P, H_f * W_f
    R = nl.tile_size.gemm_moving_fmax // W_p        # output rows per matmul
    assert R >= 1
    bf16, f32 = nl.bfloat16, nl.float32
    out = nl.ndarray((N, C_out, K0, K1), dtype=img_ref.dtype, buffer=nl.shared_hbm)

    # -- weights: w[ci, a * W_f + b, co] in bf16
    w_raw = nl.ndarray((P, TAPS, C_out), dtype=f32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_raw, src=filter_T_ref.reshape((C_in, TAPS, C_out)))
    w = nl.ndarray((P, TAPS, C_out), dtype=bf16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=w, src=w_raw)

    # -- two flat padded image buffers, zeroed once (only their interiors are rewritten)
    flat = H_p * W_p + W_f          # a little slack: the last block's junk columns may read past the end
    pads = []
    for k in nl.static_range(2):
        buf = nl.ndarray((P, flat), dtype=bf16, buffer=nl.sbuf)
        nisa.memset(dst=buf, value=0.0)
        pads.append(buf)

    ROWS = 32 if H % 32 == 0 else H                 # image rows per copy (16 KiB fp32 per partition)

    def load_image(n, buf):
        for q in nl.static_range(H // ROWS):
            raw = nl.ndarray((P, ROWS, W), dtype=f32, buffer=nl.sbuf)
            nisa.dma_copy(dst=raw, src=img_ref[n, :, q * ROWS:(q + 1) * ROWS, :])
            # rows of W interior columns at stride W_p in the flat buffer
            dst = buf.ap([[flat, P], [W_p, ROWS], [1, W]], offset=(H_pad_l + q * ROWS) * W_p + W_pad_l)
            if q % 2 == 0:
                nisa.activation(dst=dst, op=nl.copy, data=raw)
            else:
                nisa.tensor_copy(dst=dst, src=raw, engine=nisa.vector_engine)

    blocks = [(i0, min(R, K0 - i0)) for i0 in range(0, K0, R)]
    GROUP = 8                                       # blocks per output store
    load_image(0, pads[0])
    evac = 0
    for n in nl.static_range(N):
        buf = pads[n % 2]
        if n + 1 < N:
            load_image(n + 1, pads[(n + 1) % 2])
        for ct in nl.static_range(CT):
            for g0 in nl.static_range(0, len(blocks), GROUP):
                group = blocks[g0:g0 + GROUP]
                row0 = group[0][0]
                nrows = sum(r for _, r in group)
                stage = nl.ndarray((P, GROUP * R, K1), dtype=img_ref.dtype, buffer=nl.sbuf)
                for i0, r in group:
                    ps = nl.ndarray((P, R * W_p), dtype=f32, buffer=nl.psum)
                    for t in nl.static_range(TAPS):       # the first matmul overwrites, the next accumulate
                        start = (i0 + t // W_f) * W_p + t % W_f
                        nisa.nc_matmul(dst=ps[:, 0:r * W_p], stationary=w[:, t, ct * P:(ct + 1) * P],
                                       moving=buf[:, start:start + r * W_p])
                    src = ps.ap([[R * W_p, P], [W_p, r], [1, K1]], offset=0)     # skips the junk columns
                    dst = stage[:, i0 - row0:i0 - row0 + r, :]
                    if evac % 2 == 0:
                        nisa.activation(dst=dst, op=nl.copy, data=src)
                    else:
                        nisa.tensor_copy(dst=dst, src=src, engine=nisa.vector_engine)
                    evac += 1
                nisa.dma_copy(dst=out[n, ct * P:(ct + 1) * P, row0:row0 + nrows, :], src=stage[:, 0:nrows, :])
    return out
