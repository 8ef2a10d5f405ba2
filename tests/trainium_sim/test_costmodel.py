"""The trainium-sim cost model on hand-built instruction streams (fast tier: no sandbox, no kernel).

Streams are written in the recorder's wire format (program.py / _trace.py), replayed on NaN-filled
memory (timing never depends on values) and timed by costmodel.simulate. The tests check relations
the model must keep, not its exact numbers: cost grows with work, fp32 matmul is slower than bf16,
long contiguous DMA rows are efficient, independent work overlaps across engines while dependences
serialize it, a reused buffer waits for its readers (WAR) while rotating buffers do not, overflows
name the kernel lines, and the feedback names the engine that binds.
"""
from __future__ import annotations

import pytest

from autocomp_zmq.hw_runners.trainium_sim import costmodel, feedback
from autocomp_zmq.hw_runners.trainium_sim.liveness import last_use, uses
from autocomp_zmq.hw_runners.trainium_sim.program import StreamError, decode_tensors
from autocomp_zmq.hw_runners.trainium_sim.replay import Replayer

P = costmodel.params()


class Stream:
    """Builds a tensor table and an instruction list in the wire format."""

    def __init__(self) -> None:
        self.tensors: list[list] = []
        self.instrs: list[list] = []

    def tensor(self, buffer: str, shape, dtype: str = "float32", site: int = 1, pdim: int = 0) -> int:
        self.tensors.append([buffer, list(shape), dtype, pdim, site, -1])
        return len(self.tensors) - 1

    def shape(self, tid: int) -> tuple[int, ...]:
        return tuple(self.tensors[tid][1])

    def at(self, tid: int, *ranges) -> list:
        """An access: per dimension an integer or (start, stop[, step]); the whole dimension when omitted."""
        shape = self.shape(tid)
        ranges = list(ranges) + [(0, n) for n in shape[len(ranges):]]
        rank = sum(not isinstance(r, int) for r in ranges)
        idx, pos = [], 0
        for r in ranges:
            if isinstance(r, int):
                idx.append(r)
                continue
            start, stop, step = r if len(r) == 3 else (*r, 1)
            idx.append([start, [[len(range(start, stop, step)), rank, pos, step]]])
            pos += 1
        return [tid, idx]

    def emit(self, op: str, engine: str, dsts: list, srcs: list, site: int = 1, **attrs) -> None:
        self.instrs.append([op, engine, dsts, srcs, attrs, site])

    def load(self, dst: int, src: int, site: int = 1) -> None:
        self.emit("dma", "dma", [self.at(dst)], [self.at(src)], site)

    def timed(self, p: dict = P):
        """(steps, layout, timeline) of the stream, with the cost model's parameters `p`."""
        decls = decode_tensors(self.tensors, 1 << 40)
        touches: dict = {}
        first, last = uses(self.instrs, decls, touches=touches)
        lay = costmodel.layout(decls, first, last, p, touches=touches)
        steps = Replayer(decls, {}, 1, last_use(last)).run(self.instrs)
        return steps, lay, costmodel.simulate(steps, lay, p)


def matmul_step(moving: int, dtype: str, stationary: int = 128):
    s = Stream()
    a = s.tensor("sbuf", (128, stationary), dtype)
    b = s.tensor("sbuf", (128, moving), dtype)
    r = s.tensor("psum", (stationary, moving))
    s.emit("memset", "dve", [s.at(a)], [], value=1.0)
    s.emit("memset", "dve", [s.at(b)], [], value=1.0)
    s.emit("matmul", "pe", [s.at(r)], [s.at(a), s.at(b)], acc=False)
    steps, _, _ = s.timed()
    return steps[-1]


def test_matmul_cost_scales_with_moving_size():
    c = {n: costmodel.cycles(matmul_step(n, "bfloat16"), P) for n in (128, 256, 512)}
    assert c[128] < c[256] < c[512]
    # linear in the moving free size once it exceeds the minimum
    assert c[512] - c[256] == pytest.approx(2 * (c[256] - c[128]))
    # a one-column moving tile still pays the minimum
    assert costmodel.cycles(matmul_step(1, "bfloat16"), P) == costmodel.cycles(matmul_step(2, "bfloat16"), P)


def test_fp32_matmul_is_four_times_bf16():
    fixed = P["matmul_fixed_cycles"]
    for n in (128, 512):
        bf16 = costmodel.cycles(matmul_step(n, "bfloat16"), P) - fixed
        fp32 = costmodel.cycles(matmul_step(n, "float32"), P) - fixed
        assert fp32 == pytest.approx(4 * bf16)
    assert matmul_step(128, "float32").fp32_matmul and not matmul_step(128, "bfloat16").fp32_matmul



