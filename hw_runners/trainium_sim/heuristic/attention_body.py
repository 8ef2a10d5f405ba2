"""The NKI kernels of the attention schedules (trainium_attention): out = softmax(scale * q k^T) @ v per
128-query tile, for head-dim-major ("hm": q, k, v [d, S], scale 1) and seq-major ("sm": [S, d], scale 0.125,
bf16 matmul operands) inputs. Every loop is a static_range (Python ints), so the schedule can interleave
the work of neighbouring tiles; each allocation site is one line, so its tiles rotate between buffers.

The loops are written once for both NKI dialects: each statement comes from a dialect object E (V1 here,
attention_v2.V2), whose operations are put into a destination (E.put), into a new named tile (E.let), or
inline where the dialect allows it (E.val: v1 nests calls, v2 needs the tile first).
"""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import evict as evict_expr

SIG = {"hm": "q, k, v", "sm": "q_ref, k_ref, v_ref, use_causal_mask=False, mixed_precision=True"}
I4, I8, I12 = " " * 4, " " * 8, " " * 12


class V1:
    """NKI v1: a call returns its result tile, assigned (or added, `+=`, in PSUM) to its destination, so an
    operation is the text of a call and a new tile needs no allocation."""
    def par(self, p): return f"nl.par_dim({p})"
    def psum_dt(self, mdt): return mdt          # v1 PSUM tiles may hold bf16 matmul results
    def load(self, src, cast=False): return f"nl.load({src}{', dtype=dt' if cast else ''})"
    def copy(self, x, dtype="dt"): return f"nl.copy({x}, dtype={dtype})"
    def tr(self, x): return f"nisa.nc_transpose({x})"
    def mm(self, a, b): return f"nisa.nc_matmul({a}, {b})"
    def memset(self, shape, value): return f"nisa.memset({shape}, {value}, dt)"
    def recip(self, x): return f"nisa.reciprocal({x})"
    def tt(self, a, b, op, dtype): return f"nisa.tensor_tensor({a}, {b}, op={op}, dtype={dtype})"
    def ts(self, x, op, operand): return f"nisa.tensor_scalar({x}, {op}, {operand})"

    def act(self, fn, x, dtype, bias=None, scale=None, red=None):
        extra = "".join(f", {k}={v}" for k, v in (("bias", bias), ("scale", scale), ("reduce_res", red)) if v)
        return f"nisa.activation({fn}, {x}{extra}, dtype={dtype})"

    def reduce(self, op, x, dtype=None, negate=False, lead="", mid=" "):     # lead / mid: line breaks
        return (f"nisa.tensor_reduce({lead}{op}, {x}, axis=(1,),{mid}{'negate=True, ' if negate else ''}keepdims=True"
                + (f", dtype={dtype})" if dtype else ")"))

    def evict(self, engine, src, parity):
        return f"nl.copy({src}, dtype=dt)" if engine == "copy" else evict_expr(engine, src, "dt", parity)

    def put(self, ind, dst, op, acc=False, c=""): return f"{ind}{dst} {'+=' if acc else '='} {op}{c}\n"
    def let(self, ind, name, shape, dtype, op, c=""): return f"{ind}{name} = {op}{c}\n"
    def val(self, ind, name, shape, dtype, op): return "", op
    def store(self, ind, dst, src): return f"{ind}nl.store({dst}, value={src})\n"

    ROWS = "nl.matmul transposes them"           # what happens to the query rows of qt=matmul
    def row_matmul(self, ind, q, k): return f"{ind}s_ps[...] = nl.matmul({q}, {k})\n"

    def v_bigdma(self):
        return ("    v_all = nl.load(v_ref.reshape((P, n_t * d_head)), dtype=dt)   # one DMA, keys as K\n"
                "    i_vp = nl.arange(P)[:, None, None]\n"
                "    i_vt = nl.arange(n_t)[None, :, None]\n"
                "    i_vd = nl.arange(d_head)[None, None, :]\n"
                "    vx[:, :, 0:d_head] = nl.copy(v_all[i_vp, i_vt * d_head + i_vd], dtype=dt)\n")

    ACC = ("    def acc_mm(acc, t, p_t, v_t):           # [o | l] += P^T-tile x V-tile, over all key tiles t\n"
           "        if t == 0:\n"
           "            acc[...] = nisa.nc_matmul(p_t, v_t)\n"
           "        else:\n"
           "            acc += nisa.nc_matmul(p_t, v_t)\n\n")
    SOFTMAX = ("        row_max = nl.max(scores, axis=1, keepdims=True)\n"
               "        e = nl.exp(nl.subtract(scores, row_max))\n"
               "        row_sum = nl.sum(e, axis=1, keepdims=True)\n"
               "        probs = nl.multiply(e, nl.reciprocal(row_sum), dtype=dt)\n")


