"""What each supported NKI call computes on trainium-sim, checked against numpy.

Every test writes a tiny problem whose reference is plain numpy, evaluates a kernel that exercises a
group of calls through the real sandboxed evaluator, and requires correct=True. Several checks share
one kernel (one output slice per check) so the error message of a failure names the slice. A few
tests also give a deliberately wrong reference and require a wrong_result verdict, so a simulator
that ignores its outputs cannot pass.
"""
from __future__ import annotations

import pytest

from tests.trainium_sim.simkit import SimKit, explain, ok

pytestmark = pytest.mark.system

F32, BF16 = "float32", "bfloat16"


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return SimKit(tmp_path_factory.mktemp("trn-semantics"))


# -- allocation, buffers, par_dim ---------------------------------------------------------------
ALLOC_KERNEL = """
@nki.jit
def solution(a):
    out = nl.ndarray((5, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    z = nl.zeros((128, 64), nl.float32)
    o = nl.ones((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    f = nl.full((128, 64), 2.5, nl.float32)
    nl.store(out[0], nl.add(nl.add(t, z), nl.multiply(o, f)))      # a + 2.5
    pz = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
    nl.store(out[1], nl.add(nl.copy(pz), t))                        # a + 0 through PSUM
    scratch = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.hbm)
    nl.store(scratch, t)
    back = nl.load(scratch)
    nl.store(out[2], nl.multiply(back, 3.0))                        # 3a through an HBM scratch
    buf = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
    buf[0] = nl.load(a)
    buf[1] = nl.exp(buf[0])
    nl.store(out[3], buf[1])                                        # exp(a) via a par_dim buffer
    s = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    s[...] = t
    s[:, 0:32] = 7.0                                                # fill part of a tile with a number
    nl.store(out[4], s)
    return out
"""


def _alloc_ref(plus: float) -> str:
    return f"""
def reference(a):
    s = a.copy()
    s[:, :32] = 7.0
    return np.stack([a + {plus}, a, 3 * a, np.exp(a), s])
"""


def test_allocation_buffers_and_par_dim(kit):
    io = ({"a": ((128, 64), F32)}, {"out": ((5, 128, 64), F32)})
    ok(kit.evaluate(kit.problem(*io, _alloc_ref(2.5)), ALLOC_KERNEL))
    bad = kit.evaluate(kit.problem(*io, _alloc_ref(2.0)), ALLOC_KERNEL)
    assert not bad.correct and bad.error_kind == "wrong_result", explain(bad)
    assert "output out" in bad.error and "first at [0, " in bad.error


# -- indexing -----------------------------------------------------------------------------------
def test_indexing_forms(kit):
    p = kit.problem({"x": ((2, 128, 256), F32)},
                    {"o1": ((128, 128), F32), "o2": ((128, 128), F32), "o3": ((128, 64), F32),
                     "o4": ((128, 128), F32), "o5": ((128, 128), F32), "o6": ((64, 256), F32),
                     "o7": ((128, 256), F32)}, """
def reference(x):
    return (x[1, :, :128], x[0, :, 128:], x[1, :, 64:128], x[0, :, ::2], x[0, :, 1::2], x[1, ::2, :],
            x[0] + x[1])
""")
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(x):
        o1 = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        o3 = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        o4 = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        o5 = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        o6 = nl.ndarray((64, 256), dtype=x.dtype, buffer=nl.shared_hbm)
        o7 = nl.ndarray((128, 256), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(128)[None, :]
        nl.store(o1[i_p, i_f], nl.load(x[1, i_p, i_f]))
        g_p, g_f = nl.mgrid[0:128, 0:128]
        nl.store(o2[g_p, g_f], nl.load(x[0, g_p, 128 + g_f]))
        nl.store(o3, nl.load(x[1, nl.ds(0, 128), nl.ds(64, 64)]))
        nl.store(o4, nl.load(x[0, :, 0:256:2]))
        nl.store(o5[i_p, i_f], nl.load(x[0, i_p, 2 * i_f + 1]))
        nl.store(o6, nl.load(x[1, 0:128:2, :]))
        nl.store(o7, nl.add(nl.load(x[0]), nl.load(x[1])))
        return o1, o2, o3, o4, o5, o6, o7
    """))


def test_loops_and_program_ids(kit):
    p = kit.problem({"a": ((512, 64), F32)}, {"out": ((512, 64), F32), "acc": ((128, 64), F32)}, """
def reference(a):
    return 2 * a + 1, a.reshape(4, 128, 64).sum(axis=0)
""")
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        acc_out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        assert nl.program_id(0) == 0 and nl.num_programs() == 1 and nl.program_ndim() == 0
        scale = nl.num_programs() + 1 + nl.program_id(0)                 # 2
        for i in nl.affine_range(2):
            t = nl.load(a[i * 128:(i + 1) * 128, :])
            nl.store(out[i * 128:(i + 1) * 128, :], nl.add(nl.multiply(t, scale), 1.0))
        for i in nl.sequential_range(2, 3):
            t = nl.load(a[i * 128:(i + 1) * 128, :])
            nl.store(out[i * 128:(i + 1) * 128, :], t * scale + 1.0)
        for i in nl.static_range(3, 4):
            t = nl.load(a[nl.ds(i * 128, 128), :])
            nl.store(out[nl.ds(i * 128, 128), :], scale * t + 1)
        acc = nl.zeros((128, 64), nl.float32)
        for i in nl.sequential_range(4):
            acc[...] += nl.load(a[i * 128:(i + 1) * 128, :])
        nl.store(acc_out, acc)
        return out, acc_out
    """))


