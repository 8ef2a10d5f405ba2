"""The compiler's treatment of nl.affine_range loops (loops.py), on hand-built instruction streams (fast tier).

A stream's `loops` record is what the sandboxed front end claims; these tests write it by hand, honest and
forged, and check that only what the replayed instructions show to be legal changes the timing: a fixed-size
inner loop of Vector work is vectorized (Autocomp's conv1d step 5 -> 6), a long independent loop is overlapped
but not vectorized, and a forged claim (dependent iterations, accesses that are not affine, a malformed record)
leaves the kernel timed in program order.
"""
from __future__ import annotations

import time

import pytest

from autocomp_zmq.hw_runners.trainium_sim import costmodel, loops
from autocomp_zmq.hw_runners.trainium_sim.liveness import last_use, uses
from autocomp_zmq.hw_runners.trainium_sim.program import decode_tensors
from autocomp_zmq.hw_runners.trainium_sim.replay import Replayer
from tests.trainium_sim.test_costmodel import P, Stream


class LoopStream(Stream):
    """A Stream that also records affine_range iterations as the front end does."""

    def __init__(self) -> None:
        super().__init__()
        self.loops: list[list] = []
        self.ids = 0

    def loop(self, trip: int):
        self.ids += 1
        lid = self.ids
        for k in range(trip):
            self.loops.append([len(self.instrs), lid, k, trip])
            yield k
        self.loops.append([len(self.instrs), lid, -1, trip])

    def time(self, claims=None) -> tuple[float, list]:
        """(total ns, the instructions as the cost model issued them) with the given loop record (own by
        default)."""
        decls = decode_tensors(self.tensors, 1 << 40)
        first, last = uses(self.instrs, decls)
        lay = costmodel.layout(decls, first, last, P)
        steps = Replayer(decls, {}, 1, last_use(last)).run(self.instrs)
        record = self.loops if claims is None else claims
        issued = loops.transform(steps, record, P)
        return costmodel.simulate(steps, lay, P, loops=record).total_ns, issued


