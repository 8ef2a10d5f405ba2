"""Kernel text of the causal-attention schedules (trainium_flash): one head (csa) or several (mha).

Two methods. "rows" is the naive kernel's: per 128-query tile the score rows [queries, keys] go to SBUF,
are masked, reduced (row max) and exponentiated there, then P is transposed block by block on the Tensor
engine (P^T is the stationary operand of P @ V). "twopass" never transposes P: a first pass computes the
row-layout scores only for the Vector engine's row max; a second computes S^T = K^T Q^T [keys, queries]
directly, adds -m along the query axis with a rank-2 matmul (ones x -m split into bf16 high and low parts)
and the diagonal tile's mask with an identity matmul in PSUM, so one Scalar exp per group of key tiles
yields P^T in bf16, multiplied with [V | 1] whose ones column accumulates the row sums.
The kernel head, the rows pipeline and the twopass constants, max pass, exp-pass loop and driver are shared
with the NKI v2 renderer (trainium_flash_v2), which writes the statements in between the v2 way.
"""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import evict


def head(s, v2: bool = False) -> str:
    """The kernel's signature, HBM accessors, outputs and tile list (v2: with the causal_mask input, which it does
    not read, and without the nl.arange index)."""
    mha = s.family == "mha"
    sig = "num_heads=8, seq_len=2048, d_head=128" if mha else "seq_len=2048, d_head=128"
    h = "h, " if mha else ""
    shape = "H, " if mha else ""
    # the l and m dtypes each problem declares: float32, except mha's in NKI v1 (its Autocomp kernel's bfloat16)
    stats = "kernel_dtype" if mha and not v2 else "nl.float32"
    # NKI v2's definition (problem.toml's [nki2]) also passes the causal mask; the kernels build it on chip
    mask = "causal_mask, " if v2 else ""
    code = f"""@nki.jit
def solution(q, k, v, {mask}kernel_dtype, acc_type, {sig}):
    H = {"num_heads" if mha else "1"}

    def q_rows(h, r0, r1):
        return q[{h}r0:r1, :]

    def k_cols(h, c0, c1):
        return k[{h}:, c0:c1]

    def v_rows(h, r0, r1):
        return v[{h}r0:r1, :]

    def out_rows(t, h, r0, r1):
        return t[{h}r0:r1, :]

    o = nl.ndarray(({shape}seq_len, d_head), dtype=kernel_dtype, buffer=nl.shared_hbm)
    l = nl.ndarray(({shape}seq_len, 1), dtype={stats}, buffer=nl.shared_hbm)
    m = nl.ndarray(({shape}seq_len, 1), dtype={stats}, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax                   # 128 queries per tile, 128 keys per P^T block
    dt = kernel_dtype
    NEG = -9984.0                           # stands in for -inf (exp underflows to 0)
    n_t = seq_len // P
    i_p = nl.arange(P)[:, None]
    tiles = [(h, i) for h in range(H) for i in range(n_t)]
"""
    return code.replace("    i_p = nl.arange(P)[:, None]\n", "") if v2 else code


def pipeline(ahead: int, first: str, second: str) -> str:
    """Tile n's first phase is issued `ahead` tiles before its second phase (engines run in program order)."""
    return f"""    AHEAD = {ahead}                           # first phase of tile n + AHEAD before the second of tile n
    state = {{}}
    for n in nl.static_range(len(tiles) + AHEAD):
        if n < len(tiles):
            state[n] = {first}(n)
        if n >= AHEAD:
            {second}(n - AHEAD, state.pop(n - AHEAD))
    return o, l, m
"""


def rows_consts(s) -> str:
    return f"""    KB = {s.kb}                              # keys per score matmul
    TB = {s.tb}                               # P^T blocks per PSUM tile (one copy to SBUF each)
    assert seq_len % KB == 0 and d_head <= P
"""


