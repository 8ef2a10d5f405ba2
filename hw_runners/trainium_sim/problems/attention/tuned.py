import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.jit
def solution(q, k, v):
    """out = softmax(q.T @ k) @ v.T (head-dim-major inputs): two-pass attention built around P^T.

    Per 128-query tile, pass 1 computes the scores in row layout [queries, keys], 512 keys per PSUM
    bank, only for the Vector engine's row max m. Pass 2 computes them again already transposed,
    S^T = K^T Q [keys, queries], and adds -m along the query axis with a rank-2 matmul (a ones row
    times -m split into bf16 high and low parts, exact to fp32 precision), all accumulated in PSUM.
    One Scalar-engine exp then yields P^T in bf16, which is directly the stationary operand of
    P @ [V | 1]: the ones column of V makes the same matmuls accumulate the row sums. No P transpose
    or PSUM->SBUF copy of P is needed, no online rescaling either (m is known before pass 2).
    Query tile i+1's max pass is issued before tile i's exp pass, and within a pass scores of the
    next 512 keys are issued before P @ V of the current ones, so no engine waits in program order.
    """
    # Every loop is nl.static_range (unrolled while tracing): the schedule branches on loop indices
    # and keeps Python lists of tiles, which symbolic affine_range indices would not allow.
    d_head, seqlen = q.shape
    P = nl.tile_size.pmax                   # 128 queries per tile, 128 keys per key tile
    F = nl.tile_size.gemm_moving_fmax       # 512: keys per row-layout score bank, 4 key tiles per group
    G = F // P                              # key tiles per group
    assert d_head <= P and seqlen % F == 0
    n_q, n_t, n_g = seqlen // P, seqlen // P, seqlen // F
    dt = q.dtype

    out = nl.ndarray((seqlen, d_head), dtype=dt, buffer=nl.shared_hbm)

    # PSUM, one allocation site per role, two rotating banks each: row-layout scores, transposed
    # scores, the [o | l] accumulator, small transposes.
    def new_row_bank():
        return nl.ndarray((nl.par_dim(P), F), dtype=nl.float32, buffer=nl.psum)

    def new_st_bank():
        return nl.ndarray((nl.par_dim(P), F), dtype=nl.float32, buffer=nl.psum)

    def new_acc():
        return nl.ndarray((nl.par_dim(P), d_head + 1), dtype=nl.float32, buffer=nl.psum)

    def new_small_ps():
        return nl.ndarray((nl.par_dim(P), F), dtype=dt, buffer=nl.psum)

    # Resident operands: q and k are already [d_head, seq] (stationary/moving layouts of the scores);
    # V becomes [keys, d_head | 1] tiles through Tensor-engine transposes, with a ones column.
    q_sb = nl.ndarray((nl.par_dim(d_head), seqlen), dtype=dt, buffer=nl.sbuf)
    k_sb = nl.ndarray((nl.par_dim(d_head), seqlen), dtype=dt, buffer=nl.sbuf)
    v_sb = nl.ndarray((nl.par_dim(d_head), seqlen), dtype=dt, buffer=nl.sbuf)
    for c in nl.static_range((seqlen + 2047) // 2048):
        cols = slice(c * 2048, min(seqlen, (c + 1) * 2048))
        k_sb[:, cols] = nl.load(k[:, cols])
        if c == 0:
            q_sb[:, cols] = nl.load(q[:, cols])
        v_sb[:, cols] = nl.load(v[:, cols])
    for c in nl.static_range(1, (seqlen + 2047) // 2048):
        cols = slice(c * 2048, min(seqlen, (c + 1) * 2048))
        q_sb[:, cols] = nl.load(q[:, cols])
    vx_sb = nl.ndarray((nl.par_dim(P), n_t, d_head + 1), dtype=dt, buffer=nl.sbuf)
    vx_sb[:, :, d_head:d_head + 1] = nisa.memset((P, n_t, 1), 1.0, dt)
    ones2 = nisa.memset((2, P), 1.0, dt)            # stationary of the -m matmul: [2, 128 keys]

    def transpose_values(g):
        t_ps = new_small_ps()
        for j in nl.static_range(G):
            t = g * G + j
            t_ps[:, j * d_head:(j + 1) * d_head] = nisa.nc_transpose(v_sb[:, t * P:(t + 1) * P])
        for j in nl.static_range(G):
            vx_sb[:, g * G + j, 0:d_head] = nl.copy(t_ps[:, j * d_head:(j + 1) * d_head], dtype=dt)

    negm_cols = nl.ndarray((nl.par_dim(P), n_q * n_g), dtype=nl.float32, buffer=nl.sbuf)   # -max per bank
    negm = nl.ndarray((nl.par_dim(P), n_q), dtype=nl.float32, buffer=nl.sbuf)             # -row max
    negm_hl = nl.ndarray((nl.par_dim(P), n_q, 2), dtype=dt, buffer=nl.sbuf)              # bf16 hi, lo
    o_stage = nl.ndarray((nl.par_dim(P), n_q, d_head), dtype=dt, buffer=nl.sbuf)   # one region per tile
    rows = {}

    def max_chunk(i, c):
        """Negated row max of query tile i over keys [512c, 512c + 512)."""
        s_ps = new_row_bank()
        s_ps[...] = nisa.nc_matmul(q_sb[:, i * P:(i + 1) * P], k_sb[:, c * F:(c + 1) * F])
        negm_cols[:, i * n_g + c:i * n_g + c + 1] = nisa.tensor_reduce(
            nl.maximum, s_ps, axis=(1,), negate=True, keepdims=True, dtype=nl.float32)

    def max_finish(i):
        """Row max of query tile i (negated), split into a bf16 high part and the remainder."""
        negm[:, i:i + 1] = nisa.tensor_reduce(nl.minimum, negm_cols[:, i * n_g:(i + 1) * n_g], axis=(1,),
                                              keepdims=True, dtype=nl.float32)
        negm_hl[:, i, 0:1] = nl.copy(negm[:, i:i + 1], dtype=dt)
        negm_hl[:, i, 1:2] = nisa.tensor_tensor(negm[:, i:i + 1], negm_hl[:, i, 0:1], op=nl.subtract, dtype=dt)

    def max_rows(i):
        """-m of query tile i as two bf16 rows [2, 128 queries] (Tensor-engine transpose)."""
        t_ps = new_small_ps()
        t_ps[0:2, 0:P] = nisa.nc_transpose(negm_hl[:, i, :])
        rows[i] = nl.copy(t_ps[0:2, 0:P], dtype=dt)

    def scores_t(i, g):
        """exp(S^T - m) for key group g of query tile i: [128 keys, 4 key tiles x 128 queries] bf16."""
        st_ps = new_st_bank()
        for j in nl.static_range(G):
            t = g * G + j
            blk = slice(j * P, (j + 1) * P)
            st_ps[:, blk] = nisa.nc_matmul(k_sb[:, t * P:(t + 1) * P], q_sb[:, i * P:(i + 1) * P])
            st_ps[:, blk] += nisa.nc_matmul(ones2, rows[i])
        return nisa.activation(nl.exp, st_ps, dtype=dt)

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
                if t == 0:
                    acc[...] = nisa.nc_matmul(pt[:, j * P:(j + 1) * P], vx_sb[:, t, :])
                else:
                    acc += nisa.nc_matmul(pt[:, j * P:(j + 1) * P], vx_sb[:, t, :])
            pt = nxt
        if i + 1 < n_q:
            max_rows(i + 1)
        inv_l = nisa.reciprocal(acc[:, d_head:d_head + 1])
        o_stage[:, i, :] = nisa.activation(nl.copy, acc[:, 0:d_head], scale=inv_l, dtype=dt)
        nl.store(out[i * P:(i + 1) * P, :], value=o_stage[:, i, :])
        del rows[i]

    for i in range(min(2, n_q)):
        for c in nl.static_range(n_g):
            max_chunk(i, c)
        max_finish(i)
    max_rows(0)
    for i in range(n_q):
        exp_pass(i)
    return out
