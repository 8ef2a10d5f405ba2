"""The RMSNorm and LayerNorm schedules of norm.py rendered as NKI v2 kernels (the nki2 ISA profile): the same
statistics, row scale, weight multiply and broadcasts, written the v2 way (each instruction writes the dst it is
given, nisa.dma_copy moves data, no index grids or masks). What a knob changes is said in norm.py."""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.heuristic.norm import LnSchedule, RmsSchedule


def _bcast(mode: str, name: str, indent: str, whole: bool, row: str = "g_row") -> str:
    """Code broadcasting `row` [1, N] (HBM) to a [P, N] SBUF tile `name`, GB columns at a time from [1, GB]
    staging tiles, or with `whole` from the whole row copied in by one DMA."""
    def put(src: str, dst: str, ind: str) -> str:
        if mode == "vector":
            return f"{ind}nisa.tensor_copy(dst={dst}, src=nl.broadcast_to({src}, (P, GB)))\n"
        # Tensor engine: ones[1, P].T @ row[1, GB] puts the row on every partition (one PSUM bank)
        return (f"{ind}ps = nl.ndarray((P, GB), dtype=nl.float32, buffer=nl.psum)\n"
                f"{ind}nisa.nc_matmul(dst=ps, stationary=ones_row, moving={src})\n"
                f"{ind}nisa.activation(dst={dst}, op=nl.copy, data=ps)\n")
    alloc = f"{indent}{name} = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.sbuf)\n"
    if whole:
        head = (f"{indent}{name}1 = nl.ndarray((1, N), dtype=nl.float32, buffer=nl.sbuf)\n"
                f"{indent}nisa.dma_copy(dst={name}1, src={row}[0:1, 0:N])       # the whole row in one DMA\n" + alloc)
        if mode == "vector":
            return head + f"{indent}nisa.tensor_copy(dst={name}, src=nl.broadcast_to({name}1, (P, N)))\n"
        return (head + f"{indent}for c in nl.affine_range(N // GB):\n"
                + put(f"{name}1[0:1, c * GB:(c + 1) * GB]", f"{name}[:, c * GB:(c + 1) * GB]", indent + "    "))
    return (alloc + f"{indent}for c in nl.affine_range(N // GB):\n"
            f"{indent}    {name}1 = nl.ndarray((1, GB), dtype=nl.float32, buffer=nl.sbuf)\n"
            f"{indent}    nisa.dma_copy(dst={name}1, src={row}[0:1, c * GB:(c + 1) * GB])\n"
            + put(f"{name}1", f"{name}[:, c * GB:(c + 1) * GB]", indent + "    "))


def _scale(norm: str, dst: str, src: str, col: str) -> str:
    """dst = src times the per-row [P, 1] column `col`."""
    return {"broadcast": f"nisa.tensor_tensor(dst={dst}, data1={src}, data2=nl.broadcast_to({col}, (P, CW)), "
                         f"op=nl.multiply)",
            "tensor_scalar": f"nisa.tensor_scalar(dst={dst}, data={src}, op0=nl.multiply, operand0={col})",
            "scalar": f"nisa.activation(dst={dst}, op=nl.copy, data={src}, scale={col})"}[norm]


def _mul(engine: str, dst: str, a: str, b: str) -> str:
    on = ", engine=nisa.gpsimd_engine" if engine == "gpsimd" else ""
    return f"nisa.tensor_tensor(dst={dst}, data1={a}, data2={b}, op=nl.multiply{on})"


def _rows(prefetch: bool, src: str = "a_tensor") -> str:
    """The row loop's head, up to the row tile x. With prefetch the next tile's copy is issued before this
    tile's work (DMAs start in program order), so the loop is unrolled (static_range: Python ints)."""
    load = "nisa.dma_copy(dst={v}, src=%s[{t} * P:({t} + 1) * P, 0:N])" % src
    alloc = "nl.ndarray((P, N), dtype=%s.dtype, buffer=nl.sbuf)" % src
    if not prefetch:
        return f"    for t in nl.affine_range(M // P):\n        x = {alloc}\n        {load.format(v='x', t='t')}\n"
    return (f"    T = M // P\n    x_next = {alloc}\n    {load.format(v='x_next', t='0')}\n"
            f"    for t in nl.static_range(T):\n        x = x_next\n"
            f"        if t + 1 < T:                  # prefetch: the next tile's copy goes first\n"
            f"            x_next = {alloc}\n            {load.format(v='x_next', t='(t + 1)')}\n")