def transpose_step(dtype: str):
    s = Stream()
    x = s.tensor("sbuf", (128, 128), dtype)
    r = s.tensor("psum", (128, 128), dtype)
    s.emit("memset", "dve", [s.at(x)], [], value=1.0)
    s.emit("transpose", "pe", [s.at(r)], [s.at(x)])
    steps, _, _ = s.timed()
    return steps[-1]


def test_a_tensor_engine_transpose_of_fp32_data_runs_at_the_fp32_matmul_rate():
    # the Tensor engine transposes by multiplying with an identity: fp32 data streams at its fp32 rate, a
    # quarter of bf16's (Autocomp's attention chain, step 3 -> 4: fp32 -> bf16 transposes measured 1.47x)
    bf16, fp32 = (costmodel.cycles(transpose_step(d), P) for d in ("bfloat16", "float32"))
    assert fp32 == pytest.approx(P["matmul_fp32_factor"] * bf16)
    assert bf16 == pytest.approx(costmodel.cycles(matmul_step(128, "bfloat16"), P) - P["matmul_fixed_cycles"])

def _dma_rate(width: int, step: int = 1) -> tuple[int, float]:
    """(contiguous bytes per row, bytes per ns) of loading x[:, 0:width*step:step] from a [128, 8192] fp32 tensor."""
    s = Stream()
    x = s.tensor("hbm", (128, 8192))
    t = s.tensor("sbuf", (128, width))
    s.emit("dma", "dma", [s.at(t)], [s.at(x, (0, 128), (0, width * step, step))])
    steps, _, _ = s.timed()
    occupancy, _ = costmodel.dma_ns(steps[0], P)
    return steps[0].run_bytes, steps[0].dma_bytes / occupancy


def test_dma_efficiency_rises_with_contiguous_row_size():
    rates = [_dma_rate(w) for w in (16, 64, 256, 1024, 4096)]
    assert [r[0] for r in rates] == [64, 256, 1024, 4096, 16384]
    assert all(a[1] < b[1] for a, b in zip(rates, rates[1:])), rates
    # rows of >= 4 KiB run near the sustained per-queue rate, 64-byte rows far below it
    peak = 16 * P["dma_queue_gbps"]
    assert rates[-1][1] > 0.9 * peak and rates[0][1] < 0.2 * peak
    # a strided gather (4-byte rows) is slower still than 64-byte rows
    strided = _dma_rate(1024, step=2)
    assert strided[0] == 4 and strided[1] < rates[0][1]


def test_a_dma_row_never_spans_sbuf_partitions_and_summed_indices_keep_their_inner_run():
    s = Stream()
    x, t = s.tensor("hbm", (128, 512)), s.tensor("sbuf", (128, 512), site=2)
    s.load(t, x)                                       # contiguous in HBM, but 128 partition rows on chip
    w = s.tensor("sbuf", (128, 4, 16), site=3)
    # w[p, a, b] = x[p, 32 * a + b]: 16-element runs (a sum of two tile axes in one dimension)
    s.emit("dma", "dma", [s.at(w)], [[x, [[0, [[128, 3, 0, 1]]], [0, [[4, 3, 1, 32], [16, 3, 2, 1]]]]]])
    steps, _, _ = s.timed()
    assert steps[0].run_bytes == 512 * 4
    assert steps[1].run_bytes == 16 * 4


def test_independent_dmas_overlap_their_fixed_latency():
    def stream(dependent: bool) -> Stream:
        s = Stream()
        x, y = s.tensor("hbm", (128, 512)), s.tensor("hbm", (128, 512))
        t, u = s.tensor("sbuf", (128, 512), site=2), s.tensor("sbuf", (128, 512), site=3)
        s.load(t, x)
        if dependent:
            s.emit("dma", "dma", [s.at(y)], [s.at(t)])       # stores what the first load brought in
        else:
            s.load(u, y)
        return s
    steps, _, free = stream(False).timed()
    _, _, chain = stream(True).timed()
    occupancy, _ = costmodel.dma_ns(steps[0], P)
    latency = P["dma_fixed_us"] * 1000
    # independent: the second transfer queues behind the first but their fixed latencies overlap
    assert free.total_ns == pytest.approx(2 * occupancy + latency, rel=1e-6)
    assert chain.total_ns == pytest.approx(2 * (occupancy + latency), rel=1e-6)