def _head(s, E) -> str:
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
            f"        return nl.ndarray(({E.par('P')}, 512), dtype=dt, buffer=nl.psum)\n\n")


def _resident(E, name, src, lw) -> str:
    """name [d, S] resident in SBUF, filled from the [d, S] input `src` LW columns per DMA."""
    return (f"    LW = {lw}\n"
            f"    for c in nl.static_range(seqlen // LW):\n"
            + E.put(I8, f"{name}[:, c * LW:(c + 1) * LW]", E.load(f"{src}[:, c * LW:(c + 1) * LW]")))


def _operands(s, E) -> str:
    """Helpers kT(c0, w) -> [d, w] keys c0.. (SBUF), vt(t) -> [128 keys, DV] and, resident, their buffers."""
    hm, out = s.layout == "hm", []
    lw = "(2048 if seqlen % 2048 == 0 else 512)" if s.bigdma else "KW"
    if s.kres:
        if hm:
            out.append(f"    k_sb = nl.ndarray(({E.par('d_head')}, seqlen), dtype=dt, buffer=nl.sbuf)   # K resident\n"
                       + _resident(E, "k_sb", "k", lw))
        else:
            pre, src = ("", "k_all[:, t * d_head:(t + 1) * d_head]") if s.bigdma else \
                E.val(I12, "k_rows", "(P, d_head)", "dt", E.load("k_ref[t * P:(t + 1) * P, :]", True))
            big = ("    # one DMA: key tile t holds keys p * n_t + t (V uses the same order; softmax ignores key order)\n"
                   + E.let(I4, "k_all", "(P, n_t * d_head)", "dt", E.load("k_ref.reshape((P, n_t * d_head))", True))
                   ) if s.bigdma else ""
            out.append(f"    k_sb = nl.ndarray(({E.par('d_head')}, seqlen), dtype=dt, buffer=nl.sbuf)   # K^T resident\n"
                       f"{big}"
                       f"    for g in nl.static_range(n_t // G):\n"
                       f"        t_ps = small_ps()\n"
                       f"        for j in nl.static_range(G):\n"
                       f"            t = g * G + j\n"
                       + pre + E.put(I12, "t_ps[0:d_head, j * P:(j + 1) * P]", E.tr(src))
                       + E.put(I8, "k_sb[:, g * G * P:(g + 1) * G * P]", E.copy("t_ps[0:d_head, 0:G * P]")))
        out.append("\n    def kT(c0, w):\n        return k_sb[:, c0:c0 + w]\n\n")
    elif hm:
        pre, x = E.val(I8, "k_t", "(d_head, w)", "dt", E.load("k[:, c0:c0 + w]"))
        out.append("    def kT(c0, w):                          # K reloaded for every use\n"
                   f"{pre}        return {x}\n\n")
    else:
        pre, x = E.val(I8, "k_t", "(d_head, w)", "dt", E.copy("t_ps[0:d_head, 0:w]"))
        out.append("    def kT(c0, w):                          # K reloaded and transposed for every use\n"
                   "        t_ps = small_ps()\n"
                   "        for j in nl.static_range(w // P):\n"
                   + E.let(I12, "k_rows", "(P, d_head)", "dt", E.load("k_ref[c0 + j * P:c0 + (j + 1) * P, :]", True))
                   + E.put(I12, "t_ps[0:d_head, j * P:(j + 1) * P]", E.tr("k_rows"))
                   + f"{pre}        return {x}\n\n")
    ones = E.put(I4, "vx[:, :, d_head:DV]", E.memset("(P, n_t, 1)", "1.0")) if s.ones else ""
    if s.vres:
        out.append(f"    vx = nl.ndarray(({E.par('P')}, n_t, DV), dtype=dt, buffer=nl.sbuf)   # V tiles resident\n" + ones)
        if hm:
            out.append(f"    v_sb = nl.ndarray(({E.par('d_head')}, seqlen), dtype=dt, buffer=nl.sbuf)\n"
                       + _resident(E, "v_sb", "v", lw) +
                       "    for g in nl.static_range(n_t // G):    # [keys, d] tiles by Tensor-engine transposes\n"
                       "        t_ps = small_ps()\n"
                       "        for j in nl.static_range(G):\n"
                       "            t = g * G + j\n"
                       + E.put(I12, "t_ps[:, j * d_head:(j + 1) * d_head]", E.tr("v_sb[:, t * P:(t + 1) * P]")) +
                       "        for j in nl.static_range(G):\n"
                       + E.put(I12, "vx[:, g * G + j, 0:d_head]", E.copy("t_ps[:, j * d_head:(j + 1) * d_head]")))
        elif s.bigdma:
            out.append(E.v_bigdma())
        else:
            out.append("    for t in nl.static_range(n_t):\n"
                       + E.put(I8, "vx[:, t, 0:d_head]", E.load("v_ref[t * P:(t + 1) * P, :]", True)))
        out.append("\n    def vt(t):\n        return vx[:, t, :]\n\n")
    else:
        if hm:
            pre, x = E.val(I8, "v_rows", "(d_head, P)", "dt", E.load("v[:, t * P:(t + 1) * P]"))
            get = "        v_ps = small_ps()\n" + pre + E.put(I8, "v_ps[:, 0:d_head]", E.tr(x))
            put = E.copy("v_ps[:, 0:d_head]")
        else:
            get, put = "", E.load("v_ref[t * P:(t + 1) * P, :]", True)
        if s.ones:
            out.append("    def vt(t):                              # V reloaded for every use, with a ones column\n"
                       + get + f"        v_t = nl.ndarray(({E.par('P')}, DV), dtype=dt, buffer=nl.sbuf)\n"
                       + E.put(I8, "v_t[:, d_head:DV]", E.memset("(P, 1)", "1.0"))
                       + E.put(I8, "v_t[:, 0:d_head]", put) + "        return v_t\n\n")
        else:
            pre, x = E.val(I8, "v_t", "(P, d_head)", "dt", put)
            out.append("    def vt(t):                              # V reloaded for every use\n"
                       + get + f"{pre}        return {x}\n\n")
    return "".join(out)