RAGGED = """
    import math

    @nki.jit
    def solution(a):
        R, C = a.shape
        out = nl.ndarray((R, C), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:128]
        for r in nl.static_range(math.ceil(R / 128)):
            for c in nl.static_range(math.ceil(C / 128)):
                inside = (r * 128 + i_p < R) & (c * 128 + i_f < C)
                t = nl.load(a[r * 128 + i_p, c * 128 + i_f], mask=inside)
                y = nl.subtract(nl.multiply(t, 3.0), 1.0, mask=inside)
                STORE
        return out
"""


def _ragged_problem(kit):
    return kit.problem({"a": ((300, 200), F32)}, {"out": ((300, 200), F32)}, """
def reference(a):
    return 3 * a - 1
""")


def test_masked_load_on_ragged_edges(kit):
    # the partial tile is loaded under a mask; the store writes exactly the valid rectangle
    store = ("rows, cols = min(128, R - r * 128), min(128, C - c * 128)\n"
             "                nl.store(out[r * 128:r * 128 + rows, c * 128:c * 128 + cols], y[0:rows, 0:cols])")
    ok(kit.evaluate(_ragged_problem(kit), RAGGED.replace("STORE", store)))


def test_masked_store_on_ragged_edges(kit):
    store = "nl.store(out[r * 128 + i_p, c * 128 + i_f], value=y, mask=inside)"
    ok(kit.evaluate(_ragged_problem(kit), RAGGED.replace("STORE", store)))


def test_load_transpose2d_and_transposes(kit):
    p = kit.problem({"a": ((64, 128), F32), "s": ((32, 16), F32)},
                    {"t1": ((128, 64), F32), "t2": ((128, 64), F32), "t3": ((16, 32), F32),
                     "t4": ((128, 64), F32)}, """
def reference(a, s):
    return a.T, a.T, s.T, a.T
""")
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(a, s):
        t1 = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        t2 = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        t3 = nl.ndarray((16, 32), dtype=a.dtype, buffer=nl.shared_hbm)
        t4 = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(t1, nl.load_transpose2d(a))
        x = nl.load(a)
        pe = nisa.nc_transpose(x)                               # Tensor engine: result in PSUM
        nl.store(t2, nl.copy(pe))
        dve = nisa.nc_transpose(nl.load(s), engine=nisa.engine.vector)
        nl.store(t3, dve)
        nl.store(t4, nl.copy(nl.transpose(x)))
        return t1, t2, t3, t4
    """))


# -- dtype casts --------------------------------------------------------------------------------
CAST_INPUTS = """
def make_inputs(rng):
    # ties and near-ties of bf16 rounding (8 significant bits): 1 + k * 2**-8 lies between bf16 values
    v = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, 1 + 2**-8 - 2**-20, -(1 + 2**-8),
                  -(1 + 3 * 2**-8), 3.0, 65504.5, 0.1, -0.1, 1e-3, 2.0**-130], dtype=np.float64)
    a = np.zeros((128, 16), dtype=np.float32)
    a[:, :12] = v.astype(np.float32)
    a[:, 12:] = rng.standard_normal((128, 4)).astype(np.float32)
    return {"a": a}
"""


def test_copy_cast_fp32_to_bf16_rounds_to_nearest_even(kit):
    # expected bf16 values written out by hand: ties go to the even significand
    ref = """
def reference(a):
    want = np.array([1.0, 1 + 2**-6, 1 + 2**-7, 1.0, -1.0, -(1 + 2**-6), 3.0, 65536.0,
                     0.10009765625, -0.10009765625, 0.00099945068359375], dtype=np.float64)
    out = a.astype(np.float64).copy()
    out[:, :11] = want
    bits = np.ascontiguousarray(a[:, 11:], dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out[:, 11:] = rounded.view(np.float32)
    return out, out
"""
    kernel = """
    @nki.jit
    def solution(a):
        o32 = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        o16 = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        t = nl.load(a)
        b = nl.copy(t, dtype=nl.bfloat16)
        nl.store(o32, nl.copy(b, dtype=nl.float32))
        nl.store(o16, nisa.tensor_copy(t, dtype=nl.bfloat16))
        return o32, o16
    """
    io = ({"a": ((128, 16), F32)}, {"o32": ((128, 16), F32), "o16": ((128, 16), BF16)})
    ok(kit.evaluate(kit.problem(*io, ref, make_inputs=CAST_INPUTS, atol=0.0, rtol=0.0), kernel))
    # a reference expecting truncation (1 + 3 * 2**-8 -> 1 + 2**-7, not the even 1 + 2**-6) is told apart
    trunc = ref.replace("1 + 2**-6, 1 + 2**-7, 1.0,", "1 + 2**-7, 1 + 2**-7, 1.0,")
    bad = kit.evaluate(kit.problem(*io, trunc, make_inputs=CAST_INPUTS, atol=0.0, rtol=0.0), kernel)
    assert not bad.correct and bad.error_kind == "wrong_result" and "first at [0, 1]" in bad.error, explain(bad)


def test_casts_to_fp16_and_int32(kit):
    p = kit.problem({"a": ((128, 32), F32)}, {"h": ((128, 32), F32), "i": ((128, 32), "int32")}, """
def reference(a):
    return a.astype(np.float16).astype(np.float64), np.trunc(a * 10)
""", atol=0.0, rtol=0.0)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(a):
        h = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        i = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(h, nl.copy(nl.copy(t, dtype=nl.float16), dtype=nl.float32))
        nl.store(i, nl.copy(nl.multiply(t, 10.0), dtype=nl.int32))
        return h, i
    """))


