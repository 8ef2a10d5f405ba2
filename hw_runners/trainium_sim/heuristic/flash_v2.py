"""The csa / mha schedules of flash.py rendered as NKI v2 kernels (the nki2 ISA profile): the same methods,
chunks, P^T blocks, engines and pipelines, written the v2 way. Every instruction writes the dst it is given
(HBM transfers are nisa.dma_copy); tiles have the partition axis first (no par_dim); the causal masks are
nisa.affine_select patterns over (partition p, column f) instead of nl.arange predicates (NKI v2 removed
nl.arange), so an evicted score block is masked from SBUF into its place; a PSUM tile's first matmul
overwrites and the next ones into it accumulate (accumulate=None), so P @ V needs no zeroed accumulator and
the rank-2 -m and mask matmuls of S^T no `+=`. The kernel head, the rows pipeline and the twopass constants,
max pass, exp-pass loop and driver are flash_body's. What a knob changes is said in flash.py."""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.heuristic.flash_body import (MAX_PASS, exp_loop, exp_pass_head, head,
                                                                       pipeline, rows_consts, twopass_consts,
                                                                       twopass_driver)
from autocomp_zmq.hw_runners.trainium_sim.heuristic.gemm_v2 import _evict


def _tile(name: str, shape: str, dtype: str, buf: str = "sbuf", ind: str = "        ") -> str:
    return f"{ind}{name} = nl.ndarray({shape}, dtype={dtype}, buffer=nl.{buf})\n"


def _select(dst: str, width: str, src: str, offset: str, ind: str) -> str:
    """dst = src where query p sees key f (offset + p - f >= 0), else NEG (GpSimd reads SBUF only)."""
    return (f"{ind}nisa.affine_select(dst={dst}, pattern=[[-1, {width}]], channel_multiplier=1, on_true_tile={src},\n"
            f"{ind}                   on_false_value=NEG, cmp_op=nl.greater_equal, offset={offset})\n")


