"""Holes found in trainium-sim's judging, each reproduced on a hand-built instruction stream (fast tier: no
sandbox). A stream is what the candidate's process recorded, so it may be forged: every check here is made
by the trusted side, from the stream alone."""
from __future__ import annotations

import time

import numpy as np
import pytest

from autocomp_zmq.hw_runners.trainium_sim import costmodel, fp8, slicing
from autocomp_zmq.hw_runners.trainium_sim.liveness import last_use, uses
from autocomp_zmq.hw_runners.trainium_sim.program import StreamError, decode_tensors
from autocomp_zmq.hw_runners.trainium_sim.replay import Replayer
from tests.trainium_sim.test_costmodel import P, Stream


def test_a_contraction_over_more_than_128_rows_is_refused_whatever_the_front_end_recorded():
    """A kernel that called the private nl._compute("matmul", ...) got a 1024-row contraction judged correct
    and priced as 128 rows: tiles whose first axis runs over a block dimension of a (1024, par_dim(128))
    tensor. The replayer now checks the contraction axis is the partition axis."""
    s = Stream()
    a = s.tensor("sbuf", (1024, 128), pdim=1)
    b = s.tensor("sbuf", (1024, 128), pdim=1)
    r = s.tensor("psum", (128, 128))
    s.emit("memset", "dve", [s.at(a)], [], value=1.0)
    s.emit("memset", "dve", [s.at(b)], [], value=1.0)
    s.emit("matmul", "pe", [s.at(r)], [s.at(a), s.at(b)], acc=False)
    with pytest.raises(StreamError, match="first axis must be its tensor's partition dimension"):
        s.timed()


def test_a_transpose_of_a_tile_whose_first_axis_is_not_the_partitions_is_refused():
    s = Stream()
    a = s.tensor("sbuf", (256, 64), pdim=1)
    r = s.tensor("psum", (64, 256))
    s.emit("memset", "dve", [s.at(a)], [], value=1.0)
    s.emit("transpose", "pe", [s.at(r)], [s.at(a)])
    with pytest.raises(StreamError, match="partition dimension"):
        s.timed()


def test_a_transposing_dma_is_priced_per_element_not_as_one_contiguous_run():
    """x[i_f, i_p] read into a tile: every tensor dim is covered whole with unit coefficient, which the old
    run-length code took for one contiguous run; in tile order each step jumps a whole row of x."""
    s = Stream()
    x = s.tensor("hbm", (128, 128))
    t = s.tensor("sbuf", (128, 128), site=2)
    swapped = [x, [[0, [[128, 2, 1, 1]]], [0, [[128, 2, 0, 1]]]]]     # dim 0 feeds tile axis 1 and back
    s.emit("dma", "dma", [s.at(t)], [swapped])
    s.load(t, x)
    steps, _, _ = s.timed()
    assert steps[0].run_bytes == 4            # one fp32 element per row
    assert steps[1].run_bytes == 128 * 4      # the straight load: one partition row
    slow, _ = costmodel.dma_ns(steps[0], P)
    fast, _ = costmodel.dma_ns(steps[1], P)
    # element rows move at the floor (a tenth of the engines' rate), 512-byte rows at 42%
    assert costmodel.dma_efficiency(steps[0].run_bytes, P) == P["dma_min_efficiency"]
    assert slow > 4 * fast


def test_an_hbm_to_hbm_copy_moves_its_bytes_through_hbm_twice():
    s = Stream()
    a, b = s.tensor("hbm", (1024, 1024)), s.tensor("hbm", (1024, 1024))
    s.emit("dma", "dma", [s.at(b)], [s.at(a)])
    _, _, tl = s.timed()
    nbytes = 1024 * 1024 * 4
    assert tl.total_ns >= 2 * nbytes / P["hbm_gbps_per_core"]


def many_live_tiles(n: int) -> Stream:
    """n one-element SBUF tiles allocated at one line, all alive at once (each written, then all read)."""
    s = Stream()
    tiles = [s.tensor("sbuf", (1, 1), site=2) for _ in range(n)]
    sink = s.tensor("sbuf", (1, 1), site=3)
    for t in tiles:
        s.emit("memset", "dve", [s.at(t)], [], value=1.0)
    for t in tiles:
        s.emit("ew", "act", [s.at(sink)], [s.at(t)], fn="copy")
    return s


@pytest.mark.system
def test_placing_many_live_tiles_is_not_quadratic():
    """~20k live tiles took 156 s (40k: minutes) to place (a min over every buffer per tile), outside every time limit."""
    s = many_live_tiles(40_000)
    t0 = time.monotonic()
    steps, lay, tl = s.timed()
    assert time.monotonic() - t0 < 30          # was minutes; now a few seconds at most on a loaded machine
    assert len({lay.slot_of[(t, ())] for t in range(40_000)}) == 40_000     # all alive at once: all distinct