def test_uint32_holds_values_past_int32(kit):
    # nl.uint32 (token ids, hashes and bit masks in Autocomp's newer workloads) was not simulated
    p = kit.problem({"u": ((128, 64), "uint32")}, {"out": ((128, 64), "uint32")}, """
def reference(u):
    return u.astype(np.int64) >> 1
""", make_inputs="""
def make_inputs(rng):
    return {"u": rng.integers(0, 2**32, size=(128, 64), dtype=np.uint64).astype(np.uint32)}
""", atol=0.0, rtol=0.0)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(u):
        out = nl.ndarray(u.shape, dtype=nl.uint32, buffer=nl.shared_hbm)
        t = nl.load(u)
        nl.store(out, nl.right_shift(t, 1, dtype=nl.uint32))
        return out
    """))


# -- matmul -------------------------------------------------------------------------------------
def test_matmul_forms_and_psum_accumulation(kit):
    p = kit.problem({"aT": ((512, 128), F32), "x": ((64, 128), F32), "b": ((512, 512), F32)},
                    {"r1": ((128, 512), F32), "r2": ((64, 512), F32), "r3": ((128, 512), F32),
                     "r4": ((128, 512), F32), "r5": ((128, 512), F32)}, """
def reference(aT, x, b):
    full = aT.T.astype(np.float64) @ b
    return aT[:128].T @ b[:128], x @ b[:128], full, full, full
""", atol=1e-3, rtol=1e-4)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(aT, x, b):
        K, M = aT.shape
        r1 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        r2 = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        r3 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        r4 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        r5 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        a0 = nl.load(aT[0:128, :])
        b0 = nl.load(b[0:128, :])
        nl.store(r1, nl.copy(nl.matmul(a0, b0, transpose_x=True)))
        nl.store(r2, nl.copy(nl.matmul(nl.load(x), b0)))              # x [M, K]: transposed on chip
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            acc += nisa.nc_matmul(nl.load(aT[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, :]))
        nl.store(r3, nl.copy(acc))
        res = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            res[...] += nl.matmul(nl.load(aT[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, :]),
                                  transpose_x=True)
        nl.store(r4, nl.copy(res))
        sb = nl.zeros((128, 512), nl.float32)
        for k in nl.sequential_range(K // 128):
            part = nisa.nc_matmul(nl.load(aT[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, :]))
            sb[...] += nl.copy(part)                                   # accumulate in SBUF instead
        nl.store(r5, sb)
        return r1, r2, r3, r4, r5
    """))


def test_bf16_inputs_are_rounded_and_matmul_accumulates_fp32(kit):
    io = ({"aT": ((128, 128), BF16), "b": ((128, 512), BF16)}, {"r": ((128, 512), F32), "a": ((128, 128), F32)})
    kernel = """
    @nki.jit
    def solution(aT, b):
        r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        at = nl.load(aT)
        nl.store(r, nl.copy(nisa.nc_matmul(at, nl.load(b)), dtype=nl.float32))
        nl.store(a, nl.copy(at, dtype=nl.float32))
        return r, a
    """
    rounding = """
def _bf16(x):
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
"""
    # exact bf16 operands, products summed in float64: fp32 accumulation stays within 1e-5 relative
    good = rounding + """
def reference(aT, b):
    a, bb = _bf16(aT).astype(np.float64), _bf16(b).astype(np.float64)
    return a.T @ bb, a
"""
    ok(kit.evaluate(kit.problem(*io, good, atol=1e-4, rtol=1e-5), kernel))
    # the reference is given the values the bf16 tensors hold, so it needs no rounding of its own
    raw = rounding + """
def reference(aT, b):
    assert (_bf16(aT) == aT).all() and (_bf16(b) == b).all(), "inputs reach the reference unrounded"
    return aT.T.astype(np.float64) @ b, aT.astype(np.float64)
"""
    ok(kit.evaluate(kit.problem(*io, raw, atol=1e-4, rtol=1e-5), kernel))
    # bf16 accumulation would drift by ~1e-2 relative: the fp32 result is far closer than that
    bf16_acc = rounding + """
def reference(aT, b):
    a, bb = _bf16(aT), _bf16(b)
    acc = np.zeros((128, 512), np.float32)
    for k in range(128):
        acc = _bf16(acc + np.outer(a[k], bb[k]).astype(np.float32))
    return acc, a
"""
    bad = kit.evaluate(kit.problem(*io, bf16_acc, atol=1e-4, rtol=1e-5), kernel)
    assert not bad.correct and "output r " in bad.error, explain(bad)


