"""The value check of a trainium-sim evaluation (slicing.py): exact coverage of every output element, values
on the secretly drawn final writes, and only what they depend on computed, with the same values as a full
replay. Each wrong kernel here is one a search could produce."""
from __future__ import annotations

import pickle
import tempfile
from pathlib import Path

import numpy as np
import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.trainium_sim import slicing
from autocomp_zmq.hw_runners.trainium_sim.liveness import last_use, uses
from autocomp_zmq.hw_runners.trainium_sim.program import decode_tensors
from autocomp_zmq.hw_runners.trainium_sim.replay import Replayer
from autocomp_zmq.hw_runners.trainium_sim.tracer import io_tensors
from tests.trainium_sim.simkit import SimKit, explain, ok

pytestmark = pytest.mark.system

ROWS, COLS = 1024, 512          # 8 x 4 tiles of 128 x 128: 32 output writes

TILED = """
@nki.jit
def solution(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.static_range(8):
        for j in nl.static_range(4):
            t = nl.load(a[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128])
            BODY
    return out
"""
GOOD = "nl.store(out[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128], nl.exp(t))"


def tiled(body: str) -> str:
    return TILED.replace("BODY", body.replace("\n", "\n            "))


@pytest.fixture(scope="module")
def kit():
    with tempfile.TemporaryDirectory() as tmp:
        k = SimKit(Path(tmp), check_regions=2, full_check_elements=0)
        k.prob = k.problem({"a": ((ROWS, COLS), "float32")}, {"out": ((ROWS, COLS), "float32")},
                           "def reference(a):\n    return np.exp(a)\n")
        yield k


def test_a_partial_check_computes_only_what_it_checks(kit):
    r = kit.evaluate(kit.prob, tiled(GOOD))
    ok(r)
    text = r.feedback["value_check"]
    assert "values checked on" in text and "every element is written" in text, text
    checked, total = (int(x.replace(",", "")) for x in text.split("values checked on ")[1].split(" output")[0]
                      .split(" of "))
    assert 0 < checked < total == ROWS * COLS
    computed, instructions = (int(x.replace(",", "")) for x in text.split("written; ")[1].split(" instructions")[0]
                              .split(" of "))
    assert computed < instructions == 3 * 32


def test_checking_everything_gives_the_same_verdict_and_latency():
    with tempfile.TemporaryDirectory() as tmp:
        full = SimKit(Path(tmp), check_regions=0)
        p = full.problem({"a": ((ROWS, COLS), "float32")}, {"out": ((ROWS, COLS), "float32")},
                         "def reference(a):\n    return np.exp(a)\n")
        r = full.evaluate(p, tiled(GOOD))
        ok(r)
        assert r.feedback["value_check"] == "every output element checked"
        partial = SimKit(Path(tmp) / "p", check_regions=2, full_check_elements=0)
        q = partial.problem({"a": ((ROWS, COLS), "float32")}, {"out": ((ROWS, COLS), "float32")},
                            "def reference(a):\n    return np.exp(a)\n")
        assert partial.evaluate(q, tiled(GOOD)).latency == r.latency


@pytest.mark.parametrize("skip", ["i == 3 and j == 2", "i == 7 and j == 3", "i == 0 and j == 0"])
def test_a_skipped_tile_is_caught_whatever_is_drawn(kit, skip):
    for _ in range(3):
        r = kit.evaluate(kit.prob, tiled(f"if not ({skip}):\n    {GOOD}"))
        assert not r.correct and r.error_kind == "wrong_result", explain(r)
        assert f"{128 * 128:,} of {ROWS * COLS:,} elements of output #0 are never written" in r.error, r.error


