"""How many buffers a loop's tiles rotate through (params.toml loop_tile_buffers), on the pattern of Autocomp's gemm
chain steps 3 -> 5, where the same bytes loaded in fewer, larger transfers measured faster (fast tier)."""
from __future__ import annotations

import pytest

from autocomp_zmq.hw_runners.trainium_sim import costmodel
from tests.trainium_sim.test_costmodel import Stream

AUTOCOMP = costmodel.params("trn1", "autocomp")     # the DMA figures Autocomp's chain was measured with


def gemm_block(lhs_loads: int, iterations: int = 24) -> Stream:
    """Per iteration: two [128, 512] bf16 rhs tiles and a [128, 512] lhsT block in `lhs_loads` loads (4: four
    [128, 128] tiles, Autocomp's step 3; 1: one [128, 512] load sliced, its step 5), then eight matmuls into
    eight PSUM accumulators."""
    s = Stream()
    rhs_hbm, lhs_hbm = s.tensor("hbm", (iterations * 128, 1024), "bfloat16"), s.tensor("hbm", (iterations * 128, 512),
                                                                                        "bfloat16")
    acc = [s.tensor("psum", (128, 512), site=20 + i) for i in range(8)]
    width = 512 // lhs_loads
    for k in range(iterations):
        rhs = [s.tensor("sbuf", (128, 512), "bfloat16", site=2 + j) for j in range(2)]
        for j, t in enumerate(rhs):
            s.emit("dma", "dma", [s.at(t)], [s.at(rhs_hbm, (k * 128, k * 128 + 128), (j * 512, j * 512 + 512))],
                   site=2 + j)
        lhs = [s.tensor("sbuf", (128, width), "bfloat16", site=4 + i) for i in range(lhs_loads)]
        for i, t in enumerate(lhs):
            s.emit("dma", "dma", [s.at(t)], [s.at(lhs_hbm, (k * 128, k * 128 + 128), (i * width, i * width + width))],
                   site=4 + i)
        for m in range(4):
            tile, col = lhs[m * lhs_loads // 4], (m * 128) % width
            for j in range(2):
                s.emit("matmul", "pe", [s.at(acc[2 * m + j])], [s.at(tile, (0, 128), (col, col + 128)), s.at(rhs[j])],
                       site=10, acc=k > 0)
    return s


@pytest.mark.parametrize("buffers, wide_not_slower", [(2, False), (3, True)])
def test_fewer_larger_loads_are_not_slower_once_loop_tiles_are_triple_buffered(buffers, wide_not_slower):
    p = {**AUTOCOMP, "loop_tile_buffers": buffers}
    (_, _, narrow), (_, _, wide) = gemm_block(4).timed(p), gemm_block(1).timed(p)
    assert (wide.total_ns <= narrow.total_ns) == wide_not_slower, (narrow.total_ns, wide.total_ns)


def test_the_default_keeps_three_sets_of_a_loop_tile_when_there_is_room():
    _, lay, _ = gemm_block(1).timed()
    assert costmodel.params()["loop_tile_buffers"] == 3
    assert lay.buffers[("sbuf", 4)][0] == 3 and lay.buffers[("sbuf", 2)][0] == 3
