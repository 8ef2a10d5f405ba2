"""fp8 on trainium-sim (NKI v2 nl.float8_e4m3 / float8_e4m3fn / float8_e5m2): values rounded to each format's grid
(hand-computed values, saturation-free overflow and specials), fp8 HBM inputs and SBUF/PSUM tiles, fp8 matmuls
correct against numpy and priced by AWS's figures (the bf16 rate without a performance mode, twice the FLOPs per
cycle with perf_mode=double_row on trn2/trn3), and what AWS refuses per NeuronCore, refused by name."""
from __future__ import annotations

import numpy as np
import pytest

from autocomp_zmq.hw_runners.trainium_sim.fp8 import round_fp8
from tests.trainium_sim.simkit import SimKit, explain, ok

INF, NAN = np.inf, np.nan
# (input, value held) per format, worked out by hand: e4m3 has 3 mantissa bits and bias 7 (largest finite
# 1.875 * 2^7 = 240, smallest subnormal 2^-9), e4m3fn the same grid up to 1.75 * 2^8 = 448 with no inf,
# e5m2 2 mantissa bits and bias 15 (largest 1.75 * 2^15 = 57344, smallest subnormal 2^-16)
HAND = {
    "float8_e4m3": [(1.0, 1.0), (1.0625, 1.0), (1.1875, 1.25), (1.1876, 1.25), (-3.3, -3.25), (0.3, 0.3125),
                    (240.0, 240.0), (247.9, 240.0), (248.0, INF), (1e6, INF), (-1e6, -INF), (INF, INF),
                    (-INF, -INF), (NAN, NAN), (2.0 ** -6, 2.0 ** -6), (2.0 ** -9, 2.0 ** -9), (2.0 ** -10, 0.0),
                    (1.5 * 2.0 ** -10, 2.0 ** -9), (3 * 2.0 ** -10, 2.0 ** -8), (-0.0, -0.0)],
    "float8_e4m3fn": [(1.0625, 1.0), (240.0, 240.0), (256.0, 256.0), (448.0, 448.0), (464.0, 448.0),
                      (465.0, NAN), (480.0, NAN), (1e6, NAN), (INF, NAN), (-INF, NAN), (NAN, NAN),
                      (2.0 ** -9, 2.0 ** -9), (2.0 ** -10, 0.0), (-0.0, -0.0)],
    "float8_e5m2": [(1.125, 1.0), (1.375, 1.5), (3.1, 3.0), (57344.0, 57344.0), (61439.0, 57344.0),
                    (61440.0, INF), (-1e9, -INF), (INF, INF), (NAN, NAN), (2.0 ** -14, 2.0 ** -14),
                    (2.0 ** -16, 2.0 ** -16), (2.0 ** -17, 0.0), (3 * 2.0 ** -17, 2.0 ** -15), (-0.0, -0.0)],
}


@pytest.mark.parametrize("fmt", list(HAND))
def test_rounding_matches_hand_computed_values(fmt):
    x, want = (np.array(v, dtype=np.float32) for v in zip(*HAND[fmt]))
    got = round_fp8(x, fmt)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)                    # NaN == NaN for assert_array_equal
    assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all()


@pytest.mark.parametrize("fmt", list(HAND))
def test_every_fp8_value_is_a_fixed_point_and_the_grid_is_complete(fmt):
    """Rounding is idempotent, and between 1 and 2 it has 2^mantissa_bits values (the format's precision)."""
    x = np.linspace(-600, 600, 200_001, dtype=np.float32)
    once = round_fp8(x, fmt)
    np.testing.assert_array_equal(round_fp8(once, fmt), once)
    grid = np.unique(round_fp8(np.linspace(1, 2, 10_001, dtype=np.float32), fmt))
    assert len(grid[grid < 2]) == (4 if fmt == "float8_e5m2" else 8)


V2 = "import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\n"

# fp32 in, through an fp8 SBUF tile (tensor_copy casts), an fp8 PSUM tile and back to fp32: the values held
ROUNDTRIP = V2 + """
@nki.jit
def solution(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    q = nl.ndarray(x.shape, dtype=nl.FMT, buffer=nl.sbuf)
    nisa.tensor_copy(dst=q, src=t)
    p = nl.ndarray(x.shape, dtype=nl.FMT, buffer=nl.psum)
    nisa.tensor_copy(dst=p, src=q)
    r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=p)
    nisa.dma_copy(dst=out, src=r)
    return out
"""

