"""Mamba-v1 selective-scan schedules (delta, u [batch, channels, T]; A [channels, N]; B, C [batch, N, T]).

Channels go on the 128 partitions and time on the free axis, so each (channel tile, state) pair is one
Vector scan h[t] = exp(delta * A[:, n])[t] * h[t-1] + (delta * u * B[n])[t] along time, and the output
sums C[n] * h over the states. Time is walked in chunks of F steps (the whole sequence by default), the
states inside a chunk; a chunk's scan resumes from the last column of the same state's previous chunk.
The knobs: whether delta, u and A are loaded (and delta * u computed) once per channel tile or again for
every state; whether the B and C rows are loaded once per batch or per state; how a B or C row reaches all
128 partitions (a broadcast view that the Vector multiply reads, or a selection matmul on the Tensor engine
into PSUM, fp32 or as a bf16 high part plus remainder, so the Vector multiply reads PSUM); how the states'
C * h are made and summed (on Vector; or Vector products summed by identity matmuls in a PSUM bank per
chunk; or h transposed on the Tensor engine so that C[n, t] becomes a per-partition scale of a Scalar
activation, transposed back by the summing identity matmuls); the issue order of the steps (software
pipelining, so no engine waits for another); the PSUM eviction engine, and whether each chunk is stored as
soon as it is done.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import SBUF_LIMIT, evict, step_choices

DIMS = ("BATCH", "CHANNELS", "SEQ", "STATE")
CHUNKS = (0, 2048, 1024, 512, 256)          # time steps per chunk (0: the whole sequence)
BCASTS = ("vector", "tensor32", "tensor")
# vector: C * h and y += on Vector; psum: C * h on Vector, summed by identity matmuls into PSUM; transpose: h
# transposed on the Tensor engine, C * h on Scalar with C[n, t] as the per-partition scale, transposed back and
# summed by identity matmuls into PSUM (the Vector engine is left with delta * u * B and the scan)
ACCS = ("vector", "psum", "transpose")


@dataclass(frozen=True)
class Schedule:
    hoist: bool = False        # delta, u, A loaded and delta * u computed once per channel tile (else per state)
    rows: bool = False         # B and C loaded once per batch as [N, T] tiles (else one row per state and step)
    bcast: str = "vector"      # vector: broadcast views; tensor32 / tensor: selection matmuls into PSUM (see BCASTS)
    acc: str = "vector"        # how the states' C * h are made and summed (see ACCS)
    chunk: int = 0             # time steps per chunk (0: the whole sequence)
    skew: int = 0              # 0: steps in order; 1: next state's broadcasts first; 2: also Vector interleaved
    evict: str = "scalar"      # engine of the PSUM -> SBUF copy of the output chunk (acc in PSUM)
    cstore: bool = False       # store each output chunk when it is done (else one store per channel tile)
    family: str = "mamba"


# menu option id -> mutation (the planner's SCORES names)
OPTIONS = {"hoist-loads": "hoist", "remove-redundant": "hoist", "large-dma": "large_dma",
           "engine-balance": "engine", "combine-vector-ops": "fuse", "psum-accumulate": "method",
           "reduce-on-tensor": "bcast", "mixed-precision": "bcast", "fewer-bigger-instructions": "chunk",
           "block-bigger": "chunk", "loop-order": "order", "multi-buffer": "multibuf",
           "evict-efficiently": "evict", "spread-dma": "prefetch"}
SAFER = ({"cstore": False}, {"evict": "scalar"}, {"skew": 0}, {"acc": "vector"}, {"bcast": "vector"},
         {"chunk": 0}, {"rows": False}, {"hoist": False})


def default(dims: dict) -> Schedule:
    return Schedule()


def _width(s: Schedule, d: dict) -> int:
    return s.chunk or d["SEQ"]


def sbuf_bytes(s: Schedule, d: dict) -> int:
    """Bytes per partition of the large tiles (an estimate on the safe side)."""
    T, F, N = d["SEQ"], _width(s, d), d["STATE"]
    b = (3 * T if s.hoist else 6 * F) * 4                       # delta, u, delta * u (twice when per state)
    b += (2 * F if s.cstore else T) * 4                         # output tile(s)
    b += (2 + s.skew) * 4 * F * 4                               # exp, drive, products in flight
    b += (N if s.chunk else 1 + s.skew) * F * 4                 # scan results (kept as carries when chunked)
    if s.rows:
        b += 2 * T * {"vector": 4, "tensor32": 4, "tensor": 12}[s.bcast]
    if s.bcast != "vector":
        b += N * 128 * 4
    if s.acc != "vector":
        b += 128 * 4
    if s.acc == "transpose":
        b += T // 128 * N * 4 + 3 * F * 4                     # C transposed, C * h transposed in flight
    return b


def fits(s: Schedule, d: dict) -> bool:
    if s.chunk not in CHUNKS or s.bcast not in BCASTS or s.acc not in ACCS \
            or s.skew not in (0, 1, 2) or s.evict not in ("scalar", "vector"):
        return False
    T, F, N = d["SEQ"], _width(s, d), d["STATE"]
    if d["CHANNELS"] % 128 or T % F or (s.chunk and s.chunk >= T):
        return False
    if (s.bcast != "vector" or s.acc != "vector") and F > 512:
        return False                # a matmul result is one PSUM bank: at most 512 fp32 per partition
    if s.acc == "vector" and s.evict != "scalar":
        return False                # nothing to evict: one canonical form
    if s.cstore and not s.chunk:
        return False                # one chunk: already one store
    if s.rows and s.bcast == "tensor" and 2 * N > 128:
        return False                # B rows and their remainders stacked on the partitions
    if s.rows and N > 128:
        return False
    if s.acc == "transpose" and (not s.rows or F % 128):
        return False                # C resident, time in whole 128-step blocks
    return sbuf_bytes(s, d) <= SBUF_LIMIT


_ACC_WORDS = {"vector": "C * h and the sum over states on Vector",
              "psum": "C * h on Vector, summed by identity matmuls in PSUM",
              "transpose": "C * h on Scalar in the transposed layout (C a per-partition scale), transposed back "
                           "and summed by identity matmuls in PSUM"}


def describe(s: Schedule) -> str:
    how = {"vector": "partition-broadcast views read by Vector",
           "tensor32": "fp32 selection matmuls into PSUM",
           "tensor": "bf16 high+remainder selection matmuls into PSUM"}[s.bcast]
    order = {0: "steps in order", 1: "next state's broadcasts issued before this state's C * h",
             2: "software-pipelined two states deep (Vector work interleaved)"}[s.skew]
    return (f"{f'{s.chunk}-step time chunks' if s.chunk else 'whole sequence per scan'}, delta/u/A "
            f"{'loaded once per channel tile' if s.hoist else 'reloaded per state'}, B/C "
            f"{'loaded once per batch' if s.rows else 'rows loaded per state'}, broadcast by {how}, states summed "
            f"{_ACC_WORDS[s.acc]}{', evicted on ' + s.evict if s.acc != 'vector' else ''}, {order}"
            f"{', each chunk stored when done' if s.cstore else ''}")


def _to_tensor(s: Schedule, **change) -> list[Schedule]:
    """A move of Vector work to the Tensor engine, on its own and with the steps software-pipelined (so the
    Vector engine does not wait for the matmuls it now depends on); PSUM results need chunks of <= 512."""
    chunk = s.chunk if s.chunk and s.chunk <= 512 else 512
    return [replace(s, chunk=chunk, skew=k, **change) for k in dict.fromkeys((s.skew, 1, 2))]


def candidates(mutation: str, s: Schedule, d: dict) -> list[Schedule]:
    bcast = [c for m in BCASTS if m != s.bcast
             for c in (_to_tensor(s, bcast=m) if m != "vector" else [replace(s, bcast=m)])]
    acc = [c for m in ACCS if m != s.acc
           for c in ([replace(s, acc=m, evict="scalar")] if m == "vector" else
                     _to_tensor(s, acc=m, rows=s.rows or m == "transpose")
                     + _to_tensor(s, acc=m, rows=s.rows or m == "transpose", evict="vector"))]
    skew = [replace(s, skew=k) for k in (0, 1, 2) if k != s.skew]
    if mutation == "hoist":
        return [replace(s, hoist=True), replace(s, hoist=True, rows=True)] if not s.hoist else \
            ([replace(s, rows=True)] if not s.rows else [])
    if mutation == "large_dma":
        return [replace(s, rows=not s.rows)] + ([replace(s, cstore=True)] if s.chunk and not s.cstore else [])
    if mutation == "engine":               # Vector work to the Tensor engine (or back)
        return bcast + acc
    if mutation == "fuse":                 # fewer or cheaper Vector instructions: PSUM sums, PSUM operands
        return [c for c in acc if c.acc != "vector"] + \
            [c for m in ("tensor", "tensor32") if m != s.bcast for c in _to_tensor(s, bcast=m)]
    if mutation == "method":
        return acc
    if mutation == "bcast":
        return bcast
    if mutation in ("order", "multibuf"):
        return skew
    if mutation == "chunk":
        return [replace(s, chunk=c) for c in step_choices(s.chunk, CHUNKS)]
    if mutation == "evict":
        return [replace(s, evict="vector" if s.evict == "scalar" else "scalar")]
    if mutation == "prefetch":
        return [replace(s, cstore=not s.cstore)] + skew
    return []


def _setup(s: Schedule) -> str:
    """Constant tiles: selection matrices for the matmul broadcasts, the identity for the PSUM sums."""
    out = ""
    if s.bcast != "vector":
        dt = "bf16" if s.bcast == "tensor" else "f32"
        if s.rows:
            k = "2 * N" if s.bcast == "tensor" else "N"
            pred = "(i_k - i_n == 0)"
            out += (f"    # sel[k, n, p] = 1 where stacked row k belongs to state n, for every partition p\n"
                    f"    i_k = nl.arange({k})[:, None, None]\n"
                    f"    i_n = nl.arange(N)[None, :, None]\n"
                    f"    ones = nl.ones(({k}, N, P), dtype={dt}, buffer=nl.sbuf)\n"
                    f"    sel = nisa.affine_select(pred={pred}, on_true_tile=ones, on_false_value=0.0, dtype={dt})\n")
            if s.bcast == "tensor":
                out += ("    sel_lo = nisa.affine_select(pred=(i_k - i_n == N), on_true_tile=ones,\n"
                        "                                on_false_value=0.0, dtype=bf16)\n"
                        "    sel = nl.add(sel, sel_lo, dtype=bf16)\n")
        else:
            k = "2" if s.bcast == "tensor" else "1"
            out += f"    ones_k = nl.ones(({k}, P), dtype={dt}, buffer=nl.sbuf)     # row(s) -> every partition\n"
    if s.acc != "vector":
        out += ("    i_p = nl.arange(P)[:, None]\n"
                "    i_q = nl.arange(P)[None, :]\n"
                "    ident = nisa.affine_select(pred=(i_p - i_q == 0), on_true_tile=nl.ones((P, P), dtype=f32, "
                "buffer=nl.sbuf),\n"
                "                               on_false_value=0.0, dtype=f32)\n")
    return out


SPLIT = """
    def split(raw, k):
        \"\"\"bf16 [2k, W] from fp32 [2k, W] holding the same k rows twice: the value, then the remainder.\"\"\"
        hl = nl.ndarray((nl.par_dim(2 * k), raw.shape[1]), dtype=bf16, buffer=nl.sbuf)
        hl[0:k, :] = nl.copy(raw[0:k, :], dtype=bf16)
        hl[k:2 * k, :] = nisa.tensor_tensor(raw[k:2 * k, :], nl.copy(raw[k:2 * k, :], dtype=bf16),
                                            op=nl.subtract, dtype=bf16)
        return hl
