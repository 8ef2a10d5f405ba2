"""problems.toml, the problem families (arguments, numpy references, inputs)."""
from __future__ import annotations

import re
import tomllib

import numpy as np
import pytest

from autocomp_zmq.hw_runners import get_target, target_names
from autocomp_zmq.hw_runners.base import UnknownProblemError, UnknownTargetError, target_info
from autocomp_zmq.hw_runners.gemmini_sim.workloads import FAMILIES, INPUT_SETS, load_problems

PROBLEM_DIR = target_info("gemmini-sim").problems

SPEC = tomllib.loads((PROBLEM_DIR / "problems.toml").read_text())
PROBLEMS = load_problems("gemmini-sim", PROBLEM_DIR)


def test_every_toml_entry_is_a_problem(sim):
    expected = [f"gemm-{i}x{j}x{k}" for i, j, k in (e["dims"] for e in SPEC["gemm"])]
    expected += [f"conv3x3-{p}-{c}" for p, c in (e["dims"] for e in SPEC["conv3x3"])]
    expected += ["tinympc-u"] + [f"tinympc-{kind}-{n}" for kind in ("forward", "backward")
                                 for (n,) in (e["dims"] for e in SPEC[f"tinympc_{kind}"])]
    names = [p.name for p in sim.problems()]
    assert names == expected
    assert len(set(names)) == len(names) == 22   # 15 GEMMs, 4 convolutions, TinyMPC's 3 ADMM workloads (fp32)
    for name in expected:
        p = sim.problem(name)
        assert p.name == name and p.target == "gemmini-sim"


def test_problem_names_dims_and_descriptions():
    for p in PROBLEMS:
        if p.family.startswith("tinympc_"):   # test_tinympc.py
            assert set(p.kernels) == {"naive", "baseline"}
            continue
        if p.family == "gemm":
            m = re.fullmatch(r"gemm-(\d+)x(\d+)x(\d+)", p.name)
            assert m and p.dims == {"I": int(m[1]), "J": int(m[2]), "K": int(m[3])}
            assert "Entry point: void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J])" in p.description
        else:
            m = re.fullmatch(r"conv3x3-(\d+)-(\d+)", p.name)
            assert p.family == "conv3x3" and m and p.dims == {"P": int(m[1]), "C": int(m[2])}
        assert "Sizes: " + ", ".join(f"{k}={v}" for k, v in p.dims.items()) + "." in p.description
        assert set(p.kernels) == {"naive", "baseline", "tuned", "hwloop"}
        assert all(v % 16 == 0 for v in p.dims.values() if p.family == "gemm")
    tagged = {p.name for p in PROBLEMS if "resnet50" in p.tags}
    assert "gemm-512x512x512" in tagged and "gemm-256x256x256" not in tagged


def test_gemm_kernel_files_exist():
    for p in PROBLEMS:
        if p.family.startswith("tinympc_"):   # test_tinympc.py
            assert set(p.kernels) == {"naive", "baseline"}
            continue
        if p.family == "gemm":
            for role in p.kernels:
                assert "void solution" in p.kernel_source(role)


def test_conv_kernel_files_exist():
    convs = [p for p in PROBLEMS if p.family == "conv3x3"]
    assert convs
    for p in convs:
        for role in p.kernels:
            assert "void solution(int8_t inp[4][P + 2][P + 2][C]" in p.kernel_source(role)


def test_unknown_names():
    assert "gemmini-sim" in target_names()
    with pytest.raises(UnknownTargetError, match="unknown target 'nope'; available: .*gemmini-sim"):
        get_target("nope")
    with pytest.raises(UnknownProblemError, match="has no problem 'gemm-1x1'; known: gemm-512x512x512.*; or any "
                                                  r"gemm-IxJxK \(any sizes >= 1\), conv3x3-P-C"):
        get_target("gemmini-sim").problem("gemm-1x1")


def test_gemm_family_semantics():
    fam = FAMILIES["gemm"]
    d = {"I": 32, "J": 48, "K": 16}
    args = fam.args(d)
    assert [(a.name, a.dtype, a.shape, a.output) for a in args] == [
        ("A", np.int8, (32, 16), False), ("B", np.int8, (16, 48), False), ("C", np.int8, (32, 48), True)]
    assert fam.macs(d) == 32 * 48 * 16
    assert fam.compulsory_bytes(d) == (32 * 16 + 16 * 48, 32 * 48)
    assert fam.defines(d) == ["-DAUTOCOMP_GEMM", "-DI=32", "-DJ=48", "-DK=16"]
    assert fam.name(d) == "gemm-32x48x16"


