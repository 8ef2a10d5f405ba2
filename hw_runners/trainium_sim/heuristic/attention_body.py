"""The NKI kernels of the attention schedules (trainium_attention): out = softmax(scale * q k^T) @ v per
128-query tile, for head-dim-major ("hm": q, k, v [d, S], scale 1) and seq-major ("sm": [S, d], scale 0.125,
bf16 matmul operands) inputs. Every loop is a static_range (Python ints), so the schedule can interleave
the work of neighbouring tiles; each allocation site is one line, so its tiles rotate between buffers.
"""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import evict as evict_expr

SIG = {"hm": "q, k, v", "sm": "q_ref, k_ref, v_ref, use_causal_mask=False, mixed_precision=True"}


def _head(s) -> str:
    if s.layout == "hm":
        setup = ("    d_head, seqlen = q.shape\n"
                 "    dt = q.dtype                            # matmul operands\n"
                 "    odt = q.dtype\n"
                 "    scale = 1.0\n")
    else:
        setup = ("    seqlen, d_head = q_ref.shape\n"
                 "    assert not use_causal_mask              # these schedules cover the unmasked block\n"
                 "    dt = nl.bfloat16 if mixed_precision else nl.float32\n"
                 "    odt = q_ref.dtype\n"
                 "    scale = 0.125\n")
    ones = 1 if s.ones else 0
    return (f"@nki.jit\ndef solution({SIG[s.layout]}):\n{setup}"
            f"    P = nl.tile_size.pmax                   # queries per tile, keys per key tile\n"
            f"    KW = {s.kw}                                # keys per row-layout score matmul\n"
            f"    G = {s.group}                                 # key tiles per PSUM bank\n"
            f"    assert d_head <= P and seqlen % 512 == 0\n"
            f"    n_q = n_t = seqlen // P\n"
            f"    n_c = seqlen // KW\n"
            f"    DV = d_head + {ones}                        # V columns{' (a ones column: P @ [V | 1] also sums P)' if ones else ''}\n"
            f"    out = nl.ndarray((seqlen, d_head), dtype=odt, buffer=nl.shared_hbm)\n\n"
            f"    def small_ps():                         # transposes: one PSUM site\n"
            f"        return nl.ndarray((nl.par_dim(P), 512), dtype=dt, buffer=nl.psum)\n\n")