# -- elementwise --------------------------------------------------------------------------------
EW_INPUTS = """
def make_inputs(rng):
    return {"a": rng.standard_normal((128, 64)).astype(np.float32),
            "b": rng.uniform(0.5, 2.0, (128, 64)).astype(np.float32),
            "c": rng.standard_normal((128, 1)).astype(np.float32),
            "d": rng.standard_normal((1, 64)).astype(np.float32)}
"""
# (kernel expression, numpy expression): one output slice each, in this order
EW_CASES = [
    ("nl.add(a, b)", "a + b"), ("nl.subtract(a, b)", "a - b"), ("nl.multiply(a, b)", "a * b"),
    ("nl.divide(a, b)", "a / b"), ("nl.maximum(a, b)", "np.maximum(a, b)"),
    ("nl.minimum(a, b)", "np.minimum(a, b)"), ("nl.exp(a)", "np.exp(a)"), ("nl.log(b)", "np.log(b)"),
    ("nl.sqrt(b)", "np.sqrt(b)"), ("nl.rsqrt(b)", "1 / np.sqrt(b)"), ("nl.square(a)", "a * a"),
    ("nl.tanh(a)", "np.tanh(a)"), ("nl.sigmoid(a)", "1 / (1 + np.exp(-a))"), ("nl.relu(a)", "np.maximum(a, 0)"),
    ("nl.gelu(a)", "0.5 * a * (1 + _erf(a / np.sqrt(2)))"), ("nl.silu(a)", "a / (1 + np.exp(-a))"),
    ("nl.abs(a)", "np.abs(a)"), ("nl.negative(a)", "-a"), ("nl.reciprocal(b)", "1 / b"),
    ("nl.where(nl.greater(a, 0.0), a, b)", "np.where(a > 0, a, b)"),
    ("nl.greater(a, b)", "(a > b) * 1.0"), ("nl.less(a, 0.5)", "(a < 0.5) * 1.0"),
    ("nl.greater_equal(a, b)", "(a >= b) * 1.0"), ("nl.less_equal(a, b)", "(a <= b) * 1.0"),
    ("nl.equal(a, a)", "np.ones_like(a)"), ("nl.not_equal(a, b)", "(a != b) * 1.0"),
    ("a + b", "a + b"), ("a - b", "a - b"), ("a * b", "a * b"), ("a / b", "a / b"), ("-a", "-a"),
    ("2.0 * a", "2 * a"), ("1.0 - a", "1 - a"), ("a - 1", "a - 1"), ("3 / b", "3 / b"), ("a > b", "(a > b) * 1.0"),
    ("a + c", "a + c"), ("a * d", "a * d"), ("c * d", "c * d"), ("nl.broadcast_to(c, (128, 64))", "c + 0 * a"),
    ("nl.maximum(a, d)", "np.maximum(a, d)"), ("nisa.reciprocal(b)", "1 / b"),
]


def _ew_problem(kit, cases):
    exprs = ", ".join(n for _, n in cases)
    ref = f"""
import math
_erf = np.vectorize(math.erf)

def reference(a, b, c, d):
    return np.stack([np.broadcast_to(v, (128, 64)) for v in [{exprs}]])
"""
    return kit.problem({"a": ((128, 64), F32), "b": ((128, 64), F32), "c": ((128, 1), F32),
                        "d": ((1, 64), F32)}, {"out": ((len(cases), 128, 64), F32)}, ref,
                       make_inputs=EW_INPUTS, atol=1e-5, rtol=1e-4)


def _ew_kernel(cases) -> str:
    lines = "\n".join(f"        nl.store(out[{i}], {k})" for i, (k, _) in enumerate(cases))
    return f"""
    @nki.jit
    def solution(a_in, b_in, c_in, d_in):
        out = nl.ndarray(({len(cases)}, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        a, b, c, d = nl.load(a_in), nl.load(b_in), nl.load(c_in), nl.load(d_in)
{lines}
        return out
    """


def test_elementwise_functions_and_operators(kit):
    ok(kit.evaluate(_ew_problem(kit, EW_CASES), _ew_kernel(EW_CASES)))


def test_elementwise_wrong_reference_is_caught_at_its_slice(kit):
    cases = EW_CASES[:14]
    wrong = cases[:12] + [("nl.sigmoid(a)", "np.tanh(a)")] + cases[13:]
    r = kit.evaluate(_ew_problem(kit, wrong), _ew_kernel(cases))
    assert not r.correct and r.error_kind == "wrong_result", explain(r)
    assert "first at [12, " in r.error, r.error


