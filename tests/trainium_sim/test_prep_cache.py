"""A problem's preparation kept on disk (prepcache.py): a second evaluator loads the public input set and its
expected outputs by the problem's content hash instead of computing them; a damaged entry is ignored and
rebuilt; hidden sets are never written; the directory follows AUTOCOMP_CACHE and stays within its budget."""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from autocomp_zmq.hw_runners.trainium_sim import prepcache
from autocomp_zmq.hw_runners.trainium_sim.prepcache import PrepCache, as_compared, key
from autocomp_zmq.hw_runners.trainium_sim.target import Options, TrainiumSim
from autocomp_zmq.hw_runners.trainium_sim.workloads import TensorSpec, parametric_problem

PROBLEM = "rmsnorm"
# a target's options find the sandbox's toolchain (a process): the tests that build one are system tests
system = pytest.mark.system


def _sim(tmp_path, **kw) -> TrainiumSim:
    return TrainiumSim(prep_cache_dir=tmp_path, **kw)


def _spec(name: str):
    """A parametric problem's definition, without a target."""
    return parametric_problem("trainium-sim", TrainiumSim.info().problems, name).semantics


def _entry(spec) -> tuple[dict, tuple]:
    inputs = spec.make_inputs([0, 0])
    return inputs, tuple(np.ascontiguousarray(x, np.float32) for x in spec.reference(inputs))


def _prepared(sim: TrainiumSim, name: str = PROBLEM):
    spec = sim.spec(sim.problem(name))
    return spec, sim._prepared(spec, 0)


@system
def test_a_second_evaluator_loads_the_public_set_it_would_have_computed(tmp_path):
    spec, (stacked, expected) = _prepared(_sim(tmp_path))
    entries = list(tmp_path.glob("*.npz"))
    assert [p.name for p in entries] == [f"{key(spec, [0, 0])}.npz"]
    again, (stacked2, expected2) = _prepared(_sim(tmp_path))
    assert again is spec
    for t in spec.inputs:       # set 0 is the public set: the same values; set 1 is hidden: drawn afresh
        assert np.array_equal(stacked2[t.name][0], stacked[t.name][0])
        assert not np.array_equal(stacked2[t.name][1], stacked[t.name][1])
    assert all(np.array_equal(a, b) for a, b in zip(expected2[0], expected[0]))
    fresh = spec.make_inputs([0, 0])
    assert all(np.array_equal(stacked2[t.name][0], fresh[t.name]) for t in spec.inputs)


@system
def test_what_is_stored_is_what_is_used(tmp_path):
    """The second evaluator's expected outputs come from the file: an entry written with other values (as
    only a hand edit could) is what it compares against."""
    spec, (stacked, expected) = _prepared(_sim(tmp_path))
    cache = PrepCache(tmp_path)
    inputs = {t.name: stacked[t.name][0] for t in spec.inputs}
    cache.store(spec, [0, 0], inputs, tuple(x + 1 for x in expected[0]))
    _, (_, expected2) = _prepared(_sim(tmp_path))
    assert np.array_equal(expected2[0][0], expected[0][0] + 1)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "wrong shape", "missing output", "wrong dtype"])