def _transposed(E, name, src, ind=I8) -> str:
    """`return` the [d, 128] transpose of query rows `src` (a Tensor-engine transpose and a copy)."""
    pre, x = E.val(ind, "q_t", "(d_head, P)", "dt", E.copy("t_ps[0:d_head, 0:P]"))
    return (f"{ind}t_ps = small_ps()\n" + name + E.put(ind, "t_ps[0:d_head, 0:P]", E.tr(src))
            + f"{pre}{ind}return {x}\n\n")


def _qt(s, E) -> str:
    """q_tile(i): the [d, 128] Q^T stationary of query tile i (rows [128, d] for nl.matmul); with qres all
    of Q is prepared once, before the loops."""
    if s.qres:
        return _q_resident(s, E)
    if s.layout == "hm":
        pre, x = E.val(I8, "q_t", "(d_head, P)", "dt", E.load("q[:, i * P:(i + 1) * P]"))
        return f"    def q_tile(i):\n{pre}        return {x}\n\n"
    rows = E.load("q_ref[i * P:(i + 1) * P, :]", True)
    if s.qt == "matmul":
        pre, x = E.val(I8, "q_rows", "(P, d_head)", "dt", rows)
        return (f"    def q_tile(i):                          # rows [128 queries, d]: {E.ROWS}\n"
                f"{pre}        return {x}\n\n")
    if s.fold:
        return (f"    qn = nl.ndarray(({E.par('P')}, n_q, d_head + 2), dtype=dt, buffer=nl.sbuf)  # rows | -m hi, lo\n\n"
                "    def q_tile(i):\n" + E.put(I8, "qn[:, i, 0:d_head]", rows) + _transposed(E, "", "qn[:, i, 0:d_head]"))
    pre, x = E.val(I8, "q_rows", "(P, d_head)", "dt", rows)
    return "    def q_tile(i):                          # transposed once per query tile\n" + _transposed(E, pre, x)