"""


def _rows(s: Schedule) -> str:
    """Per batch: B and C as whole [N, T] tiles (stacked with their bf16 remainders for 'tensor'); for the
    transposed C * h, C with time on the partitions instead (cT[t, j, n] = C[n, j * P + t])."""
    if not s.rows:
        return ""
    out = ""
    for x in ("B", "C"):
        v = x.lower()
        if x == "C" and s.acc == "transpose":
            out += ("        c_all = nl.load(C[b, :, :])\n"
                    "        cT = nl.ndarray((nl.par_dim(P), seq_len // P, N), dtype=f32, buffer=nl.sbuf)\n"
                    "        for j in nl.static_range(seq_len // P):\n"
                    "            cT[:, j, :] = nl.copy(nisa.nc_transpose(c_all[:, j * P:(j + 1) * P]), dtype=f32)\n")
        elif s.bcast == "tensor":
            out += (f"        {v}_raw = nl.ndarray((nl.par_dim(2 * N), seq_len), dtype=f32, buffer=nl.sbuf)\n"
                    f"        {v}_raw[0:N, :] = nl.load({x}[b, :, :])\n"
                    f"        {v}_raw[N:2 * N, :] = nl.load({x}[b, :, :])\n"
                    f"        {v}_all = split({v}_raw, N)\n")
        else:
            out += f"        {v}_all = nl.load({x}[b, :, :])\n"
    return out


def _bcast_fn(s: Schedule) -> str:
    """bcast(i): B[n] (and C[n], unless C * h runs transposed) of step i's chunk on every partition."""
    t = "ch * F:(ch + 1) * F"
    out = "            def bcast(i):\n                ch, n = steps[i]\n                bc[i] = []\n"
    for x in ("B", "C") if s.acc != "transpose" else ("B",):
        v = x.lower()
        if s.rows:
            put = (f"{v}_all[n:n + 1, {t}].broadcast_to((P, F))" if s.bcast == "vector" else
                   f"nisa.nc_matmul(sel[:, n, :], {v}_all[:, {t}])")
        elif s.bcast == "vector":
            put = f"nl.load({x}[b, n:n + 1, {t}]).broadcast_to((P, F))"
        elif s.bcast == "tensor32":
            put = f"nisa.nc_matmul(ones_k, nl.load({x}[b, n:n + 1, {t}]))"
        else:
            out += (f"                raw = nl.ndarray((nl.par_dim(2), F), dtype=f32, buffer=nl.sbuf)\n"
                    f"                raw[0:1, :] = nl.load({x}[b, n:n + 1, {t}])\n"
                    f"                raw[1:2, :] = nl.load({x}[b, n:n + 1, {t}])\n")
            put = "nisa.nc_matmul(ones_k, split(raw, 1))"
        out += f"                bc[i].append({put})\n"
    return out