def rows_body(s) -> str:
    code = head(s) + rows_consts(s)
    if s.hoist:
        code += """    # K and V of every head stay resident, each loaded once (when its head starts)
    k_sb = nl.ndarray((nl.par_dim(d_head), H, seq_len), dtype=dt, buffer=nl.sbuf)
    v_sb = nl.ndarray((nl.par_dim(P), H, n_t, d_head), dtype=dt, buffer=nl.sbuf)

    def k_tile(h, c0, c1):
        return k_sb[:, h, c0:c1]

    def v_tile(h, t):
        return v_sb[:, h, t, :]
"""
    else:
        code += """
    def k_tile(h, c0, c1):
        return nl.load(k_cols(h, c0, c1))

    def v_tile(h, t):
        return nl.load(v_rows(h, t * P, (t + 1) * P))
"""
    code += """
    def scores_phase(n):
        \"\"\"Scores of tile n in SBUF (masked), their row max and P = exp(S - max) in bf16.\"\"\"
        h, i = tiles[n]
"""
    if s.hoist:
        code += """        if i == 0:
            k_sb[:, h, :] = nl.load(k_cols(h, 0, seq_len), dtype=dt)
            for t in nl.static_range(n_t):
                v_sb[:, h, t, :] = nl.load(v_rows(h, t * P, (t + 1) * P), dtype=dt)
"""
    code += "        q_tile = nl.load(q_rows(h, i * P, (i + 1) * P))              # [128 queries, d_head]\n"
    if s.qt:
        code += ("        q_t = " + evict(s.sev, "nisa.nc_transpose(q_tile)", "dt") + "   # Q^T once per tile\n")
        mm = "nisa.nc_matmul(q_t, k_tile(h, c * KB, c * KB + w))"
    else:
        mm = "nl.matmul(q_tile, k_tile(h, c * KB, c * KB + w))          # inserts a transpose of q_tile"
    nk = "(i + 1) * P                       # visible keys only" if s.skip else "seq_len"
    code += f"""        nk = {nk}
        scores = nl.ndarray((nl.par_dim(P), seq_len), dtype=acc_type, buffer=nl.sbuf)
        for c in nl.static_range((nk + KB - 1) // KB):
            w = min(KB, nk - c * KB)
            s_ps = {mm}
"""
    ev = evict(s.sev, "{src}", "acc_type", "c")
    if s.skip:     # only the diagonal block of the last chunk needs the mask
        code += f"""            if c * KB + w < nk or w == 0:
                scores[:, c * KB:c * KB + w] = {ev.format(src="s_ps")}
            else:
                if w > P:
                    scores[:, c * KB:c * KB + w - P] = {ev.format(src="s_ps[:, 0:w - P]")}
                scores[:, nk - P:nk] = nisa.affine_select(
                    pred=(i_p - nl.arange(P)[None, :] >= 0), on_true_tile={ev.format(src="s_ps[:, w - P:w]")},
                    on_false_value=NEG, dtype=acc_type)
"""
    else:
        code += f"""            # causal mask: query i*128 + p sees key c*KB + f when p - f >= c*KB - i*128
            scores[:, c * KB:c * KB + w] = nisa.affine_select(
                pred=(i_p - nl.arange(w)[None, :] >= c * KB - i * P), on_true_tile={ev.format(src="s_ps")},
                on_false_value=NEG, dtype=acc_type)
"""
    if s.fuse:
        code += """        neg_max = nisa.tensor_reduce(nl.maximum, scores[:, 0:nk], axis=(1,), negate=True, keepdims=True,
                                     dtype=acc_type)
        row_sum = nl.ndarray((nl.par_dim(P), 1), dtype=acc_type, buffer=nl.sbuf)
        p = nisa.activation_reduce(op=nl.exp, data=scores[:, 0:nk], reduce_op=nl.add, reduce_res=row_sum,
                                   bias=neg_max, dtype=dt)
        return p, row_sum, neg_max, nk
"""
    else:
        code += """        row_max = nl.max(scores[:, 0:nk], axis=1, keepdims=True, dtype=acc_type)
        neg_max = nl.multiply(row_max, -1.0, dtype=acc_type)
        p = nisa.activation(op=nl.exp, data=scores[:, 0:nk], bias=neg_max, scale=1.0, dtype=dt)
        row_sum = nl.sum(p, axis=1, keepdims=True, dtype=acc_type)
        return p, row_sum, row_max, nk
"""
    code += """
    def pv_phase(n, st):
        \"\"\"o = P @ V over the visible key blocks (P^T by Tensor transposes), then l, m and the stores.\"\"\"
        h, i = tiles[n]
        p, row_sum, mx, nk = st
        o_ps = nl.zeros((P, d_head), nl.float32, buffer=nl.psum)
        n_k = nk // P
        for b in nl.static_range((n_k + TB - 1) // TB):
            cnt = min(TB, n_k - b * TB)
"""
    if s.tb == 1:
        code += f"""            p_t = nl.transpose(p[:, b * P:(b + 1) * P])                  # [128 keys, 128 queries] in PSUM
            p_t_sb = {evict(s.pev, "p_t", "dt", "b")}
            o_ps += nisa.nc_matmul(p_t_sb, v_tile(h, b))
"""
    else:
        code += f"""            pt_ps = nl.ndarray((nl.par_dim(P), TB * P), dtype=dt, buffer=nl.psum)
            for j in nl.static_range(cnt):
                pt_ps[:, j * P:(j + 1) * P] = nisa.nc_transpose(p[:, (b * TB + j) * P:(b * TB + j + 1) * P])
            p_t_sb = {evict(s.pev, "pt_ps[:, 0:cnt * P]", "dt", "b")}
            for j in nl.static_range(cnt):
                o_ps += nisa.nc_matmul(p_t_sb[:, j * P:(j + 1) * P], v_tile(h, b * TB + j))
"""
    code += """        r0, r1 = i * P, (i + 1) * P
        o_sb = nl.copy(o_ps, dtype=dt)
        nl.store(out_rows(o, h, r0, r1), value=o_sb)
"""
    if s.fuse:
        code += """        log_l = nisa.activation(nl.log, row_sum, dtype=acc_type)
        l_sb = nisa.tensor_scalar(log_l, nl.subtract, mx, dtype=dt)       # log(sum p) + max
        nl.store(out_rows(l, h, r0, r1), value=l_sb)
        m_sb = nisa.tensor_scalar(mx, nl.multiply, -1.0, dtype=dt)
        nl.store(out_rows(m, h, r0, r1), value=m_sb)

"""
    else:
        code += """        l_sb = nl.add(nl.log(row_sum), mx, dtype=dt)
        nl.store(out_rows(l, h, r0, r1), value=l_sb)
        m_sb = nl.copy(mx, dtype=dt)
        nl.store(out_rows(m, h, r0, r1), value=m_sb)

"""
    return code + pipeline(s.ahead, "scores_phase", "pv_phase")