def test_loads_and_stores_together_share_the_16_dma_engines():
    """Loads and stores use separate DMA queues but the same 16 engines: 272 GB/s together (DMABW), not each
    (they used to get 16 engines apiece, moving up to the 410 GB/s of HBM)."""
    s = Stream()
    n = 16
    src = [s.tensor("hbm", (128, 1024)) for _ in range(n)]
    dst = [s.tensor("hbm", (128, 1024)) for _ in range(n)]
    tiles = [s.tensor("sbuf", (128, 1024), site=2 + i) for i in range(n)]
    for i in range(n):
        s.load(tiles[i], src[i])
    for i in range(n):
        s.emit("dma", "dma", [s.at(dst[i])], [s.at(tiles[(i + 1) % n])])   # stores overlap the loads
    _, _, tl = s.timed()
    moved = 2 * n * 128 * 1024 * 4
    engines_gbps = P["dma_queues"] * P["dma_queue_gbps"]
    assert moved / tl.total_ns <= engines_gbps * 1.0001
    # the engines are what binds: close to their rate (4 KiB rows), the stores interleaved with the loads
    assert moved / tl.total_ns > 0.9 * engines_gbps * costmodel.dma_efficiency(4096, P)


def test_compute_overlaps_an_independent_dma():
    s = Stream()
    x = s.tensor("hbm", (128, 4096))
    t, u, y = (s.tensor("sbuf", (128, 4096), site=k) for k in (2, 3, 4))
    s.emit("memset", "dve", [s.at(u)], [], value=1.0)
    s.load(t, x)                                                      # independent of the activation
    s.emit("activation", "act", [s.at(y)], [s.at(u), 1.0, None], fn="exp")
    steps, _, tl = s.timed()
    memset_ns = costmodel.cycles(steps[0], P) / costmodel.clock_ghz("dve", P)
    load_ns = costmodel.dma_ns(steps[1], P)[0] + P["dma_fixed_us"] * 1000
    act_ns = costmodel.cycles(steps[2], P) / costmodel.clock_ghz("act", P)
    assert tl.total_ns == pytest.approx(max(load_ns, memset_ns + act_ns), rel=1e-6)
    assert tl.total_ns < load_ns + memset_ns + act_ns


def test_a_dependent_chain_serializes_across_engines():
    def stream(dependent: bool) -> Stream:
        s = Stream()
        xs = [s.tensor("hbm", (128, 512)) for _ in range(4)]
        ts = [s.tensor("sbuf", (128, 512), site=10 + i) for i in range(4)]
        ys = [s.tensor("sbuf", (128, 512), site=20 + i) for i in range(4)]
        for i in range(4):
            if dependent and i:
                # each iteration loads what the previous one computed, through HBM
                s.emit("dma", "dma", [s.at(xs[i])], [s.at(ys[i - 1])])
            s.load(ts[i], xs[i])
            s.emit("activation", "act", [s.at(ys[i])], [s.at(ts[i]), 1.0, None], fn="exp")
        return s
    _, _, free = stream(False).timed()
    _, _, chain = stream(True).timed()
    latency = P["dma_fixed_us"] * 1000
    assert free.total_ns < 0.5 * chain.total_ns, (free.total_ns, chain.total_ns)
    # independent: loads stream back to back, one fixed latency and one activation stick out
    act_ns = free.busy_ns["act"] / 4
    assert free.total_ns == pytest.approx(free.busy_ns["dma"] + latency + act_ns, rel=1e-6)
    # the chain pays every transfer, its fixed latency and every activation back to back
    engines = {k: v for k, v in chain.busy_ns.items() if k != "dma"}   # dma = max(dma_in, dma_out)
    assert chain.total_ns == pytest.approx(sum(engines.values()) + 7 * latency, rel=1e-6)


def _pipeline(rotating: bool, n: int = 6, store: bool = False, reps: int = 1) -> float:
    """n iterations of load -> exp (reps times) (-> store) through one SBUF tile per role (rotating: a fresh
    tile per iteration allocated at the same kernel line, so the layout gives the line two buffers)."""
    s = Stream()
    x = s.tensor("hbm", (n, 128, 2048))
    out = s.tensor("hbm", (n, 128, 2048))
    tin = [s.tensor("sbuf", (128, 2048), site=5)] * n if not rotating else \
        [s.tensor("sbuf", (128, 2048), site=5) for _ in range(n)]
    tout = [s.tensor("sbuf", (128, 2048), site=6)] * n if not rotating else \
        [s.tensor("sbuf", (128, 2048), site=6) for _ in range(n)]
    for i in range(n):
        s.emit("dma", "dma", [s.at(tin[i])], [s.at(x, i)], site=5)
        for _ in range(reps):
            s.emit("activation", "act", [s.at(tout[i])], [s.at(tin[i]), 1.0, None], site=7, fn="exp")
        if store:
            s.emit("dma", "dma", [s.at(out, i)], [s.at(tout[i])], site=8)
    _, lay, tl = s.timed()
    assert lay.buffers[("sbuf", 5)][0] == (P["loop_tile_buffers"] if rotating else 1)
    return tl.total_ns


def test_reused_buffer_serializes_while_double_buffering_overlaps():
    single, double = _pipeline(False), _pipeline(True)
    # single buffer: each load waits for the previous activation to finish reading (WAR)
    assert double < 0.7 * single, (single, double)