def _operands(s) -> str:
    """Helpers kT(c0, w) -> [d, w] keys c0.. (SBUF), vt(t) -> [128 keys, DV] and, resident, their buffers."""
    hm, out = s.layout == "hm", []
    lw = "(2048 if seqlen % 2048 == 0 else 512)" if s.bigdma else "KW"
    if s.kres:
        if hm:
            out.append(f"    k_sb = nl.ndarray((nl.par_dim(d_head), seqlen), dtype=dt, buffer=nl.sbuf)   # K resident\n"
                       f"    LW = {lw}\n"
                       f"    for c in nl.static_range(seqlen // LW):\n"
                       f"        k_sb[:, c * LW:(c + 1) * LW] = nl.load(k[:, c * LW:(c + 1) * LW])\n")
        else:
            src = "k_all[:, t * d_head:(t + 1) * d_head]" if s.bigdma else "nl.load(k_ref[t * P:(t + 1) * P, :], dtype=dt)"
            big = ("    # one DMA: key tile t holds keys p * n_t + t (V uses the same order; softmax ignores key order)\n"
                   "    k_all = nl.load(k_ref.reshape((P, n_t * d_head)), dtype=dt)\n") if s.bigdma else ""
            out.append(f"    k_sb = nl.ndarray((nl.par_dim(d_head), seqlen), dtype=dt, buffer=nl.sbuf)   # K^T resident\n"
                       f"{big}"
                       f"    for g in nl.static_range(n_t // G):\n"
                       f"        t_ps = small_ps()\n"
                       f"        for j in nl.static_range(G):\n"
                       f"            t = g * G + j\n"
                       f"            t_ps[0:d_head, j * P:(j + 1) * P] = nisa.nc_transpose({src})\n"
                       f"        k_sb[:, g * G * P:(g + 1) * G * P] = nl.copy(t_ps[0:d_head, 0:G * P], dtype=dt)\n")
        out.append("\n    def kT(c0, w):\n        return k_sb[:, c0:c0 + w]\n\n")
    elif hm:
        out.append("    def kT(c0, w):                          # K reloaded for every use\n"
                   "        return nl.load(k[:, c0:c0 + w])\n\n")
    else:
        out.append("    def kT(c0, w):                          # K reloaded and transposed for every use\n"
                   "        t_ps = small_ps()\n"
                   "        for j in nl.static_range(w // P):\n"
                   "            k_rows = nl.load(k_ref[c0 + j * P:c0 + (j + 1) * P, :], dtype=dt)\n"
                   "            t_ps[0:d_head, j * P:(j + 1) * P] = nisa.nc_transpose(k_rows)\n"
                   "        return nl.copy(t_ps[0:d_head, 0:w], dtype=dt)\n\n")
    ones = "    vx[:, :, d_head:DV] = nisa.memset((P, n_t, 1), 1.0, dt)\n" if s.ones else ""
    if s.vres:
        out.append("    vx = nl.ndarray((nl.par_dim(P), n_t, DV), dtype=dt, buffer=nl.sbuf)   # V tiles resident\n" + ones)
        if hm:
            out.append(f"    v_sb = nl.ndarray((nl.par_dim(d_head), seqlen), dtype=dt, buffer=nl.sbuf)\n"
                       f"    LW = {lw}\n"
                       f"    for c in nl.static_range(seqlen // LW):\n"
                       f"        v_sb[:, c * LW:(c + 1) * LW] = nl.load(v[:, c * LW:(c + 1) * LW])\n"
                       f"    for g in nl.static_range(n_t // G):    # [keys, d] tiles by Tensor-engine transposes\n"
                       f"        t_ps = small_ps()\n"
                       f"        for j in nl.static_range(G):\n"
                       f"            t = g * G + j\n"
                       f"            t_ps[:, j * d_head:(j + 1) * d_head] = nisa.nc_transpose(v_sb[:, t * P:(t + 1) * P])\n"
                       f"        for j in nl.static_range(G):\n"
                       f"            vx[:, g * G + j, 0:d_head] = nl.copy(t_ps[:, j * d_head:(j + 1) * d_head], dtype=dt)\n")
        elif s.bigdma:
            out.append("    v_all = nl.load(v_ref.reshape((P, n_t * d_head)), dtype=dt)   # one DMA, keys as K\n"
                       "    i_vp = nl.arange(P)[:, None, None]\n"
                       "    i_vt = nl.arange(n_t)[None, :, None]\n"
                       "    i_vd = nl.arange(d_head)[None, None, :]\n"
                       "    vx[:, :, 0:d_head] = nl.copy(v_all[i_vp, i_vt * d_head + i_vd], dtype=dt)\n")
        else:
            out.append("    for t in nl.static_range(n_t):\n"
                       "        vx[:, t, 0:d_head] = nl.load(v_ref[t * P:(t + 1) * P, :], dtype=dt)\n")
        out.append("\n    def vt(t):\n        return vx[:, t, :]\n\n")
    else:
        if hm:
            get = ("        v_ps = small_ps()\n"
                   "        v_ps[:, 0:d_head] = nisa.nc_transpose(nl.load(v[:, t * P:(t + 1) * P]))\n")
            put = "nl.copy(v_ps[:, 0:d_head], dtype=dt)"
        else:
            get, put = "", "nl.load(v_ref[t * P:(t + 1) * P, :], dtype=dt)"
        if s.ones:
            out.append("    def vt(t):                              # V reloaded for every use, with a ones column\n"
                       + get + "        v_t = nl.ndarray((nl.par_dim(P), DV), dtype=dt, buffer=nl.sbuf)\n"
                       "        v_t[:, d_head:DV] = nisa.memset((P, 1), 1.0, dt)\n"
                       f"        v_t[:, 0:d_head] = {put}\n        return v_t\n\n")
        else:
            out.append("    def vt(t):                              # V reloaded for every use\n"
                       + get + f"        return {put}\n\n")
    return "".join(out)