def test_gemm_reference_saturates_exactly():
    fam = FAMILIES["gemm"]
    d = {"I": 3, "J": 2, "K": 4}
    a = np.array([[127, 127, 127, 127], [-128, -128, -128, -128], [1, -1, 2, 0]], dtype=np.int8)
    b = np.array([[1, -1], [1, -1], [1, -1], [1, 0]], dtype=np.int8)
    want = np.array([[127, -128], [-128, 127], [2, -2]], dtype=np.int8)
    got = fam.reference(d, [a, b])
    assert got.dtype == np.int8 and np.array_equal(got, want)
    rng = np.random.default_rng(1)
    d = {"I": 16, "J": 32, "K": 2048}
    a = rng.integers(-128, 128, (16, 2048), dtype=np.int8)
    b = rng.integers(-128, 128, (2048, 32), dtype=np.int8)
    exact = np.clip(a.astype(np.int64) @ b.astype(np.int64), -128, 127)
    assert np.array_equal(fam.reference(d, [a, b]), exact)


def slow_conv(inp, w, bias, P, Cch):
    out = np.zeros((4, P, P, Cch), dtype=np.int64)
    for n in range(4):
        for p in range(P):
            for q in range(P):
                for k in range(Cch):
                    acc = int(bias[0, k])
                    for r in range(3):
                        for s in range(3):
                            for c in range(Cch):
                                acc += int(inp[n, p + r, q + s, c]) * int(w[r, s, c, k])
                    out[n, p, q, k] = acc
    return np.clip(out, -128, 127).astype(np.int8)


@pytest.mark.parametrize("P,Cch", [(2, 3), (3, 2), (4, 5)])
@pytest.mark.parametrize("kind", INPUT_SETS)
def test_conv_reference_matches_direct_loops(P, Cch, kind):
    fam = FAMILIES["conv3x3"]
    d = {"P": P, "C": Cch}
    inp, w, bias = fam.make_inputs(d, 7, kind)
    assert inp.shape == (4, P + 2, P + 2, Cch) and w.shape == (3, 3, Cch, Cch) and bias.shape == (1, Cch)
    assert bias.dtype == np.int32
    assert np.array_equal(fam.reference(d, [inp, w, bias]), slow_conv(inp, w, bias, P, Cch))


def test_conv_family_semantics():
    fam = FAMILIES["conv3x3"]
    d = {"P": 14, "C": 128}
    assert fam.macs(d) == 4 * 14 * 14 * 128 * 9 * 128
    assert fam.reduction_length(d) == 9 * 128
    assert fam.defines(d) == ["-DAUTOCOMP_CONV3X3", "-DP=14", "-DC=128", "-DK=128"]
    assert [a.name for a in fam.args(d)] == ["inp", "weights", "bias", "output"]
    assert fam.compulsory_bytes(d) == (4 * 16 * 16 * 128 + 9 * 128 * 128 + 4 * 128, 4 * 14 * 14 * 128)


@pytest.mark.parametrize("family,dims", [("gemm", {"I": 64, "J": 32, "K": 256}), ("conv3x3", {"P": 4, "C": 16})])
def test_inputs_are_deterministic_per_seed(family, dims):
    fam = FAMILIES[family]
    for kind in INPUT_SETS:
        x, y, z = fam.make_inputs(dims, 3, kind), fam.make_inputs(dims, 3, kind), fam.make_inputs(dims, 4, kind)
        assert all(np.array_equal(a, b) for a, b in zip(x, y))
        assert not all(np.array_equal(a, c) for a, c in zip(x, z))
    # the three sets differ from one another
    sets = [fam.make_inputs(dims, 3, kind)[0] for kind in INPUT_SETS]
    assert not np.array_equal(sets[0], sets[1]) and not np.array_equal(sets[0], sets[2])


def test_input_set_distributions():
    fam = FAMILIES["gemm"]
    d = {"I": 128, "J": 128, "K": 256}
    full, _ = fam.make_inputs(d, 0, "full-range")
    sparse, _ = fam.make_inputs(d, 0, "sparse")
    small, _ = fam.make_inputs(d, 0, "small-values")
    assert full.min() == -128 and full.max() == 127
    assert 0.85 < np.mean(sparse == 0) < 0.95
    bound = round(np.sqrt(150 / np.sqrt(256)))
    assert np.abs(small).max() == bound
    # small values keep the reference mostly unsaturated, full range mostly saturated
    ref_small = fam.reference(d, fam.make_inputs(d, 0, "small-values"))
    ref_full = fam.reference(d, fam.make_inputs(d, 0, "full-range"))
    assert np.mean(np.abs(ref_small.astype(int)) >= 127) < 0.2
    assert np.mean(np.abs(ref_full.astype(int)) >= 127) > 0.8