def twopass_body(s) -> str:
    code = head(s) + twopass_consts(s) + f"""    k_sb = nl.ndarray((nl.par_dim(d_head), H, seq_len), dtype=dt, buffer=nl.sbuf)
    qT = nl.ndarray((nl.par_dim(d_head), H, seq_len), dtype=dt, buffer=nl.sbuf)
    vx = nl.ndarray((nl.par_dim(P), H, n_t, d_head + 1), dtype=dt, buffer=nl.sbuf)
    vx[:, :, :, d_head:d_head + 1] = nisa.memset((P, H, n_t, 1), 1.0, dt)
    groups = [(h, g) for h in range(H) for g in range(n_t // GL)]
    q_grp = {{}}

    def load_group(x):
        h, g = groups[x]
        k_sb[:, h, g * F:(g + 1) * F] = nl.load(k_cols(h, g * F, (g + 1) * F), dtype=dt)
        q_grp[x] = nl.ndarray((nl.par_dim(P), GL, d_head), dtype=dt, buffer=nl.sbuf)
        for j in nl.static_range(GL):
            q_grp[x][:, j, :] = nl.load(q_rows(h, (g * GL + j) * P, (g * GL + j + 1) * P), dtype=dt)
        for j in nl.static_range(GL):
            vx[:, h, g * GL + j, 0:d_head] = nl.load(v_rows(h, (g * GL + j) * P, (g * GL + j + 1) * P), dtype=dt)

    for x in nl.static_range(min(2, len(groups))):
        load_group(x)

    def transpose_queries(x):
        \"\"\"Q^T of group x's query tiles (one PSUM bank, one copy), just before their first scores.\"\"\"
        h, g = groups[x]
        if x + 2 < len(groups):
            load_group(x + 2)
        t_ps = new_small_ps()
        for j in nl.static_range(GL):
            t_ps[0:d_head, j * P:(j + 1) * P] = nisa.nc_transpose(q_grp[x][:, j, :])
        qT[:, h, g * F:(g + 1) * F] = nl.copy(t_ps[0:d_head, :], dtype=dt)
        del q_grp[x]

    def new_small_ps():                     # one allocation site (two rotating banks) for small transposes
        return nl.ndarray((nl.par_dim(P), F), dtype=dt, buffer=nl.psum)

    ones2 = nisa.memset((2, P), 1.0, dt)    # stationary of the -m matmul: [2, 128 keys]
    i_f = nl.arange(P)[None, :]
    zeros = nl.zeros((P, P), dtype=nl.float32, buffer=nl.sbuf)
    ones = nl.ones((P, P), dtype=dt, buffer=nl.sbuf)
    tri = nisa.affine_select(pred=(i_p - i_f >= 0), on_true_tile=zeros, on_false_value=NEG, dtype=TRI_DT)
    tri_t = nisa.affine_select(pred=(i_f - i_p >= 0), on_true_tile=zeros, on_false_value=NEG, dtype=dt)
    ident = nisa.affine_select(pred=(i_p - i_f == 0), on_true_tile=ones, on_false_value=0.0, dtype=dt)
    n_cols = n_t // GL
    negm_cols = nl.ndarray((nl.par_dim(P), len(tiles) * n_cols), dtype=nl.float32, buffer=nl.sbuf)
    negm = nl.ndarray((nl.par_dim(P), len(tiles)), dtype=nl.float32, buffer=nl.sbuf)     # -row max
    negm_hl = nl.ndarray((nl.par_dim(P), len(tiles), 2), dtype=dt, buffer=nl.sbuf)      # bf16 hi, lo
    o_stage = nl.ndarray((nl.par_dim(P), len(tiles), d_head), dtype=dt, buffer=nl.sbuf)
    lm_stage = nl.ndarray((nl.par_dim(P), len(tiles), 2), dtype=dt, buffer=nl.sbuf)
    rows = {{}}

    def max_chunk(n, c):
        \"\"\"Negated row max of tile n over its visible keys in [512c, 512c + 512).\"\"\"
        h, i = tiles[n]
        if c == 0 and i % GL == 0:
            transpose_queries(groups.index((h, i // GL)))
        w = min(F, (i + 1) * P - c * F)
        s_ps = nl.ndarray((nl.par_dim(P), F), dtype=nl.float32, buffer=nl.psum)
        s_ps[:, 0:w] = nisa.nc_matmul(qT[:, h, i * P:(i + 1) * P], k_sb[:, h, c * F:c * F + w])
        if c == n_chunks[i] - 1:
            MASK_ADD
        negm_cols[:, n * n_cols + c:n * n_cols + c + 1] = nisa.tensor_reduce(
            nl.maximum, s_ps[:, 0:w], axis=(1,), negate=True, keepdims=True, dtype=nl.float32)

    def max_finish(n):
        \"\"\"-m of tile n, split into a bf16 high part and the remainder.\"\"\"
        i = tiles[n][1]
        negm[:, n:n + 1] = nisa.tensor_reduce(nl.minimum, negm_cols[:, n * n_cols:n * n_cols + n_chunks[i]],
                                              axis=(1,), keepdims=True, dtype=nl.float32)
        negm_hl[:, n, 0:1] = nl.copy(negm[:, n:n + 1], dtype=dt)
        negm_hl[:, n, 1:2] = nisa.tensor_tensor(negm[:, n:n + 1], negm_hl[:, n, 0:1], op=nl.subtract, dtype=dt)

    def max_rows(n):
        \"\"\"-m of tile n as two rows [2, 128 queries] (moving operand of the rank-2 matmul).\"\"\"
        t_ps = new_small_ps()
        t_ps[0:2, 0:P] = nisa.nc_transpose(negm_hl[:, n, :])
        rows[n] = nl.copy(t_ps[0:2, 0:P], dtype=dt)

""" + MAX_PASS + f"""
    def scores_t(n, g):
        \"\"\"P^T = exp(S^T - m) of tile n for its visible key tiles gG .. gG+G-1: [128 keys, tiles x 128 queries].\"\"\"
        h, i = tiles[n]
        gt = min(G, i + 1 - g * G)
        st_ps = nl.ndarray((nl.par_dim(P), G * P), dtype=nl.float32, buffer=nl.psum)
        for j in nl.static_range(gt):
            t = g * G + j
            blk = slice(j * P, (j + 1) * P)
            st_ps[:, blk] = nisa.nc_matmul(k_sb[:, h, t * P:(t + 1) * P], qT[:, h, i * P:(i + 1) * P])
            st_ps[:, blk] += nisa.nc_matmul(ones2, rows[n])
            if t == i:
                st_ps[:, blk] += nisa.nc_matmul(ident, tri_t)
        return nisa.activation(nl.exp, st_ps[:, 0:gt * P], dtype=dt)

""" + exp_pass_head("nl.ndarray((nl.par_dim(P), d_head + 1), dtype=nl.float32, buffer=nl.psum)")
    code += exp_loop(s, """                if t == 0:
                    acc[...] = nisa.nc_matmul(pt[:, j * P:(j + 1) * P], vx[:, h, t, :])
                else:
                    acc += nisa.nc_matmul(pt[:, j * P:(j + 1) * P], vx[:, h, t, :])
""")
    code += """        o_stage[:, n, :] = nl.copy(acc[:, 0:d_head], dtype=dt)
        log_l = nisa.activation(nl.log, acc[:, d_head:d_head + 1], dtype=nl.float32)
        lm_stage[:, n, 0:1] = nisa.tensor_scalar(log_l, nl.subtract, negm[:, n:n + 1], dtype=dt)
        lm_stage[:, n, 1:2] = nisa.tensor_scalar(negm[:, n:n + 1], nl.multiply, -1.0, dtype=dt)
        nl.store(out_rows(o, h, r0, r1), value=o_stage[:, n, :])
        nl.store(out_rows(l, h, r0, r1), value=lm_stage[:, n, 0:1])
        nl.store(out_rows(m, h, r0, r1), value=lm_stage[:, n, 1:2])
""" + twopass_driver(s)
    if s.tmask:     # the diagonal tile's mask added by the Tensor engine: ident^T @ tri = tri, into PSUM
        code = code.replace("MASK_ADD", "s_ps[:, w - P:w] += nisa.nc_matmul(ident, tri)").replace("TRI_DT", "dt")
    else:          # added by the Vector engine, which reads the PSUM bank and writes it back
        code = code.replace("MASK_ADD", "s_ps[:, w - P:w] = nl.add(s_ps[:, w - P:w], tri)")
        code = code.replace("TRI_DT", "nl.float32")
    return code


