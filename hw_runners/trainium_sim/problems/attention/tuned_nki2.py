import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def solution(q, k, v):
    """out = softmax(q.T @ k) @ v.T (head-dim-major inputs): two-pass attention built around P^T (NKI v2).

    Per 128-query tile, pass 1 computes the scores in row layout [queries, keys], 512 keys per PSUM
    bank, only for the Vector engine's row max m. Pass 2 computes them again already transposed,
    S^T = K^T Q [keys, queries], and adds -m along the query axis with a rank-2 matmul (a ones row
    times -m split into bf16 high and low parts, exact to fp32 precision), all accumulated in PSUM.
    One Scalar-engine exp then yields P^T in bf16, which is directly the stationary operand of
    P @ [V | 1]: the ones column of V makes the same matmuls accumulate the row sums. No P transpose
    or PSUM->SBUF copy of P is needed, no online rescaling either (m is known before pass 2).
    Query tile i+2's max pass is interleaved with tile i's exp pass, and within a pass scores of the
    next 512 keys are issued before P @ V of the current ones, so no engine waits in program order.
    """
    # Every loop is nl.static_range (unrolled while tracing): the schedule branches on loop indices
    # and keeps Python dicts of tiles. Every instruction writes the dst it is given; a PSUM tile's
    # first matmul overwrites it and the following ones accumulate (nc_matmul's accumulate=None).
    d_head, seqlen = q.shape
    P = nl.tile_size.pmax                   # 128 queries per tile, 128 keys per key tile
    F = nl.tile_size.gemm_moving_fmax       # 512: keys per row-layout score bank, 4 key tiles per group
    G = F // P                              # key tiles per group
    assert d_head <= P and seqlen % F == 0
    n_q, n_t, n_g = seqlen // P, seqlen // P, seqlen // F
    dt = q.dtype
    f32 = nl.float32

    out = nl.ndarray((seqlen, d_head), dtype=dt, buffer=nl.shared_hbm)

    # PSUM, one allocation site per role, two rotating banks each: row-layout scores, transposed
    # scores, the [o | l] accumulator, small transposes.
    def new_row_bank():
        return nl.ndarray((P, F), dtype=f32, buffer=nl.psum)

    def new_st_bank():
        return nl.ndarray((P, F), dtype=f32, buffer=nl.psum)

    def new_acc():
        return nl.ndarray((P, d_head + 1), dtype=f32, buffer=nl.psum)

    def new_small_ps():                     # Tensor-engine transposes keep the dtype of their data
        return nl.ndarray((P, F), dtype=dt, buffer=nl.psum)

    # Resident operands: q and k are already [d_head, seq] (stationary/moving layouts of the scores);
    # V becomes [keys, d_head | 1] tiles through Tensor-engine transposes, with a ones column.
    q_sb = nl.ndarray((d_head, seqlen), dtype=dt, buffer=nl.sbuf)
    k_sb = nl.ndarray((d_head, seqlen), dtype=dt, buffer=nl.sbuf)
    v_sb = nl.ndarray((d_head, seqlen), dtype=dt, buffer=nl.sbuf)
    for c in nl.static_range((seqlen + 2047) // 2048):
        cols = slice(c * 2048, min(seqlen, (c + 1) * 2048))
        nisa.dma_copy(dst=k_sb[:, cols], src=k[:, cols])
        if c == 0:
            nisa.dma_copy(dst=q_sb[:, cols], src=q[:, cols])
        nisa.dma_copy(dst=v_sb[:, cols], src=v[:, cols])
    for c in nl.static_range(1, (seqlen + 2047) // 2048):
        cols = slice(c * 2048, min(seqlen, (c + 1) * 2048))
        nisa.dma_copy(dst=q_sb[:, cols], src=q[:, cols])
    vx_sb = nl.ndarray((P, n_t, d_head + 1), dtype=dt, buffer=nl.sbuf)
    nisa.memset(dst=vx_sb[:, :, d_head:d_head + 1], value=1.0)
    ones2 = nl.ndarray((2, P), dtype=dt, buffer=nl.sbuf)      # stationary of the -m matmul: [2, 128 keys]
    nisa.memset(dst=ones2, value=1.0)

    def transpose_values(g):
        t_ps = new_small_ps()
        for j in nl.static_range(G):
            t = g * G + j
            nisa.nc_transpose(dst=t_ps[:, j * d_head:(j + 1) * d_head], data=v_sb[:, t * P:(t + 1) * P])
        for j in nl.static_range(G):
            nisa.tensor_copy(dst=vx_sb[:, g * G + j, 0:d_head], src=t_ps[:, j * d_head:(j + 1) * d_head])

    negm_cols = nl.ndarray((P, n_q * n_g), dtype=f32, buffer=nl.sbuf)   # -max per bank
    negm = nl.ndarray((P, n_q), dtype=f32, buffer=nl.sbuf)              # -row max
    negm_hl = nl.ndarray((P, n_q, 2), dtype=dt, buffer=nl.sbuf)         # bf16 hi, lo
    o_stage = nl.ndarray((P, n_q, d_head), dtype=dt, buffer=nl.sbuf)    # one region per tile
    rows = {}

    def max_chunk(i, c):
        """Negated row max of query tile i over keys [512c, 512c + 512)."""
        s_ps = new_row_bank()
        nisa.nc_matmul(dst=s_ps, stationary=q_sb[:, i * P:(i + 1) * P], moving=k_sb[:, c * F:(c + 1) * F])
        nisa.tensor_reduce(dst=negm_cols[:, i * n_g + c:i * n_g + c + 1], op=nl.maximum, data=s_ps, axis=1,
                           negate=True, keepdims=True)

    def max_finish(i):
        """Row max of query tile i (negated), split into a bf16 high part and the remainder."""
        nisa.tensor_reduce(dst=negm[:, i:i + 1], op=nl.minimum, data=negm_cols[:, i * n_g:(i + 1) * n_g], axis=1,
                           keepdims=True)
        nisa.tensor_copy(dst=negm_hl[:, i, 0:1], src=negm[:, i:i + 1])
        nisa.tensor_tensor(dst=negm_hl[:, i, 1:2], data1=negm[:, i:i + 1], data2=negm_hl[:, i, 0:1], op=nl.subtract)

    def max_rows(i):
        """-m of query tile i as two bf16 rows [2, 128 queries] (Tensor-engine transpose)."""
        t_ps = new_small_ps()
        nisa.nc_transpose(dst=t_ps[0:2, 0:P], data=negm_hl[:, i, :])
        rows[i] = nl.ndarray((2, P), dtype=dt, buffer=nl.sbuf)
        nisa.tensor_copy(dst=rows[i], src=t_ps[0:2, 0:P])

    def scores_t(i, g):
        """exp(S^T - m) for key group g of query tile i: [128 keys, 4 key tiles x 128 queries] bf16."""
        st_ps = new_st_bank()
        for j in nl.static_range(G):
            t = g * G + j
            blk = st_ps[:, j * P:(j + 1) * P]          # S^T, then -m added by the second (accumulating) matmul
            nisa.nc_matmul(dst=blk, stationary=k_sb[:, t * P:(t + 1) * P], moving=q_sb[:, i * P:(i + 1) * P])
            nisa.nc_matmul(dst=blk, stationary=ones2, moving=rows[i])
        pt = nl.ndarray((P, F), dtype=dt, buffer=nl.sbuf)
        nisa.activation(dst=pt, op=nl.exp, data=st_ps)
        return pt

    def exp_pass(i):
        """[o | l] = P @ [V | 1] over all keys, then out = o / l. The max pass of tile i+2 is
        interleaved (two ahead, so its short finishing chain never delays the next tile)."""
        acc = new_acc()
        pt = scores_t(i, 0)
        for g in nl.static_range(n_g):
            if i + 2 < n_q:
                max_chunk(i + 2, g)
                if g == n_g - 1:
                    max_finish(i + 2)
            nxt = scores_t(i, g + 1) if g + 1 < n_g else None
            if i == 0:
                transpose_values(g)
            for j in nl.static_range(G):
                t = g * G + j
                nisa.nc_matmul(dst=acc, stationary=pt[:, j * P:(j + 1) * P], moving=vx_sb[:, t, :])
            pt = nxt
        if i + 1 < n_q:
            max_rows(i + 1)
        inv_l = nl.ndarray((P, 1), dtype=f32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_l, data=acc[:, d_head:d_head + 1])
        nisa.activation(dst=o_stage[:, i, :], op=nl.copy, data=acc[:, 0:d_head], scale=inv_l)
        nisa.dma_copy(dst=out[i * P:(i + 1) * P, :], src=o_stage[:, i, :])
        del rows[i]

    for i in range(min(2, n_q)):
        for c in nl.static_range(n_g):
            max_chunk(i, c)
        max_finish(i)
    max_rows(0)
    for i in range(n_q):
        exp_pass(i)
    return out
