"""The RMSNorm schedules of norm.py rendered as NKI v2 kernels (the nki2 ISA profile): the same statistics,
row scale, weight multiply and broadcasts, written the v2 way (each instruction writes the dst it is given,
nisa.dma_copy moves data, no index grids or masks). What a knob changes is said in norm.py."""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.heuristic.norm import RmsSchedule


def _bcast(mode: str, name: str, indent: str, whole: bool) -> str:
    """Code broadcasting g_row [1, N] (HBM) to a [P, N] SBUF tile `name`, GB columns at a time from [1, GB]
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
                f"{indent}nisa.dma_copy(dst={name}1, src=g_row[0:1, 0:N])       # the whole row in one DMA\n" + alloc)
        if mode == "vector":
            return head + f"{indent}nisa.tensor_copy(dst={name}, src=nl.broadcast_to({name}1, (P, N)))\n"
        return (head + f"{indent}for c in nl.affine_range(N // GB):\n"
                + put(f"{name}1[0:1, c * GB:(c + 1) * GB]", f"{name}[:, c * GB:(c + 1) * GB]", indent + "    "))
    return (alloc + f"{indent}for c in nl.affine_range(N // GB):\n"
            f"{indent}    {name}1 = nl.ndarray((1, GB), dtype=nl.float32, buffer=nl.sbuf)\n"
            f"{indent}    nisa.dma_copy(dst={name}1, src=g_row[0:1, c * GB:(c + 1) * GB])\n"
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


def _rows(prefetch: bool) -> str:
    """The row loop's head, up to the row tile x. With prefetch the next tile's copy is issued before this
    tile's work (DMAs start in program order), so the loop is unrolled (static_range: Python ints)."""
    load = "nisa.dma_copy(dst={v}, src=a_tensor[{t} * P:({t} + 1) * P, 0:N])"
    alloc = "nl.ndarray((P, N), dtype=a_tensor.dtype, buffer=nl.sbuf)"
    if not prefetch:
        return f"    for t in nl.affine_range(M // P):\n        x = {alloc}\n        {load.format(v='x', t='t')}\n"
    return (f"    T = M // P\n    x_next = {alloc}\n    {load.format(v='x_next', t='0')}\n"
            f"    for t in nl.static_range(T):\n        x = x_next\n"
            f"        if t + 1 < T:                  # prefetch: the next tile's copy goes first\n"
            f"            x_next = {alloc}\n            {load.format(v='x_next', t='(t + 1)')}\n")


def rms_body(s: RmsSchedule) -> str:
    weights = _bcast(s.bcast, "g_b", "    " if s.hoist else "        ", s.wrow)
    loop = _rows(s.prefetch)
    if s.hoist and s.prefetch:      # the first row tile's copy goes before the weights (DMAs in program order)
        first, rest = loop.split("    for t in", 1)
        head = first + weights + "    for t in" + rest
    elif s.hoist:
        head = weights + loop
    else:
        head = loop + weights
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