def test_double_buffering_overlaps_a_load_compute_store_loop():
    # compute-heavy (six passes over each tile): loads and stores share the DMA engines, so a loop whose
    # transfers bind cannot gain from overlapping them with compute
    single, double = _pipeline(False, store=True, reps=6), _pipeline(True, store=True, reps=6)
    assert double < 0.85 * single, (single, double)


def test_war_dependency_waits_for_the_reader():
    """A load into a tile that an earlier activation still reads must start after that read ends."""
    s = Stream()
    x = s.tensor("hbm", (128, 4096))
    t = s.tensor("sbuf", (128, 4096), site=3)
    y = s.tensor("sbuf", (128, 4096), site=4)
    s.load(t, x)
    s.emit("activation", "act", [s.at(y)], [s.at(t), 1.0, None], fn="exp")
    s.load(t, x)                       # overwrites t: WAR on the activation's read
    steps, lay, tl = s.timed()
    act_ns = costmodel.cycles(steps[1], P) / costmodel.clock_ghz("act", P)
    one_load, _ = costmodel.dma_ns(steps[0], P)
    latency = P["dma_fixed_us"] * 1000
    # load, then the activation, then the second load: nothing overlaps
    assert tl.total_ns == pytest.approx(2 * (one_load + latency) + act_ns, rel=1e-6)


def test_sbuf_overflow_spills_the_largest_lines_to_hbm_at_a_cost():
    """Where the compiler would spill (more SBUF alive than there is), the tiles of the largest lines live in
    HBM: each write is stored and each read loaded back, on the DMA queues."""
    def stream(n: int) -> Stream:
        s = Stream()
        tiles = [s.tensor("sbuf", (128, 16384), site=40 + i) for i in range(n)]   # n x 64 KiB per partition
        sink = s.tensor("sbuf", (128, 1), site=50)
        for t in tiles:
            s.emit("memset", "dve", [s.at(t)], [], value=0.0)
        for t in tiles:
            s.instrs.append(["reduce", "dve", [s.at(sink)], [s.at(t)], {"op": "add", "axes": [1]}, 1])
        return s
    _, fits, fast = stream(2).timed()
    _, over, slow = stream(4).timed()
    assert not fits.spilled and fast.spill_bytes == 0
    assert len(over.spilled) == 2 and over.sbuf_bytes <= P["sbuf_usable_partition_bytes"]
    spilled_lines = sorted(site for _, site in over.spilled)
    assert slow.spill_bytes == 2 * 2 * 128 * 16384 * 4          # two tiles, each stored once and loaded once
    assert slow.total_ns > 2 * fast.total_ns
    m = feedback.metrics(slow, over, P, 0, (1 << 20, 1 << 20))
    assert m["spilled_lines"] == spilled_lines and "spilled" in feedback.text(m)


def test_multi_block_tiles_are_allocated_by_live_block():
    """nl.zeros((8, 4, par_dim(128), 2050)) in SBUF (256 KiB per partition in all) and a (32, 8, 128, 512)
    fp32 PSUM tensor (256 banks) ran on trn1: the compiler allocates each block from its first to its last
    use, so only the blocks alive at once need room."""
    s = Stream()
    big = s.tensor("sbuf", (8, 4, 128, 2050), site=2, pdim=2)
    acc = s.tensor("psum", (32, 8, 128, 512), site=3, pdim=2)
    out = s.tensor("sbuf", (128, 1), site=4)
    for i in range(8):
        for j in range(4):
            s.emit("memset", "dve", [s.at(big, i, j)], [], value=1.0)
            s.instrs.append(["reduce", "dve", [s.at(out)], [s.at(big, i, j)], {"op": "add", "axes": [1]}, 1])
    for i in range(32):
        for j in range(8):
            s.emit("memset", "dve", [s.at(acc, i, j)], [], value=0.0)
            s.emit("ew", "act", [s.at(out)], [s.at(acc, i, j, (0, 128), (0, 1))], fn="copy")
    _, lay, _ = s.timed()
    assert not lay.spilled
    depth = P["loop_tile_buffers"]
    assert lay.buffers[("sbuf", 2)] == (depth, 2050 * 4)        # a few rotating blocks, not 32
    assert lay.buffers[("psum", 3)] == (depth, 2048) and lay.psum_banks == depth
    assert len({lay.slot_of[(big, (i, j))] for i in range(8) for j in range(4)}) == depth