# lhsT [K, M] and rhs [K, N] -> lhsT.T @ rhs in fp32: one nc_matmul per 128 rows of K (any dtype), or per 256
# rows with perf_mode=double_row (the stationary [128, 2, 128] and moving [128, 2, 512] halves of K)
MATMUL = V2 + """
@nki.jit
def solution(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    R = ROWS
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // (128 * R)):
                lt = nl.ndarray(SSHAPE, dtype=lhsT.dtype, buffer=nl.sbuf)
                rt = nl.ndarray(MSHAPE, dtype=rhs.dtype, buffer=nl.sbuf)
                for h in nl.static_range(R):
                    k0 = (k * R + h) * 128
                    nisa.dma_copy(dst=lt[0:128, HALF 0:128], src=lhsT[k0:k0 + 128, m * 128:(m + 1) * 128])
                    nisa.dma_copy(dst=rt[0:128, HALF 0:512], src=rhs[k0:k0 + 128, n * 512:(n + 1) * 512])
                nisa.nc_matmul(dst=acc, stationary=lt, moving=rt PERF)
            res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], src=res)
    return out
"""
K, M, N = 512, 256, 1024


def matmul(double_row: bool) -> str:
    if not double_row:
        return (MATMUL.replace("ROWS", "1").replace("SSHAPE", "(128, 128)").replace("MSHAPE", "(128, 512)")
                .replace("HALF ", "").replace(" PERF", ""))
    return (MATMUL.replace("ROWS", "2").replace("SSHAPE", "(128, 2, 128)").replace("MSHAPE", "(128, 2, 512)")
            .replace("HALF ", "h, ").replace(" PERF", ", perf_mode=nisa.matmul_perf_mode.double_row"))


def matmul_problem(kit, dtype, name=None):
    return kit.problem({"lhsT": ((K, M), dtype), "rhs": ((K, N), dtype)}, {"out": ((M, N), "float32")},
                       "def reference(lhsT, rhs):\n    return lhsT.astype(np.float64).T @ rhs.astype(np.float64)\n",
                       atol=1e-3, rtol=1e-4, name=name)


def tensor_us(r) -> float:
    """Tensor-engine busy time of a verdict (us)."""
    return r.feedback["engine_busy"]["Tensor"] * r.latency


@pytest.mark.system
@pytest.mark.parametrize("fmt,platform", [("float8_e4m3", "trn2"), ("float8_e5m2", "trn1"),
                                          ("float8_e4m3fn", "trn3")])
def test_fp8_tiles_hold_the_rounded_values(tmp_path, fmt, platform):
    """The hand values with a finite result, through fp8 SBUF and PSUM tiles (overflow to NaN would fail any
    comparison, so it is covered by the rounding test above)."""
    pairs = [(v, w) for v, w in HAND[fmt] if np.isfinite(v) and np.isfinite(w)]
    kit = SimKit(tmp_path, platform=platform)
    arr = "np.resize(np.array({!r}, dtype=np.float32), (128, 64))"
    prob = kit.problem({"x": ((128, 64), "float32")}, {"out": ((128, 64), "float32")},
                       f"def reference(x):\n    return {arr.format([w for _, w in pairs])}\n",
                       make_inputs=f"def make_inputs(rng):\n    return {{'x': {arr.format([v for v, _ in pairs])}}}\n",
                       atol=0.0, rtol=0.0)
    ok(kit.evaluate(prob, ROUNDTRIP.replace("FMT", fmt), header=False))