def _q_resident(s, E) -> str:
    if s.layout == "hm":
        lw = "LQ" if s.bigdma else "512"
        return (f"    q_sb = nl.ndarray(({E.par('d_head')}, seqlen), dtype=dt, buffer=nl.sbuf)   # Q resident\n"
                + ("    LQ = 2048 if seqlen % 2048 == 0 else 512\n" if s.bigdma else "") +
                f"    for c in nl.static_range(seqlen // {lw}):\n"
                + E.put(I8, f"q_sb[:, c * {lw}:(c + 1) * {lw}]", E.load(f"q[:, c * {lw}:(c + 1) * {lw}]")) +
                "\n    def q_tile(i):\n        return q_sb[:, i * P:(i + 1) * P]\n\n")
    rows = "qn" if s.fold else "q_rows"
    width = "d_head + 2" if s.fold else "d_head"
    head = (f"    {rows} = nl.ndarray(({E.par('P')}, n_q, {width}), dtype=dt, buffer=nl.sbuf)   # query rows resident\n"
            "    for t in nl.static_range(n_q):\n"
            + E.put(I8, f"{rows}[:, t, 0:d_head]", E.load("q_ref[t * P:(t + 1) * P, :]", True)))
    if s.qt == "matmul":
        return head + "\n    def q_tile(i):\n        return q_rows[:, i, :]\n\n"
    return (head + f"    q_sb = nl.ndarray(({E.par('d_head')}, seqlen), dtype=dt, buffer=nl.sbuf)   # Q^T, once\n"
            "    for g in nl.static_range(n_q // G):\n"
            "        t_ps = small_ps()\n"
            "        for j in nl.static_range(G):\n"
            + E.put(I12, "t_ps[0:d_head, j * P:(j + 1) * P]", E.tr(f"{rows}[:, g * G + j, 0:d_head]"))
            + E.put(I8, "q_sb[:, g * G * P:(g + 1) * G * P]", E.copy("t_ps[0:d_head, 0:G * P]")) +
            "\n    def q_tile(i):\n        return q_sb[:, i * P:(i + 1) * P]\n\n")


def _pv_transposed(s, E, p: str, base: str, nkeys: str, ind: str) -> str:
    """P^T by Tensor transposes of the probability tile `p` ([128, nkeys], key tiles from `base`), G per PSUM
    bank, and acc += P^T-tile x V-tile."""
    return (f"{ind}for g in nl.static_range({nkeys} // (G * P)):\n"
            f"{ind}    t_ps = small_ps()\n"
            f"{ind}    for j in nl.static_range(G):\n"
            f"{ind}        c0 = (g * G + j) * P\n"
            + E.put(ind + I8, "t_ps[:, j * P:(j + 1) * P]", E.tr(f"{p}[:, c0:c0 + P]"))
            + E.let(ind + I4, "p_t", "(P, G * P)", "dt", E.evict(s.evict, "t_ps[:, 0:G * P]", "g")) +
            f"{ind}    for j in nl.static_range(G):\n"
            f"{ind}        t = {base} + g * G + j\n"
            f"{ind}        acc_mm(acc, t, p_t[:, j * P:(j + 1) * P], vt(t))\n")