def test_a_single_unwritten_element_is_caught(kit):
    body = ("i_p = nl.arange(128)[:, None]\ni_f = nl.arange(128)[None, :]\n"
            "if i == 4 and j == 1:\n"
            "    nl.store(out[i * 128 + i_p, j * 128 + i_f], nl.exp(t), mask=(i_p < 127))\n"
            f"else:\n    {GOOD}")
    r = kit.evaluate(kit.prob, tiled(body))
    assert not r.correct and "128 of" in r.error and "never written" in r.error, explain(r)


@pytest.mark.parametrize("wrong", [
    "i == 7",                      # the last row of tiles (a remainder mishandled): a face of the output
    "j == 0",                      # the first column of tiles
    "i == 0 and j == 3",           # a corner tile
    "(i + j) % 2 == 0",            # half of the tiles
])
def test_a_wrong_tile_pattern_is_caught_on_every_draw(kit, wrong):
    body = f"if {wrong}:\n    nl.store(out[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128], nl.exp(t) * 1.5)\n" \
           f"else:\n    {GOOD}"
    with tempfile.TemporaryDirectory() as tmp:
        k = SimKit(Path(tmp), check_regions=16, full_check_elements=0)
        p = k.problem({"a": ((ROWS, COLS), "float32")}, {"out": ((ROWS, COLS), "float32")},
                      "def reference(a):\n    return np.exp(a)\n")
        for _ in range(4):
            r = k.evaluate(p, tiled(body))
            assert not r.correct and r.error_kind == "wrong_result", explain(r)
            assert "checked elements outside" in r.error, r.error


# -- the slice computes exactly what a full replay computes, on what it checks ---------------------------
KERNELS = [("gemm-1024", "naive"), ("gemm-1024", "tuned"), ("csa-2048", "tuned"), ("conv2d-small", "tuned"),
           ("transpose-small", "tuned"), ("mamba", "tuned"), ("layernorm", "tuned"), ("attention", "tuned"),
           ("cumsum", "tuned"), ("rope", "tuned")]


def _replay(tgt, trace, spec, needed_of):
    tensors = decode_tensors(trace["tensors"], 1 << 40)
    ins, outs = io_tensors(trace, tensors, spec)
    stacked, expected = tgt._prepared(spec, 0)
    _, last = uses(trace["instrs"], tensors)
    rp = Replayer(tensors, {tid: stacked[t.name] for tid, t in zip(ins, spec.inputs)}, len(expected),
                  last_use(last), rounded=True)
    steps = rp.decode(trace["instrs"])
    check = needed_of(steps, rp, tensors, outs)
    rp.execute(check.needed if check else None)
    return rp, outs, check, steps


@pytest.mark.parametrize("name,role", KERNELS)
def test_sliced_replay_equals_full_replay_on_the_checked_elements(name, role):
    tgt = get_target("trainium-sim")
    p = tgt.problem(name)
    spec = tgt.spec(p)
    (trace, _), failure = tgt._trace(spec, p.kernel_source(role), tgt.options.limits)
    assert failure is None
    trace = pickle.loads(pickle.dumps(trace))
    full, outs, _, steps = _replay(tgt, trace, spec, lambda *a: None)
    checks = []
    for seed in range(3):
        def sliced(steps, rp, tensors, outs):
            check, unwritten = slicing.plan(steps, rp.decoded, tensors, outs, 4, np.random.default_rng(seed))
            assert unwritten is None
            checks.append(check)
            return check
        part, outs2, check, _ = _replay(tgt, trace, spec, sliced)
        for o in outs:
            want, got = full._array(o), part._array(o)
            m = check.masks[o]
            sel = (slice(None),) if m is None else (slice(None), m)
            np.testing.assert_array_equal(got[sel], want[sel])
            assert not np.isnan(want).any()
    # the check is partial where the output has many writes, and what it computes is a fraction
    if checks[0].needed is not None:
        assert sum(checks[0].needed) < len(steps)
        assert 0 < checks[0].checked < checks[0].elements