# -- reductions ---------------------------------------------------------------------------------
def test_reductions_axis_and_keepdims(kit):
    p = kit.problem({"x": ((128, 64), F32), "y": ((128, 4, 16), F32)},
                    {"s": ((128, 1), F32), "mx": ((128,), F32), "mn": ((128, 1), F32), "me": ((128, 1), F32),
                     "s3": ((128, 1, 1), F32), "m3": ((128, 4), F32), "pr": ((128, 1), F32)}, """
def reference(x, y):
    return (x.sum(1, keepdims=True), x.max(1), x.min(1, keepdims=True), x.mean(1, keepdims=True),
            y.sum((1, 2), keepdims=True), y.max(2), np.prod(x[:, :8], 1, keepdims=True))
""", atol=1e-4, rtol=1e-4)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(x, y):
        s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        mx = nl.ndarray((128,), dtype=nl.float32, buffer=nl.shared_hbm)
        mn = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        me = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        s3 = nl.ndarray((128, 1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        m3 = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        pr = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t, u = nl.load(x), nl.load(y)
        nl.store(s, nl.sum(t, axis=1, keepdims=True))
        nl.store(mx, nl.max(t, axis=1))
        nl.store(mn, nl.min(t, axis=[1], keepdims=True))
        nl.store(me, nl.mean(t, axis=-1, keepdims=True))
        nl.store(s3, nl.sum(u, axis=(1, 2), keepdims=True))
        nl.store(m3, nl.max(u, axis=2))
        nl.store(pr, nl.prod(nl.load(x[:, 0:8]), axis=1, keepdims=True))
        return s, mx, mn, me, s3, m3, pr
    """))


def test_tile_size_constants(kit):
    p = kit.problem({"a": ((128, 4), F32)}, {"out": ((128, 4), F32)}, """
def reference(a):
    return a + 128 + 128 + 512 + 512
""")
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(a):
        ts = nl.tile_size
        assert (ts.pmax, ts.gemm_stationary_fmax, ts.gemm_moving_fmax, ts.psum_fmax) == (128, 128, 512, 512)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        k = ts.pmax + ts.gemm_stationary_fmax + ts.gemm_moving_fmax + ts.psum_fmax
        nl.store(out, nl.add(nl.load(a), float(k)))
        return out
    """))


# -- nki.isa ------------------------------------------------------------------------------------
ISA_INPUTS = """
def make_inputs(rng):
    return {"x": rng.standard_normal((128, 64)).astype(np.float32),
            "g": rng.uniform(0.2, 0.9, (128, 64)).astype(np.float32),
            "c": rng.standard_normal((128, 1)).astype(np.float32)}
"""


def test_isa_vector_scalar_and_gpsimd_calls(kit):
    p = kit.problem({"x": ((128, 64), F32), "g": ((128, 64), F32), "c": ((128, 1), F32)},
                    {"out": ((11, 128, 64), F32), "red": ((3, 128, 1), F32)}, """
def _scan(decay, x, init):
    out = np.empty_like(x)
    prev = init
    for i in range(x.shape[1]):
        prev = prev * decay[:, i] + x[:, i]
        out[:, i] = prev
    return out

def reference(x, g, c):
    P, F = x.shape
    ip, jf = np.arange(P)[:, None], np.arange(F)[None, :]
    outs = [x + g, x * g, (x * 2 + c), 5 - x, np.cumsum(x, axis=1) + 1.5, _scan(g, x, c[:, 0]),
            x.copy(), np.exp(2 * x + c), np.where(ip >= jf, x, -1e4), ip * 64 + jf + 0 * x, np.full_like(x, 0.25)]
    reds = [-x.sum(1, keepdims=True), np.exp(x + c).sum(1, keepdims=True), np.tanh(x * c).max(1, keepdims=True)]
    return np.stack(outs), np.stack(reds)
""", make_inputs=ISA_INPUTS, atol=1e-4, rtol=1e-4)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(x_in, g_in, c_in):
        out = nl.ndarray((11, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        red = nl.ndarray((3, 128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        x, g, c = nl.load(x_in), nl.load(g_in), nl.load(c_in)
        nl.store(out[0], nisa.tensor_tensor(x, g, op=np.add))
        nl.store(out[1], nisa.tensor_tensor(data1=x, data2=g, op=nl.multiply))
        nl.store(out[2], nisa.tensor_scalar(x, op0=np.multiply, operand0=2.0, op1=np.add, operand1=c))
        nl.store(out[3], nisa.tensor_scalar(x, np.subtract, 5.0, reverse0=True))
        ones = nl.ones((128, 64), nl.float32)
        nl.store(out[4], nisa.tensor_tensor_scan(ones, x, 1.5, op0=np.multiply, op1=np.add))
        nl.store(out[5], nisa.tensor_tensor_scan(g, x, initial=c, op0=np.multiply, op1=np.add))
        nl.store(out[6], nisa.tensor_copy(x))
        nl.store(out[7], nisa.activation(op=nl.exp, data=x, bias=c, scale=2.0))
        i_p, i_f = nl.mgrid[0:128, 0:64]
        nl.store(out[8], nisa.affine_select(pred=(i_p - i_f >= 0), on_true_tile=x, on_false_value=-1e4))
        nl.store(out[9], nisa.iota(i_p * 64 + i_f, dtype=nl.float32))
        nl.store(out[10], nisa.memset((128, 64), 0.25, nl.float32))
        nl.store(red[0], nisa.tensor_reduce(np.add, x, axis=1, negate=True, keepdims=True))
        r1 = nl.ndarray((128, 1), dtype=nl.float32)
        nisa.activation_reduce(op=nl.exp, data=x, reduce_op=np.add, reduce_res=r1, bias=c)
        nl.store(red[1], r1)
        r2 = nl.ndarray((128, 1), dtype=nl.float32)
        nisa.activation(op=nl.tanh, data=x, scale=c, reduce_op=np.maximum, reduce_res=r2)
        nl.store(red[2], r2)
        return out, red
    """))


def test_isa_nc_matmul_and_psum_accumulation_with_bf16_operands(kit):
    p = kit.problem({"aT": ((256, 128), BF16), "b": ((256, 256), BF16)}, {"r": ((128, 256), BF16)}, """
def _bf16(x):
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)

def reference(aT, b):
    return _bf16(_bf16(aT).T.astype(np.float64) @ _bf16(b))
""", atol=1e-3, rtol=1e-2)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(aT, b):
        K, M = aT.shape
        r = nl.ndarray((M, b.shape[1]), dtype=aT.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((M, b.shape[1]), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            acc += nisa.nc_matmul(nl.load(aT[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, :]))
        nl.store(r, nl.copy(acc, dtype=aT.dtype))
        return r
    """))


# -- HBM reshape --------------------------------------------------------------------------------
def test_hbm_reshape_of_inputs_and_outputs(kit):
    p = kit.problem({"a": ((128, 256), F32)}, {"out": ((2, 128, 128), F32)}, """
def reference(a):
    return (a.reshape(256, 128) * 2).reshape(2, 128, 128)
""")
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(a):
        out = nl.ndarray((2, 128, 128), dtype=a.dtype, buffer=nl.shared_hbm)
        a2 = a.reshape((256, 128))
        o2 = out.reshape((256, 128))
        for i in nl.affine_range(2):
            t = nl.load(a2[i * 128:(i + 1) * 128, :])
            nl.store(o2[i * 128:(i + 1) * 128, :], nl.multiply(t, 2.0))
        return out
    """))


def test_int32_tiles_partial_psum_accumulation_and_reverse1(kit):
    p = kit.problem({"n": ((128, 64), "int32"), "a": ((128, 64), F32)},
                    {"i": ((128, 64), "int32"), "r": ((64, 128), F32), "q": ((128, 64), F32)}, """
def reference(n, a):
    g = a.T.astype(np.float64) @ a
    return n * 3 + 7, np.concatenate([g, 2 * g], axis=1), 10.0 / (a * a + 1.0)
""", atol=1e-3, rtol=1e-4)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(n, a):
        i = nl.ndarray(n.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        r = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        q = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(i, nl.add(nl.multiply(nl.load(n), 3), 7))
        t = nl.load(a)
        acc = nl.zeros((64, 128), nl.float32, buffer=nl.psum)
        acc[:, 0:64] += nisa.nc_matmul(t, t)                   # accumulate into part of a PSUM tile
        for k in nl.affine_range(2):
            acc[:, 64:128] += nisa.nc_matmul(t, t)
        nl.store(r, nl.copy(acc))
        nl.store(q, nisa.tensor_scalar(nl.square(t), np.add, 1.0, op1=np.divide, operand1=10.0, reverse1=True))
        return i, r, q
    """))