def _acc(E) -> str:
    return ("    def new_acc():\n"
            f"        return nl.ndarray(({E.par('P')}, DV), dtype=nl.float32, buffer=nl.psum)\n\n" + E.ACC)


def _finish(s, E, inv: str | None, ind: str = I8) -> str:
    val = E.act("nl.copy", "acc[:, 0:d_head]", "odt", scale=inv) if inv else E.copy("acc[:, 0:d_head]", "odt")
    return (f"{ind}o_sb = nl.ndarray(({E.par('P')}, d_head), dtype=odt, buffer=nl.sbuf)\n"
            + E.put(ind, "o_sb[...]", val) + E.store(ind, "out[i * P:(i + 1) * P, :]", "o_sb"))


def _one_pass(s, E) -> str:
    """Scores of a query tile gathered in an SBUF row, the softmax taken there, P^T by transposes."""
    copy = E.copy("s_ps", "nl.float32") if s.layout == "hm" else E.act("nl.copy", "s_ps", "nl.float32", scale="scale")
    if s.softmax == "sbuf":
        soft, inv = E.SOFTMAX, None
    else:
        sums = "" if s.ones else f"        row_sum = nl.ndarray(({E.par('P')}, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
        soft = (E.let(I8, "neg_max", "(P, 1)", "nl.float32", E.reduce("nl.maximum", "scores", negate=True)) + sums
                + E.let(I8, "probs", "(P, seqlen)", "dt",
                        E.act("nl.exp", "scores", "dt", bias="neg_max", red=None if s.ones else "row_sum")))
        inv = "inv_l"
    fin = ""
    if inv:
        fin = E.let(I8, "inv_l", "(P, 1)", "nl.float32", E.recip("acc[:, d_head:DV]" if s.ones else "row_sum"))
    score = (E.row_matmul(I12, "q_i", "kT(c * KW, KW)") if s.layout == "sm" and s.qt == "matmul" else
             E.put(I12, "s_ps[...]", E.mm("q_i", "kT(c * KW, KW)")))
    return (_acc(E) + _qt(s, E) +
            "    for i in nl.static_range(n_q):\n"
            "        q_i = q_tile(i)\n"
            f"        scores = nl.ndarray(({E.par('P')}, seqlen), dtype=nl.float32, buffer=nl.sbuf)\n"
            "        for c in nl.static_range(n_c):\n"
            f"            s_ps = nl.ndarray(({E.par('P')}, KW), dtype=nl.float32, buffer=nl.psum)\n"
            + score + E.put(I12, "scores[:, c * KW:(c + 1) * KW]", copy)
            + soft + "        acc = new_acc()\n"
            + _pv_transposed(s, E, "probs", "0", "seqlen", I8) + fin + _finish(s, E, inv))