def _qt(s) -> str:
    """q_tile(i): the [d, 128] Q^T stationary of query tile i (rows [128, d] for nl.matmul); with qres all
    of Q is prepared once, before the loops."""
    if s.qres:
        return _q_resident(s)
    if s.layout == "hm":
        return ("    def q_tile(i):\n"
                "        return nl.load(q[:, i * P:(i + 1) * P])\n\n")
    if s.qt == "matmul":
        return ("    def q_tile(i):                          # rows [128 queries, d]: nl.matmul transposes them\n"
                "        return nl.load(q_ref[i * P:(i + 1) * P, :], dtype=dt)\n\n")
    if s.fold:
        return ("    qn = nl.ndarray((nl.par_dim(P), n_q, d_head + 2), dtype=dt, buffer=nl.sbuf)  # rows | -m hi, lo\n\n"
                "    def q_tile(i):\n"
                "        qn[:, i, 0:d_head] = nl.load(q_ref[i * P:(i + 1) * P, :], dtype=dt)\n"
                "        t_ps = small_ps()\n"
                "        t_ps[0:d_head, 0:P] = nisa.nc_transpose(qn[:, i, 0:d_head])\n"
                "        return nl.copy(t_ps[0:d_head, 0:P], dtype=dt)\n\n")
    return ("    def q_tile(i):                          # transposed once per query tile\n"
            "        t_ps = small_ps()\n"
            "        t_ps[0:d_head, 0:P] = nisa.nc_transpose(nl.load(q_ref[i * P:(i + 1) * P, :], dtype=dt))\n"
            "        return nl.copy(t_ps[0:d_head, 0:P], dtype=dt)\n\n")


def _q_resident(s) -> str:
    if s.layout == "hm":
        lw = "LQ" if s.bigdma else "512"
        return ("    q_sb = nl.ndarray((nl.par_dim(d_head), seqlen), dtype=dt, buffer=nl.sbuf)   # Q resident\n"
                + ("    LQ = 2048 if seqlen % 2048 == 0 else 512\n" if s.bigdma else "") +
                f"    for c in nl.static_range(seqlen // {lw}):\n"
                f"        q_sb[:, c * {lw}:(c + 1) * {lw}] = nl.load(q[:, c * {lw}:(c + 1) * {lw}])\n\n"
                "    def q_tile(i):\n        return q_sb[:, i * P:(i + 1) * P]\n\n")
    rows = "qn" if s.fold else "q_rows"
    width = "d_head + 2" if s.fold else "d_head"
    head = (f"    {rows} = nl.ndarray((nl.par_dim(P), n_q, {width}), dtype=dt, buffer=nl.sbuf)   # query rows resident\n"
            "    for t in nl.static_range(n_q):\n"
            f"        {rows}[:, t, 0:d_head] = nl.load(q_ref[t * P:(t + 1) * P, :], dtype=dt)\n")
    if s.qt == "matmul":
        return head + "\n    def q_tile(i):\n        return q_rows[:, i, :]\n\n"
    return (head + "    q_sb = nl.ndarray((nl.par_dim(d_head), seqlen), dtype=dt, buffer=nl.sbuf)   # Q^T, once\n"
            "    for g in nl.static_range(n_q // G):\n"
            "        t_ps = small_ps()\n"
            "        for j in nl.static_range(G):\n"
            f"            t_ps[0:d_head, j * P:(j + 1) * P] = nisa.nc_transpose({rows}[:, g * G + j, 0:d_head])\n"
            "        q_sb[:, g * G * P:(g + 1) * G * P] = nl.copy(t_ps[0:d_head, 0:G * P], dtype=dt)\n\n"
            "    def q_tile(i):\n        return q_sb[:, i * P:(i + 1) * P]\n\n")


def _score(s, q: str, k: str) -> str:
    if s.layout == "sm" and s.qt == "matmul":
        return f"nl.matmul({q}, {k})"
    return f"nisa.nc_matmul({q}, {k})"


def _pt_copy(s, src: str, parity: str) -> str:
    if s.evict == "copy":
        return f"nl.copy({src}, dtype=dt)"
    return evict_expr(s.evict, src, "dt", parity)