def test_an_over_full_psum_spills_its_largest_lines_and_keeps_a_staging_bank():
    """Nine one-bank PSUM tiles alive at once, where PSUM has eight banks: as Autocomp's attention kernel (256
    banks alive at once) compiled and ran on a trn1, the compiler spills rather than refusing; one bank stays
    for staging the spilled lines' results, and the spilled tiles' traffic is charged."""
    s = Stream()
    tiles = [s.tensor("psum", (128, 512), site=60 + i) for i in range(9)]
    sink = s.tensor("sbuf", (128, 512), site=70)
    for t in tiles:
        s.emit("memset", "dve", [s.at(t)], [], value=0.0)
    for t in tiles:                             # all nine written before any is read: alive at once
        s.emit("ew", "act", [s.at(sink)], [s.at(t)], fn="copy")
    _, lay, tl = s.timed()
    assert len(lay.spilled) == 2 and all(buf == "psum" for buf, _ in lay.spilled)
    assert lay.psum_banks == 8                  # seven kept, one staging
    assert tl.spill_bytes == 2 * 2 * 128 * 2048     # each spilled tile stored once and reloaded once


def test_tiles_whose_lifetimes_do_not_overlap_share_memory():
    """Capacity is counted by liveness: nine one-bank PSUM tiles, each written and read before the next is
    written, need one bank at a time, not nine (the per-line count spilled them, and doubled AWS's measured
    fused mamba v2 at seq_len 8192 where lines of one loop body take turns: now +79%, was +104%)."""
    s = Stream()
    tiles = [s.tensor("psum", (128, 512), site=60 + i) for i in range(9)]
    sink = s.tensor("sbuf", (128, 512), site=70)
    for t in tiles:
        s.emit("memset", "dve", [s.at(t)], [], value=0.0)
        s.emit("ew", "act", [s.at(sink)], [s.at(t)], fn="copy")
    _, lay, tl = s.timed()
    assert not lay.spilled and tl.spill_bytes == 0
    assert lay.psum_banks == 1


def test_layout_falls_back_to_one_buffer_when_two_do_not_fit():
    s = Stream()
    big = [s.tensor("sbuf", (128, 30000), site=9) for _ in range(2)]    # 117 KiB each: two do not fit
    for t in big:
        s.emit("memset", "dve", [s.at(t)], [], value=0.0)
    _, lay, _ = s.timed()
    assert lay.buffers[("sbuf", 9)][0] == 1 and lay.sbuf_bytes == 120000


def _metrics(s: Stream, flops: int = 0) -> dict:
    _, lay, tl = s.timed()
    return feedback.metrics(tl, lay, P, flops, (1 << 20, 1 << 20))


@pytest.mark.parametrize("engine_name", ["Tensor", "Scalar", "DMA"])
def test_feedback_names_the_binding_engine(engine_name):
    s = Stream()
    a = s.tensor("sbuf", (128, 128))
    b = s.tensor("sbuf", (128, 512))
    r = s.tensor("psum", (128, 512))
    x = s.tensor("hbm", (128, 2048))
    t = s.tensor("sbuf", (128, 2048), site=2)
    y = s.tensor("sbuf", (128, 2048), site=3)
    s.emit("memset", "dve", [s.at(a)], [], value=1.0)
    s.emit("memset", "dve", [s.at(b)], [], value=1.0)
    s.load(t, x)
    heavy = {"Tensor": (20, 1, 1), "Scalar": (1, 30, 1), "DMA": (1, 1, 20)}[engine_name]
    for _ in range(heavy[0]):
        s.emit("matmul", "pe", [s.at(r)], [s.at(a), s.at(b)], acc=False)       # fp32: 4x slower
    for _ in range(heavy[1]):
        s.emit("activation", "act", [s.at(y)], [s.at(t), 1.0, None], fn="exp")
    for _ in range(heavy[2]):
        s.load(t, x)
    m = _metrics(s)
    assert m["binding_engine"] == engine_name, m["engine_busy"]
    assert m["engine_busy"][engine_name] == max(m["engine_busy"].values())
    assert f"binding engine: {engine_name}" in feedback.text(m)


def test_feedback_reports_latency_traffic_and_small_rows():
    s = Stream()
    x = s.tensor("hbm", (128, 8192))
    t = s.tensor("sbuf", (128, 16), site=2)
    s.emit("dma", "dma", [s.at(t)], [s.at(x, (0, 128), (0, 16))])
    m = _metrics(s)
    assert m["dma_bytes"] == 128 * 16 * 4 and m["dma_small_rows"] == 1
    assert m["latency_us"] > P["dma_fixed_us"] and 0 < m["roofline_fraction"] <= 1
    text = feedback.text(m)
    assert "rows under 512 contiguous bytes" in text and "binding engine: DMA" in text