def _head(loop: str, weights: str, hoist: bool, prefetch: bool) -> str:
    """The row loop with the weight broadcasts: hoisted ahead of it (with prefetching, after the first row
    tile's copy: DMAs start in program order, and the big copy should not wait behind the weights), or else
    at the top of its body."""
    if hoist and prefetch:
        first, rest = loop.split("    for t in", 1)
        return first + weights + "    for t in" + rest
    return weights + loop if hoist else loop + weights


def rms_body(s: RmsSchedule) -> str:
    weights = _bcast(s.bcast, "g_b", "    " if s.hoist else "        ", s.wrow)
    head = _head(_rows(s.prefetch), weights, s.hoist, s.prefetch)
    if s.fuse:
        stats = ("        sq = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.sbuf)\n"
                 "        ss = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
                 "        nisa.activation_reduce(dst=sq, op=nl.square, data=x, reduce_op=nl.add, reduce_res=ss)\n")
    else:
        stats = ("        sq = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.sbuf)\n"
                 "        nisa.tensor_tensor(dst=sq, data1=x, data2=x, op=nl.multiply)\n"
                 "        ss = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
                 "        nisa.tensor_reduce(dst=ss, op=nl.add, data=sq, axis=1, keepdims=True)\n")
    cols = "c * CW:(c + 1) * CW"
    if s.gfirst:
        steps = (f"            {_mul(s.gmul, 'y', f'x[:, {cols}]', f'g_b[:, {cols}]')}\n"
                 f"            {_scale(s.norm, 'z', 'y', 'rinv')}\n")
    else:
        steps = (f"            {_scale(s.norm, 'y', f'x[:, {cols}]', 'rinv')}\n"
                 f"            {_mul(s.gmul, 'z', 'y', f'g_b[:, {cols}]')}\n")
    ones = ("    ones_row = nl.ndarray((1, P), dtype=nl.float32, buffer=nl.sbuf)\n"
            "    nisa.memset(dst=ones_row, value=1.0)\n") if s.bcast == "tensor" else ""
    return f"""@nki.jit
def solution(a_tensor, g_tensor):
    M, N = a_tensor.shape
    P = {s.rows}                              # rows per tile, one per partition
    CW = {s.chunk or "N"}                               # columns per scale/weight/store step
    assert M % P == 0 and N % CW == 0
    out = nl.ndarray((M, N), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    g_row = g_tensor.reshape((1, N))
    GB = min(N, 512)                         # weight columns per broadcast step (one PSUM bank)
    assert N % GB == 0
{ones}{head}{stats}\
        rinv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rinv, op=nl.rsqrt, data=ss, scale=1.0 / N)     # 1 / sqrt(mean(x^2))
        for c in nl.affine_range(N // CW):
            y = nl.ndarray((P, CW), dtype=nl.float32, buffer=nl.sbuf)
            z = nl.ndarray((P, CW), dtype=a_tensor.dtype, buffer=nl.sbuf)
{steps}            nisa.dma_copy(dst=out[t * P:(t + 1) * P, {cols}], src=z)
    return out
"""


# ---------------------------------------------------------------------------- LayerNorm
def _col(name: str) -> str:
    return f"        {name} = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)\n"


def _row_sum(dst: str, src: str, engine: str) -> str:
    """dst [P, 1] = the row sums of the [P, N] tile `src`: a Vector tensor_reduce, or a Scalar
    activation_reduce whose elementwise result goes to the shared scratch row `junk`."""
    if engine == "vector":
        return _col(dst) + f"        nisa.tensor_reduce(dst={dst}, op=nl.add, data={src}, axis=1, keepdims=True)\n"
    return (_col(dst) + f"        nisa.activation_reduce(dst=junk, op=nl.{engine}, data={src}, reduce_op=nl.add, "
                        f"reduce_res={dst})\n")