def _pv_transposed(s, p: str, base: str, nkeys: str, ind: str) -> str:
    """P^T by Tensor transposes of the probability tile `p` ([128, nkeys], key tiles from `base`), G per PSUM
    bank, and acc += P^T-tile x V-tile."""
    return (f"{ind}for g in nl.static_range({nkeys} // (G * P)):\n"
            f"{ind}    t_ps = small_ps()\n"
            f"{ind}    for j in nl.static_range(G):\n"
            f"{ind}        c0 = (g * G + j) * P\n"
            f"{ind}        t_ps[:, j * P:(j + 1) * P] = nisa.nc_transpose({p}[:, c0:c0 + P])\n"
            f"{ind}    p_t = {_pt_copy(s, 't_ps[:, 0:G * P]', 'g')}\n"
            f"{ind}    for j in nl.static_range(G):\n"
            f"{ind}        t = {base} + g * G + j\n"
            f"{ind}        acc_mm(acc, t, p_t[:, j * P:(j + 1) * P], vt(t))\n")


ACC = ("    def new_acc():\n"
       "        return nl.ndarray((nl.par_dim(P), DV), dtype=nl.float32, buffer=nl.psum)\n\n"
       "    def acc_mm(acc, t, p_t, v_t):           # [o | l] += P^T-tile x V-tile, over all key tiles t\n"
       "        if t == 0:\n"
       "            acc[...] = nisa.nc_matmul(p_t, v_t)\n"
       "        else:\n"
       "            acc += nisa.nc_matmul(p_t, v_t)\n\n")


def _finish(s, inv: str | None, ind: str = "        ") -> str:
    val = f"nisa.activation(nl.copy, acc[:, 0:d_head], scale={inv}, dtype=odt)" if inv else \
        "nl.copy(acc[:, 0:d_head], dtype=odt)"
    return (f"{ind}o_sb = nl.ndarray((nl.par_dim(P), d_head), dtype=odt, buffer=nl.sbuf)\n"
            f"{ind}o_sb[...] = {val}\n"
            f"{ind}nl.store(out[i * P:(i + 1) * P, :], value=o_sb)\n")


def _one_pass(s) -> str:
    """Scores of a query tile gathered in an SBUF row, the softmax taken there, P^T by transposes."""
    copy = "nl.copy(s_ps, dtype=nl.float32)" if s.layout == "hm" else \
        "nisa.activation(nl.copy, s_ps, scale=scale, dtype=nl.float32)"
    if s.softmax == "sbuf":
        soft = ("        row_max = nl.max(scores, axis=1, keepdims=True)\n"
                "        e = nl.exp(nl.subtract(scores, row_max))\n"
                "        row_sum = nl.sum(e, axis=1, keepdims=True)\n"
                "        probs = nl.multiply(e, nl.reciprocal(row_sum), dtype=dt)\n")
        inv = None
    else:
        sums = "" if s.ones else ("        row_sum = nl.ndarray((nl.par_dim(P), 1), dtype=nl.float32, buffer=nl.sbuf)\n")
        red = "" if s.ones else ", reduce_res=row_sum"
        soft = ("        neg_max = nisa.tensor_reduce(nl.maximum, scores, axis=(1,), negate=True, keepdims=True)\n"
                + sums + f"        probs = nisa.activation(nl.exp, scores, bias=neg_max{red}, dtype=dt)\n")
        inv = "inv_l"
    fin = ""
    if inv:
        fin = ("        inv_l = nisa.reciprocal(acc[:, d_head:DV])\n" if s.ones else
               "        inv_l = nisa.reciprocal(row_sum)\n")
    return (ACC + _qt(s) +
            "    for i in nl.static_range(n_q):\n"
            "        q_i = q_tile(i)\n"
            "        scores = nl.ndarray((nl.par_dim(P), seqlen), dtype=nl.float32, buffer=nl.sbuf)\n"
            "        for c in nl.static_range(n_c):\n"
            "            s_ps = nl.ndarray((nl.par_dim(P), KW), dtype=nl.float32, buffer=nl.psum)\n"
            f"            s_ps[...] = {_score(s, 'q_i', 'kT(c * KW, KW)')}\n"
            f"            scores[:, c * KW:(c + 1) * KW] = {copy}\n"
            + soft + "        acc = new_acc()\n"
            + _pv_transposed(s, "probs", "0", "seqlen", "        ") + fin + _finish(s, inv))