def test_tensor_tensor_scan_operand_order(kit):
    p = kit.problem({"a": ((128, 64), F32)}, {"out": ((128, 64), F32)}, """
def reference(a):
    out = np.empty_like(a)
    prev = np.full(a.shape[0], 0.5, np.float32)
    for i in range(a.shape[1]):
        prev = (a[:, i] - prev) + 1.0           # NKI: op1(op0(data0[:, i], result[:, i-1]), data1[:, i])
        out[:, i] = prev
    return out
""")
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ones = nl.ones(a.shape, nl.float32)
        nl.store(out, nisa.tensor_tensor_scan(nl.load(a), ones, 0.5, op0=np.subtract, op1=np.add))
        return out
    """))


def test_a_running_sum_scan_rounds_as_the_step_by_step_loop(kit):
    """data0 all ones, multiply then add (the form of NKI's cumsum): computed in one accumulate pass from the
    initial column, it must round exactly as out[i] = 1 * out[i-1] + data1[i] does step by step in fp32."""
    p = kit.problem({"a": ((128, 512), F32), "c": ((128, 1), F32)}, {"out": ((128, 512), F32)}, """
def reference(a, c):
    out = np.empty_like(a)
    prev = c[:, 0].astype(np.float32)
    for i in range(a.shape[1]):
        prev = np.float32(1.0) * prev + a[:, i]
        out[:, i] = prev
    return out
""", make_inputs="""
def make_inputs(rng):
    return {"a": (rng.standard_normal((128, 512)) * 1e3).astype(np.float32),
            "c": (rng.standard_normal((128, 1)) * 1e7).astype(np.float32)}
""", atol=0.0, rtol=0.0)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(a, c):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ones = nl.ones(a.shape, nl.float32)
        nl.store(out, nisa.tensor_tensor_scan(ones, nl.load(a), nl.load(c), op0=np.multiply, op1=np.add))
        return out
    """))