def conv_rows(outputs: int, inner: int | None) -> LoopStream:
    """Autocomp's conv1d inner computation: per output column, a [128, 3] window times the filter, reduced to
    one column; in one loop of `outputs` iterations, or in blocks of an `inner`-trip loop."""
    s = LoopStream()
    img = s.tensor("sbuf", (128, outputs + 2), site=1)
    filt = s.tensor("sbuf", (128, 3), site=2)
    out = s.tensor("sbuf", (128, outputs), site=3)
    s.emit("memset", "dve", [s.at(img)], [], value=1.0)
    s.emit("memset", "dve", [s.at(filt)], [], value=1.0)

    def body(o: int) -> None:
        prod = s.tensor("sbuf", (128, 3), site=10)
        s.emit("ew", "dve", [s.at(prod)], [s.at(img, (0, 128), (o, o + 3)), s.at(filt)], fn="multiply")
        s.instrs.append(["reduce", "dve", [s.at(out, (0, 128), (o, o + 1))], [s.at(prod)], {"op": "add", "axes": [1]},
                         1])

    if inner is None:
        for o in s.loop(outputs):
            body(o)
    else:
        for b in s.loop(outputs // inner):
            for o in s.loop(inner):
                body(b * inner + o)
    return s


def transformed(st) -> bool:
    return bool(st.extra.get("vectorized") or st.extra.get("overlapped"))


def test_a_fixed_size_inner_loop_of_vector_work_is_vectorized():
    flat_ns, flat = conv_rows(1024, None).time()
    blocked_ns, blocked = conv_rows(1024, 64).time()
    assert not any(st.extra.get("vectorized") for st in flat)
    assert all(st.extra.get("overlapped") for st in flat[2:])
    fused = [st for st in blocked if st.extra.get("vectorized")]
    assert [st.extra["vectorized"] for st in fused] == [64] * 32 and fused[0].free == 64 * 3
    # conv1d step 5 -> 6 measured 10.75x on a trn1 (with its loads, stores and zero fills around it); here
    # 64 x two MIN_II instructions against a 192-element multiply and reduction per block: at most 21x
    assert 7 < flat_ns / blocked_ns < 22, (flat_ns, blocked_ns)


def every_8th_column(looped: bool) -> LoopStream:
    """exp of a [128, 64] tile into every 8th column of a [128, 512] one (a 32-byte stride): one column per
    iteration of a 64-trip loop, or in one instruction."""
    s = LoopStream()
    x, t = s.tensor("sbuf", (128, 64)), s.tensor("sbuf", (128, 512), site=2)
    s.emit("memset", "dve", [s.at(x)], [], value=1.0)
    if looped:
        for k in s.loop(64):
            column = s.at(t, (0, 128), (8 * k, 8 * k + 1))
            s.emit("activation", "act", [column], [s.at(x, (0, 128), (k, k + 1)), 1.0, None], fn="exp", site=2)
    else:
        s.emit("activation", "act", [s.at(t, (0, 128), (0, 512, 8))], [s.at(x), 1.0, None], fn="exp", site=2)
    return s


def test_a_vectorized_loop_walks_its_iterations_at_their_stride():
    """Fused, one column per iteration 8 columns apart is a strided walk: it costs what the same walk written as
    one instruction costs (not the contiguous rate: a loop is no way to make a strided access cheap)."""
    looped_ns, issued = every_8th_column(True).time()
    direct_ns, _ = every_8th_column(False).time()
    direct = every_8th_column(False).time()[1][1]
    [fused] = [st for st in issued if st.extra.get("vectorized")]
    assert fused.extra.get("strided") and costmodel.cycles(fused, P) == pytest.approx(costmodel.cycles(direct, P))
    assert looped_ns == pytest.approx(direct_ns)


def test_independent_iterations_hide_the_dependent_latency_and_small_tile_overhead():
    s = conv_rows(256, None)
    overlapped_ns, _ = s.time()
    program_order_ns, issued = s.time(claims=[])
    assert not any(transformed(st) for st in issued)
    # two MIN_II instructions per iteration, where program order also waits on each reduction's input
    per_iteration = 2 * P["min_ii"] / P["vector_clock_ghz"]
    assert overlapped_ns < 1.1 * 256 * per_iteration + 1000
    assert program_order_ns > 2 * overlapped_ns


def chains_in_a_loop(trip: int, length: int = 40) -> LoopStream:
    """`trip` independent iterations, each a load and a chain of `length` dependent one-element Vector
    instructions (the load keeps the loop from being vectorized)."""
    s = LoopStream()
    acc = s.tensor("sbuf", (128, trip * (length + 1)), site=1)
    x = s.tensor("hbm", (128, trip))
    for k in s.loop(trip):
        base = k * (length + 1)
        s.emit("dma", "dma", [s.at(acc, (0, 128), (base, base + 1))], [s.at(x, (0, 128), (k, k + 1))], site=2)
        for j in range(length):
            s.emit("ew", "dve", [s.at(acc, (0, 128), (base + j + 1, base + j + 2))],
                   [s.at(acc, (0, 128), (base + j, base + j + 1))], fn="copy")
    return s


def test_a_loop_of_two_hides_only_what_the_other_iteration_fills():
    """Two interleaved chains hide one instruction's occupancy of each wait, not the whole wait: wrapping
    dependent work in a two-trip loop must not buy the timing of a long loop."""
    per_instruction = {}
    for trip in (2, 64):
        s = chains_in_a_loop(trip)
        overlapped_ns, issued = s.time()
        assert all(st.extra.get("overlapped") == trip for st in issued)
        program_order_ns, _ = s.time(claims=[])
        assert overlapped_ns < program_order_ns
        per_instruction[trip] = overlapped_ns / (trip * 40)
    assert per_instruction[2] > 1.5 * per_instruction[64], per_instruction


def dependent_chain(trip: int) -> LoopStream:
    """acc[:, k] = acc[:, k - 1] * x: each iteration reads what the one before wrote (a sequential loop)."""
    s = LoopStream()
    acc = s.tensor("sbuf", (128, trip + 1), site=1)
    x = s.tensor("sbuf", (128, 1), site=2)
    s.emit("memset", "dve", [s.at(acc)], [], value=1.0)
    s.emit("memset", "dve", [s.at(x)], [], value=1.0)
    for k in s.loop(trip):
        s.emit("ew", "dve", [s.at(acc, (0, 128), (k + 1, k + 2))], [s.at(acc, (0, 128), (k, k + 1)), s.at(x)],
               fn="multiply")
    return s


def test_a_forged_claim_on_dependent_iterations_gains_nothing():
    for trip in (16, 300):
        s = dependent_chain(trip)
        claimed_ns, issued = s.time()
        honest_ns, _ = s.time(claims=[])
        assert claimed_ns == honest_ns
        assert not any(transformed(st) for st in issued)


def test_iterations_that_write_one_location_are_not_independent():
    s = LoopStream()
    out = s.tensor("sbuf", (128, 4), site=1)
    for k in s.loop(8):
        s.emit("memset", "dve", [s.at(out, (0, 128), (k % 4, k % 4 + 1))], [], value=float(k))
    _, issued = s.time()
    assert not any(transformed(st) for st in issued)


def test_accesses_that_are_not_affine_in_the_iteration_are_not_vectorized():
    s = LoopStream()
    img = s.tensor("sbuf", (128, 300), site=1)
    out = s.tensor("sbuf", (128, 16), site=2)
    s.emit("memset", "dve", [s.at(img)], [], value=1.0)
    for k in s.loop(16):
        s.emit("ew", "act", [s.at(out, (0, 128), (k, k + 1))], [s.at(img, (0, 128), (k * k, k * k + 1))],
               fn="exp")
    _, issued = s.time()
    assert not any(st.extra.get("vectorized") for st in issued)
    assert all(st.extra.get("overlapped") for st in issued[1:])      # still independent


def test_a_loop_with_dma_or_matmul_is_not_vectorized():
    s = LoopStream()
    x = s.tensor("hbm", (128, 64))
    t = s.tensor("sbuf", (128, 64), site=1)
    for k in s.loop(8):
        s.emit("dma", "dma", [s.at(t, (0, 128), (8 * k, 8 * k + 8))], [s.at(x, (0, 128), (8 * k, 8 * k + 8))])
    _, issued = s.time()
    assert not any(st.extra.get("vectorized") for st in issued)


def test_malformed_loop_records_are_ignored():
    s = conv_rows(128, 64)
    honest_ns, _ = s.time(claims=[])
    n = len(s.instrs)
    bad = [
        "not a list",
        [[0, 1, 0]],                                    # three fields
        [[0, 1, 0, 2], [5, 1, 1, 2]],                   # never ends
        [[0, 1, 0, 2], [5, 1, 2, 2], [9, 1, -1, 2]],    # skips an iteration
        [[5, 1, 0, 2], [3, 1, 1, 2], [9, 1, -1, 2]],    # goes backwards
        [[0, 1, 0, 2], [5, 1, 1, 2], [n + 1, 1, -1, 2]],    # past the last instruction
        [[0, 1, 0, 1], [0, 2, 0, 1], [4, 1, -1, 1], [8, 2, -1, 1]],     # crossed, not nested
        [[0, 1, 0, 2.5], [5, 1, 1, 2.5], [9, 1, -1, 2.5]],               # not integers
    ]
    for record in bad:
        assert loops.loops_of(record, n) == []
        assert s.time(claims=record)[0] == honest_ns


def test_checking_the_loops_stops_at_the_deadline():
    s = conv_rows(256, None)
    decls = decode_tensors(s.tensors, 1 << 40)
    first, last = uses(s.instrs, decls)
    steps = Replayer(decls, {}, 1, last_use(last)).run(s.instrs)
    with pytest.raises(TimeoutError, match="checking the kernel's loops"):
        loops.transform(steps, s.loops, P, deadline=time.monotonic() - 1)


def test_the_record_nests_inner_loops_in_their_outer_loop():
    s = conv_rows(256, 64)
    top = loops.loops_of(s.loops, len(s.instrs))
    assert [lp.trip for lp in top] == [4] and [lp.trip for lp in top[0].inner] == [64] * 4
    assert not any(lp.inner for lp in top[0].inner)


def test_a_spilled_tile_written_one_column_at_a_time_moves_whole_rows():
    """Autocomp's conv1d steps 0-2 spilled their [8, 4, 128, 2048] fp32 output tile and wrote it one column
    at a time, at the speed of the unspilled step 3: the spill traffic is the compiler's, in whole rows."""
    def kernel(width: int) -> float:
        s = LoopStream()
        out = s.tensor("sbuf", (2, 128, width), site=1, pdim=1)
        for k in s.loop(1024):
            for b in range(2):                 # both blocks alive at once
                s.emit("memset", "dve", [s.at(out, b, (0, 128), (k, k + 1))], [], value=1.0)
        return s.time()[0]
    # two blocks of 120,000 bytes per partition: more than SBUF's 192 KiB, spilled; against two of 4 KiB
    # (four-byte-row spill transfers: 3.3x the resident kernel)
    spilled, resident = kernel(30_000), kernel(1024)
    assert spilled < 1.1 * resident, (spilled, resident)