def _two_pass(s) -> str:
    """A max pass (row-layout scores reduced straight from PSUM), then the scores again, exponentiated from
    PSUM: in row layout with P^T by transposes, or (direct) already transposed with -m added by a matmul."""
    mdt = "dt" if s.mdt == "bf16" else "nl.float32"
    direct = s.pt == "direct"
    out = [ACC, _qt(s),
           "    negm_cols = nl.ndarray((nl.par_dim(P), n_q * n_c), dtype=%s, buffer=nl.sbuf)   # -max per matmul\n"
           "    negm = nl.ndarray((nl.par_dim(P), n_q), dtype=nl.float32, buffer=nl.sbuf)            # -row max\n"
           "    q_of = {}\n\n" % mdt,
           "    def max_chunk(i, c):                    # negated row max of tile i over keys [c KW, (c + 1) KW)\n"
           "        if c == 0:\n"
           "            q_of[i] = q_tile(i)\n"
           f"        s_ps = nl.ndarray((nl.par_dim(P), KW), dtype={mdt}, buffer=nl.psum)\n"
           "        s_ps[...] = nisa.nc_matmul(q_of[i], kT(c * KW, KW))\n"
           "        negm_cols[:, i * n_c + c:i * n_c + c + 1] = nisa.tensor_reduce(\n"
           f"            nl.maximum, s_ps, axis=(1,), negate=True, keepdims=True, dtype={mdt})\n\n"]
    fin = ["    def max_finish(i):\n"
           "        negm[:, i:i + 1] = nisa.tensor_reduce(nl.minimum, negm_cols[:, i * n_c:(i + 1) * n_c], axis=(1,),\n"
           "                                              keepdims=True, dtype=nl.float32)\n"]
    if direct:     # -m as bf16 high part + remainder: two contraction rows, exact to fp32
        out.append("    negm_hl = nl.ndarray((nl.par_dim(P), n_q, 2), dtype=dt, buffer=nl.sbuf)\n"
                   "    rows = {}\n")
        hl = ("        negm_hl[:, i, 0:1] = nl.copy(negm[:, i:i + 1], dtype=dt)\n"
              "        negm_hl[:, i, 1:2] = nisa.tensor_tensor(negm[:, i:i + 1], negm_hl[:, i, 0:1], op=nl.subtract, dtype=dt)\n")
        if s.fold:       # into the two extra columns of the query rows
            hl = (hl.replace("negm_hl[:, i, 0:1]", "qn[:, i, d_head:d_head + 1]")
                  .replace("negm_hl[:, i, 1:2]", "qn[:, i, d_head + 1:d_head + 2]"))
        fin.append(hl)
        if s.fold:     # K^T gets two ones rows, the query rows -m: the scores matmul subtracts m itself
            out.append("    kx = nl.ndarray((nl.par_dim(d_head + 2), seqlen), dtype=dt, buffer=nl.sbuf)\n"
                       "    kx[d_head:d_head + 2, :] = nisa.memset((2, seqlen), 1.0, dt)\n"
                       "    for c in nl.static_range(seqlen // 512):\n"
                       "        kx[0:d_head, c * 512:(c + 1) * 512] = nl.copy(kT(c * 512, 512), dtype=dt)\n\n"
                       "    def max_rows(i):                        # [Q^T ; -m rows] of tile i\n"
                       "        t_ps = small_ps()\n"
                       "        t_ps[0:d_head + 2, 0:P] = nisa.nc_transpose(qn[:, i, :])\n"
                       "        rows[i] = nl.copy(t_ps[0:d_head + 2, 0:P], dtype=dt)\n\n")
        else:
            out.append("    ones2 = nisa.memset((2, P), 1.0, dt)    # stationary of the -m matmul\n\n"
                       "    def max_rows(i):                        # -m of tile i as two rows [2, 128 queries]\n"
                       "        t_ps = small_ps()\n"
                       "        t_ps[0:2, 0:P] = nisa.nc_transpose(negm_hl[:, i, :])\n"
                       "        rows[i] = nl.copy(t_ps[0:2, 0:P], dtype=dt)\n\n")
    elif s.layout == "sm":
        out.append("    nbias = nl.ndarray((nl.par_dim(P), n_q), dtype=nl.float32, buffer=nl.sbuf)  # -scale * max\n")
        fin.append("        nbias[:, i:i + 1] = nisa.tensor_scalar(negm[:, i:i + 1], nl.multiply, scale)\n")
    out.append("".join(fin) + "\n")
    bias = "nbias" if s.layout == "sm" else "negm"
    if direct:
        mm = ("                st_ps[:, blk] = nisa.nc_matmul(kx[:, t * P:(t + 1) * P], rows[i])\n" if s.fold else
              "                st_ps[:, blk] = nisa.nc_matmul(kT(t * P, P), q_of[i])\n"
              "                st_ps[:, blk] += nisa.nc_matmul(ones2, rows[i])\n")
        out.append("    def step(i, g):                         # exp(S^T - m) of key tiles [g G, (g + 1) G): P^T\n"
                   "        st_ps = nl.ndarray((nl.par_dim(P), G * P), dtype=nl.float32, buffer=nl.psum)\n"
                   "        for j in nl.static_range(G):\n"
                   "            t = g * G + j\n"
                   "            blk = slice(j * P, (j + 1) * P)\n" + mm.replace("                ", "            ") +
                   "        return nisa.activation(nl.exp, st_ps, scale=scale, dtype=dt)\n\n"
                   "    def use(i, g, p_t, acc):\n"
                   "        for j in nl.static_range(G):\n"
                   "            acc_mm(acc, g * G + j, p_t[:, j * P:(j + 1) * P], vt(g * G + j))\n\n"
                   "    n_steps = n_t // G\n")
    else:
        red = "" if s.ones else ", reduce_res=sums[:, c:c + 1]"
        out.append("    def step(i, c):                         # exp(scale * (s - m)) of keys [c KW, (c + 1) KW)\n"
                   "        s_ps = nl.ndarray((nl.par_dim(P), KW), dtype=nl.float32, buffer=nl.psum)\n"
                   "        s_ps[...] = nisa.nc_matmul(q_of[i], kT(c * KW, KW))\n"
                   f"        return nisa.activation(nl.exp, s_ps, bias={bias}[:, i:i + 1], scale=scale{red}, dtype=dt)\n\n"
                   "    def use(i, c, p, acc):\n"
                   + _pv_transposed(s, "p", "c * (KW // P)", "KW", "        ") + "\n"
                   "    n_steps = n_c\n")
    a = s.ahead
    pre = "        max_rows(i)\n" if direct else ""
    if not s.ones:
        pre += "        sums = nl.ndarray((nl.par_dim(P), n_c), dtype=nl.float32, buffer=nl.sbuf)\n"
    inv = ("        inv_l = nisa.reciprocal(acc[:, d_head:DV])\n" if s.ones else
           "        inv_l = nisa.reciprocal(nisa.tensor_reduce(nl.add, sums, axis=(1,), keepdims=True, dtype=nl.float32))\n")
    if s.skew:
        loop = ("        p = step(i, 0)\n"
                "        for g in nl.static_range(n_steps):\n"
                "            interleave(i, g)\n"
                "            nxt = step(i, g + 1) if g + 1 < n_steps else None   # next scores before this P @ V\n"
                "            use(i, g, p, acc)\n"
                "            p = nxt\n")
    else:
        loop = ("        for g in nl.static_range(n_steps):\n"
                "            interleave(i, g)\n"
                "            use(i, g, step(i, g), acc)\n")
    out.append(f"    AHEAD = {a}                               # the max pass runs this many query tiles ahead\n"
               "\n    def interleave(i, g):                   # max chunks of tile i + AHEAD spread over i's steps\n"
               "        if AHEAD and i + AHEAD < n_q:\n"
               "            for c in nl.static_range(g * n_c // n_steps, (g + 1) * n_c // n_steps):\n"
               "                max_chunk(i + AHEAD, c)\n"
               "            if g == n_steps - 1:\n"
               "                max_finish(i + AHEAD)\n\n"
               "    for i in nl.static_range(min(AHEAD, n_q)):\n"
               "        for c in nl.static_range(n_c):\n"
               "            max_chunk(i, c)\n"
               "        max_finish(i)\n"
               "    for i in nl.static_range(n_q):\n"
               "        if not AHEAD:\n"
               "            for c in nl.static_range(n_c):\n"
               "                max_chunk(i, c)\n"
               "            max_finish(i)\n"
               + pre + "        acc = new_acc()\n" + loop + inv + _finish(s, "inv_l") + "        del q_of[i]\n")
    return "".join(out)


def body(s) -> str:
    main = _one_pass(s) if s.softmax in ("sbuf", "fused") else _two_pass(s)
    return _head(s) + _operands(s) + main + "    return out\n"