@pytest.mark.system
def test_fp8_matmuls_are_correct_and_priced_by_aws_figures(tmp_path):
    kits = {p: SimKit(tmp_path / p, platform=p) for p in ("trn1", "trn2", "trn3")}
    t = {}
    for platform, kit in kits.items():
        for dtype in ("bfloat16", "float8_e4m3", "float8_e5m2"):
            r = kit.evaluate(matmul_problem(kit, dtype), matmul(False), header=False)
            ok(r)
            t[platform, dtype] = tensor_us(r)
        if platform != "trn1":
            r = kit.evaluate(matmul_problem(kit, "float8_e4m3"), matmul(True), header=False)
            ok(r)
            t[platform, "double_row"] = (tensor_us(r), r.latency)
            t[platform, "bf16_latency"] = kit.evaluate(matmul_problem(kit, "bfloat16"), matmul(False),
                                                       header=False).latency
    for platform in kits:
        # without a performance mode fp8 runs at the bf16 rate (the nc_matmul cost formula, TRN1's 190 = 190)
        assert t[platform, "float8_e4m3"] == pytest.approx(t[platform, "bfloat16"], rel=0.02)
        assert t[platform, "float8_e5m2"] == pytest.approx(t[platform, "bfloat16"], rel=0.02)
    for platform in ("trn2", "trn3"):
        # double_row: 256 rows of K in a bf16 MultiplyMoving's time, so half the Tensor time (158 vs 79 TFLOPS)
        busy, latency = t[platform, "double_row"]
        assert busy == pytest.approx(t[platform, "bfloat16"] / 2, rel=0.03)
        assert latency < t[platform, "bf16_latency"]


# a Tensor-bound kernel: lhsT [256, 128] and rhs [256, 512] loaded once, REPS matmuls accumulating REPS * lhsT.T @ rhs
REPEAT = V2 + """
@nki.jit
def solution(lhsT, rhs):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    lt = nl.ndarray(SSHAPE, dtype=lhsT.dtype, buffer=nl.sbuf)
    rt = nl.ndarray(MSHAPE, dtype=rhs.dtype, buffer=nl.sbuf)
    for h in nl.static_range(2):
        nisa.dma_copy(dst=lt[0:128, SLOT 0:128], src=lhsT[h * 128:(h + 1) * 128, 0:128])
        nisa.dma_copy(dst=rt[0:128, SLOT 0:512], src=rhs[h * 128:(h + 1) * 128, 0:512])
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for i in nl.static_range(REPS):
        MATMULS
    res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out
"""
REPS = 64


def repeat(double_row: bool) -> str:
    if double_row:
        mm = "nisa.nc_matmul(dst=acc, stationary=lt, moving=rt, perf_mode=nisa.matmul_perf_mode.double_row)"
        return (REPEAT.replace("SSHAPE", "(128, 2, 128)").replace("MSHAPE", "(128, 2, 512)")
                .replace("SLOT ", "h, ").replace("MATMULS", mm).replace("REPS", str(REPS)))
    mm = ("nisa.nc_matmul(dst=acc, stationary=lt[0:128, 0:128], moving=rt[0:128, 0:512])\n        "
          "nisa.nc_matmul(dst=acc, stationary=lt[0:128, 128:256], moving=rt[0:128, 512:1024])")
    return (REPEAT.replace("SSHAPE", "(128, 256)").replace("MSHAPE", "(128, 1024)")
            .replace("SLOT 0:128", "h * 128:(h + 1) * 128").replace("SLOT 0:512", "h * 512:(h + 1) * 512")
            .replace("MATMULS", mm).replace("REPS", str(REPS)))


@pytest.mark.system
@pytest.mark.parametrize("platform", ["trn2", "trn3"])
def test_a_tensor_bound_fp8_kernel_runs_twice_as_fast_with_double_row(tmp_path, platform):
    kit = SimKit(tmp_path, platform=platform)
    ref = f"def reference(lhsT, rhs):\n    return {REPS} * (lhsT.astype(np.float64).T @ rhs.astype(np.float64))\n"
    lat, pe = {}, {}
    for dtype, dr in (("bfloat16", False), ("float8_e5m2", False), ("float8_e5m2", True)):
        prob = kit.problem({"lhsT": ((256, 128), dtype), "rhs": ((256, 512), dtype)}, {"out": ((128, 512), "float32")},
                           ref, atol=1e-2, rtol=1e-4)
        r = kit.evaluate(prob, repeat(dr), header=False)
        ok(r)
        lat[dtype, dr], pe[dtype, dr] = r.latency, tensor_us(r)
    assert lat["float8_e5m2", False] == pytest.approx(lat["bfloat16", False], rel=0.05)
    # the Tensor engine's time halves and the kernel, bound by it, saves that half
    assert pe["float8_e5m2", True] == pytest.approx(pe["bfloat16", False] / 2, rel=0.02)
    assert lat["bfloat16", False] - lat["float8_e5m2", True] == pytest.approx(pe["bfloat16", False] / 2, rel=0.1)