def _max_pass(s, E) -> str:
    """max_chunk(i, c) / max_finish(i): the negated row max of query tile i, 512 (KW) keys at a time, with
    what pass 2 needs of it (the -m rows of direct P^T, the -scale * m bias of seq-major row layout)."""
    mdt = "dt" if s.mdt == "bf16" else "nl.float32"
    direct = s.pt == "direct"
    out = [f"    negm_cols = nl.ndarray(({E.par('P')}, n_q * n_c), dtype={mdt}, buffer=nl.sbuf)   # -max per matmul\n"
           f"    negm = nl.ndarray(({E.par('P')}, n_q), dtype=nl.float32, buffer=nl.sbuf)            # -row max\n"
           "    q_of = {}\n\n",
           "    def max_chunk(i, c):                    # negated row max of tile i over keys [c KW, (c + 1) KW)\n"
           "        if c == 0:\n"
           "            q_of[i] = q_tile(i)\n"
           f"        s_ps = nl.ndarray(({E.par('P')}, KW), dtype={E.psum_dt(mdt)}, buffer=nl.psum)\n"
           + E.put(I8, "s_ps[...]", E.mm("q_of[i]", "kT(c * KW, KW)"))
           + E.put(I8, "negm_cols[:, i * n_c + c:i * n_c + c + 1]",
                   E.reduce("nl.maximum", "s_ps", mdt, negate=True, lead="\n" + I12)) + "\n"]
    fin = ["    def max_finish(i):\n"
           + E.put(I8, "negm[:, i:i + 1]", E.reduce("nl.minimum", "negm_cols[:, i * n_c:(i + 1) * n_c]", "nl.float32",
                                                   mid="\n" + " " * 46))]
    if direct:     # -m as bf16 high part + remainder: two contraction rows, exact to fp32
        out.append(f"    negm_hl = nl.ndarray(({E.par('P')}, n_q, 2), dtype=dt, buffer=nl.sbuf)\n"
                   "    rows = {}\n")
        hl = (E.put(I8, "negm_hl[:, i, 0:1]", E.copy("negm[:, i:i + 1]"))
              + E.put(I8, "negm_hl[:, i, 1:2]", E.tt("negm[:, i:i + 1]", "negm_hl[:, i, 0:1]", "nl.subtract", "dt")))
        if s.fold:       # into the two extra columns of the query rows
            hl = (hl.replace("negm_hl[:, i, 0:1]", "qn[:, i, d_head:d_head + 1]")
                  .replace("negm_hl[:, i, 1:2]", "qn[:, i, d_head + 1:d_head + 2]"))
        fin.append(hl)
        if s.fold:     # K^T gets two ones rows, the query rows -m: the scores matmul subtracts m itself
            out.append(f"    kx = nl.ndarray(({E.par('d_head + 2')}, seqlen), dtype=dt, buffer=nl.sbuf)\n"
                       + E.put(I4, "kx[d_head:d_head + 2, :]", E.memset("(2, seqlen)", "1.0")) +
                       "    for c in nl.static_range(seqlen // 512):\n"
                       + E.put(I8, "kx[0:d_head, c * 512:(c + 1) * 512]", E.copy("kT(c * 512, 512)")) +
                       "\n    def max_rows(i):                        # [Q^T ; -m rows] of tile i\n"
                       "        t_ps = small_ps()\n"
                       + E.put(I8, "t_ps[0:d_head + 2, 0:P]", E.tr("qn[:, i, :]"))
                       + E.let(I8, "rows[i]", "(d_head + 2, P)", "dt", E.copy("t_ps[0:d_head + 2, 0:P]")) + "\n")
        else:
            out.append(E.let(I4, "ones2", "(2, P)", "dt", E.memset("(2, P)", "1.0"), c="    # stationary of the -m matmul")
                       + "\n    def max_rows(i):                        # -m of tile i as two rows [2, 128 queries]\n"
                       "        t_ps = small_ps()\n"
                       + E.put(I8, "t_ps[0:2, 0:P]", E.tr("negm_hl[:, i, :]"))
                       + E.let(I8, "rows[i]", "(2, P)", "dt", E.copy("t_ps[0:2, 0:P]")) + "\n")
    elif s.layout == "sm":
        out.append(f"    nbias = nl.ndarray(({E.par('P')}, n_q), dtype=nl.float32, buffer=nl.sbuf)  # -scale * max\n")
        fin.append(E.put(I8, "nbias[:, i:i + 1]", E.ts("negm[:, i:i + 1]", "nl.multiply", "scale")))
    return "".join(out) + "".join(fin) + "\n"