def _ln_stats(s: LnSchedule) -> str:
    """Code leaving mean and var ([P, 1]) of the row tile x; the two-pass statistics also leave xc = x - mean."""
    junk = "        junk = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.sbuf)\n"
    scaled = ("        {d} = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
              "        nisa.tensor_scalar(dst={d}, data={s}, op0=nl.multiply, operand0=1.0 / N)\n")
    if s.stats == "bn_stats":     # mean and variance straight from the Vector engine, no scratch row
        return ("        BN = min(N, 512)                         # bn_stats takes at most 512 columns\n"
                "        st = nl.ndarray((P, 6 * (N // BN)), dtype=nl.float32, buffer=nl.sbuf)\n"
                "        for c in nl.static_range(N // BN):\n"
                "            nisa.bn_stats(dst=st[:, 6 * c:6 * (c + 1)], data=x[:, c * BN:(c + 1) * BN])\n"
                "        mv = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)\n"
                "        nisa.bn_aggr(dst=mv, data=st)\n"
                "        mean = mv[:, 0:1]\n"
                "        var = mv[:, 1:2]\n")
    if s.stats.startswith("two_pass"):
        if s.norm == "broadcast":
            centre = "nisa.tensor_tensor(dst=xc, data1=x, data2=nl.broadcast_to(mean, (P, N)), op=nl.subtract)"
        else:
            centre = "nisa.tensor_scalar(dst=xc, data=x, op0=nl.subtract, operand0=mean)"
        code = (_row_sum("s1", "x", "vector") + scaled.format(d="mean", s="s1")
                + "        xc = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.sbuf)\n" + f"        {centre}\n")
        if s.stats == "two_pass_fused":
            return code + junk + _row_sum("ss", "xc", "square") + scaled.format(d="var", s="ss")
        return (code + "        nisa.tensor_tensor(dst=x, data1=xc, data2=xc, op=nl.multiply)   # x is no longer "
                       "needed: reuse its buffer\n" + _row_sum("ss", "x", "vector") + scaled.format(d="var", s="ss"))
    # one pass: E[x^2] - E[x]^2 from the two row sums
    first = "copy" if s.stats == "one_pass_scalar" else "vector"
    return (junk + _row_sum("s1", "x", first) + _row_sum("s2", "x", "square") + scaled.format(d="mean", s="s1")
            + _col("msq") + "        nisa.tensor_tensor(dst=msq, data1=mean, data2=mean, op=nl.multiply)\n"
            + _col("var") + "        nisa.tensor_scalar(dst=var, data=s2, op0=nl.multiply, operand0=1.0 / N, "
                            "op1=nl.subtract, operand1=msq)\n")


def _ln_norm(s: LnSchedule) -> str:
    """Code writing step c of the normalized rows into w [P, CW]."""
    two = s.stats.startswith("two_pass")
    xs = f"{'xc' if two else 'x'}[:, c * CW:(c + 1) * CW]"
    ind = "            "
    if s.norm == "scalar":
        bias = "" if two else ", bias=nbias"
        return f"{ind}nisa.activation(dst=w, op=nl.copy, data={xs}, scale=rstd{bias})\n"
    if s.norm == "tensor_scalar":
        if two:
            return f"{ind}nisa.tensor_scalar(dst=w, data={xs}, op0=nl.multiply, operand0=rstd)\n"
        return (f"{ind}nisa.tensor_scalar(dst=w, data={xs}, op0=nl.subtract, operand0=mean, op1=nl.multiply, "
                f"operand1=rstd)\n")
    scale = f"{ind}nisa.tensor_tensor(dst=w, data1={{}}, data2=nl.broadcast_to(rstd, (P, CW)), op=nl.multiply)\n"
    if two:
        return scale.format(xs)
    return (f"{ind}nisa.tensor_tensor(dst=w, data1={xs}, data2=nl.broadcast_to(mean, (P, CW)), op=nl.subtract)\n"
            + scale.format("w"))


