import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def solution(q, k, v, causal_mask, kernel_dtype, acc_type, num_heads=8, seq_len=2048, d_head=128):
    """Multi-head causal self-attention forward returning (o, l, m), head by head, 128 queries at a time
    (NKI v2).

    For each query tile: the full score row block [128, seq_len] is computed (K reloaded from HBM),
    masked, reduced and exponentiated in SBUF; then P is transposed tile by tile and multiplied with V
    (reloaded from HBM) into PSUM. o stays unnormalised, l = log(sum p) + m.

    causal_mask (the NKI v2 definition's input, always the causal mask) is not read: the mask is an
    affine_select pattern over (query, key) on chip, which costs no HBM traffic. l and m are float32, as
    the NKI v2 definition declares them (Autocomp's v2 kernel's).
    """
    P = nl.tile_size.pmax                   # 128 queries per tile
    F = nl.tile_size.gemm_moving_fmax       # 512 keys per score matmul
    assert seq_len % F == 0 and d_head <= P
    NEG = -9984.0                           # stands in for -inf (exp underflows to 0)

    o = nl.ndarray((num_heads, seq_len, d_head), dtype=kernel_dtype, buffer=nl.shared_hbm)
    l = nl.ndarray((num_heads, seq_len, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    m = nl.ndarray((num_heads, seq_len, 1), dtype=nl.float32, buffer=nl.shared_hbm)

    for h in nl.affine_range(num_heads):
        for qi in nl.affine_range(seq_len // P):
            rows = slice(qi * P, (qi + 1) * P)
            q_tile = nl.ndarray((P, d_head), dtype=kernel_dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=q_tile, src=q[h, rows, :])                      # [128 queries, d_head]
            # the stationary operand of S = Q K is Q^T [d_head, 128 queries]
            q_t_ps = nl.ndarray((d_head, P), dtype=kernel_dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=q_t_ps, data=q_tile)
            q_t = nl.ndarray((d_head, P), dtype=kernel_dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=q_t, src=q_t_ps)

            scores = nl.ndarray((P, seq_len), dtype=acc_type, buffer=nl.sbuf)
            for kj in nl.affine_range(seq_len // F):
                k_tile = nl.ndarray((d_head, F), dtype=kernel_dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=k_tile, src=k[h, :, kj * F:(kj + 1) * F])    # [d_head, 512 keys]
                s_ps = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=s_ps, stationary=q_t, moving=k_tile)
                s_sb = nl.ndarray((P, F), dtype=acc_type, buffer=nl.sbuf)
                nisa.tensor_copy(dst=s_sb, src=s_ps)
                # causal mask: query qi*128 + p sees key kj*512 + f when qi*128 - kj*512 + p - f >= 0
                nisa.affine_select(dst=scores[:, kj * F:(kj + 1) * F], pattern=[[-1, F]], channel_multiplier=1,
                                   on_true_tile=s_sb, on_false_value=NEG, cmp_op=nl.greater_equal,
                                   offset=qi * P - kj * F)

            row_max = nl.ndarray((P, 1), dtype=acc_type, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=scores, axis=1, keepdims=True)
            neg_max = nl.ndarray((P, 1), dtype=acc_type, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=neg_max, data=row_max, op0=nl.multiply, operand0=-1.0)
            p = nl.ndarray((P, seq_len), dtype=kernel_dtype, buffer=nl.sbuf)
            nisa.activation(dst=p, op=nl.exp, data=scores, bias=neg_max, scale=1.0)
            row_sum = nl.ndarray((P, 1), dtype=acc_type, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=row_sum, op=nl.add, data=p, axis=1, keepdims=True)

            o_ps = nl.ndarray((P, d_head), dtype=nl.float32, buffer=nl.psum)
            for kt in nl.affine_range(seq_len // P):
                v_tile = nl.ndarray((P, d_head), dtype=kernel_dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=v_tile, src=v[h, kt * P:(kt + 1) * P, :])    # [128 keys, d_head]
                p_t_ps = nl.ndarray((P, P), dtype=kernel_dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=p_t_ps, data=p[:, kt * P:(kt + 1) * P])  # [128 keys, 128 queries]
                p_t = nl.ndarray((P, P), dtype=kernel_dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=p_t, src=p_t_ps)
                nisa.nc_matmul(dst=o_ps, stationary=p_t, moving=v_tile)  # first overwrites, then accumulates

            o_sb = nl.ndarray((P, d_head), dtype=kernel_dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=o_sb, src=o_ps)
            nisa.dma_copy(dst=o[h, rows, :], src=o_sb)
            log_sum = nl.ndarray((P, 1), dtype=acc_type, buffer=nl.sbuf)
            nisa.activation(dst=log_sum, op=nl.log, data=row_sum)
            l_sb = nl.ndarray((P, 1), dtype=kernel_dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=l_sb, data1=log_sum, data2=row_max, op=nl.add)
            nisa.dma_copy(dst=l[h, rows, :], src=l_sb)
            m_sb = nl.ndarray((P, 1), dtype=kernel_dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=m_sb, src=row_max)
            nisa.dma_copy(dst=m[h, rows, :], src=m_sb)
    return o, l, m