def _steps(s, E) -> str:
    """step(i, g) -> the probabilities (P^T with direct) of pass 2's g-th piece of query tile i; use(i, g, p, acc)
    accumulates them times V into acc; n_steps pieces per tile."""
    if s.pt == "direct":
        if s.fold:
            mm = E.put(I12, "st_ps[:, blk]", E.mm("kx[:, t * P:(t + 1) * P]", "rows[i]"))
        else:
            mm = (E.put(I12, "st_ps[:, blk]", E.mm("kT(t * P, P)", "q_of[i]"))
                  + E.put(I12, "st_ps[:, blk]", E.mm("ones2", "rows[i]"), acc=True))
        pre, x = E.val(I8, "p_t", "(P, G * P)", "dt", E.act("nl.exp", "st_ps", "dt", scale="scale"))
        return ("    def step(i, g):                         # exp(S^T - m) of key tiles [g G, (g + 1) G): P^T\n"
                f"        st_ps = nl.ndarray(({E.par('P')}, G * P), dtype=nl.float32, buffer=nl.psum)\n"
                "        for j in nl.static_range(G):\n"
                "            t = g * G + j\n"
                "            blk = slice(j * P, (j + 1) * P)\n" + mm + f"{pre}        return {x}\n\n"
                "    def use(i, g, p_t, acc):\n"
                "        for j in nl.static_range(G):\n"
                "            acc_mm(acc, g * G + j, p_t[:, j * P:(j + 1) * P], vt(g * G + j))\n\n"
                "    n_steps = n_t // G\n")
    bias = "nbias" if s.layout == "sm" else "negm"
    pre, x = E.val(I8, "p", "(P, KW)", "dt", E.act("nl.exp", "s_ps", "dt", bias=f"{bias}[:, i:i + 1]", scale="scale",
                                                    red=None if s.ones else "sums[:, c:c + 1]"))
    return ("    def step(i, c):                         # exp(scale * (s - m)) of keys [c KW, (c + 1) KW)\n"
            f"        s_ps = nl.ndarray(({E.par('P')}, KW), dtype=nl.float32, buffer=nl.psum)\n"
            + E.put(I8, "s_ps[...]", E.mm("q_of[i]", "kT(c * KW, KW)")) + f"{pre}        return {x}\n\n"
            "    def use(i, c, p, acc):\n"
            + _pv_transposed(s, E, "p", "c * (KW // P)", "KW", I8) + "\n"
            "    n_steps = n_c\n")


def _two_pass(s, E) -> str:
    """A max pass (row-layout scores reduced straight from PSUM), then the scores again, exponentiated from
    PSUM: in row layout with P^T by transposes, or (direct) already transposed with -m added by a matmul."""
    pre = "        max_rows(i)\n" if s.pt == "direct" else ""
    if s.ones:
        inv = E.let(I8, "inv_l", "(P, 1)", "nl.float32", E.recip("acc[:, d_head:DV]"))
    else:
        pre += f"        sums = nl.ndarray(({E.par('P')}, n_c), dtype=nl.float32, buffer=nl.sbuf)\n"
        lpre, l_sum = E.val(I8, "l_sum", "(P, 1)", "nl.float32", E.reduce("nl.add", "sums", "nl.float32"))
        inv = lpre + E.let(I8, "inv_l", "(P, 1)", "nl.float32", E.recip(l_sum))
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
    return (_acc(E) + _qt(s, E) + _max_pass(s, E) + _steps(s, E) +
            f"    AHEAD = {s.ahead}                               # the max pass runs this many query tiles ahead\n"
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
            + pre + "        acc = new_acc()\n" + loop + inv + _finish(s, E, "inv_l") + "        del q_of[i]\n")


def body(s, E=V1()) -> str:
    main = _one_pass(s, E) if s.softmax in ("sbuf", "fused") else _two_pass(s, E)
    return _head(s, E) + _operands(s, E) + main + "    return out\n"