def _order(s: Schedule) -> str:
    ind = "            "
    if s.skew == 0:
        return (f"{ind}for i in nl.static_range(S):\n{ind}    bcast(i)\n{ind}    drive(i)\n{ind}    scan(i)\n"
                f"{ind}    emit(i)\n{ind}    accum(i)\n")
    if s.skew == 1:     # the next state's broadcasts go to the Tensor engine before this state's C * h sum
        return (f"{ind}bcast(0)\n{ind}drive(0)\n{ind}scan(0)\n"
                f"{ind}for i in nl.static_range(S):\n"
                f"{ind}    if i + 1 < S:\n{ind}        bcast(i + 1)\n"
                f"{ind}    emit(i)\n{ind}    accum(i)\n"
                f"{ind}    if i + 1 < S:\n{ind}        drive(i + 1)\n{ind}        scan(i + 1)\n")
    # two states deep: Vector runs drive(i+2) between scan(i+1) and C * h(i+1), so no Vector instruction
    # directly follows the one it depends on; the sum of a state's C * h waits one more step
    return (f"{ind}bcast(0)\n{ind}drive(0)\n{ind}scan(0)\n"
            f"{ind}if S > 1:\n{ind}    bcast(1)\n{ind}    drive(1)\n"
            f"{ind}for i in nl.static_range(S):\n"
            f"{ind}    if i + 2 < S:\n{ind}        bcast(i + 2)\n"
            f"{ind}    emit(i)\n"
            f"{ind}    if i >= 1:\n{ind}        accum(i - 1)\n"
            f"{ind}    if i + 1 < S:\n{ind}        scan(i + 1)\n"
            f"{ind}    if i + 2 < S:\n{ind}        drive(i + 2)\n"
            f"{ind}accum(S - 1)\n")