def ln_body(s: LnSchedule) -> str:
    ind = "    " if s.hoist else "        "
    if s.bcast == "psum":
        # gamma and beta rows side by side on two partitions; a selector (ones on one partition), as the
        # stationary of a matmul, puts that row's step on every partition of a PSUM bank
        gb = ("    gb_rows = nl.ndarray((2, N), dtype=nl.float32, buffer=nl.sbuf)\n"
              "    nisa.dma_copy(dst=gb_rows[0:1, 0:N], src=gam_row[0:1, 0:N])\n"
              "    nisa.dma_copy(dst=gb_rows[1:2, 0:N], src=bet_row[0:1, 0:N])\n"
              "    ones2 = nl.ndarray((2, P), dtype=nl.float32, buffer=nl.sbuf)\n"
              "    nisa.memset(dst=ones2, value=1.0)\n"
              "    pick_g = nl.ndarray((2, P), dtype=nl.float32, buffer=nl.sbuf)\n"
              "    pick_b = nl.ndarray((2, P), dtype=nl.float32, buffer=nl.sbuf)\n"
              "    nisa.affine_select(dst=pick_g, pattern=[[0, P]], channel_multiplier=1, on_true_tile=ones2,\n"
              "                       on_false_value=0.0, cmp_op=nl.equal, offset=0)       # partition 0\n"
              "    nisa.affine_select(dst=pick_b, pattern=[[0, P]], channel_multiplier=1, on_true_tile=ones2,\n"
              "                       on_false_value=0.0, cmp_op=nl.equal, offset=-1)      # partition 1\n")
    else:
        gb = (_bcast(s.bcast, "gam_b", ind, s.wrow, "gam_row") + _bcast(s.bcast, "bet_b", ind, s.wrow, "bet_row"))
    ones = ("    ones_row = nl.ndarray((1, P), dtype=nl.float32, buffer=nl.sbuf)\n"
            "    nisa.memset(dst=ones_row, value=1.0)\n") if s.bcast == "tensor" else ""
    nbias = ""
    if s.norm == "scalar" and not s.stats.startswith("two_pass"):    # activation's bias: -mean * rstd
        nbias = (_col("nbias") + "        nisa.tensor_scalar(dst=nbias, data=mean, op0=nl.multiply, operand0=rstd, "
                                 "op1=nl.multiply, operand1=-1.0)\n")
    cols = "c * CW:(c + 1) * CW"
    last = f"x[:, {cols}]" if s.rowstore else "w"
    on = {"gpsimd_mul": (", engine=nisa.gpsimd_engine", ""), "gpsimd_add": ("", ", engine=nisa.gpsimd_engine")}
    gm, ba = on.get(s.affine, ("", ""))
    if s.bcast == "psum":
        affine = ("            gs = nl.ndarray((P, CW), dtype=nl.float32, buffer=nl.psum)\n"
                  f"            nisa.nc_matmul(dst=gs, stationary=pick_g, moving=gb_rows[:, {cols}])\n"
                  "            nisa.tensor_tensor(dst=w, data1=w, data2=gs, op=nl.multiply)\n"
                  "            bs = nl.ndarray((P, CW), dtype=nl.float32, buffer=nl.psum)\n"
                  f"            nisa.nc_matmul(dst=bs, stationary=pick_b, moving=gb_rows[:, {cols}])\n"
                  f"            nisa.tensor_tensor(dst={last}, data1=w, data2=bs, op=nl.add)\n")
    else:
        affine = (f"            nisa.tensor_tensor(dst=w, data1=w, data2=gam_b[:, {cols}], op=nl.multiply{gm})\n"
                  f"            nisa.tensor_tensor(dst={last}, data1=w, data2=bet_b[:, {cols}], op=nl.add{ba})\n")
    if s.rowstore:     # each step's result back into the row tile (x is no longer read), one store per tile
        store = "        nisa.dma_copy(dst=out[t * P:(t + 1) * P, 0:N], src=x)\n"
    else:
        store = f"            nisa.dma_copy(dst=out[t * P:(t + 1) * P, {cols}], src=w)\n"
    return f"""@nki.jit
def solution(input_tensor, epsilon, gamma_vector, beta_vector):
    M, N = input_tensor.shape
    P = 128                                  # rows per tile, one per partition
    CW = {s.chunk or "N"}                               # columns per normalize/affine/store step
    assert M % P == 0 and N % CW == 0
    out = nl.ndarray((M, N), dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    gam_row = gamma_vector.reshape((1, N))
    bet_row = beta_vector.reshape((1, N))
    GB = min(N, 512)                         # weight columns per broadcast step (one PSUM bank)
    assert N % GB == 0
{ones}{_head(_rows(s.prefetch, "input_tensor"), gb, s.hoist, s.prefetch)}{_ln_stats(s)}\
        ve = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=ve, data=var, op0=nl.add, operand0=epsilon)
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=ve)
{nbias}        for c in nl.affine_range(N // CW):
            w = nl.ndarray((P, CW), dtype=nl.float32, buffer=nl.sbuf)
{_ln_norm(s)}{affine}{store}    return out
"""
