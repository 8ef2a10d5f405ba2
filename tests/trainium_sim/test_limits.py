"""Kernels that break an NKI rule or a NeuronCore-v2 limit get a failed verdict that says why and where.

Each case evaluates one small kernel and requires: correct=False, the expected error kind, words that
identify the rule or the call, and the kernel.py line of the offending call (the line the message must
cite, computed from the kernel text itself).
"""
from __future__ import annotations

import pytest

from tests.trainium_sim.simkit import SimKit, explain, line_of

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return SimKit(tmp_path_factory.mktemp("trn-limits"))


@pytest.fixture(scope="module")
def prob(kit):
    """x [256, 1024] fp32 in, out = x[:128, :64] fp32 out: big enough for every limit below."""
    return kit.problem({"x": ((256, 1024), "float32")}, {"out": ((128, 64), "float32")}, """
def reference(x):
    return x[:128, :64]
""")


def kernel(body: str) -> str:
    """solution(x) allocating the right output, running `body` (4-space indented), returning out."""
    lines = "\n".join("    " + line for line in body.strip("\n").splitlines())
    return ("@nki.jit\ndef solution(x):\n    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
            f"{lines}\n    return out\n")


def fails(kit, prob, body: str, marker: str, *needles: str, kind: str = "compile") -> str:
    """Evaluate; require a failure of `kind` citing the line holding `marker` and containing `needles`."""
    code = kernel(body)
    r = kit.evaluate(prob, code)
    assert not r.correct and r.error_kind == kind, explain(r)
    line = line_of(code, marker)
    assert f"line {line}" in r.error, f"expected line {line}:\n{explain(r)}"
    for n in needles:
        assert n.lower() in r.error.lower(), f"expected {n!r}:\n{explain(r)}"
    return r.error


def test_the_valid_kernel_passes(kit, prob):
    r = kit.evaluate(prob, kernel("nl.store(out, nl.load(x[0:128, 0:64]))"))
    assert r.correct, explain(r)


def test_tile_with_more_than_128_partitions(kit, prob):
    fails(kit, prob, """
t = nl.load(x[0:256, 0:64])           # LOAD
nl.store(out, t[0:128, :])
""", "# LOAD", "256 partitions", "at most 128")


def test_ndarray_with_more_than_128_partitions(kit, prob):
    fails(kit, prob, """
big = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.sbuf)   # ALLOC
big[0:128, :] = nl.load(x[0:128, 0:64])
nl.store(out, big[0:128, :])
""", "# ALLOC", "256 partitions", "at most 128")


STATIONARY_256 = """
s = nl.load(x[0:128, 0:256])
m = nl.load(x[0:128, 0:128])
r = nisa.nc_matmul(s, m)              # MM
nl.store(out, nl.copy(r[0:128, 0:64]))
"""


def test_stationary_free_size_over_128(kit, prob):
    fails(kit, prob, STATIONARY_256, "# MM", "256")


def test_stationary_free_size_over_128_names_the_call(kit, prob):
    fails(kit, prob, STATIONARY_256, "# MM", "nc_matmul", "stationary", "at most 128")


def test_moving_free_size_over_512(kit, prob):
    fails(kit, prob, """
s = nl.load(x[0:128, 0:128])
m = nl.load(x[0:128, 0:1024])
r = nisa.nc_matmul(s, m)              # MM
nl.store(out, nl.copy(r[0:128, 0:64]))
""", "# MM", "nc_matmul", "moving", "1024", "at most 512")


def test_psum_tile_over_one_bank(kit, prob):
    fails(kit, prob, """
acc = nl.zeros((128, 1024), nl.float32, buffer=nl.psum)       # PSUM
nl.store(out, nl.copy(acc[:, 0:64]))
""", "# PSUM", "PSUM", "2 KiB")


SBUF_OVERFLOW = """
t1 = nl.ndarray((128, 16384), dtype=nl.float32)     # T1
t2 = nl.ndarray((128, 16384), dtype=nl.float32)     # T2
t3 = nl.ndarray((128, 16384), dtype=nl.float32)     # T3
t4 = nl.ndarray((128, 16384), dtype=nl.float32)     # T4
for k in nl.affine_range(16):
    t1[:, k * 1024:(k + 1) * 1024] = nl.load(x[0:128, :])
    t2[:, k * 1024:(k + 1) * 1024] = nl.load(x[0:128, :])
    t3[:, k * 1024:(k + 1) * 1024] = nl.load(x[0:128, :])
    t4[:, k * 1024:(k + 1) * 1024] = nl.load(x[0:128, :])
s = nl.add(nl.add(t1[:, 0:64], t2[:, 0:64]), nl.add(t3[:, 0:64], t4[:, 0:64]))
nl.store(out, s)
"""