def _emit(s: Schedule) -> str:
    """emit(i): state i's C * h (ys[i]); accum(i): its sum into the output chunk, stored after the last state."""
    t = "ch * F:(ch + 1) * F"
    if s.acc == "transpose":
        emit = ("                # C * h with time on the partitions, where C[n, t] is a per-partition scale (Scalar)\n"
                "                hT = nl.ndarray((nl.par_dim(P), F // P, P), dtype=f32, buffer=nl.psum)\n"
                "                ys[i] = nl.ndarray((nl.par_dim(P), F // P, P), dtype=f32, buffer=nl.sbuf)\n"
                "                for j in nl.static_range(F // P):\n"
                "                    hT[:, j, :] = nisa.nc_transpose(h[i][:, j * P:(j + 1) * P])\n"
                "                for j in nl.static_range(F // P):\n"
                "                    ys[i][:, j, :] = nisa.activation(op=nl.copy, data=hT[:, j, :],\n"
                "                                                     scale=cT[:, ch * (F // P) + j, n:n + 1])\n")
        acc = ("                if n == 0:\n"
               "                    y_ps[ch] = nl.ndarray((nl.par_dim(P), F), dtype=f32, buffer=nl.psum)\n"
               "                for j in nl.static_range(F // P):     # transposed back by identity matmuls\n"
               "                    if n == 0:\n"
               "                        y_ps[ch][:, j * P:(j + 1) * P] = nisa.nc_matmul(ys[i][:, j, :], ident)\n"
               "                    else:\n"
               "                        y_ps[ch][:, j * P:(j + 1) * P] += nisa.nc_matmul(ys[i][:, j, :], ident)\n")
    else:
        emit = "                ys[i] = nisa.tensor_tensor(h[i], bc[i][1], op=nl.multiply)\n"
        if s.acc == "psum":
            acc = ("                if n == 0:\n"
                   "                    y_ps[ch] = nl.ndarray((nl.par_dim(P), F), dtype=f32, buffer=nl.psum)\n"
                   "                    y_ps[ch][...] = nisa.nc_matmul(ident, ys[i])\n"
                   "                else:\n"
                   "                    y_ps[ch] += nisa.nc_matmul(ident, ys[i])\n")
        elif s.cstore:
            acc = ("                if n == 0:\n"
                   "                    y_c[ch] = nl.zeros((nl.par_dim(P), F), dtype=f32, buffer=nl.sbuf)\n"
                   "                y_c[ch][...] = nl.add(y_c[ch], ys[i])\n")
        else:
            acc = f"                y_sb[:, {t}] = nl.add(y_sb[:, {t}], ys[i])\n"
    last = ""
    if s.acc != "vector":
        dst = "y_c[ch]" if s.cstore else f"y_sb[:, {t}]"
        last += f"                    {dst} = {evict(s.evict, 'y_ps[ch]', 'f32')}\n"
    if s.cstore:
        last += f"                    nl.store(out[b, c0:c0 + P, {t}], value=y_c[ch])\n"
    return emit_fns(emit, acc, last)


