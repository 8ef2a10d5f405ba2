"""An analytical cycle estimate of the heuristic's CPU-issued schedules on gemmini-sim (isa.md sections 1,
3, 10): per block the array time, the CPU issue time (timing.py's cpu_issue_cycles per instruction), the DMA time of its mvins
and mvouts, and the stalls a missing double buffer or software pipeline leaves. The planner ranks block
sizes and options with it; it never replaces an evaluation."""
from __future__ import annotations

from autocomp_zmq.hw_runners.gemmini_sim.heuristic.conv import ConvSchedule
from autocomp_zmq.hw_runners.gemmini_sim.heuristic.gemm import GemmSchedule
from autocomp_zmq.hw_runners.gemmini_sim.heuristic.machine import (ARRAY_LATENCY, BANK_ROWS, DIM, INFLIGHT, ISSUE,
                                                                  LATENCY, tiles)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _dma(rows: int, width: int) -> float:
    """Cycles one mvin/mvout of `rows` rows of `width` 16-byte columns keeps its DMA direction busy in a
    stream of them: 16 requests in flight, 64 cycles each, one 16-byte beat per cycle."""
    return rows * max(width, (LATENCY + width) / INFLIGHT)


def _bank_overlap(a: tuple[int, int], b: tuple[int, int]) -> float:
    """Fraction of (row of a, row of b) pairs in the same bank, for two row ranges [start, start + n)."""
    def share(r):
        start, n = r
        out = {}
        for bank in range(start // BANK_ROWS, (start + n - 1) // BANK_ROWS + 1):
            lo, hi = max(start, bank * BANK_ROWS), min(start + n, (bank + 1) * BANK_ROWS)
            out[bank] = (hi - lo) / n
        return out
    sa, sb = share(a), share(b)
    return sum(v * sb.get(k, 0.0) for k, v in sa.items())


def _block(s, npairs: int, ex: float, cpu: float, nl: int, lt: float, first: float,
           stores: int, st: float) -> float:
    """Cycles of one block in steady state. ex: array time, cpu: issue time, nl mvins taking lt cycles
    of DMA (first: until the data of its first pair is in), stores mvouts taking st cycles (0: the block
    does not store)."""
    ahead = min(8, npairs) * ex / max(1, npairs)   # the previous block's pairs still in the execute queue
    if s.prefetch:   # loads spread over the previous block: only bandwidth shows
        t = max(ex, cpu, lt + DIM)
    else:            # loads first: the CPU waits on the 8-entry load queue, the array on the data
        tau = lt / max(1, nl)
        blocked = max(0, nl - 8) * tau
        wait = max(blocked, first)
        stall = max(0.0, wait - ahead) if s.double_buffer else wait + ARRAY_LATENCY
        t = stall + max(ex, cpu - blocked / 2, lt - wait)
    if not stores:
        return t
    per = st / stores
    if s.spread_stores:
        return max(t, st + DIM)
    if s.double_acc:
        return t + (0.0 if stores <= 4 else max(0.0, 170 + (stores - 4) * per - ahead))
    return t + ARRAY_LATENCY + 28 + per + max(0, stores - 4) * per


# -- GEMM ------------------------------------------------------------------------------------------------
def gemm_cycles(s: GemmSchedule, d: dict[str, int]) -> float:
    ni, nj, nk = tiles(d["I"]), tiles(d["J"]), tiles(d["K"])
    ti, tj, tk = s.ti, s.tj, s.tk
    NI, NJ, NK = ni // ti, nj // tj, nk // tk
    nb = NI * NJ * NK
    lw = 4 if s.wide_mvin else 1
    sw = 4 if s.wide_mvout else 1
    npairs = ti * tj * tk
    a_n, a_t = ti * _cdiv(tk, lw), _dma(DIM, min(lw, tk)) * ti * _cdiv(tk, lw)
    b_n, b_t = tk * _cdiv(tj, lw), _dma(DIM, min(lw, tj)) * tk * _cdiv(tj, lw)
    st_n = ti * _cdiv(tj, sw)
    st_t = st_n * _dma(DIM, min(sw, tj))
    # bank conflicts of a pair (B of the preload and A of the previous compute in one bank), and mvins
    # writing banks the array reads (writes win)
    a_rows, b_rows = ti * tk * DIM, tk * tj * DIM
    if s.split_banks:
        conflict, port = 0.0, 0.0
    else:
        conflict = _bank_overlap((0, a_rows), (a_rows, b_rows))
        nxt = (a_rows + b_rows, a_rows + b_rows)
        port = _bank_overlap(nxt, (0, a_rows + b_rows)) if s.double_buffer else 0.0
    heads = npairs / ti if s.weight_reuse else npairs
    ex = npairs * DIM + heads * DIM * conflict
    # block kinds: (count, new A, new B)
    if NK > 1:
        kinds = [(nb, True, True)]
    elif s.order == "ij":
        kinds = [(NI, True, True), (nb - NI, False, True)] if NJ > 1 else [(1, True, True), (nb - 1, True, False)]
    else:
        kinds = [(NJ, True, True), (nb - NJ, True, False)] if NI > 1 else [(1, True, True), (nb - 1, False, True)]
    total = 0.0
    for count, new_a, new_b in kinds:
        if count <= 0:
            continue
        nl = a_n * new_a + b_n * new_b
        lt = a_t * new_a + b_t * new_b
        tau_a, tau_b = a_t / max(1, a_n), b_t / max(1, b_n)
        first = (a_t * new_a + tau_b if new_b else tau_a) + LATENCY + DIM * min(lw, tk) - tau_a
        ex_k = ex + port * DIM * (ti * tk * new_a + tk * tj * new_b) / 4
        for n_blocks, stores in ((count * (NK - 1) / NK, 0), (count / NK, st_n)):
            if n_blocks <= 0:
                continue
            cpu = ISSUE * (2 * npairs + nl + stores)
            total += n_blocks * _block(s, npairs, ex_k, cpu, nl, lt, first, stores, st_t if stores else 0.0)
    return total + a_t + b_t + LATENCY + st_t + ARRAY_LATENCY


# -- conv ------------------------------------------------------------------------------------------------
def conv_cycles(s: ConvSchedule, d: dict[str, int]) -> float:
    p, ct = d["P"], d["C"] // DIM
    kt, rows = s.kt, s.rows
    strips = [min(DIM, p - q) for q in range(0, p, DIM)]
    ns = len(strips)
    nkb, npb = ct // kt, p // rows
    nb = nkb * 4 * npb
    lw = 4 if s.wide_mvin else 1
    sw = 4 if s.wide_mvout else 1
    npairs = rows * ns * 9 * ct * kt
    groups = 9 * ct * kt
    if s.weight_reuse:
        head = max(0, DIM - (DIM if ns > 1 else strips[0]))
        ex = groups * (rows * sum(max(r, 4) for r in strips) + head)
        heads = groups
    else:
        ex = npairs * DIM
        heads = npairs
    lay = s.layout(d)
    w_rows, in_rows = lay[0], lay[1]
    if s.split_banks:
        conflict, port = 0.0, 0.0 if s.double_buffer else 1.0
    else:
        conflict = _bank_overlap((0, w_rows), (w_rows * (2 if s.double_buffer else 1), in_rows))
        port = 1.0 if w_rows * 2 + in_rows * 2 <= BANK_ROWS or not s.double_buffer else 0.3
    ex += heads * DIM * conflict
    w_n = 9 * ct * _cdiv(kt, lw)
    w_t = w_n * _dma(DIM, min(lw, kt))
    ncg = _cdiv(ct, lw)
    if s.input_reuse:
        segs = [min(DIM, p + 2 - x) for x in range(0, p + 2, DIM)]
        in_n = (rows + 2) * len(segs) * ncg
        in_t = (rows + 2) * ncg * sum(_dma(r, min(lw, ct)) for r in segs)
    else:
        in_n = (rows + 2) * 3 * ns * ncg
        in_t = (rows + 2) * 3 * ncg * sum(_dma(r, min(lw, ct)) for r in strips)
    bias_n = rows * ns * kt
    bias_t = rows * kt * sum(_dma(r, 4) for r in strips)
    st_n = rows * ns * _cdiv(kt, sw)
    st_t = rows * _cdiv(kt, sw) * sum(_dma(r, min(sw, kt)) for r in strips)
    new_w_blocks = nkb if s.weight_resident else nb
    total = 0.0
    for count, new_w in ((new_w_blocks, True), (nb - new_w_blocks, False)):
        if count <= 0:
            continue
        nl = in_n + bias_n + w_n * new_w
        lt = in_t + bias_t + w_t * new_w
        first = w_t * new_w + in_t * 3 / (rows + 2) + bias_t / max(1, bias_n) + LATENCY
        ex_k = ex + port * DIM * (in_rows / DIM / 4 + (w_rows / DIM if new_w else 0))
        cpu = ISSUE * (2 * npairs + nl + st_n)
        total += count * _block(s, npairs, ex_k, cpu, nl, lt, first, st_n, st_t)
    return total + w_t + in_t + LATENCY + st_t + ARRAY_LATENCY