def test_a_scan_with_restarts_and_decays_rounds_as_the_step_by_step_loop(kit):
    """data0 mostly ones, 0 where a segment restarts (in some partitions only) and 0.5 in one column: runs of
    all-ones columns are accumulated in one pass, the other columns step by step; every rounding must be the
    loop's out[i] = data0[i] * out[i-1] + data1[i] in fp32."""
    p = kit.problem({"g": ((128, 512), F32), "a": ((128, 512), F32), "c": ((128, 1), F32)},
                    {"out": ((128, 512), F32)}, """
def reference(g, a, c):
    out = np.empty_like(a)
    prev = c[:, 0].astype(np.float32)
    for i in range(a.shape[1]):
        prev = g[:, i] * prev + a[:, i]
        out[:, i] = prev
    return out
""", make_inputs="""
def make_inputs(rng):
    g = np.ones((128, 512), np.float32)
    g[:, [0, 100, 101, 300]] = 0.0
    g[rng.random(128) < 0.5, 200] = 0.0
    g[:, 400] = 0.5
    return {"g": g, "a": (rng.standard_normal((128, 512)) * 1e3).astype(np.float32),
            "c": (rng.standard_normal((128, 1)) * 1e7).astype(np.float32)}
""", atol=0.0, rtol=0.0)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(g, a, c):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_tensor_scan(nl.load(g), nl.load(a), nl.load(c), op0=np.multiply, op1=np.add))
        return out
    """))


def test_tile_stays_valid_after_being_assigned(kit):
    p = kit.problem({"a": ((128, 64), F32)}, {"out": ((128, 64), F32)}, """
def reference(a):
    return 2 * a
""")
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        buf = nl.ndarray(a.shape, dtype=nl.float32)
        buf[...] = t
        nl.store(out, nl.add(t, buf))
        return out
    """))


# Known difference from NKI: `acc += p` sends the matmul straight into acc (as NKI's compiler does), so p
# has no value of its own afterwards; using it is a clear error rather than a silently different result.
def test_matmul_result_used_after_accumulation_is_a_clear_error(kit):
    p = kit.problem({"a": ((128, 64), F32)}, {"out": ((64, 64), F32), "acc": ((64, 64), F32)}, """
def reference(a):
    g = a.T.astype(np.float64) @ a
    return g, g
""", atol=1e-3)
    r = kit.evaluate(p, """
    @nki.jit
    def solution(a):
        out = nl.ndarray((64, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        acc_out = nl.ndarray((64, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        acc = nl.zeros((64, 64), nl.float32, buffer=nl.psum)
        prod = nisa.nc_matmul(t, t)
        acc += prod
        nl.store(out, nl.copy(prod))
        nl.store(acc_out, nl.copy(acc))
        return out, acc_out
    """)
    assert not r.correct and "has no value of its own" in r.error, r.error


def test_masks_over_a_reduction_select_the_reduced_elements(kit):
    p = kit.problem({"x": ((128, 64), F32)},
                    {"s": ((128, 1), F32), "mx": ((128, 1), F32), "me": ((128, 1), F32), "st": ((128, 2), F32)}, """
def reference(x):
    h = x[:, :40].astype(np.float64)
    return h.sum(1, keepdims=True), h.max(1, keepdims=True), h.mean(1, keepdims=True), \\
        np.stack([h.mean(1), h.var(1)], axis=1)
""", atol=1e-4, rtol=1e-4)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(x):
        outs = [nl.ndarray((128, n), dtype=nl.float32, buffer=nl.shared_hbm) for n in (1, 1, 1, 2)]
        t = nl.load(x)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        first40 = i_f < 40                                   # a mask over the input's free axis
        nl.store(outs[0], nl.sum(t[i_p, i_f], axis=1, mask=first40))
        nl.store(outs[1], nisa.tensor_reduce(np.max, t[i_p, i_f], axis=(1,), mask=first40))
        nl.store(outs[2], nl.mean(t[i_p, i_f], axis=1, mask=first40))
        nl.store(outs[3], nisa.bn_aggr(nisa.bn_stats(t[i_p, i_f], mask=first40)))
        return tuple(outs)
    """))


def test_python_bool_masks_and_per_partition_operands_on_3d_tiles(kit):
    p = kit.problem({"x": ((128, 4, 16), F32), "c": ((128, 1), F32)},
                    {"o": ((128, 4, 16), F32), "acc": ((128, 512), F32)}, """
def reference(x, c):
    c3 = c[:, :, None].astype(np.float64)
    o = np.exp((x * c3 + c3) - c3)
    return o, np.zeros((128, 512)) + 2 * 128
""", atol=1e-3, rtol=1e-3)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(x, c):
        o = nl.ndarray((128, 4, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        acc_out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t, ct = nl.load(x), nl.load(c)
        # (P, 1) operands broadcast over every free axis of a (P, 4, 16) tile
        u = nisa.tensor_scalar(t, np.multiply, ct, op1=np.add, operand1=ct, engine=nisa.vector_engine)
        v = nisa.activation(np.exp, u, bias=nl.negative(ct), scale=1.0)
        nl.store(o, v)
        ones = nl.ones((128, 128), dtype=nl.bfloat16)
        rhs = nl.ones((128, 512), dtype=nl.bfloat16)
        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(3):
            # a condition on loop indices is a Python bool while tracing: k == 1 is skipped
            acc += nl.matmul(ones, rhs, transpose_x=True, mask=(k != 1))
        keep = nl.copy(acc)
        keep[...] = nl.exp(keep, mask=False)                 # masked off entirely: keep is unchanged
        nl.store(acc_out, keep)
        return o, acc_out
    """))


