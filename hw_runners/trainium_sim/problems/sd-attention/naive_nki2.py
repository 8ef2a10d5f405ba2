import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def solution(q_ref, k_ref, v_ref, use_causal_mask=False, mixed_precision=True):
    """Stable Diffusion attention out = softmax(0.125 * q @ k.T) @ v, one 128-query tile at a time (NKI v2).

    Straightforward tiling: for every query tile each 128-key tile of K is reloaded from HBM and
    transposed on the Tensor engine, the scores are gathered in SBUF, the softmax is taken there,
    and every V tile is reloaded for the P @ V product. Inputs and output are [seq_len, d_head].
    """
    seqlen, d_head = q_ref.shape
    P = nl.tile_size.pmax
    assert seqlen % P == 0 and d_head <= P
    pe_dt = nl.bfloat16 if mixed_precision else nl.float32
    f32 = nl.float32
    scale = 0.125
    n_t = seqlen // P

    out = nl.ndarray((seqlen, d_head), dtype=q_ref.dtype, buffer=nl.shared_hbm)

    for qi in nl.affine_range(n_t):
        q_tile = nl.ndarray((P, d_head), dtype=pe_dt, buffer=nl.sbuf)           # [128 queries, d]
        nisa.dma_copy(dst=q_tile, src=q_ref[qi * P:(qi + 1) * P, :])           # the DMA casts to pe_dt
        q_ps = nl.ndarray((d_head, P), dtype=pe_dt, buffer=nl.psum)
        nisa.nc_transpose(dst=q_ps, data=q_tile)
        q_t = nl.ndarray((d_head, P), dtype=pe_dt, buffer=nl.sbuf)              # [d, 128 queries]
        nisa.tensor_copy(dst=q_t, src=q_ps)
        scores = nl.ndarray((P, seqlen), dtype=f32, buffer=nl.sbuf)
        for kt in nl.affine_range(n_t):
            k_tile = nl.ndarray((P, d_head), dtype=pe_dt, buffer=nl.sbuf)       # [128 keys, d]
            nisa.dma_copy(dst=k_tile, src=k_ref[kt * P:(kt + 1) * P, :])
            k_ps = nl.ndarray((d_head, P), dtype=pe_dt, buffer=nl.psum)
            nisa.nc_transpose(dst=k_ps, data=k_tile)
            k_t = nl.ndarray((d_head, P), dtype=pe_dt, buffer=nl.sbuf)          # [d, 128 keys]
            nisa.tensor_copy(dst=k_t, src=k_ps)
            s_psum = nl.ndarray((P, P), dtype=f32, buffer=nl.psum)              # q_tile @ k_t
            nisa.nc_matmul(dst=s_psum, stationary=q_t, moving=k_t)
            blk = scores[:, kt * P:(kt + 1) * P]
            nisa.tensor_scalar(dst=blk, data=s_psum, op0=nl.multiply, operand0=scale)
            if use_causal_mask:
                # key kt*128 + f is visible to query qi*128 + p when p - f - (kt - qi) * 128 >= 0
                nisa.affine_select(dst=blk, pattern=[[-1, P]], channel_multiplier=1, on_true_tile=blk,
                                   on_false_value=-9984.0, cmp_op=nl.greater_equal, offset=(qi - kt) * P)

        row_max = nl.ndarray((P, 1), dtype=f32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=scores, axis=1, keepdims=True)
        shifted = nl.ndarray((P, seqlen), dtype=f32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=shifted, data=scores, op0=nl.subtract, operand0=row_max)
        e = nl.ndarray((P, seqlen), dtype=f32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=shifted)
        row_sum = nl.ndarray((P, 1), dtype=f32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_sum, op=nl.add, data=e, axis=1, keepdims=True)
        inv_sum = nl.ndarray((P, 1), dtype=f32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)
        probs = nl.ndarray((P, seqlen), dtype=pe_dt, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=probs, data=e, op0=nl.multiply, operand0=inv_sum)

        # the first matmul into o_psum overwrites it, the following ones accumulate
        o_psum = nl.ndarray((P, d_head), dtype=f32, buffer=nl.psum)
        for kt in nl.affine_range(n_t):
            v_tile = nl.ndarray((P, d_head), dtype=pe_dt, buffer=nl.sbuf)       # [128 keys, d]
            nisa.dma_copy(dst=v_tile, src=v_ref[kt * P:(kt + 1) * P, :])
            p_ps = nl.ndarray((P, P), dtype=pe_dt, buffer=nl.psum)
            nisa.nc_transpose(dst=p_ps, data=probs[:, kt * P:(kt + 1) * P])
            p_t = nl.ndarray((P, P), dtype=pe_dt, buffer=nl.sbuf)               # [128 keys, 128 queries]
            nisa.tensor_copy(dst=p_t, src=p_ps)
            nisa.nc_matmul(dst=o_psum, stationary=p_t, moving=v_tile)
        o_sb = nl.ndarray((P, d_head), dtype=out.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o_sb, src=o_psum)
        nisa.dma_copy(dst=out[qi * P:(qi + 1) * P, :], src=o_sb)
    return out
