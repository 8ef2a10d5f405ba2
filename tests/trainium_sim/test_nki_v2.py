"""NKI v2 (`import nki`, Neuron SDK 2.27+) on trainium-sim: kernels written in the v2 dialect are traced by the
v2 front end into the same instruction stream, replayed and judged; v1-only forms give the v2 error; the
`platform` option (trn1 / trn2 / trn3) changes the limits and the timing."""
from __future__ import annotations

import pytest

from tests.trainium_sim.simkit import SimKit, explain, ok

pytestmark = pytest.mark.system

V2 = "import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\n"

ADD = V2 + """
@nki.jit
def solution(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    M, N = a.shape
    for m in nl.affine_range(M // 128):
        rows = slice(m * 128, (m + 1) * 128)
        a_tile = nl.ndarray((128, N), dtype=a.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((128, N), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a[rows, 0:N])
        nisa.dma_copy(dst=b_tile, src=b[rows, 0:N])
        c_tile = nl.ndarray((128, N), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.OP)
        nisa.dma_copy(dst=out[rows, 0:N], src=c_tile)
    return out
"""

# lhsT [K, M] and rhs [K, N] -> lhsT.T @ rhs, tiled over K with PSUM accumulation (ACC: the accumulate= argument)
MATMUL = V2 + """
@nki.jit
def solution(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        acc = nl.ndarray((128, N), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            lt = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
            rt = nl.ndarray((128, N), dtype=rhs.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=lt, src=lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
            nisa.dma_copy(dst=rt, src=rhs[k * 128:(k + 1) * 128, 0:N])
            nisa.nc_matmul(dst=acc, stationary=lt, moving=rt ACC)
        res = nl.ndarray((128, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, 0:N], src=res)
    return out
"""

# row maxima (nisa.tensor_reduce) and row sums (nl.sum, the 0.3.0 convenience API), stored side by side
REDUCE = V2 + """
@nki.jit
def solution(x):
    P, F = x.shape
    out = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    r = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=r[0:P, 0:1], op=nl.OP, data=t, axis=1)
    nisa.tensor_copy(dst=r[0:P, 1:2], src=nl.sum(t, axis=1, keepdims=True))
    nisa.dma_copy(dst=out, src=r)
    return out
"""


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return SimKit(tmp_path_factory.mktemp("trn-v2"))


@pytest.fixture(scope="module")
def add_prob(kit):
    return kit.problem({"a": ((256, 512), "float32"), "b": ((256, 512), "float32")},
                       {"out": ((256, 512), "float32")}, "def reference(a, b):\n    return a + b\n")


@pytest.fixture(scope="module")
def mm_prob(kit):
    return kit.problem({"lhsT": ((512, 256), "float32"), "rhs": ((512, 512), "float32")},
                       {"out": ((256, 512), "float32")},
                       "def reference(lhsT, rhs):\n    return lhsT.astype(np.float64).T @ rhs\n", atol=1e-2, rtol=1e-3)


def run(kit, prob, code: str, **kw):
    return kit.evaluate(prob, code, header=False, **kw)


def test_tensor_add_is_traced_replayed_and_correct_on_trn2_by_default(kit, add_prob):
    r = run(kit, add_prob, ADD.replace("OP", "add"))
    ok(r)
    assert r.feedback["platform"] == "trn2", r.feedback
    assert r.feedback["instructions"] == {"DMA": 6, "Vector": 2}, r.feedback


def test_a_wrong_v2_kernel_is_judged_wrong(kit, add_prob):
    r = run(kit, add_prob, ADD.replace("OP", "subtract"))
    assert not r.correct and r.error_kind == "wrong_result", explain(r)


@pytest.mark.parametrize("acc", ["", ", accumulate=(k > 0)"])
def test_tiled_matmul_accumulates_in_psum(kit, mm_prob, acc):
    # accumulate=None: the first matmul into a PSUM location overwrites, the later ones accumulate
    # (nisa.nc_matmul's reference); the explicit form says the same
    r = run(kit, mm_prob, MATMUL.replace(" ACC", acc))
    ok(r)
    assert r.feedback["instructions"]["Tensor"] == 2 * 4


def test_matmul_that_never_accumulates_is_wrong(kit, mm_prob):
    r = run(kit, mm_prob, MATMUL.replace(" ACC", ", accumulate=False"))
    assert not r.correct and r.error_kind == "wrong_result", explain(r)


def test_reductions(kit):
    p = kit.problem({"x": ((128, 256), "float32")}, {"out": ((128, 2), "float32")},
                    "def reference(x):\n    return np.stack([x.max(axis=1), x.sum(axis=1)], axis=1)\n")
    ok(run(kit, p, REDUCE.replace("OP", "maximum")))
    r = run(kit, p, REDUCE.replace("OP", "minimum"))
    assert not r.correct and r.error_kind == "wrong_result", explain(r)


def test_access_pattern_view(kit):
    # `tensor.ap([[stride, num], ...])` (the average-pool tutorial's 2x2 windows) reduced with nl.sum
    p = kit.problem({"x": ((64, 8, 8), "float32")}, {"out": ((64, 4, 4), "float32")},
                    "def reference(x):\n    return x.reshape(64, 4, 2, 4, 2).sum(axis=(2, 4))\n")
    code = V2 + """
@nki.jit
def solution(x):
    out = nl.ndarray((64, 4, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.sum(t.ap([[64, 64], [16, 4], [2, 4], [8, 2], [1, 2]]), axis=[3, 4])
    nisa.dma_copy(dst=out, src=s)
    return out
"""
    ok(run(kit, p, code))