# ---------------------------------------------------------------- calibrated mechanisms (params.toml sources)
def _act_chain(n: int, dependent: bool, free: int = 1) -> float:
    """n activations on [128, free] tiles, each reading the previous one's output (dependent) or the input."""
    s = Stream()
    x = s.tensor("sbuf", (128, free))
    ys = [s.tensor("sbuf", (128, free), site=10 + i) for i in range(n)]
    s.emit("memset", "dve", [s.at(x)], [], value=1.0)
    for i in range(n):
        src = ys[i - 1] if dependent and i else x
        s.emit("activation", "act", [s.at(ys[i])], [s.at(src), 1.0, None], site=10 + i, fn="exp")
    _, _, tl = s.timed()
    return tl.total_ns


def test_dependent_one_element_instructions_pay_the_static_overhead_twice():
    """PERF Opt #5a: 189 ns (264 ScalarE cycles) between dependent 1-element instructions: MIN_II + the
    small-tile overhead + the dependent-instruction overhead (ARCH's 100 cycles each)."""
    ghz = P["scalar_clock_ghz"]
    per = (_act_chain(40, True) - _act_chain(20, True)) / 20
    small = P["instruction_overhead_cycles"] * (1 - 1 / P["small_instruction_elements"])
    assert per == pytest.approx((P["min_ii"] + small + P["instruction_overhead_cycles"]) / ghz, rel=1e-6)
    assert per == pytest.approx(189, rel=0.05)
    # independent 1-element instructions pay the small-tile overhead only
    independent = (_act_chain(40, False) - _act_chain(20, False)) / 20
    assert independent == pytest.approx((P["min_ii"] + small) / ghz, rel=1e-6)
    # large independent tiles stream back to back: N cycles, no SBUF access overhead added to each
    big = (_act_chain(40, False, 1024) - _act_chain(20, False, 1024)) / 20
    assert big == pytest.approx(1024 / ghz, rel=1e-6)


def _vector_copy(step: int) -> float:
    """Cycles of a Vector copy reading every `step`-th fp32 element of a [128, 4096] tile."""
    s = Stream()
    x = s.tensor("sbuf", (128, 4096))
    y = s.tensor("sbuf", (128, 512), site=2)
    s.emit("memset", "dve", [s.at(x)], [], value=1.0)
    s.emit("ew", "dve", [s.at(y)], [s.at(x, (0, 128), (0, 512 * step, step))], fn="copy")
    steps, _, _ = s.timed()
    return costmodel.cycles(steps[-1], P)


def test_a_stride_over_16_bytes_halves_the_streaming_rate():
    assert _vector_copy(1) == _vector_copy(4) == 512                    # 16 B stride: full rate
    assert _vector_copy(8) == pytest.approx(512 * P["strided_access_factor"])     # 32 B: half


def test_a_partition_broadcast_is_a_view_and_a_scalar_operand_costs_what_tensor_scalar_costs():
    s = Stream()
    row = s.tensor("sbuf", (1, 512))
    col = s.tensor("sbuf", (128, 1), site=2)
    x = s.tensor("sbuf", (128, 512), site=3)
    b = s.tensor("sbuf", (128, 512), site=4)
    y = s.tensor("sbuf", (128, 512), site=5)
    z = s.tensor("sbuf", (128, 512), site=6)
    for t in (row, col, x):
        s.emit("memset", "dve", [s.at(t)], [], value=1.0)
    s.emit("ew", "dve", [s.at(b)], [s.at(row)], fn="copy")                   # broadcast_to((128, 512))
    s.emit("ew", "dve", [s.at(y)], [s.at(x), s.at(col)], fn="multiply")      # x * (P, 1) tile
    s.emit("ew", "dve", [s.at(z)], [s.at(x), s.at(b)], fn="multiply")        # two full fp32 tiles
    steps, _, _ = s.timed()
    assert costmodel.cycles(steps[3], P) == 0
    assert costmodel.cycles(steps[4], P) == 512
    assert costmodel.cycles(steps[5], P) == pytest.approx(512 * costmodel.two_input_factor(512, P))


def test_two_input_vector_instructions_cost_more_per_element_as_they_grow():
    # AWS's fused mamba measured ~1.3N at N = 512; the same kernel at N = 2048 (Autocomp's harness) ~2N
    def two_tile_multiply(n: int) -> float:
        s = Stream()
        x, y, z = (s.tensor("sbuf", (128, n), site=i) for i in (1, 2, 3))
        for t in (x, y):
            s.emit("memset", "dve", [s.at(t)], [], value=1.0)
        s.emit("ew", "dve", [s.at(z)], [s.at(x), s.at(y)], fn="multiply")
        steps, _, _ = s.timed()
        return costmodel.cycles(steps[-1], P) / n

    per_element = {n: two_tile_multiply(n) for n in (256, 512, 1024, 2048, 4096)}
    assert per_element[256] == per_element[512] == pytest.approx(1.3)
    assert per_element[512] < per_element[1024] < per_element[2048]
    assert per_element[2048] == per_element[4096] == pytest.approx(2.0)