@pytest.mark.system
def test_e4m3fn_matmul_on_trn3(tmp_path):
    kit = SimKit(tmp_path, platform="trn3")
    ok(kit.evaluate(matmul_problem(kit, "float8_e4m3fn"), matmul(True), header=False))


# -- refusals ---------------------------------------------------------------------------------------------
def _refused(r, *needles):
    assert not r.correct and r.error_kind == "compile", explain(r)
    for n in needles:
        assert n in r.error, explain(r)


@pytest.mark.system
def test_refusals(tmp_path):
    trn1, trn2, trn3 = (SimKit(tmp_path / p, platform=p) for p in ("trn1", "trn2", "trn3"))
    # double_row on NeuronCore-v2
    _refused(trn1.evaluate(matmul_problem(trn1, "float8_e4m3"), matmul(True), header=False),
             "perf_mode=double_row is not available on trn1")
    # double_row needs fp8 operands
    _refused(trn2.evaluate(matmul_problem(trn2, "bfloat16"), matmul(True), header=False),
             "double_row takes fp8 stationary and moving tiles")
    # double_row needs the [K, 2, M] / [K, 2, N] layout
    two_d = matmul(False).replace("rt)", "rt, perf_mode=nisa.matmul_perf_mode.double_row)")
    _refused(trn2.evaluate(matmul_problem(trn2, "float8_e4m3"), two_d, header=False), "[K, 2, M]")
    # float8_e4m3fn is NeuronCore-v4's: as an HBM input (the trusted side's check) and as a tile (the front end's)
    hbm_in = trn2.problem({"x": ((128, 64), "float8_e4m3fn")}, {"out": ((128, 64), "float32")},
                          "def reference(x):\n    return x\n")
    _refused(trn2.evaluate(hbm_in, ROUNDTRIP.replace("FMT", "float32"), header=False),
             "float8_e4m3fn (OCP FP8, an input or output) is not supported on trn2")
    tile = ROUNDTRIP.replace("FMT", "float8_e4m3fn")
    prob = trn2.problem({"x": ((128, 64), "float32")}, {"out": ((128, 64), "float32")},
                        "def reference(x):\n    return x\n")
    _refused(trn2.evaluate(prob, tile, header=False), "float8_e4m3fn is supported on trn3")
    # legacy e4m3 and OCP e4m3fn cannot meet in one matmul
    mixed = trn3.problem({"lhsT": ((K, M), "float8_e4m3"), "rhs": ((K, N), "float8_e4m3fn")},
                         {"out": ((M, N), "float32")}, "def reference(lhsT, rhs):\n    return lhsT.T @ rhs\n")
    _refused(trn3.evaluate(mixed, matmul(False), header=False), "cannot be mixed")


@pytest.mark.system
def test_the_trusted_side_refuses_what_the_front_end_was_tricked_into(tmp_path):
    """A kernel that changes the front end's idea of the platform records double_row on trn1 and an e4m3fn tile on
    trn2; the replayer's platform check (fp8.check_platform) refuses both."""
    trn1, trn2 = SimKit(tmp_path / "trn1", platform="trn1"), SimKit(tmp_path / "trn2", platform="trn2")
    forge = "import nki._v2 as V\nV.PLATFORM['name'] = '{}'\n"
    code = matmul(True).replace("@nki.jit\n", forge.format("trn2") + "@nki.jit\n")
    _refused(trn1.evaluate(matmul_problem(trn1, "float8_e4m3"), code, header=False),
             "perf_mode=double_row is not available on trn1")
    prob = trn2.problem({"x": ((128, 64), "float32")}, {"out": ((128, 64), "float32")},
                        "def reference(x):\n    return x\n")
    code = ROUNDTRIP.replace("FMT", "float8_e4m3fn").replace("@nki.jit\n", forge.format("trn3") + "@nki.jit\n")
    _refused(trn2.evaluate(prob, code, header=False), "float8_e4m3fn (OCP FP8, kernel.py line",
             "not supported on trn2")