# -- v1-only forms in a v2 kernel: the v2 error, naming the replacement -------------------------------------
@pytest.mark.parametrize("old,new,needle", [
    ("nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.OP)",
     "nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add, mask=None)",
     "mask= parameter was removed in NKI 0.2.0"),
    ("nisa.dma_copy(dst=a_tile, src=a[rows, 0:N])", "i_p = nl.arange(128)[:, None]",
     "nl.arange was removed in NKI 0.2.0"),
    ("nisa.dma_copy(dst=a_tile, src=a[rows, 0:N])", "i_p, i_f = nl.mgrid[0:128, 0:512]",
     "nl.mgrid was removed in NKI 0.2.0"),
    ("a_tile = nl.ndarray((128, N), dtype=a.dtype, buffer=nl.sbuf)",
     "a_tile = nl.ndarray((1, nl.par_dim(128), N), dtype=a.dtype, buffer=nl.sbuf)", "nl.par_dim"),
    ("nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.OP)",
     "c_tile = nisa.tensor_tensor(a_tile, b_tile, op=nl.add)", "missing 1 required positional argument"),
    ("import nki.isa as nisa\n", "import nki.isa as nisa\nimport neuronxcc.nki.language as nl1\n",
     "imports both NKI v1 (neuronxcc.nki) and NKI v2 (nki)"),
    ("    out = nl.ndarray(", "    __import__('neuronxcc.nki.language')\n    out = nl.ndarray(",
     "imports both NKI v1"),
])
def test_v1_forms_give_the_v2_error(kit, add_prob, old, new, needle):
    code = ADD.replace("OP", "add")
    assert old.replace("OP", "add") in code or old in ADD
    r = run(kit, add_prob, code.replace(old.replace("OP", "add"), new))
    assert not r.correct and r.error_kind == "compile", explain(r)
    assert needle in r.error, explain(r)


def test_par_dim_as_the_first_dimension_is_accepted(kit, add_prob):
    # Autocomp's NKI v2 gemm marks its tiles' first dimension so (sols/trn-tutorial-nki2/2_gemm_ref.py) and ran on
    # trn2; before, any nl.par_dim was refused. Anywhere else it is a block dimension (test above).
    code = ADD.replace("OP", "add").replace("nl.ndarray((128, N)", "nl.ndarray((nl.par_dim(128), N)")
    assert "nl.par_dim(128)" in code
    r = run(kit, add_prob, code)
    assert r.correct, explain(r)


def test_dma_from_psum_is_refused(kit, mm_prob):
    code = MATMUL.replace(" ACC", "").replace("        nisa.tensor_copy(dst=res, src=acc)\n", "").replace(
        "src=res)", "src=acc)")
    r = run(kit, mm_prob, code)
    assert not r.correct and "cannot read or write PSUM (NKI 0.3.0)" in (r.error or ""), explain(r)


def test_v1_kernels_still_run_on_trn1_by_default(kit, add_prob):
    code = """
@nki.jit
def solution(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(2):
        nl.store(out[m * 128:(m + 1) * 128], nl.add(nl.load(a[m * 128:(m + 1) * 128]),
                                                    nl.load(b[m * 128:(m + 1) * 128])))
    return out
"""
    r = kit.evaluate(add_prob, code)
    ok(r)
    assert r.feedback["platform"] == "trn1"


# -- platforms ----------------------------------------------------------------------------------------------
def test_platform_option_is_checked(tmp_path):
    with pytest.raises(ValueError, match="platform must be one of trn1, trn2, trn3"):
        SimKit(tmp_path, platform="trn9")


def test_sbuf_limit_follows_the_platform(tmp_path):
    # a tile of 200 KiB per partition: over NeuronCore-v2's 192 KiB SBUF partition, within NeuronCore-v3's 224 KiB
    code = V2 + """
@nki.jit
def solution(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    big = nl.ndarray((128, 51200), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=big[0:128, 0:512], src=a)
    nisa.dma_copy(dst=out, src=big[0:128, 0:512])
    return out
"""
    verdicts = {}
    for platform in ("trn1", "trn2"):
        kit = SimKit(tmp_path / platform, platform=platform)
        p = kit.problem({"a": ((128, 512), "float32")}, {"out": ((128, 512), "float32")},
                        "def reference(a):\n    return a\n")
        verdicts[platform] = run(kit, p, code)
    assert not verdicts["trn1"].correct and "SBUF has 196,608" in verdicts["trn1"].error, explain(verdicts["trn1"])
    ok(verdicts["trn2"])


def test_timing_follows_the_platform(tmp_path):
    """bf16 tensor_scalar work on the Vector engine: NeuronCore-v3's performance mode (4x for SBUF BF16 with
    contiguous elements, at 0.96 GHz against 1.12) makes it faster on trn2; the same kernel in fp32 gets no
    performance mode and runs at the lower clock, so it is slower on trn2."""
    code = V2 + """
@nki.jit
def solution(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    for i in nl.sequential_range(64):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=1.0)
    nisa.dma_copy(dst=out, src=t)
    return out
"""
    latency = {}
    for dtype in ("bfloat16", "float32"):
        for platform in ("trn1", "trn2", "trn3"):
            kit = SimKit(tmp_path / f"{platform}-{dtype}", platform=platform)
            p = kit.problem({"a": ((128, 2048), dtype)}, {"out": ((128, 2048), dtype)},
                            "def reference(a):\n    return a\n", atol=1e-2, rtol=1e-2)
            r = run(kit, p, code)
            ok(r)
            latency[platform, dtype] = r.latency
    assert latency["trn2", "bfloat16"] < latency["trn1", "bfloat16"] / 2, latency
    assert latency["trn2", "float32"] > latency["trn1", "float32"], latency
    assert latency["trn3", "float32"] < latency["trn2", "float32"], latency      # Vector at 1.2 GHz