def _psum_group(fill: float, read_first: bool = False):
    s = Stream()
    a = s.tensor("sbuf", (128, 128), "bfloat16")
    b = s.tensor("sbuf", (128, 512), "bfloat16", site=2)
    acc = s.tensor("psum", (128, 512), site=3)
    out = s.tensor("sbuf", (128, 512), site=4)
    s.emit("memset", "dve", [s.at(a)], [], value=1.0)
    s.emit("memset", "dve", [s.at(b)], [], value=1.0)
    s.emit("memset", "dve", [s.at(acc)], [], value=fill)                      # nl.zeros(..., buffer=nl.psum)
    if read_first:
        s.emit("ew", "act", [s.at(out)], [s.at(acc)], fn="copy")
    for _ in range(4):
        s.emit("matmul", "pe", [s.at(acc)], [s.at(a), s.at(b)], acc=True)    # acc += matmul
    steps, _, tl = s.timed()
    return costmodel.elided_psum_zero_fills(steps), tl


def test_psum_zeroing_before_an_accumulation_group_is_dropped_as_the_compiler_does():
    """ARCH 'Near-memory accumulation': the group's first matmul overwrites the bank, so the zero-fill is
    not executed; a non-zero fill, or one whose value is read first, still is."""
    elided, tl = _psum_group(0.0)
    assert elided == {2} and tl.counts["dve"] == 2
    assert tl.counts["pe"] == 4
    assert _psum_group(1.0)[0] == set()
    assert _psum_group(0.0, read_first=True)[0] == set()


def test_vector_and_gpsimd_share_the_sbuf_port_vector_and_scalar_the_psum_port():
    def stream(second_engine: str, psum: bool) -> float:
        s = Stream()
        buf = "psum" if psum else "sbuf"
        x = s.tensor(buf, (128, 512))
        y = s.tensor("sbuf", (128, 512), site=2)
        z = s.tensor("sbuf", (128, 512), site=3)
        w = s.tensor(buf, (128, 512), site=4)
        s.emit("memset", "dve", [s.at(x)], [], value=1.0)
        s.emit("memset", "dve", [s.at(w)], [], value=1.0)
        s.emit("ew", "dve", [s.at(y)], [s.at(x)], fn="copy", site=5)
        s.emit("ew", second_engine, [s.at(z)], [s.at(w)], fn="copy", site=6)  # independent of the first
        steps, _, tl = s.timed()
        return tl.total_ns, tl.busy_ns
    # Vector + GpSimd on SBUF: serialized; Vector + Scalar on SBUF: in parallel
    (pool, busy), (act, _) = stream("pool", False), stream("act", False)
    assert pool == pytest.approx(sum(busy[e] for e in ("dve", "pool")), rel=1e-6)
    assert act < pool
    # Vector + Scalar on PSUM: serialized
    act_psum, busy = stream("act", True)
    assert act_psum == pytest.approx(sum(busy[e] for e in ("dve", "act")), rel=1e-6)


def test_a_load_waiting_for_its_buffer_holds_up_the_loads_queued_behind_it():
    """Loads start in program order: one waiting for its buffer to be read (WAR) delays the independent
    load issued after it; a store waiting for its compute does not (stores have their own queue)."""
    def stream(first: str) -> float:
        s = Stream()
        x = [s.tensor("hbm", (128, 2048)) for _ in range(3)]
        out = s.tensor("hbm", (128, 2048))
        t, u, y = (s.tensor("sbuf", (128, 2048), site=k) for k in (2, 3, 4))
        z = s.tensor("sbuf", (128, 2048), site=6)
        s.load(t, x[0])
        for _ in range(8):
            s.emit("activation", "act", [s.at(y)], [s.at(t), 1.0, None], fn="exp", site=5)
        blocked = {"load": lambda: s.load(t, x[1]),                           # waits for the reads of t
                   "store": lambda: s.emit("dma", "dma", [s.at(out)], [s.at(y)])}   # waits for y
        independent = lambda: s.load(u, x[2])
        for emit in ((blocked[first], independent) if first in blocked else (independent, blocked["load"])):
            emit()
        s.emit("activation", "act", [s.at(z)], [s.at(u), 1.0, None], fn="exp", site=7)     # uses u
        _, _, tl = s.timed()
        return tl.total_ns
    occupancy, _ = costmodel.dma_ns(_load_step(), P)
    # the independent load queued behind the blocked one waits for the activations, then for its turn
    assert stream("load") > stream("independent first") + occupancy
    assert stream("store") < stream("load")


def _load_step():
    s = Stream()
    x, t = s.tensor("hbm", (128, 2048)), s.tensor("sbuf", (128, 2048), site=2)
    s.load(t, x)
    steps, _, _ = s.timed()
    return steps[0]