def emit_fns(emit: str, acc: str, last: str) -> str:
    """Both dialects: emit(i) runs `emit` (state i's C * h into ys[i]), accum(i) runs `acc` (its sum into the
    output chunk) and, after the chunk's last state, `last` (eviction and store of the chunk)."""
    if last:
        acc += "                if n == N - 1:\n" + last
    return (f"            def emit(i):\n                ch, n = steps[i]\n{emit}\n"
            f"            def accum(i):\n                ch, n = steps[i]\n{acc}")


def body(s: Schedule) -> str:
    t = "ch * F:(ch + 1) * F"
    if s.hoist:
        tiles = ("            delta_t = nl.load(delta[b, c0:c0 + P, :])\n"
                 "            u_t = nl.load(u[b, c0:c0 + P, :])\n"
                 "            a_t = nl.load(A[c0:c0 + P, :])\n"
                 "            du = nisa.tensor_tensor(delta_t, u_t, op=nl.multiply)\n")
        drive_in = (f"                d_a[i] = nisa.activation(op=nl.exp, data=delta_t[:, {t}],\n"
                    f"                                         scale=a_t[:, n:n + 1])\n"
                    f"                d_bu[i] = nisa.tensor_tensor(du[:, {t}], bc[i][0], op=nl.multiply)\n")
    else:
        tiles = ""
        drive_in = (f"                delta_t = nl.load(delta[b, c0:c0 + P, {t}])\n"
                    f"                u_t = nl.load(u[b, c0:c0 + P, {t}])\n"
                    f"                a_col = nl.load(A[c0:c0 + P, n:n + 1])\n"
                    f"                d_a[i] = nisa.activation(op=nl.exp, data=delta_t, scale=a_col)\n"
                    f"                d_u = nisa.tensor_tensor(delta_t, u_t, op=nl.multiply)\n"
                    f"                d_bu[i] = nisa.tensor_tensor(d_u, bc[i][0], op=nl.multiply)\n")
    if s.cstore:
        y_alloc, store = "            y_c = [None] * n_ch\n", ""
    else:
        y_alloc = ("            y_sb = nl.zeros((nl.par_dim(P), seq_len), dtype=f32, buffer=nl.sbuf)\n"
                   if s.acc == "vector" else
                   "            y_sb = nl.ndarray((nl.par_dim(P), seq_len), dtype=f32, buffer=nl.sbuf)\n")
        store = "            nl.store(out[b, c0:c0 + P, :], value=y_sb)\n"
    scan = ("                h[i] = nisa.tensor_tensor_scan(d_a[i], d_bu[i], initial=init, op0=nl.multiply, "
            "op1=nl.add)\n")
    return kernel(s, _setup(s) + (SPLIT if s.bcast == "tensor" else ""), _rows(s), tiles + y_alloc, _bcast_fn(s),
                  drive_in, scan, _emit(s), store)