def test_a_damaged_entry_is_ignored_and_can_be_rebuilt(tmp_path, damage):
    spec, cache = _spec("rmsnorm-128x128"), PrepCache(tmp_path)
    inputs, expected = _entry(spec)
    cache.store(spec, [0, 0], inputs, expected)
    path = tmp_path / f"{key(spec, [0, 0])}.npz"
    good = path.read_bytes()
    loaded = cache.load(spec, [0, 0])
    assert all(np.array_equal(loaded[0][n], inputs[n]) for n in inputs)
    assert all(np.array_equal(a, b) for a, b in zip(loaded[1], expected))
    if damage == "garbage":
        path.write_bytes(b"not an archive")
    elif damage == "truncated":
        path.write_bytes(good[:len(good) // 2])
    else:
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        if damage == "wrong shape":
            arrays["out_0"] = arrays["out_0"][:-1]
        elif damage == "wrong dtype":
            arrays["out_0"] = arrays["out_0"].astype(np.float64)
        else:
            del arrays["out_0"]
        with open(path, "wb") as f:
            np.savez(f, **arrays)
    assert cache.load(spec, [0, 0]) is None
    cache.store(spec, [0, 0], inputs, expected)          # what an evaluator does after a miss
    assert cache.load(spec, [0, 0]) is not None
    assert [p.name for p in tmp_path.iterdir()] == [path.name]      # no temporary file left behind


@system
def test_an_evaluator_rebuilds_a_damaged_entry(tmp_path):
    spec, (_, expected) = _prepared(_sim(tmp_path))
    path = tmp_path / f"{key(spec, [0, 0])}.npz"
    path.write_bytes(path.read_bytes()[:100])
    _, (_, expected2) = _prepared(_sim(tmp_path))
    assert all(np.array_equal(a, b) for a, b in zip(expected2[0], expected[0]))
    assert PrepCache(tmp_path).load(spec, [0, 0]) is not None


def test_the_key_follows_the_definition_and_the_seed():
    small, big = _spec("rmsnorm-128x128"), _spec("rmsnorm-256x128")
    assert key(small, [0, 0]) == key(_spec("rmsnorm-128x128"), [0, 0])
    assert len({key(small, [0, 0]), key(small, [1, 0]), key(big, [0, 0])}) == 3


def test_the_oldest_entries_go_once_the_budget_is_exceeded(tmp_path):
    specs = [_spec(f"rmsnorm-{n}x128") for n in (128, 256, 384)]
    cache = PrepCache(tmp_path, budget=1 << 30)
    for s in specs:
        cache.store(s, [0, 0], *_entry(s))
    for age, s in enumerate(specs):       # stored in this order (set apart: a coarse clock may tie them)
        os.utime(tmp_path / f"{key(s, [0, 0])}.npz", (1000 + age, 1000 + age))
    sizes = {p.name: p.stat().st_size for p in tmp_path.glob("*.npz")}
    assert len(sizes) == 3
    cache.load(specs[0], [0, 0])         # used: now the most recent
    cache.budget = sum(sizes.values()) - 1
    cache.prune()
    left = {p.name for p in tmp_path.glob("*.npz")}
    assert left == {f"{key(s, [0, 0])}.npz" for s in (specs[0], specs[2])}


@system
def test_no_disk_entry_with_a_zero_budget_and_the_default_directory_follows_autocomp_cache(tmp_path, monkeypatch):
    _prepared(_sim(tmp_path / "off", prep_cache_bytes=0))
    assert not (tmp_path / "off").exists()
    monkeypatch.setenv("AUTOCOMP_CACHE", str(tmp_path / "mine"))
    assert prepcache.default_dir() == tmp_path / "mine" / "trainium-sim-prep"
    _prepared(TrainiumSim())
    assert len(list((tmp_path / "mine" / "trainium-sim-prep").glob("*.npz"))) == 1
    with pytest.raises(ValueError, match="prep_cache_bytes"):
        Options(prep_cache_bytes=-1)


def test_outputs_are_compared_as_through_float64_without_the_float64_copy():
    """A floating output goes to float32 in one rounding, as float64 -> float32 rounds it (float16/32/64 are exact
    in float64); other results and other output dtypes still go through float64."""
    rng = np.random.default_rng(0)
    wide = rng.standard_normal((64, 48)) * 1e3 + 1e-9          # float64 values that float32 must round
    results = [wide, wide.T, wide.astype(np.float32).T, wide.astype(np.float16), np.arange(12).reshape(3, 4),
               (wide > 0), wide.astype(np.longdouble) * np.longdouble(1 + 2 ** -60), [[0.1, 0.2], [1e39, -1e39]]]
    for dtype in ("float32", "bfloat16", "int32"):
        for x in results:
            shape = np.shape(x)
            spec = dataclasses.replace(_spec("rmsnorm-128x128"), outputs=(TensorSpec("out", shape, dtype),))
            old = np.asarray(x, dtype=np.float64)
            with np.errstate(over="ignore"):        # 1e39 is inf in float32, either way
                want = np.ascontiguousarray(old, dtype=np.float32 if dtype != "int32" else np.float64)
                (got,) = as_compared(spec, (x,))
            assert got.dtype == want.dtype and got.flags.c_contiguous
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (dtype, np.asarray(x).dtype)


@system
def test_every_input_set_is_on_its_dtypes_grid_drawn_or_loaded(tmp_path):
    """The stacked sets are not rounded again (make_inputs rounds each set, the cache keeps what it made): the
    values a bf16 input holds are bf16 values whether drawn now or loaded from disk."""
    from autocomp_zmq.hw_runners.trainium_sim import ops
    for _ in range(2):                                      # drawn and stored, then loaded
        spec, (stacked, _) = _prepared(_sim(tmp_path), "gemm-1024")
        assert {t.dtype for t in spec.inputs} == {"bfloat16"}
        for t in spec.inputs:
            assert np.array_equal(stacked[t.name], ops.round_to(stacked[t.name], t.dtype))
    assert len(list(tmp_path.glob("*.npz"))) == 1