def _scores_phase(s) -> str:
    code = """
    def scores_phase(n):
        \"\"\"Scores of tile n in SBUF (masked), their row max and P = exp(S - max) in bf16.\"\"\"
        h, i = tiles[n]
"""
    if s.hoist:
        code += """        if i == 0:
            nisa.dma_copy(dst=k_sb[:, h, :], src=k_cols(h, 0, seq_len))
            for t in nl.static_range(n_t):
                nisa.dma_copy(dst=v_sb[:, h, t, :], src=v_rows(h, t * P, (t + 1) * P))
"""
    code += (_tile("q_tile", "(P, d_head)", "dt")
             + "        nisa.dma_copy(dst=q_tile, src=q_rows(h, i * P, (i + 1) * P))       # [128 queries, d_head]\n")
    if s.qt:
        one_copy = "scalar" if s.sev == "alternate" else s.sev      # alternating one copy: its first engine
        code += (_tile("q_ps", "(d_head, P)", "dt", "psum") + "        nisa.nc_transpose(dst=q_ps, data=q_tile)\n"
                 + _tile("q_t", "(d_head, P)", "dt")
                 + f"        {_evict(one_copy, 'q_t', 'q_ps', '0')}   # Q^T once per tile\n")
        mm = (_tile("s_ps", "(P, KB)", "nl.float32", "psum", "            ")
              + "            nisa.nc_matmul(dst=s_ps[:, 0:w], stationary=q_t, moving=k_tile(h, c * KB, c * KB + w))\n")
    else:         # the NKI 0.3.0 convenience matmul: a new PSUM tile, Q transposed for every call
        mm = ("            s_ps = nl.matmul(q_tile, k_tile(h, c * KB, c * KB + w))"
              "          # inserts a transpose of q_tile\n")
    nk = "(i + 1) * P                       # visible keys only" if s.skip else "seq_len"
    code += f"""        nk = {nk}
        scores = nl.ndarray((P, seq_len), dtype=acc_type, buffer=nl.sbuf)
        for c in nl.static_range((nk + KB - 1) // KB):
            w = min(KB, nk - c * KB)
{mm}"""

    def ev(dst: str, src: str, ind: str = "                ") -> str:
        return f"{ind}{_evict(s.sev, dst, src, 'c')}\n"
    if s.skip:     # only the diagonal block of the last chunk needs the mask
        code += ("            if c * KB + w < nk or w == 0:\n" + ev("scores[:, c * KB:c * KB + w]", "s_ps[:, 0:w]")
                 + "            else:\n                if w > P:\n"
                 + ev("scores[:, c * KB:c * KB + w - P]", "s_ps[:, 0:w - P]", " " * 20)
                 + _tile("diag", "(P, P)", "acc_type", ind=" " * 16) + ev("diag", "s_ps[:, w - P:w]")
                 + _select("scores[:, nk - P:nk]", "P", "diag", "0", " " * 16))
    else:
        code += (_tile("s_sb", "(P, KB)", "acc_type", ind=" " * 12) + ev("s_sb[:, 0:w]", "s_ps[:, 0:w]", " " * 12)
                 + "            # causal mask: query i*128 + p sees key c*KB + f when i*128 - c*KB + p - f >= 0\n"
                 + _select("scores[:, c * KB:c * KB + w]", "w", "s_sb[:, 0:w]", "i * P - c * KB", " " * 12))
    code += _tile("neg_max", "(P, 1)", "acc_type") + _tile("row_sum", "(P, 1)", "acc_type") + _tile(
        "p", "(P, seq_len)", "dt")
    if s.fuse:
        return code + """        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=scores[:, 0:nk], axis=(1,), negate=True,
                           keepdims=True)
        nisa.activation_reduce(dst=p[:, 0:nk], op=nl.exp, data=scores[:, 0:nk], reduce_op=nl.add, reduce_res=row_sum,
                               bias=neg_max)
        return p, row_sum, neg_max, nk
"""
    return code + _tile("row_max", "(P, 1)", "acc_type") + """\
        nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=scores[:, 0:nk], axis=(1,), keepdims=True)
        nisa.tensor_scalar(dst=neg_max, data=row_max, op0=nl.multiply, operand0=-1.0)
        nisa.activation(dst=p[:, 0:nk], op=nl.exp, data=scores[:, 0:nk], bias=neg_max, scale=1.0)
        nisa.tensor_reduce(dst=row_sum, op=nl.add, data=p[:, 0:nk], axis=(1,), keepdims=True)
        return p, row_sum, row_max, nk
"""


