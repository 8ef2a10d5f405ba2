import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def solution(q, k, v, causal_mask, kernel_dtype, acc_type, num_heads=8, seq_len=2048, d_head=128):
    """Multi-head causal attention forward returning (o, l, m): two-pass attention built around P^T
    (NKI v2).

    The algorithm of the NKI v1 tuned kernel (tuned.py), written the v2 way: every instruction writes the
    dst it is given, tiles have the partition axis first (no par_dim), the masks are affine_select
    patterns over (partition, column) instead of index grids, and a PSUM tile's first matmul overwrites
    while the next ones into it accumulate (no zeroing, no +=).
    Heads are independent: all (head, query tile) pairs form one pipeline, so one head's last tiles
    overlap the next head's first ones. Per 128-query tile, pass 1 computes the visible scores in
    row layout [queries, keys], 512 keys per PSUM bank (diagonal tile masked in place), only for
    the Vector engine's row max m. Pass 2 computes them again already transposed, S^T = K^T Q^T
    [keys, queries], and adds -m along the query axis with a rank-2 matmul (a ones row times -m
    split into bf16 high and low parts, exact to fp32 precision) and the causal mask of the
    diagonal tile with an identity matmul, all accumulated in PSUM. One Scalar-engine exp per four
    key tiles yields P^T in bf16, directly the stationary operand of P @ [V | 1], whose ones column
    accumulates the row sums l. No transposes or PSUM->SBUF copies of P, no online rescaling.
    The max pass of the tile after next is interleaved with this tile's exp pass, and scores of the
    next four key tiles are issued before P @ V of the current ones, so no engine stalls in order.

    causal_mask (the NKI v2 definition's input, always the causal mask) is not read: the mask is an
    affine_select pattern over (query, key) on chip, which costs no HBM traffic. l and m are float32, as
    the NKI v2 definition declares them (Autocomp's v2 kernel's).
    """
    # Every loop is nl.static_range (unrolled while tracing): the schedule branches on loop indices
    # and keeps Python lists of tiles.
    H = num_heads

    def q_rows(h, r0, r1):
        return q[h, r0:r1, :]

    def k_cols(h, c0, c1):
        return k[h, :, c0:c1]

    def v_rows(h, r0, r1):
        return v[h, r0:r1, :]

    o = nl.ndarray((H, seq_len, d_head), dtype=kernel_dtype, buffer=nl.shared_hbm)
    l = nl.ndarray((H, seq_len, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    m = nl.ndarray((H, seq_len, 1), dtype=nl.float32, buffer=nl.shared_hbm)

    def out_rows(t, h, r0, r1):
        return t[h, r0:r1, :]

    # ---- shared with csa (which differs only in the accessors above) ----
    P = nl.tile_size.pmax                   # 128 queries per tile, 128 keys per key tile
    F = nl.tile_size.gemm_moving_fmax       # 512 keys per row-layout score bank
    G = F // P                              # key tiles per group (one PSUM bank of S^T)
    assert seq_len % F == 0 and d_head <= P
    dt = kernel_dtype
    f32 = nl.float32
    NEG = -9984.0                           # stands in for -inf (exp underflows to 0)
    n_t = seq_len // P
    n_chunks = [((i + 1) * P + F - 1) // F for i in range(n_t)]

    # PSUM, one allocation site per role, two rotating banks each.
    def new_row_bank():
        return nl.ndarray((P, F), dtype=f32, buffer=nl.psum)

    def new_st_bank():
        return nl.ndarray((P, F), dtype=f32, buffer=nl.psum)

    def new_acc():
        return nl.ndarray((P, d_head + 1), dtype=f32, buffer=nl.psum)

    def new_small_ps():
        return nl.ndarray((P, F), dtype=dt, buffer=nl.psum)

    # Resident operands of every head. Group x = (head, 4 query tiles) brings its 512 keys of K, its
    # values as [V | 1] tiles and its queries (only until transposed: only Q^T is kept); the loads
    # of group x+2 are issued when group x is transposed, so the DMA queues never hold a long
    # backlog in front of the output stores or the next transfers.
    k_sb = nl.ndarray((d_head, H, seq_len), dtype=dt, buffer=nl.sbuf)
    qT = nl.ndarray((d_head, H, seq_len), dtype=dt, buffer=nl.sbuf)
    vx = nl.ndarray((P, H, n_t, d_head + 1), dtype=dt, buffer=nl.sbuf)
    nisa.memset(dst=vx[:, :, :, d_head:d_head + 1], value=1.0)
    groups = [(h, g) for h in range(H) for g in range(n_t // G)]
    q_grp = {}

    def load_group(x):
        h, g = groups[x]
        nisa.dma_copy(dst=k_sb[:, h, g * F:(g + 1) * F], src=k_cols(h, g * F, (g + 1) * F))
        q_grp[h, g] = nl.ndarray((P, G, d_head), dtype=dt, buffer=nl.sbuf)
        for j in nl.static_range(G):
            t = g * G + j
            nisa.dma_copy(dst=q_grp[h, g][:, j, :], src=q_rows(h, t * P, (t + 1) * P))
        for j in nl.static_range(G):
            t = g * G + j
            nisa.dma_copy(dst=vx[:, h, t, 0:d_head], src=v_rows(h, t * P, (t + 1) * P))

    for x in nl.static_range(min(2, len(groups))):
        load_group(x)

    # Constants: masks as affine_select patterns over (partition p, column f).
    ones2 = nl.ndarray((2, P), dtype=dt, buffer=nl.sbuf)     # stationary of the -m matmul: [2, 128 keys]
    nisa.memset(dst=ones2, value=1.0)
    zeros = nl.ndarray((P, P), dtype=f32, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    ones = nl.ndarray((P, P), dtype=dt, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    tri = nl.ndarray((P, P), dtype=f32, buffer=nl.sbuf)      # 0 where p - f >= 0 (key f visible to query p)
    nisa.affine_select(dst=tri, pattern=[[-1, P]], channel_multiplier=1, on_true_tile=zeros, on_false_value=NEG,
                       cmp_op=nl.greater_equal, offset=0)
    tri_t = nl.ndarray((P, P), dtype=dt, buffer=nl.sbuf)     # its transpose: 0 where f - p >= 0
    nisa.affine_select(dst=tri_t, pattern=[[1, P]], channel_multiplier=-1, on_true_tile=zeros, on_false_value=NEG,
                       cmp_op=nl.greater_equal, offset=0)
    ident = nl.ndarray((P, P), dtype=dt, buffer=nl.sbuf)     # 1 where p == f
    nisa.affine_select(dst=ident, pattern=[[-1, P]], channel_multiplier=1, on_true_tile=ones, on_false_value=0.0,
                       cmp_op=nl.equal, offset=0)

    tiles = [(h, i) for h in range(H) for i in range(n_t)]
    n_cols = n_t // G
    negm_cols = nl.ndarray((P, len(tiles) * n_cols), dtype=f32, buffer=nl.sbuf)
    negm = nl.ndarray((P, len(tiles)), dtype=f32, buffer=nl.sbuf)           # -row max
    negm_hl = nl.ndarray((P, len(tiles), 2), dtype=dt, buffer=nl.sbuf)      # bf16 hi, lo
    # Output staging: a distinct region per tile, so no compute waits for a store to drain.
    o_stage = nl.ndarray((P, len(tiles), d_head), dtype=dt, buffer=nl.sbuf)
    lm_stage = nl.ndarray((P, len(tiles), 2), dtype=dt, buffer=nl.sbuf)
    rows = {}

    def transpose_queries(h, g):
        """Q^T of query tiles 4g..4g+3, just before their first scores."""
        x = groups.index((h, g))
        if x + 2 < len(groups):
            load_group(x + 2)
        t_ps = new_small_ps()
        for j in nl.static_range(G):
            nisa.nc_transpose(dst=t_ps[0:d_head, j * P:(j + 1) * P], data=q_grp[h, g][:, j, :])
        nisa.activation(dst=qT[:, h, g * F:(g + 1) * F], op=nl.copy, data=t_ps[0:d_head, :])
        del q_grp[h, g]

    def max_chunk(n, c):
        """Negated row max of tile n's queries over their visible keys in [512c, 512c + 512)."""
        h, i = tiles[n]
        if c == 0 and i % G == 0:
            transpose_queries(h, i // G)
        w = min(F, (i + 1) * P - c * F)
        s_ps = new_row_bank()
        nisa.nc_matmul(dst=s_ps[:, 0:w], stationary=qT[:, h, i * P:(i + 1) * P], moving=k_sb[:, h, c * F:c * F + w])
        if c == n_chunks[i] - 1:
            nisa.tensor_tensor(dst=s_ps[:, w - P:w], data1=s_ps[:, w - P:w], data2=tri, op=nl.add)
        nisa.tensor_reduce(dst=negm_cols[:, n * n_cols + c:n * n_cols + c + 1], op=nl.maximum, data=s_ps[:, 0:w],
                           axis=(1,), negate=True, keepdims=True)

    def max_finish(n):
        """-m of tile n split into a bf16 high part and the remainder (issued after its last chunk)."""
        i = tiles[n][1]
        nisa.tensor_reduce(dst=negm[:, n:n + 1], op=nl.minimum, data=negm_cols[:, n * n_cols:n * n_cols + n_chunks[i]],
                           axis=(1,), keepdims=True)
        nisa.activation(dst=negm_hl[:, n, 0:1], op=nl.copy, data=negm[:, n:n + 1])
        nisa.tensor_tensor(dst=negm_hl[:, n, 1:2], data1=negm[:, n:n + 1], data2=negm_hl[:, n, 0:1], op=nl.subtract)

    def max_rows(n):
        """-m of tile n as two rows [2, 128 queries] on the Tensor engine (issued when it is due)."""
        t_ps = new_small_ps()
        nisa.nc_transpose(dst=t_ps[0:2, 0:P], data=negm_hl[:, n, :])
        rows[n] = nl.ndarray((2, P), dtype=dt, buffer=nl.sbuf)
        nisa.activation(dst=rows[n], op=nl.copy, data=t_ps[0:2, 0:P])

    def scores_t(n, g):
        """exp(S^T - m) of tile n for visible key tiles 4g..4g+3: [128 keys, key tiles x 128 queries]."""
        h, i = tiles[n]
        gt = min(G, i + 1 - g * G)
        st_ps = new_st_bank()
        for j in nl.static_range(gt):      # per block: the first matmul overwrites, the next two accumulate
            t = g * G + j
            blk = slice(j * P, (j + 1) * P)
            nisa.nc_matmul(dst=st_ps[:, blk], stationary=k_sb[:, h, t * P:(t + 1) * P],
                           moving=qT[:, h, i * P:(i + 1) * P])
            nisa.nc_matmul(dst=st_ps[:, blk], stationary=ones2, moving=rows[n])
            if t == i:
                nisa.nc_matmul(dst=st_ps[:, blk], stationary=ident, moving=tri_t)
        pt = nl.ndarray((P, F), dtype=dt, buffer=nl.sbuf)
        nisa.activation(dst=pt[:, 0:gt * P], op=nl.exp, data=st_ps[:, 0:gt * P])
        return pt

    def exp_pass(n):
        """[o | l] = P @ [V | 1] over the visible keys; the max pass of the tile after next is
        interleaved (two ahead, so its short finishing chain never delays the next tile)."""
        h, i = tiles[n]
        n_grp = (i + 1 + G - 1) // G
        ahead = n + 2
        ahead_chunks = n_chunks[tiles[ahead][1]] if ahead < len(tiles) else 0
        acc = new_acc()
        pt = scores_t(n, 0)
        for g in nl.static_range(max(n_grp, ahead_chunks)):
            if g < ahead_chunks:
                max_chunk(ahead, g)
                if g == ahead_chunks - 1:
                    max_finish(ahead)
            if g >= n_grp:
                continue
            nxt = scores_t(n, g + 1) if g + 1 < n_grp else None
            for j in nl.static_range(min(G, i + 1 - g * G)):     # the first matmul into acc overwrites
                t = g * G + j
                nisa.nc_matmul(dst=acc, stationary=pt[:, j * P:(j + 1) * P], moving=vx[:, h, t, :])
            pt = nxt
        if n + 1 < len(tiles):
            max_rows(n + 1)
        r0, r1 = i * P, (i + 1) * P
        nisa.activation(dst=o_stage[:, n, :], op=nl.copy, data=acc[:, 0:d_head])
        log_l = nl.ndarray((P, 1), dtype=f32, buffer=nl.sbuf)
        nisa.activation(dst=log_l, op=nl.log, data=acc[:, d_head:d_head + 1])
        nisa.tensor_scalar(dst=lm_stage[:, n, 0:1], data=log_l, op0=nl.subtract, operand0=negm[:, n:n + 1])
        nisa.tensor_scalar(dst=lm_stage[:, n, 1:2], data=negm[:, n:n + 1], op0=nl.multiply, operand0=-1.0)
        nisa.dma_copy(dst=out_rows(o, h, r0, r1), src=o_stage[:, n, :])
        nisa.dma_copy(dst=out_rows(l, h, r0, r1), src=lm_stage[:, n, 0:1])
        nisa.dma_copy(dst=out_rows(m, h, r0, r1), src=lm_stage[:, n, 1:2])
        del rows[n]

    for n in range(min(2, len(tiles))):
        for c in nl.static_range(n_chunks[tiles[n][1]]):
            max_chunk(n, c)
        max_finish(n)
    max_rows(0)
    for n in range(len(tiles)):
        exp_pass(n)
    return o, l, m