def test_two_stage_isa_calls_dma_copy_mgrid_attributes_and_scans_over_all_free_axes(kit):
    p = kit.problem({"x": ((128, 64), F32), "y": ((128, 64), F32), "c": ((128, 1), F32), "z": ((128, 4, 8), F32)},
                    {"stt": ((128, 64), F32), "tsr": ((128, 64), F32), "red": ((128, 1), F32),
                     "cp": ((128, 64), F32), "scan": ((128, 4, 8), F32)}, """
def reference(x, y, c, z):
    t = x * 2.0
    flat = z.reshape(128, -1).astype(np.float64)
    return (x * c - y, t, t.sum(1, keepdims=True), x, np.cumsum(flat, axis=1).reshape(z.shape))
""", atol=1e-3, rtol=1e-4)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(x, y, c, z):
        stt, tsr, cp = (nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm) for _ in range(3))
        red = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        scan = nl.ndarray((128, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        i = nl.mgrid[0:128, 0:64]
        xt, yt, ct = nl.load(x[i.p, i.x]), nl.load(y), nl.load(c)
        nl.store(stt, nisa.scalar_tensor_tensor(data=xt, op0=np.multiply, operand0=ct, op1=np.subtract,
                                                operand1=yt))
        acc = nl.ndarray((128, 1), dtype=nl.float32)
        nl.store(tsr, nisa.tensor_scalar_reduce(data=xt, op0=np.multiply, operand0=2.0, reduce_op=np.add,
                                                reduce_res=acc))
        nl.store(red, acc)
        nisa.dma_copy(dst=cp, src=x)                         # HBM to HBM
        zt = nl.load(z)
        nl.store(scan, nisa.tensor_tensor_scan(zt, nl.zeros((128, 4, 8), nl.float32), 0.0, np.add, np.add))
        return stt, tsr, red, cp, scan
    """))


def test_forms_from_published_kernels(kit):
    """Constructs of published NKI kernels: a (P,) column as a per-partition operand, a (P, 1) reduction
    into a column view, masks mixing index comparisons with loop conditions, predicates comparing two
    index expressions, affine_select straight out of PSUM, and a moving tile with two free axes."""
    p = kit.problem({"x": ((128, 64), F32), "c": ((128, 8), F32)},
                    {"o": ((128, 64), F32), "m": ((128, 4), F32), "sel": ((128, 128), F32),
                     "mm": ((128, 4, 16), F32)}, """
def reference(x, c):
    o = np.maximum(x, c[:, 3:4])
    m = x.reshape(128, 4, 16).max(axis=2)
    sel = np.where(np.arange(128)[:, None] >= np.arange(128)[None, :], 128.0, -1.0)
    return o, m, sel, np.full((128, 4, 16), 128.0)
""", atol=1e-4, rtol=1e-4)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(x, c):
        o = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        m = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        sel = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        mm = nl.ndarray((128, 4, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        t = nl.load(x)
        nl.store(o, nisa.tensor_scalar(t, nl.maximum, nl.load(c[:, 3])))
        mx = nl.ndarray((128, 4), dtype=nl.float32)
        for k in nl.affine_range(4):
            mx[:, k] = nisa.tensor_reduce(np.max, t[i_p, k * 16 + nl.arange(16)[None, :]], axis=(1,))
        nl.store(m, mx)
        ip, jf = nl.mgrid[0:128, 0:128]
        ones = nl.ones((128, 128), nl.bfloat16)
        ps = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            ps[ip, jf] += nl.matmul(ones, ones, transpose_x=True, mask=(ip < 128) & (k < 1))
        nl.store(sel, nisa.affine_select(pred=(ip >= jf), on_true_tile=ps, on_false_value=-1.0))
        moving = nl.ones((128, 4, 16), nl.bfloat16)
        nl.store(mm, nl.copy(nisa.nc_matmul(ones, moving)))
        return o, m, sel, mm
    """))


def test_loop_reduce_accumulates_into_the_tile_it_is_assigned_to(kit):
    p = kit.problem({"x": ((4, 128, 64), F32)}, {"s": ((128, 64), F32), "m": ((128, 64), F32)}, """
def reference(x):
    return x.sum(axis=0), x.max(axis=0)
""", atol=1e-4, rtol=1e-4)
    ok(kit.evaluate(p, """
    @nki.jit
    def solution(x):
        s = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        m = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32)
        top = nl.full((128, 64), -1e30, nl.float32)
        for k in nl.affine_range(4):
            t = nl.load(x[k])
            acc[...] = nl.loop_reduce(t, op=np.add, loop_indices=[k], dtype=nl.float32)
            top[...] = nl.loop_reduce(t, op=np.maximum, loop_indices=[k])
        nl.store(s, acc)
        nl.store(m, top)
        return s, m
    """))
    misuse = kit.evaluate(p, """
    @nki.jit
    def solution(x):
        s = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(s, nl.loop_reduce(nl.load(x[0]), op=np.add, loop_indices=[0]))
        return s, s
    """)
    assert misuse.error_kind == "compile" and "assigned into its accumulator" in misuse.error, explain(misuse)