def _pv_phase(s) -> str:
    code = """
    def pv_phase(n, st):
        \"\"\"o = P @ V over the visible key blocks (P^T by Tensor transposes), then l, m and the stores.\"\"\"
        h, i = tiles[n]
        p, row_sum, mx, nk = st
        o_ps = nl.ndarray((P, d_head), dtype=nl.float32, buffer=nl.psum)   # the first matmul overwrites
        n_k = nk // P
        for b in nl.static_range((n_k + TB - 1) // TB):
            cnt = min(TB, n_k - b * TB)
"""
    ind = "            "
    if s.tb == 1:
        code += (_tile("p_t", "(P, P)", "dt", "psum", ind)
                 + f"{ind}nisa.nc_transpose(dst=p_t, data=p[:, b * P:(b + 1) * P])       # [128 keys, 128 queries]\n"
                 + _tile("p_t_sb", "(P, P)", "dt", ind=ind) + f"{ind}{_evict(s.pev, 'p_t_sb', 'p_t', 'b')}\n"
                 + f"{ind}nisa.nc_matmul(dst=o_ps, stationary=p_t_sb, moving=v_tile(h, b))\n")
    else:
        code += (_tile("pt_ps", "(P, TB * P)", "dt", "psum", ind) + f"""{ind}for j in nl.static_range(cnt):
{ind}    nisa.nc_transpose(dst=pt_ps[:, j * P:(j + 1) * P], data=p[:, (b * TB + j) * P:(b * TB + j + 1) * P])
""" + _tile("p_t_sb", "(P, TB * P)", "dt", ind=ind)
                 + f"{ind}{_evict(s.pev, 'p_t_sb[:, 0:cnt * P]', 'pt_ps[:, 0:cnt * P]', 'b')}\n"
                 + f"""{ind}for j in nl.static_range(cnt):
{ind}    nisa.nc_matmul(dst=o_ps, stationary=p_t_sb[:, j * P:(j + 1) * P], moving=v_tile(h, b * TB + j))
""")
    code += """        r0, r1 = i * P, (i + 1) * P
""" + _tile("o_sb", "(P, d_head)", "dt") + """        nisa.activation(dst=o_sb, op=nl.copy, data=o_ps)
        nisa.dma_copy(dst=out_rows(o, h, r0, r1), src=o_sb)
""" + _tile("log_l", "(P, 1)", "acc_type") + _tile("l_sb", "(P, 1)", "dt") + _tile("m_sb", "(P, 1)", "dt") + """\
        nisa.activation(dst=log_l, op=nl.log, data=row_sum)
"""
    if s.fuse:      # mx is the negated max
        code += """        nisa.tensor_scalar(dst=l_sb, data=log_l, op0=nl.subtract, operand0=mx)       # log(sum p) + max
        nisa.tensor_scalar(dst=m_sb, data=mx, op0=nl.multiply, operand0=-1.0)
"""
    else:
        code += """        nisa.tensor_tensor(dst=l_sb, data1=log_l, data2=mx, op=nl.add)
        nisa.activation(dst=m_sb, op=nl.copy, data=mx)
"""
    return code + """        nisa.dma_copy(dst=out_rows(l, h, r0, r1), src=l_sb)
        nisa.dma_copy(dst=out_rows(m, h, r0, r1), src=m_sb)

"""


def rows_body(s) -> str:
    code = head(s, v2=True) + rows_consts(s)
    if s.hoist:
        code += """    # K and V of every head stay resident, each loaded once (when its head starts)
    k_sb = nl.ndarray((d_head, H, seq_len), dtype=dt, buffer=nl.sbuf)
    v_sb = nl.ndarray((P, H, n_t, d_head), dtype=dt, buffer=nl.sbuf)

    def k_tile(h, c0, c1):
        return k_sb[:, h, c0:c1]

    def v_tile(h, t):
        return v_sb[:, h, t, :]
"""
    else:
        code += """
    def k_tile(h, c0, c1):                  # reloaded from HBM for every use
        kt = nl.ndarray((d_head, KB), dtype=dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=kt[:, 0:c1 - c0], src=k_cols(h, c0, c1))
        return kt[:, 0:c1 - c0]

    def v_tile(h, t):
        vt = nl.ndarray((P, d_head), dtype=dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=vt, src=v_rows(h, t * P, (t + 1) * P))
        return vt
"""
    return code + _scores_phase(s) + _pv_phase(s) + pipeline(s.ahead, "scores_phase", "pv_phase")