# ---- twopass pieces shared with the NKI v2 renderer (pure control flow, no statements that differ) ----
def twopass_consts(s) -> str:
    return f"""    F = nl.tile_size.gemm_moving_fmax       # 512 keys per row-layout score bank (max pass)
    G = {s.group}                               # key tiles per S^T bank and per exp instruction
    GL = F // P                             # query/key tiles per load group
    assert seq_len % F == 0 and d_head <= P
    n_chunks = [((i + 1) * P + F - 1) // F for i in range(n_t)]

    # Resident operands: K, Q^T and [V | 1] of every head. Group x = (head, 512 keys) brings its K columns,
    # queries and values; the loads of group x + 2 are issued when group x is first used.
"""


MAX_PASS = """    def max_pass(n):
        for c in nl.static_range(n_chunks[tiles[n][1]]):
            max_chunk(n, c)
        max_finish(n)
"""


def exp_pass_head(acc: str) -> str:
    """The head of exp_pass up to its [o | l] PSUM accumulator, allocated by the expression `acc`."""
    return f"""    def exp_pass(n, ahead):
        \"\"\"[o | l] = P @ [V | 1] over the visible keys, with the max pass of tile `ahead` interleaved.\"\"\"
        h, i = tiles[n]
        n_grp = (i + 1 + G - 1) // G
        a_chunks = n_chunks[tiles[ahead][1]] if ahead is not None else 0
        acc = {acc}
"""


