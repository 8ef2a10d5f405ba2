import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.jit
def solution(q, k, v, kernel_dtype, acc_type, seq_len=2048, d_head=128):
    """Causal self-attention forward returning (o, l, m), one 128-query tile at a time.

    For each query tile: the full score row block [128, seq_len] is computed (K reloaded from HBM),
    masked, reduced and exponentiated in SBUF; then P is transposed tile by tile and multiplied with V
    (reloaded from HBM) into PSUM. o stays unnormalised, l = log(sum p) + m.
    """
    B_P = nl.tile_size.pmax                 # 128 queries per tile
    B_F = nl.tile_size.gemm_moving_fmax     # 512 keys per score matmul
    assert seq_len % B_F == 0 and d_head <= B_P
    NEG = -9984.0                           # stands in for -inf (exp underflows to 0)

    o = nl.ndarray((seq_len, d_head), dtype=kernel_dtype, buffer=nl.shared_hbm)
    l = nl.ndarray((seq_len, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    m = nl.ndarray((seq_len, 1), dtype=nl.float32, buffer=nl.shared_hbm)

    i_p = nl.arange(B_P)[:, None]
    i_f = nl.arange(B_F)[None, :]
    for qi in nl.affine_range(seq_len // B_P):
        q_tile = nl.load(q[qi * B_P:(qi + 1) * B_P, :])                  # [128 queries, d_head]

        scores = nl.ndarray((nl.par_dim(B_P), seq_len), dtype=acc_type, buffer=nl.sbuf)
        for kj in nl.affine_range(seq_len // B_F):
            k_tile = nl.load(k[:, kj * B_F:(kj + 1) * B_F])              # [d_head, 512 keys]
            s_psum = nl.matmul(q_tile, k_tile)                            # q_tile @ k_tile -> PSUM
            s_sb = nl.copy(s_psum, dtype=acc_type)
            # causal mask: query qi*128 + p sees key kj*512 + f when p - f >= kj*512 - qi*128
            scores[:, kj * B_F:(kj + 1) * B_F] = nisa.affine_select(
                pred=(i_p - i_f >= kj * B_F - qi * B_P), on_true_tile=s_sb, on_false_value=NEG, dtype=acc_type)

        row_max = nl.max(scores, axis=1, keepdims=True, dtype=acc_type)  # [128, 1]
        neg_max = nl.multiply(row_max, -1.0, dtype=acc_type)
        p = nisa.activation(op=nl.exp, data=scores, bias=neg_max, scale=1.0, dtype=kernel_dtype)
        row_sum = nl.sum(p, axis=1, keepdims=True, dtype=acc_type)

        o_psum = nl.zeros((B_P, d_head), nl.float32, buffer=nl.psum)
        for kt in nl.affine_range(seq_len // B_P):
            v_tile = nl.load(v[kt * B_P:(kt + 1) * B_P, :])              # [128 keys, d_head]
            p_t = nl.transpose(p[:, kt * B_P:(kt + 1) * B_P])            # [128 keys, 128 queries] in PSUM
            p_t_sb = nl.copy(p_t, dtype=kernel_dtype)
            o_psum += nisa.nc_matmul(p_t_sb, v_tile)

        o_sb = nl.copy(o_psum, dtype=kernel_dtype)
        nl.store(o[qi * B_P:(qi + 1) * B_P, :], value=o_sb)
        l_sb = nl.add(nl.log(row_sum), row_max, dtype=kernel_dtype)
        nl.store(l[qi * B_P:(qi + 1) * B_P, :], value=l_sb)
        m_sb = nl.copy(row_max, dtype=kernel_dtype)
        nl.store(m[qi * B_P:(qi + 1) * B_P, :], value=m_sb)
    return o, l, m