def twopass_body(s) -> str:
    code = head(s, v2=True) + twopass_consts(s) + """    k_sb = nl.ndarray((d_head, H, seq_len), dtype=dt, buffer=nl.sbuf)
    qT = nl.ndarray((d_head, H, seq_len), dtype=dt, buffer=nl.sbuf)
    vx = nl.ndarray((P, H, n_t, d_head + 1), dtype=dt, buffer=nl.sbuf)
    nisa.memset(dst=vx[:, :, :, d_head:d_head + 1], value=1.0)
    groups = [(h, g) for h in range(H) for g in range(n_t // GL)]
    q_grp = {}

    def load_group(x):
        h, g = groups[x]
        nisa.dma_copy(dst=k_sb[:, h, g * F:(g + 1) * F], src=k_cols(h, g * F, (g + 1) * F))
        q_grp[x] = nl.ndarray((P, GL, d_head), dtype=dt, buffer=nl.sbuf)
        for j in nl.static_range(GL):
            nisa.dma_copy(dst=q_grp[x][:, j, :], src=q_rows(h, (g * GL + j) * P, (g * GL + j + 1) * P))
        for j in nl.static_range(GL):
            nisa.dma_copy(dst=vx[:, h, g * GL + j, 0:d_head], src=v_rows(h, (g * GL + j) * P, (g * GL + j + 1) * P))

    for x in nl.static_range(min(2, len(groups))):
        load_group(x)

    def transpose_queries(x):
        \"\"\"Q^T of group x's query tiles (one PSUM bank, one copy), just before their first scores.\"\"\"
        h, g = groups[x]
        if x + 2 < len(groups):
            load_group(x + 2)
        t_ps = new_small_ps()
        for j in nl.static_range(GL):
            nisa.nc_transpose(dst=t_ps[0:d_head, j * P:(j + 1) * P], data=q_grp[x][:, j, :])
        nisa.activation(dst=qT[:, h, g * F:(g + 1) * F], op=nl.copy, data=t_ps[0:d_head, :])
        del q_grp[x]

    def new_small_ps():                     # one allocation site (two rotating banks) for small transposes
        return nl.ndarray((P, F), dtype=dt, buffer=nl.psum)

    ones2 = nl.ndarray((2, P), dtype=dt, buffer=nl.sbuf)    # stationary of the -m matmul: [2, 128 keys]
    nisa.memset(dst=ones2, value=1.0)
    zeros = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    ones = nl.ndarray((P, P), dtype=dt, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    # masks over (partition p, column f): tri 0 where p - f >= 0 (NEG above the diagonal), tri_t its transpose
    tri = nl.ndarray((P, P), dtype=TRI_DT, buffer=nl.sbuf)
    nisa.affine_select(dst=tri, pattern=[[-1, P]], channel_multiplier=1, on_true_tile=zeros, on_false_value=NEG,
                       cmp_op=nl.greater_equal, offset=0)
    tri_t = nl.ndarray((P, P), dtype=dt, buffer=nl.sbuf)
    nisa.affine_select(dst=tri_t, pattern=[[1, P]], channel_multiplier=-1, on_true_tile=zeros, on_false_value=NEG,
                       cmp_op=nl.greater_equal, offset=0)
    ident = nl.ndarray((P, P), dtype=dt, buffer=nl.sbuf)
    nisa.affine_select(dst=ident, pattern=[[-1, P]], channel_multiplier=1, on_true_tile=ones, on_false_value=0.0,
                       cmp_op=nl.equal, offset=0)
    n_cols = n_t // GL
    negm_cols = nl.ndarray((P, len(tiles) * n_cols), dtype=nl.float32, buffer=nl.sbuf)
    negm = nl.ndarray((P, len(tiles)), dtype=nl.float32, buffer=nl.sbuf)     # -row max
    negm_hl = nl.ndarray((P, len(tiles), 2), dtype=dt, buffer=nl.sbuf)      # bf16 hi, lo
    o_stage = nl.ndarray((P, len(tiles), d_head), dtype=dt, buffer=nl.sbuf)
    lm_stage = nl.ndarray((P, len(tiles), 2), dtype=dt, buffer=nl.sbuf)
    rows = {}

    def max_chunk(n, c):
        \"\"\"Negated row max of tile n over its visible keys in [512c, 512c + 512).\"\"\"
        h, i = tiles[n]
        if c == 0 and i % GL == 0:
            transpose_queries(groups.index((h, i // GL)))
        w = min(F, (i + 1) * P - c * F)
        s_ps = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=s_ps[:, 0:w], stationary=qT[:, h, i * P:(i + 1) * P], moving=k_sb[:, h, c * F:c * F + w])
        if c == n_chunks[i] - 1:
            MASK_ADD
        nisa.tensor_reduce(dst=negm_cols[:, n * n_cols + c:n * n_cols + c + 1], op=nl.maximum, data=s_ps[:, 0:w],
                           axis=(1,), negate=True, keepdims=True)

    def max_finish(n):
        \"\"\"-m of tile n, split into a bf16 high part and the remainder.\"\"\"
        i = tiles[n][1]
        nisa.tensor_reduce(dst=negm[:, n:n + 1], op=nl.minimum, data=negm_cols[:, n * n_cols:n * n_cols + n_chunks[i]],
                           axis=(1,), keepdims=True)
        nisa.activation(dst=negm_hl[:, n, 0:1], op=nl.copy, data=negm[:, n:n + 1])
        nisa.tensor_tensor(dst=negm_hl[:, n, 1:2], data1=negm[:, n:n + 1], data2=negm_hl[:, n, 0:1], op=nl.subtract)

    def max_rows(n):
        \"\"\"-m of tile n as two rows [2, 128 queries] (moving operand of the rank-2 matmul).\"\"\"
        t_ps = new_small_ps()
        nisa.nc_transpose(dst=t_ps[0:2, 0:P], data=negm_hl[:, n, :])
        rows[n] = nl.ndarray((2, P), dtype=dt, buffer=nl.sbuf)
        nisa.activation(dst=rows[n], op=nl.copy, data=t_ps[0:2, 0:P])

""" + MAX_PASS + """
    def scores_t(n, g):
        \"\"\"P^T = exp(S^T - m) of tile n for its visible key tiles gG .. gG+G-1: [128 keys, tiles x 128 queries].\"\"\"
        h, i = tiles[n]
        gt = min(G, i + 1 - g * G)
        st_ps = nl.ndarray((P, G * P), dtype=nl.float32, buffer=nl.psum)
        for j in nl.static_range(gt):       # per block: the first matmul overwrites, the next ones accumulate
            t = g * G + j
            blk = slice(j * P, (j + 1) * P)
            nisa.nc_matmul(dst=st_ps[:, blk], stationary=k_sb[:, h, t * P:(t + 1) * P],
                           moving=qT[:, h, i * P:(i + 1) * P])
            nisa.nc_matmul(dst=st_ps[:, blk], stationary=ones2, moving=rows[n])
            if t == i:
                nisa.nc_matmul(dst=st_ps[:, blk], stationary=ident, moving=tri_t)
        pt = nl.ndarray((P, G * P), dtype=dt, buffer=nl.sbuf)
        nisa.activation(dst=pt[:, 0:gt * P], op=nl.exp, data=st_ps[:, 0:gt * P])
        return pt

""" + exp_pass_head("nl.ndarray((P, d_head + 1), dtype=nl.float32, buffer=nl.psum)   # the first matmul overwrites")
    code += exp_loop(s, "                nisa.nc_matmul(dst=acc, stationary=pt[:, j * P:(j + 1) * P], "
                        "moving=vx[:, h, t, :])\n")
    code += """        nisa.activation(dst=o_stage[:, n, :], op=nl.copy, data=acc[:, 0:d_head])
        log_l = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=log_l, op=nl.log, data=acc[:, d_head:d_head + 1])
        nisa.tensor_scalar(dst=lm_stage[:, n, 0:1], data=log_l, op0=nl.subtract, operand0=negm[:, n:n + 1])
        nisa.tensor_scalar(dst=lm_stage[:, n, 1:2], data=negm[:, n:n + 1], op0=nl.multiply, operand0=-1.0)
        nisa.dma_copy(dst=out_rows(o, h, r0, r1), src=o_stage[:, n, :])
        nisa.dma_copy(dst=out_rows(l, h, r0, r1), src=lm_stage[:, n, 0:1])
        nisa.dma_copy(dst=out_rows(m, h, r0, r1), src=lm_stage[:, n, 1:2])
""" + twopass_driver(s)
    if s.tmask:     # the Tensor engine adds the mask: ident^T @ tri = tri accumulates into the open PSUM group
        return code.replace("MASK_ADD", "nisa.nc_matmul(dst=s_ps[:, w - P:w], stationary=ident, moving=tri)").replace(
            "TRI_DT", "dt")
    # the Vector engine adds it, reading the PSUM bank and writing it back
    return code.replace("MASK_ADD", "nisa.tensor_tensor(dst=s_ps[:, w - P:w], data1=s_ps[:, w - P:w], data2=tri, "
                                    "op=nl.add)").replace("TRI_DT", "nl.float32")


def body(s) -> str:
    return twopass_body(s) if s.method == "twopass" else rows_body(s)