@pytest.mark.system
def test_disjoint_writes_keep_dependency_tracking_linear():
    """40k one-element stores to disjoint parts of one HBM tensor took 668 s: writes were never merged, so
    every store scanned every earlier one."""
    s = Stream()
    n = 40_000
    out = s.tensor("hbm", (n, 1))
    t = s.tensor("sbuf", (1, 1), site=2)
    s.emit("memset", "dve", [s.at(t)], [], value=1.0)
    for i in range(n):
        s.emit("dma", "dma", [s.at(out, (i, i + 1))], [s.at(t)])
    t0 = time.monotonic()
    _, _, tl = s.timed()
    assert time.monotonic() - t0 < 30
    assert tl.counts["dma"] == n


def test_a_masked_access_keeps_its_index_compact():
    """A decoded stream keeps every access's index until the cost model is done: a masked 128 x 128 access
    must hold per-axis ranges (broadcast views), not 128 x 128 int64 arrays per dimension. The published
    transpose kernel (24k masked accesses) needed 18 GiB when they were materialized."""
    from autocomp_zmq.hw_runners.trainium_sim.program import TensorDecl, mask_array, resolve
    t = TensorDecl(0, "hbm", (4, 512, 512), "float32", 0, 1)
    i = [0, [[128, 2, 0, 1]]]                   # const 0 + arange(128) on tile axis 0
    j = [128, [[128, 2, 1, 1]]]                 # 128 + arange(128) on tile axis 1
    mask = mask_array([[i, "<", 100]], (128, 128), "a test")
    a = resolve([0, [3, i, j]], [t], "a test", mask)
    arrays = [x for x in a.index[1:] if isinstance(x, np.ndarray)]
    assert arrays and all(x.shape == (128, 128) for x in arrays)
    assert all((x.base if x.base is not None else x).size <= 128 for x in arrays)


def test_choosing_the_checked_elements_looks_at_the_clock_between_writers():
    """16,000 whole-output DMAs took 176 s under a 10 s limit: marking each output element's last writer
    (slicing.last_writers) never looked at the deadline. Now a passed deadline stops it with a timeout."""
    s = Stream()
    x, out = s.tensor("hbm", (256, 256)), s.tensor("hbm", (256, 256))
    for _ in range(50):
        s.emit("dma", "dma", [s.at(out)], [s.at(x)])
    decls = decode_tensors(s.tensors, 1 << 40)
    _, last = uses(s.instrs, decls)
    replay = Replayer(decls, {}, 1, last_use(last))
    steps = replay.decode(s.instrs)
    with pytest.raises(TimeoutError, match="choosing the output elements to check"):
        slicing.plan(steps, replay.decoded, decls, [out], 0, np.random.default_rng(0), time.monotonic() - 1)


@pytest.mark.system
def test_timing_a_spilled_tile_is_linear_in_its_blocks():
    """Timing an access to a spilled tile looked up the access's blocks once per block: one DMA writing all
    16,384 blocks of a spilled (16384, par_dim(128), 2) tensor took 80 s (8,192: 18 s), so a kernel could
    hold an evaluator far past its limit between two looks at the clock. Each access's blocks are now
    listed once; 65,536 blocks take a few seconds."""
    s = Stream()
    n = 65_536
    x, out = s.tensor("hbm", (n, 128, 2)), s.tensor("hbm", (n, 128, 2))
    a = s.tensor("sbuf", (n, 128, 2), pdim=1, site=2)    # 512 KiB per partition: more than SBUF holds
    s.emit("dma", "dma", [s.at(a)], [s.at(x)])
    s.emit("dma", "dma", [s.at(out)], [s.at(a)])
    t0 = time.monotonic()
    _, lay, tl = s.timed()
    assert lay.spilled and tl.spill_bytes == 2 * n * 128 * 2 * 4
    assert time.monotonic() - t0 < 60        # was ~20 minutes; a few seconds on a loaded machine


@pytest.mark.parametrize("platform", ["trn1", "trn2"])
def test_a_forged_bf16_psum_matmul_is_refused_before_trn3(platform):
    """The front end refuses nc_matmul into a bfloat16 PSUM tile before trn3 (BF16 PSUM accumulation is a
    NeuronCore-v4 feature); a stream that records one anyway meets the same rule on the trusted side."""
    s = Stream()
    a, b = s.tensor("sbuf", (128, 128), "bfloat16"), s.tensor("sbuf", (128, 512), "bfloat16")
    r = s.tensor("psum", (128, 512), "bfloat16")
    s.emit("memset", "dve", [s.at(a)], [], value=1.0)
    s.emit("memset", "dve", [s.at(b)], [], value=1.0)
    s.emit("matmul", "pe", [s.at(r)], [s.at(a), s.at(b)], acc=True)
    steps, _, _ = s.timed()
    decls = decode_tensors(s.tensors, 1 << 40)
    with pytest.raises(StreamError, match="BF16 PSUM accumulation is NeuronCore-v4"):
        fp8.check_platform(decls, steps, costmodel.params(platform), platform)
    fp8.check_platform(decls, steps, costmodel.params("trn3"), "trn3")