def test_a_loop_tile_loaded_block_by_block_is_double_buffered_as_a_whole():
    """A tile of blocks (k, par_dim(128), f) loaded block by block, then read, in every iteration: its k blocks
    are alive together, so multi-buffering keeps loop_tile_buffers x k and the next iterations' loads overlap this
    one's reads. When SBUF is short, the line whose extra sets are largest gives one up first, and so on."""
    def stream(blocks: int, cols: int):
        s = Stream()
        x = s.tensor("hbm", (6, blocks, 128, cols))
        y = s.tensor("hbm", (6, 128, 4096))
        out = s.tensor("sbuf", (128, 512), site=9)
        keep = s.tensor("sbuf", (128, 10240), site=8)                # 40 KiB alive throughout
        s.emit("memset", "dve", [s.at(keep)], [], value=0.0)
        for i in range(6):
            t = s.tensor("sbuf", (blocks, 128, cols), site=5, pdim=1)
            u = s.tensor("sbuf", (128, 4096), site=6)                # a 16 KiB single-block loop tile
            s.emit("dma", "dma", [s.at(u)], [s.at(y, i)], site=6)
            for j in range(blocks):
                s.emit("dma", "dma", [s.at(t, j)], [s.at(x, i, j)], site=5)
            for j in range(blocks):
                s.emit("activation", "act", [s.at(out)], [s.at(t, j, (0, 128), (0, 512))], fn="exp", site=7)
            s.emit("activation", "act", [s.at(out)], [s.at(u, (0, 128), (0, 512))], fn="exp", site=7)
        s.emit("activation", "act", [s.at(out)], [s.at(keep, (0, 128), (0, 512))], fn="exp", site=7)
        _, lay, _ = s.timed()
        return lay
    depth = P["loop_tile_buffers"]
    assert depth == 3                                                # the sizes below are chosen for 3 sets
    lay = stream(4, 512)                                             # 4 x 2 KiB blocks: room for everything
    assert lay.buffers[("sbuf", 5)] == (4 * depth, 2048) and lay.buffers[("sbuf", 6)][0] == depth
    # 16 x 4 KiB blocks: 3 x 64 + 3 x 16 + 40 + 2 KiB do not fit in 176; the block tile gives up a set (then
    # 2 x 64 + 48 + 42 = 218: still over), then its second (154: fits); the 16 KiB loop tile keeps its three
    lay = stream(16, 1024)
    assert lay.buffers[("sbuf", 5)] == (16, 4096) and lay.buffers[("sbuf", 6)] == (3, 16384)


def test_an_independent_instruction_runs_in_an_earlier_gap_of_its_engine():
    """The compiler schedules the unrolled stream, not the program's order (AWS, nki.language.no_reorder: without
    it 'the compiler scheduler is free to reorder independent operations'): an exp that waits for a load leaves
    ScalarE idle, and an independent exp written after it runs in that gap instead of after it."""
    def stream(independent_work: bool) -> Stream:
        s = Stream()
        x = s.tensor("hbm", (128, 8192))
        t, y, u, v = (s.tensor("sbuf", (128, 8192), site=k) for k in (2, 3, 4, 5))
        s.emit("memset", "dve", [s.at(u)], [], value=1.0)
        s.load(t, x)
        s.emit("activation", "act", [s.at(y)], [s.at(t), 1.0, None], fn="exp")       # waits for the load
        if independent_work:
            s.emit("activation", "act", [s.at(v)], [s.at(u), 1.0, None], fn="exp")   # ready long before
        return s
    steps, _, alone = stream(False).timed()
    _, _, both = stream(True).timed()
    act_ns = costmodel.cycles(steps[2], P) / costmodel.clock_ghz("act", P)
    load_ns = costmodel.dma_ns(steps[1], P)[0] + P["dma_fixed_us"] * 1000
    assert load_ns > 2 * act_ns                   # the gap is long enough for the second exp
    assert both.total_ns == pytest.approx(alone.total_ns, rel=1e-6)   # hidden in the gap, not appended
    assert both.busy_ns["act"] == pytest.approx(2 * act_ns, rel=1e-6)


def test_a_gap_too_short_for_an_instruction_is_not_used():
    from autocomp_zmq.hw_runners.trainium_sim.slots import Resource
    r = Resource()
    r.occupy(0.0, 10.0)
    r.occupy(50.0, 10.0)                  # leaves [10, 50) open
    assert r.earliest(0.0, 40.0) == 10.0 and r.earliest(0.0, 41.0) == 60.0
    r.occupy(10.0, 15.0)                  # [25, 50) stays open
    assert r.earliest(12.0, 20.0) == 25.0 and r.earliest(30.0, 25.0) == 60.0
    assert r.earliest(70.0, 5.0) == 70.0