def test_sbuf_overflow_spills_and_the_feedback_names_the_lines(kit, prob):
    # four live tiles of 64 KiB per partition: 256 KiB > 176 KiB usable; the compiler spills rather than
    # refusing, so the kernel runs (it computes something else than the problem asks) at the cost of the spill
    code = kernel(SBUF_OVERFLOW)
    r = kit.evaluate(prob, code)
    assert r.error_kind == "wrong_result", explain(r)
    lines = {line_of(code, f"# T{i}") for i in range(1, 5)}
    assert r.feedback["spilled_lines"] and set(r.feedback["spilled_lines"]) <= lines, r.feedback
    assert r.feedback["spill_bytes"] > 0 and "spilled to HBM" in r.feedback_text


def test_psum_past_8_banks_spills_and_the_feedback_names_the_lines(kit, prob):
    # nine PSUM tiles alive at once: the compiler spills (as it did for Autocomp's attention kernel on a trn1)
    allocs = "\n".join(f"p{i} = nl.zeros((128, 512), nl.float32, buffer=nl.psum)     # P{i}" for i in range(9))
    uses = " + ".join(f"nl.copy(p{i}[:, 0:64])" for i in range(9))
    code = kernel(f"{allocs}\nnl.store(out, {uses})\n")
    r = kit.evaluate(prob, code)
    assert r.error_kind == "wrong_result", explain(r)       # it runs; zeros are not the problem's answer
    assert set(r.feedback["spilled_lines"]) <= {line_of(code, f"# P{i}") for i in range(9)}, r.feedback
    assert r.feedback["spill_bytes"] > 0 and "spilled to HBM" in r.feedback_text


def test_matmul_operand_not_in_sbuf(kit, prob):
    # nisa.nc_matmul(psum_tile, ...) gets the compiler's copy to SBUF (test_nki_compat); a stream whose matmul
    # reads PSUM itself is still refused by the replayer
    fails(kit, prob, """
s = nl.load(x[0:128, 0:128])
ps = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
r = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
nl.RECORDER.emit("matmul", "pe", [r.view()], [ps.view(), s], {"acc": False})     # MM
nl.store(out, nl.copy(r[:, 0:64]))
""", "# MM", "nc_matmul", "SBUF", "PSUM")


def test_matmul_result_not_in_psum(kit, prob):
    fails(kit, prob, """
s = nl.load(x[0:128, 0:128])
sb = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
sb[...] = nisa.nc_matmul(s, s)         # MM
nl.store(out, sb[:, 0:64])
""", "# MM", "nc_matmul", "result in PSUM")


def test_compute_on_an_hbm_tensor(kit, prob):
    fails(kit, prob, """
e = nl.exp(x[0:128, 0:64])             # EXP
nl.store(out, e)
""", "# EXP", "exp", "HBM", "nl.load")


def test_store_from_psum(kit, prob):
    # nl.store of a PSUM tile gets NKI's extra copy to SBUF (test_nki_compat); a DMA that reads PSUM itself (a
    # forged stream) is refused by the replayer
    fails(kit, prob, """
ps = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
nl.RECORDER.emit("dma", "dma", [out.view()], [ps.view()], {})     # STORE
""", "# STORE", "nl.store", "PSUM")


def test_integer_index_out_of_bounds(kit, prob):
    fails(kit, prob, """
t = nl.load(x[300, 0:64])              # LOAD
nl.store(out, t)
""", "# LOAD", "out of bounds", "300")


def test_affine_index_out_of_bounds(kit, prob):
    fails(kit, prob, """
i_p, i_f = nl.mgrid[0:128, 0:64]
t = nl.load(x[i_p + 200, i_f])         # LOAD
nl.store(out, t)
""", "# LOAD", "nl.load", "out of bounds", "200..327")