def kernel(s: Schedule, setup: str, rows: str, tiles: str, bcast_fn: str, drive_in: str, scan: str, emit: str,
           store: str) -> str:
    """The kernel in both NKI dialects around the dialect's statements: sizes, the loops over batches and
    channel tiles, the per-step functions (bcast, drive, scan, emit, accum over steps (chunk, state)) and
    their issue order (_order). `scan` writes h[i] from d_a[i], d_bu[i] and `init`."""
    y_ps = "            y_ps = [None] * n_ch\n" if s.acc != "vector" else ""
    return f"""@nki.jit
def solution(delta, u, A, B, C):
    # Every loop is nl.static_range (unrolled while tracing): the steps are Python lists of tiles.
    batch, channels, seq_len = delta.shape
    _, N = A.shape
    P = nl.tile_size.pmax
    F = {s.chunk or "seq_len"}                          # time steps per chunk
    assert channels % P == 0 and seq_len % F == 0
    n_ch = seq_len // F
    f32, bf16 = nl.float32, nl.bfloat16
    out = nl.ndarray((batch, channels, seq_len), dtype=delta.dtype, buffer=nl.shared_hbm)
{setup}
    steps = [(ch, n) for ch in nl.static_range(n_ch) for n in nl.static_range(N)]
    S = len(steps)
    for b in nl.static_range(batch):
{rows}        for ct in nl.static_range(channels // P):
            c0 = ct * P
{tiles}{y_ps}            bc, d_a, d_bu, h, ys = [None] * S, [None] * S, [None] * S, [None] * S, [None] * S

{bcast_fn}
            def drive(i):
                ch, n = steps[i]
{drive_in}
            def scan(i):
                ch, n = steps[i]
                # h[t] = exp(delta * A)[t] * h[t-1] + (delta * u * B)[t], from the state's previous chunk
                init = 0.0 if ch == 0 else h[i - N][:, F - 1:F]
{scan}
{emit}
{_order(s)}{store}    return out
"""