def exp_loop(s, pv: str) -> str:
    """exp_pass's loop over its key groups (`pv`: the P @ [V | 1] matmuls of key tile t of group g), with the
    max pass of tile `ahead` before it or interleaved chunk by chunk; then the -m rows of the next tile."""
    if s.interleave:   # the next group's scores go to the Tensor engine before this group's P @ V
        code = """        pt = scores_t(n, 0)
        for g in nl.static_range(max(n_grp, a_chunks)):
            if g < a_chunks:
                max_chunk(ahead, g)
                if g == a_chunks - 1:
                    max_finish(ahead)
            if g >= n_grp:
                continue
            nxt = scores_t(n, g + 1) if g + 1 < n_grp else None
"""
    else:
        code = """        if ahead is not None:
            max_pass(ahead)
        for g in nl.static_range(n_grp):
            pt = scores_t(n, g)
"""
    code += """            for j in nl.static_range(min(G, i + 1 - g * G)):
                t = g * G + j
""" + pv
    if s.interleave:
        code += "            pt = nxt\n"
    return code + """        if n + 1 < len(tiles) and AHEAD > 0:
            max_rows(n + 1)
        r0, r1 = i * P, (i + 1) * P
"""


def twopass_driver(s) -> str:
    """The end of exp_pass and the tile loop: the max pass AHEAD tiles before the exp pass."""
    return f"""        del rows[n]

    AHEAD = {s.ahead}                           # the max pass runs this many tiles ahead of the exp pass
    for n in nl.static_range(min(AHEAD, len(tiles))):
        max_pass(n)
    if AHEAD > 0:
        max_rows(0)
    for n in nl.static_range(len(tiles)):
        if AHEAD == 0:
            max_pass(n)
            max_rows(n)
        exp_pass(n, n + AHEAD if 0 < AHEAD and n + AHEAD < len(tiles) else None)
    return o, l, m
"""