def test_slice_past_the_end_is_out_of_bounds(kit, prob):
    fails(kit, prob, """
t = nl.load(x[0:128, 960:1088])        # LOAD
nl.store(out, t[:, 0:64])
""", "# LOAD", "out of bounds")


PARTITION_SUM = """
t = nl.load(x[0:128, 0:64])
s = nl.sum(t, axis=0)                  # SUM
nl.store(out, t)
"""


def test_reduction_over_the_partition_axis(kit, prob):
    fails(kit, prob, PARTITION_SUM, "# SUM", "cannot reduce along the partition dimension")


def test_reduction_over_the_partition_axis_names_the_call(kit, prob):
    fails(kit, prob, PARTITION_SUM, "# SUM", "nl.sum")


def test_a_vector_engine_transpose_over_32x32_runs_on_the_tensor_engine(kit, prob):
    # the Vector engine transposes 32x32 at most; Autocomp's sd-attention step 3 asks it for (128, 64) and ran
    # correctly on a trn1, so the compiler moved it: it is priced on the Tensor engine
    r = kit.evaluate(prob, kernel("""
t = nl.load(x[0:64, 0:64])
tt = nisa.nc_transpose(t, engine=nisa.engine.vector)    # TR
nl.store(out[0:64, :], tt)
nl.store(out[64:128, :], tt)
"""))
    assert r.error_kind == "wrong_result", explain(r)          # it runs (a transpose is not this problem's answer)
    assert r.feedback["instructions"].get("Tensor", 0) >= 1, r.feedback


def test_unsupported_dtype(kit, prob):
    fails(kit, prob, """
t = nl.ndarray((128, 64), dtype=np.float64)    # ALLOC
nl.store(out, t)
""", "# ALLOC", "unsupported dtype", "float64")


def test_returning_an_sbuf_tile(kit):
    p = kit.problem({"x": ((128, 64), "float32")}, {"out": ((128, 64), "float32")}, """
def reference(x):
    return x
""")
    code = """
    @nki.jit
    def solution(x):
        t = nl.load(x)
        return t
    """
    r = kit.evaluate(p, code)
    assert not r.correct and r.error_kind == "compile", explain(r)
    assert "must return the HBM tensor" in r.error and "sbuf" in r.error, explain(r)


@pytest.mark.parametrize("alloc,needle", [
    ("nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)", "float32[128, 32]"),
    ("nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.shared_hbm)", "bfloat16[128, 64]"),
])
def test_wrong_output_shape_or_dtype(kit, prob, alloc, needle):
    code = f"""
@nki.jit
def solution(x):
    out = {alloc}
    t = nl.load(x[0:128, 0:{32 if '32)' in alloc else 64}])
    nl.store(out, t)
    return out
"""
    r = kit.evaluate(prob, code)
    assert not r.correct and r.error_kind == "compile", explain(r)
    assert "output out must be a new HBM tensor float32[128, 64]" in r.error and needle in r.error, explain(r)


def test_returning_too_many_outputs(kit, prob):
    code = """
@nki.jit
def solution(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x[0:128, 0:64]))
    return out, out
"""
    r = kit.evaluate(prob, code)
    assert not r.correct and r.error_kind == "compile" and "returned 2 tensor(s)" in r.error, explain(r)


def test_tile_in_python_control_flow(kit, prob):
    fails(kit, prob, """
t = nl.load(x[0:128, 0:64])
if nl.greater(t, 0.0):                 # IF
    t = nl.negative(t)
nl.store(out, t)
""", "# IF", "control flow")


def test_numpy_array_as_an_operand(kit, prob):
    fails(kit, prob, """
t = nl.load(x[0:128, 0:64])
u = nl.add(t, np.ones((128, 64), dtype=np.float32))      # ADD
nl.store(out, u)
""", "# ADD", "nl.add", "ndarray")


def test_numpy_array_as_an_isa_operand(kit, prob):
    fails(kit, prob, """
t = nl.load(x[0:128, 0:64])
u = nisa.tensor_tensor(t, np.ones((128, 64), dtype=np.float32), op=np.add)     # TT
nl.store(out, u)
""", "# TT", "tensor_tensor", "ndarray")


def test_numpy_on_a_tile(kit, prob):
    fails(kit, prob, """
t = nl.load(x[0:128, 0:64])
u = np.exp(t)                          # NP
nl.store(out, t)
""", "# NP", "not numpy arrays")