def test_small_outputs_are_checked_in_full(kit):
    """Up to full_check_elements output elements (default 2^20) everything is computed and compared: a
    kernel wrong in one of its 32 writes fails on every evaluation."""
    with tempfile.TemporaryDirectory() as tmp:
        k = SimKit(Path(tmp))
        p = k.problem({"a": ((ROWS, COLS), "float32")}, {"out": ((ROWS, COLS), "float32")},
                      "def reference(a):\n    return np.exp(a)\n")
        r = k.evaluate(p, tiled(GOOD))
        ok(r)
        assert r.feedback["value_check"] == "every output element checked"
        wrong = f"if i == 5 and j == 2:\n    nl.store(out[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128], " \
                f"nl.exp(t) * 1.5)\nelse:\n    {GOOD}"
        r = k.evaluate(p, tiled(wrong))
        assert not r.correct and "of 524,288 elements outside" in r.error, explain(r)


def test_a_strided_store_writes_what_an_indexed_store_writes():
    """Affine stores go through a strided view of the destination (replay.store); overlapping ones, which a
    view cannot express as 'last write wins', keep the index arrays."""
    from types import SimpleNamespace

    from autocomp_zmq.hw_runners.trainium_sim.replay import _one_to_one, store
    rng = np.random.default_rng(0)
    # a [32, 3, 4] tile into a (2 sets, 4, 8, 3, 5) array: tile partition p -> (p // 8, p % 8), the middle tile
    # axis steps through dim 2 and the last through columns 1..4 of dim 3
    p, m, w = np.meshgrid(np.arange(32), np.arange(3), np.arange(4), indexing="ij")
    index = (slice(None), p // 8, p % 8, m, w + 1)
    strided = (1, (15, 5, 1))         # row-major strides (120, 15, 5, 1) of (4, 8, 3, 5): p -> 15, m -> 5, w -> 1
    assert _one_to_one((32, 3, 4), strided[1])
    value = rng.standard_normal((2, 32, 3, 4)).astype(np.float32)
    by_index, by_view = np.zeros((2, 4, 8, 3, 5), np.float32), np.zeros((2, 4, 8, 3, 5), np.float32)
    by_index[index] = value
    store(by_view, SimpleNamespace(index=index, shape=(32, 3, 4), strided=strided), value, None)
    assert np.array_equal(by_index, by_view)
    # overlapping windows and a broadcast axis reach elements twice: not one-to-one
    assert not _one_to_one((4, 3), (1, 1)) and not _one_to_one((4, 3), (0, 1)) and _one_to_one((1, 4), (0, 1))


def test_a_full_check_catches_an_interior_tile_the_sample_can_miss(kit):
    """Issue 39: a kernel wrong in one interior tile passes a sampled check when no drawn point lands in it (a
    2048 GEMM with one wrong 128x512 tile passed 8 of 10 times). A sampled verdict says so (`sampled`), and
    full=True, which a search asks for before a kernel becomes a parent or its result, computes and compares
    every element: the wrong tile fails every time."""
    wrong = f"if i == 3 and j == 2:\n    nl.store(out[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128], " \
            f"nl.exp(t) * 1.5)\nelse:\n    {GOOD}"
    with tempfile.TemporaryDirectory() as tmp:
        k = SimKit(Path(tmp), check_regions=1, full_check_elements=0)
        p = k.problem({"a": ((ROWS, COLS), "float32")}, {"out": ((ROWS, COLS), "float32")},
                      "def reference(a):\n    return np.exp(a)\n")
        good = k.evaluate(p, tiled(GOOD))
        ok(good)
        assert good.sampled and "values checked on" in good.feedback["value_check"]
        whole = k.evaluate(p, tiled(GOOD), full=True)
        ok(whole)
        assert not whole.sampled and whole.feedback["value_check"] == "every output element checked"
        assert whole.latency == good.latency
        for _ in range(3):
            r = k.evaluate(p, tiled(wrong), full=True)
            assert not r.correct and "of 524,288 elements outside" in r.error, explain(r)
