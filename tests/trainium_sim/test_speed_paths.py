"""The evaluation's faster paths give exactly what the plain ones gave (issue 39, item 4): the comparison of
mostly-selected pieces in place, the comparison without a separate finiteness pass, the value check's marking
through strided views, the compacted transpose, an evaluation that leaves no cyclic garbage behind, the scan
stepped in place, and instructions of known forms (decoded as a full check decodes them, bounds and operand
dtypes still checked)."""
from __future__ import annotations

import gc
import pickle

import numpy as np
import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.trainium_sim import replay, slicing
from autocomp_zmq.hw_runners.trainium_sim.compare import finite_tolerance, mismatch
from autocomp_zmq.hw_runners.trainium_sim.liveness import last_use, uses
from autocomp_zmq.hw_runners.trainium_sim.program import decode_tensors
from autocomp_zmq.hw_runners.trainium_sim.replay import Replayer, _transposed
from autocomp_zmq.hw_runners.trainium_sim.tracer import io_tensors


@pytest.mark.parametrize("density", [0.0, 0.1, 0.3, 0.9, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_in_place_comparison_of_a_mostly_selected_piece_says_what_gathering_says(density, seed):
    rng = np.random.default_rng(seed)
    want = rng.standard_normal((300, 1000)).astype(np.float32)
    got = want + rng.standard_normal(want.shape).astype(np.float32) * 1e-6
    bad = rng.random(want.shape) < 0.001
    got[bad] += 1.0
    got[rng.random(want.shape) < 0.0005] = np.nan
    got[rng.random(want.shape) < 0.0005] = np.inf
    mask = rng.random(want.shape) < density
    # reference verdict: the selected elements gathered and compared whole (no mask at all)
    sel_got, sel_want = got[mask].reshape(1, -1), want[mask].reshape(1, -1)
    expect = mismatch(sel_got, sel_want, 1e-4, 1e-2) if sel_got.size else ""
    said = mismatch(got, want, 1e-4, 1e-2, mask=mask)
    for finite in (False, True):
        assert mismatch(got, want, 1e-4, 1e-2, mask=mask, finite=finite) == said
    assert bool(said) == bool(expect)
    if said:      # the same count of bad elements, and the first one is the first selected bad element
        assert said.split(" ")[0] == expect.split(" ")[0]
        flat = np.flatnonzero(mask.reshape(-1))
        first_sel = int(expect.split("first at [0, ")[1].split("]")[0])
        assert f"first at {[int(i) for i in np.unravel_index(flat[first_sel], want.shape)]}" in said


def test_the_finiteness_pass_is_skipped_only_where_it_cannot_matter():
    want = np.ones((4, 4), np.float32)
    assert finite_tolerance(want, 1e-4, 1e-2) and finite_tolerance(np.arange(4), 0, 0)
    assert not finite_tolerance(np.array([1.0, np.inf], np.float32), 1e-4, 1e-2)
    assert not finite_tolerance(np.array([3e38], np.float32), 0.0, 10.0)      # its tolerance overflows
    for bad in (np.nan, -np.inf):                                             # anywhere, either sign
        for at in (0, 7, 15):
            x = np.linspace(-2, 3, 16, dtype=np.float32)
            x[at] = bad
            assert not finite_tolerance(x, 1e-4, 1e-2), (bad, at)
    assert not finite_tolerance(np.array([-3e38, 1.0], np.float32), 0.0, 10.0)  # the largest magnitude is negative
    got = want.copy()
    got[1, 1], got[2, 2] = np.inf, -np.inf
    assert mismatch(got, want, 1e-4, 1e-2, finite=True) == mismatch(got, want, 1e-4, 1e-2)
    assert mismatch(got, want, 1e-4, 1e-2).startswith("2 of 16")


def test_a_transposed_strided_tile_is_the_plain_transpose():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((2, 128, 2048)).astype(np.float32)
    tile = big[:, :, 3::4][:, :, :128]
    np.testing.assert_array_equal(_transposed(tile), tile.swapaxes(1, 2))
    np.testing.assert_array_equal(_transposed(np.empty((0, 4, 5))), np.empty((0, 5, 4)))


KERNELS = [("maxpool", "tuned"), ("conv1d", "tuned"), ("transpose-small", "tuned"), ("gemm-1024", "naive")]


@pytest.mark.system
@pytest.mark.parametrize("name,role", KERNELS)
def test_the_check_marked_through_strided_views_is_the_one_marked_by_index(name, role, monkeypatch):
    tgt = get_target("trainium-sim")
    p = tgt.problem(name)
    spec = tgt.spec(p)
    (trace, _), failure = tgt._trace(spec, p.kernel_source(role), tgt.options.limits)
    assert failure is None
    tensors = decode_tensors(trace["tensors"], 1 << 40)
    _, outs = io_tensors(trace, tensors, spec)
    _, last = uses(trace["instrs"], tensors)
    rp = Replayer(tensors, {}, 0, last_use(last), compute=False)
    steps = rp.decode(pickle.loads(pickle.dumps(trace["instrs"])))

    def plan(seed):
        check, unwritten = slicing.plan(steps, rp.decoded, tensors, outs, 4, np.random.default_rng(seed))
        assert unwritten is None
        return check

    fast = [plan(seed) for seed in range(2)]
    monkeypatch.setattr(slicing, "strided_view", lambda *a, **k: None)
    for seed, f in enumerate(fast):
        plain = plan(seed)
        assert (f.needed, f.checked, f.elements, f.writes) == (plain.needed, plain.checked, plain.elements,
                                                                plain.writes)
        for o in outs:
            np.testing.assert_array_equal(f.masks[o], plain.masks[o])


@pytest.mark.system
def test_an_evaluation_leaves_no_cyclic_garbage():
    """Everything an evaluation builds is freed by reference counting as it returns (the collector, paused
    during the evaluation, then has nothing to scan)."""
    tgt = get_target("trainium-sim")
    p = tgt.problem("rope")
    tgt.evaluate(p, p.kernel_source("tuned"))
    gc.collect()
    gc.disable()
    try:
        gc.set_debug(gc.DEBUG_SAVEALL)
        r = tgt.evaluate(p, p.kernel_source("tuned"))
        assert r.correct, r.error
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, (Replayer, replay.Step))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not left


@pytest.mark.system
def test_an_evaluation_says_where_its_time_went():
    """feedback["seconds"]: the trace, the decoding, the values and the timing, which together are the evaluation
    but for its set-up (the speed bench lists the values' share of each evaluation over its goal)."""
    tgt = get_target("trainium-sim")
    p = tgt.problem("rmsnorm")
    r = tgt.evaluate(p, p.kernel_source("tuned"))
    assert r.correct, r.error
    seconds = r.feedback["seconds"]
    assert list(seconds) == ["trace", "decode", "values", "timing"]
    assert all(s >= 0 for s in seconds.values()) and 0 < sum(seconds.values()) <= r.wall_s
    assert "seconds" not in r.feedback_text       # wall times are no business of the prompt


def _step_by_step_scan(prev, d0, d1):
    out = np.empty(d0.shape, np.float32)
    for i in range(d0.shape[-1]):
        prev = out[..., i] = d0[..., i] * prev + d1[..., i]
    return out


@pytest.mark.parametrize("sets", [0, 1, 2])
def test_the_in_place_multiply_add_scan_rounds_as_the_step_by_step_loop(sets):
    """The scan laid out column-contiguous and stepped in place gives the loop's values bit for bit: decays,
    runs of ones (one accumulate pass), restarts, nan and inf, a broadcast (zero-stride) data0, a dry run."""
    from autocomp_zmq.hw_runners.trainium_sim.engine_ops import _multiply_add_scan
    rng = np.random.default_rng(sets)
    d0 = rng.uniform(0.2, 1.1, (sets, 16, 300)).astype(np.float32)
    d0[..., 40:90] = 1.0
    d0[..., 95] = 0.0
    d0[..., 2, 7] = np.nan
    d1 = (rng.standard_normal((sets, 16, 300)) * 1e3).astype(np.float32)
    d1[..., 3, 120] = np.inf
    prev = (rng.standard_normal((sets, 16)) * 1e7).astype(np.float32)
    for a, b in ((d0, d1), np.broadcast_arrays(d0[:, :1], d1)):
        got = _multiply_add_scan(prev, a, b)
        assert got.shape == a.shape and got.dtype == np.float32
        assert np.array_equal(got, _step_by_step_scan(prev, a, b), equal_nan=True)


def _row(const: int, rows: int, cols: int) -> list:
    """The access [const + i, j] of a (rows, cols) tile, as the front end records it."""
    return [[const, [[rows, 2, 0, 1]]], [0, [[cols, 2, 1, 1]]]]


def _decode(tensors: list, instrs: list) -> Replayer:
    rp = Replayer(decode_tensors(tensors, 1 << 30), {}, 0, compute=False)
    rp.decode(instrs)
    return rp


def test_an_instruction_of_a_known_form_still_has_its_bounds_checked():
    """Loads of one form at three offsets: the first is checked in full, the second takes its Step, the third
    reaches past the tensor and is refused all the same (bounds are checked on every access)."""
    tensors = [["hbm", [256, 64], "float32", 0, 1, -1]] + [["sbuf", [128, 64], "float32", 0, 2, -1]] * 3
    load = [["dma", "dma", [[1 + n, _row(0, 128, 64)]], [[0, _row(at, 128, 64)]], {}, 3]
            for n, at in enumerate((0, 128))]
    rp = _decode(tensors, load)
    assert len(rp.known.forms) == 1
    first, second = rp.steps
    assert (second.reads[0].lo, second.writes[0].tensor.tid) == ((128, 0), 2)
    assert {k: v for k, v in vars(first).items() if k not in ("reads", "writes")} == \
        {k: v for k, v in vars(second).items() if k not in ("reads", "writes")}
    with pytest.raises(replay.StreamError, match="out of bounds"):
        _decode(tensors, load + [["dma", "dma", [[3, _row(0, 128, 64)]], [[0, _row(192, 128, 64)]], {}, 4]])


def test_a_form_names_its_operands_dtypes_so_a_mixed_precision_matmul_is_checked_anew():
    """Two matmuls alike but for the dtype of the moving tile: the second is a new form, checked in full, and
    refused (an fp8 stationary takes no fp32 moving tile)."""
    tensors = [["sbuf", [128, 128], "float8_e4m3", 0, 1, -1], ["sbuf", [128, 512], "float8_e4m3", 0, 1, -1],
               ["sbuf", [128, 512], "float32", 0, 1, -1], ["psum", [128, 512], "float32", 0, 2, -1]]
    mm = [["matmul", "pe", [[3, _row(0, 128, 512)]], [[0, _row(0, 128, 128)], [m, _row(0, 128, 512)]], {}, 5]
          for m in (1, 1)]
    assert len(_decode(tensors, mm).known.forms) == 1
    mixed = ["matmul", "pe", [[3, _row(0, 128, 512)]], [[0, _row(0, 128, 128)], [2, _row(0, 128, 512)]], {}, 6]
    with pytest.raises(replay.StreamError, match="line 6: a float32 operand needs a float32 partner"):
        _decode(tensors, mm + [mixed])


def _step_fields(st) -> tuple:
    accesses = [(a.tensor.tid, a.shape, a.lo, a.hi, a.run_bytes, a.axis0_is_partition, a.dense, a.strided, a.lanes)
                for a in st.reads + st.writes]
    return (st.op, st.engine, st.site, st.fn, st.partitions, st.free, st.moving, st.stationary, st.fp32_matmul,
            st.psum_read, st.dma_bytes, st.run_bytes, st.extra, len(st.reads), accesses)


class _Forgetful(dict):
    """A form table that remembers nothing: every instruction checked in full, as before forms were kept."""

    def __setitem__(self, key, value) -> None:
        pass


DECODED = ["attention", "conv1d", "conv2d-small", "csa-2048", "cumsum", "gemm-1024", "layernorm", "mamba",
           "maxpool", "rmsnorm", "rope", "sd-attention", "transpose-small"]


@pytest.mark.system
@pytest.mark.parametrize("name", DECODED)
def test_instructions_of_known_forms_decode_to_the_steps_a_full_check_gives(name):
    """Every built-in kernel of these problems decodes to the same Steps, accesses and decoded operands
    whether each instruction is checked in full or takes the Step of its form's first instruction."""
    tgt = get_target("trainium-sim")
    p = tgt.problem(name)
    spec = tgt.spec(p)
    try:
        for role in ("naive", "tuned"):
            (trace, _), failure = tgt._trace(spec, p.kernel_source(role), tgt.options.limits)
            assert failure is None
            tensors = decode_tensors(trace["tensors"], 1 << 40)
            full = Replayer(tensors, {}, 0, compute=False)
            full.known.forms = _Forgetful()
            kept = Replayer(tensors, {}, 0, compute=False)
            want, got = full.decode(trace["instrs"]), kept.decode(trace["instrs"])
            assert len(kept.known.forms) < len(got)         # forms repeat: most instructions took a known Step
            assert [_step_fields(s) for s in got] == [_step_fields(s) for s in want]
            for (run_a, reads_a, writes_a, attrs_a, mask_a, what_a), (run_b, reads_b, writes_b, attrs_b, mask_b,
                                                                      what_b) in zip(kept.decoded, full.decoded):
                assert (run_a, attrs_a, what_a, mask_a is None) == (run_b, attrs_b, what_b, mask_b is None)
                assert [getattr(a, "lo", a) for a in reads_a + writes_a] == \
                    [getattr(b, "lo", b) for b in reads_b + writes_b]
    finally:
        tgt.close()


@pytest.mark.system
@pytest.mark.parametrize("name,role", [("transpose-small", "naive"), ("sd-attention", "tuned"), ("rmsnorm", "naive")])
def test_an_instruction_the_compiler_places_runs_on_the_plan_placing_it_made(name, role, monkeypatch):
    """EngineTiming.run takes the plan that place() made for the engine it chose (nothing ran in between) instead
    of planning it again: every timeline is the one planned anew gives."""
    from autocomp_zmq.hw_runners.trainium_sim import costmodel
    tgt = get_target("trainium-sim")
    p = tgt.problem(name)
    spec = tgt.spec(p)
    params = tgt._params("trn1")
    (trace, _), failure = tgt._trace(spec, p.kernel_source(role), tgt.options.limits)
    assert failure is None
    tensors = decode_tensors(trace["tensors"], 1 << 40)
    first, last = uses(trace["instrs"], tensors)

    def timeline():
        steps = Replayer(tensors, {}, 0, compute=False).decode(trace["instrs"])
        tl = costmodel.simulate(steps, costmodel.layout(tensors, first, last, params), params, None, trace["loops"])
        return (tl.total_ns, dict(tl.busy_ns), dict(tl.waits_ns), dict(tl.site_ns), dict(tl.counts), tl.dma_bytes,
                tl.dma_small_rows, tl.spill_bytes)

    reused = timeline()
    planned = costmodel.EngineTiming.run

    def run_planned_anew(self, st, ready, cause, plan=None):
        return planned(self, st, ready, cause)

    monkeypatch.setattr(costmodel.EngineTiming, "run", run_planned_anew)
    assert timeline() == reused
    if name == "transpose-small":       # its copies are placed by the compiler: the reused plans were taken
        assert any(st.extra.get("engines") for st in Replayer(tensors, {}, 0, compute=False).decode(trace["instrs"]))
    tgt.close()


@pytest.mark.parametrize("seed", range(4))
def test_recording_an_access_to_exactly_one_segment_in_place_leaves_what_merging_leaves(seed):
    """deps.Buffer.record updates the records of the one segment an access covers exactly in place: every wait
    and every segment's records are those of the general merge, over tiles accessed whole, in parts and across."""
    from autocomp_zmq.hw_runners.trainium_sim.deps import Buffer

    class Merging(Buffer):
        def record(self, p0, p1, f0, f1, is_write, end, engine):
            self._merge(*self._span(f0, f1), p0, p1, f0, f1, is_write, end, engine)

    rng = np.random.default_rng(seed)
    fast, plain = Buffer(), Merging()
    for n in range(3000):
        tile = int(rng.integers(8))
        f0, f1 = tile * 512, tile * 512 + 511
        if rng.random() < 0.2:      # a part of a tile, or across two
            f0 += int(rng.integers(256))
            f1 += int(rng.integers(-256, 512))
        p0 = int(rng.integers(2)) * 64
        p1 = p0 + int(rng.integers(1, 65)) - 1
        w = bool(rng.random() < 0.5)
        assert fast.ready(p0, p1, f0, f1, w) == plain.ready(p0, p1, f0, f1, w)
        for b in (fast, plain):
            b.record(p0, p1, f0, f1, w, float(n), "dve" if w else "act")
        assert (fast.starts, fast.ends, fast.recs) == (plain.starts, plain.ends, plain.recs)
