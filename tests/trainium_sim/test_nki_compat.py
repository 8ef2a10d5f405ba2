"""NKI constructs that published trn1 kernels use (Autocomp's benchmark, the NKI tutorials), each in a small
kernel of our own that trainium-sim used to refuse and now runs correctly: the SDK's module layout
(neuronxcc.nki.typing, nki.tensor, neuronxcc.nki.language.constants), harness files' host-side imports,
`//` and `%` on index expressions, views of views, NKI's operand masking of matmul operands, SPMD launch
grids, list arguments, PSUM operands of nc_matmul, and the activation engine's accumulator registers
(nisa.reduce_cmd)."""
from __future__ import annotations

import dataclasses

import pytest

from autocomp_zmq.hw_runners.base import Problem
from tests.trainium_sim.simkit import SimKit, explain, ok

pytestmark = pytest.mark.system

F32, BF16 = "float32", "bfloat16"


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return SimKit(tmp_path_factory.mktemp("trn-compat"))


def refused(r, *needles):
    assert not r.correct and r.error_kind == "compile", explain(r)
    for n in needles:
        assert n in (r.error or ""), explain(r)


# -- module layout and annotations ----------------------------------------------------------------
def test_typing_annotations_and_language_package(kit):
    p = kit.problem({"a": ((128, 64), F32)}, {"out": ((128, 64), F32)},
                    "def reference(a):\n    return a * 2.0 + 4\n")
    r = kit.evaluate(p, """
        import neuronxcc.nki.typing as nt
        import neuronxcc.nki.language.constants as constants
        from neuronxcc.nki.language.constants import sizeinbytes
        from neuronxcc.nki.language import par_dim
        from neuronxcc.nki.typing import tensor

        DESCRIBED = nt.tensor[[128, 64], nl.bfloat16]      # what harnesses hand to nki.benchmark

        @nki.jit
        def solution(a: nt.tensor) -> nki.tensor:
            assert isinstance(a, nt.tensor) and isinstance(a, nki.tensor)
            assert sizeinbytes(nl.bfloat16) == 2 and constants.sizeinbytes(a.dtype) == 4
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            t: tensor[128, 64] = nl.load(a)
            buf = nl.ndarray((par_dim(128), 64), dtype=nl.float32)
            buf[...] = nl.multiply(t, 2.0)
            nl.store(out, nl.add(buf, float(sizeinbytes(nl.float32))))
            return out
    """)
    ok(r)


def test_host_side_imports_of_a_harness_file(kit):
    # a harness or tutorial file imports torch, scipy, time, argparse for its host-side code and sets
    # compiler flags at the top; the kernel in it runs unchanged
    p = kit.problem({"a": ((128, 64), F32)}, {"out": ((128, 64), F32)}, "def reference(a):\n    return np.exp(a)\n")
    header = """
        import os
        import time
        import argparse
        import torch
        import torch.nn.functional as F
        from scipy.special import softmax
        os.environ["NEURON_CC_FLAGS"] = "--auto-cast=none"

        class Model(torch.nn.Module):
            pass

        def host_reference(x: torch.Tensor) -> torch.Tensor:
            return torch.exp(x)

        @nki.jit
        def solution(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.exp(nl.load(a)))
    """
    ok(kit.evaluate(p, header + "        return out\n"))
    # using one of them inside the kernel is refused, naming it
    body = "        {}\n            return out\n"       # the header ends inside the kernel, indented
    refused(kit.evaluate(p, header + body.format("time.sleep(1)")), "time.sleep is not available")
    refused(kit.evaluate(p, header + body.format("Model()")), "Model derives from a module")


# -- index expressions ----------------------------------------------------------------------------
def test_floor_division_and_modulo_of_index_expressions(kit):
    # (4 * i + j) // 4 is i and % 4 is j for j in [0, 4); (i + 128 t) // 128 is t for i in [0, 128)
    p = kit.problem({"a": ((128, 32), F32)}, {"out": ((2, 32, 4), F32), "out2": ((128, 32), F32)}, """
def reference(a):
    x = a[:32].reshape(32, 4, 8)[:, :, 1]
    return np.stack([x, a[:32, 4:8]]), np.broadcast_to(a[:, 1:2], (128, 32))
""")
    ok(kit.evaluate(p, """
        @nki.jit
        def solution(a):
            out = nl.ndarray((2, 32, 4), dtype=a.dtype, buffer=nl.shared_hbm)
            out2 = nl.ndarray((128, 32), dtype=a.dtype, buffer=nl.shared_hbm)
            i = nl.arange(32)[:, None]
            j = nl.arange(4)[None, :]
            flat = 4 * i + j                            # element (i, j) of a 32 x 4 grid, flattened
            # row flat // 4 = i, column 8 * (flat % 4) + 1
            nl.store(out[0], nl.load(a[flat // 4, 8 * (flat % 4) + 1]))
            nl.store(out[1], nl.load(a[(i + 128 * 3) % 128, (j + 28) % 7 + (j + 28) // 7]))   # a[i, j + 4]
            ip = nl.arange(128)[:, None]
            t = nl.load(a[ip, (ip + 128) // 128])        # column 1, for every row
            nl.store(out2, t.broadcast_to((128, 32)))
            return out, out2
    """))


def test_a_non_affine_division_is_refused_with_a_reason(kit):
    p = kit.problem({"a": ((128, 64), F32)}, {"out": ((128, 64), F32)}, "def reference(a):\n    return a\n")
    refused(kit.evaluate(p, """
        @nki.jit
        def solution(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            i = nl.arange(128)[:, None]
            nl.store(out, nl.load(a[i // 2, nl.arange(64)[None, :]]))
            return out
    """), "is not affine")


def test_a_view_of_a_view_of_an_hbm_tensor(kit):
    # x[b, h] then [rows, cols] (the rotary tutorial's pattern), with a mask on a ragged last tile
    p = kit.problem({"x": ((2, 3, 200, 16), F32)}, {"out": ((2, 3, 200, 16), F32)},
                    "def reference(x):\n    return x * 3\n")
    ok(kit.evaluate(p, """
        @nki.jit
        def solution(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            i_p, i_f = nl.mgrid[0:128, 0:16]
            for b in nl.affine_range(2):
                for h in nl.affine_range(3):
                    src, dst = x[b, h], out[b, h]
                    for t in nl.affine_range(2):
                        rows = t * 128 + i_p
                        v = nl.load(src[rows, i_f], mask=rows < 200)
                        nl.store(dst[rows, i_f], nl.multiply(v, 3.0), mask=rows < 200)
            return out
    """))


# -- operand masking ------------------------------------------------------------------------------
def test_operand_masks_of_nc_matmul(kit):
    # stationary[i_m < 48] and moving[i_n < 200]: the product is computed on that part only; the rest of the
    # PSUM tile keeps what it held (here: zeros); a Python bool as a mask keeps everything
    p = kit.problem({"a": ((128, 64), F32), "b": ((128, 256), F32)}, {"out": ((64, 256), F32)}, """
def reference(a, b):
    r = a.astype(np.float64).T @ b
    r[48:, :] = 0
    r[:, 200:] = 0
    return r
""", atol=1e-3, rtol=1e-4)
    ok(kit.evaluate(p, """
        @nki.jit
        def solution(a, b):
            out = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
            at, bt = nl.load(a), nl.load(b)
            i_k = nl.arange(128)[:, None]
            i_m = nl.arange(64)[None, :]
            i_n = nl.arange(256)[None, :]
            s = at[i_k, i_m]
            m = bt[i_k, i_n]
            ps = nl.zeros((64, 256), nl.float32, buffer=nl.psum)
            ps[...] += nisa.nc_matmul(s[i_m < 48], m[i_n < 200][3 < 5])
            nl.store(out, nl.copy(ps))
            return out
    """))


def test_an_operand_mask_outside_matmul_is_refused(kit):
    p = kit.problem({"a": ((128, 64), F32)}, {"out": ((128, 64), F32)}, "def reference(a):\n    return a\n")
    refused(kit.evaluate(p, """
        @nki.jit
        def solution(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            t = nl.load(a)
            i_f = nl.arange(64)[None, :]
            v = t[nl.arange(128)[:, None], i_f]
            nl.store(out, nl.exp(v[i_f < 32]))
            return out
    """), "operand mask")


# -- launch grids and arguments -------------------------------------------------------------------
def test_an_spmd_launch_grid(kit):
    # kernel[2, 3](...): every instance runs, each on its tile; nl.shared_hbm output shared by all
    p = kit.problem({"a": ((256, 384), F32)}, {"out": ((256, 384), F32)},
                    "def reference(a):\n    return a + 1\n")
    ok(kit.evaluate(p, """
        @nki.jit
        def add_one(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            assert nl.program_ndim() == 2 and nl.num_programs() == 6 and nl.num_programs(axes=1) == 3
            i = nl.program_id(0) * 128 + nl.arange(128)[:, None]
            j = nl.program_id(axis=1) * 128 + nl.arange(128)[None, :]
            nl.store(out[i, j], nl.add(nl.load(a[i, j]), 1.0))
            return out

        def solution(a):
            return add_one[2, 3](a)
    """))


def test_a_list_argument_stays_a_list(kit):
    # a harness calls solution(img, out_perm=[0, 1, 2, 3]) and the kernel compares with a list
    p = kit.problem({"a": ((128, 64), F32)}, {"out": ((128, 64), F32)}, """
def reference(a, perm):
    return a * len(perm)
""")
    spec = dataclasses.replace(kit.sim.spec(p), kwargs={"perm": [0, 1, 2, 3]})
    listed = Problem(name=p.name, target=p.target, family=p.family, dims={}, description="", kernels={},
                     semantics=spec)
    ok(kit.sim.evaluate(listed, kit_code("""
        @nki.jit
        def solution(a, perm=None):
            assert perm == [0, 1, 2, 3], perm
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.multiply(nl.load(a), 4.0))
            return out
    """)))


def kit_code(body: str) -> str:
    import textwrap

    from tests.trainium_sim.simkit import HEADER
    return HEADER + textwrap.dedent(body)


# -- the Tensor engine's operands; the Scalar engine's accumulators ---------------------------------
def test_a_psum_operand_of_nc_matmul(kit):
    # an nc_transpose result (PSUM) fed straight to nc_matmul: the compiler's copy to SBUF is issued
    p = kit.problem({"a": ((64, 128), F32), "b": ((128, 256), F32)}, {"out": ((64, 256), F32)}, """
def reference(a, b):
    return a.astype(np.float64) @ b
""", atol=1e-3, rtol=1e-4)
    r = kit.evaluate(p, """
        @nki.jit
        def solution(a, b):
            out = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
            a_t = nisa.nc_transpose(nl.load(a))          # (128, 64) in PSUM
            ps = nisa.nc_matmul(stationary=a_t, moving=nl.load(b))
            nl.store(out, nl.copy(ps))
            return out
    """)
    ok(r)


def test_storing_a_psum_tile(kit):
    # NKI documents an extra copy to SBUF for nl.store of a PSUM tile
    p = kit.problem({"a": ((128, 64), F32), "b": ((128, 32), F32)}, {"out": ((64, 32), F32)},
                    "def reference(a, b):\n    return a.astype(np.float64).T @ b * 0.5\n", atol=1e-3, rtol=1e-4)
    ok(kit.evaluate(p, """
        @nki.jit
        def solution(a, b):
            out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
            acc = nl.zeros((64, 32), nl.float32, buffer=nl.psum)
            acc += nisa.nc_matmul(nl.load(a), nl.load(b))
            acc[...] = nisa.tensor_scalar(acc, nl.multiply, 0.5, engine=nisa.vector_engine)
            nl.store(out, acc)
            return out
    """))


def test_activation_accumulator_registers(kit):
    # reset_reduce, then reduce: the registers sum exp over four column chunks; idle reads them out; reset
    # zeroes them; activation_reduce (no reduce_cmd) still reduces one instruction
    p = kit.problem({"x": ((128, 256), F32)}, {"out": ((128, 4), F32)}, """
def reference(x):
    e = np.exp(x.astype(np.float64))
    return np.stack([e.sum(axis=1), np.zeros(128), e[:, :64].sum(axis=1), e[:, 64:].sum(axis=1)], axis=1)
""", atol=1e-3, rtol=1e-4)
    ok(kit.evaluate(p, """
        @nki.jit
        def solution(x):
            out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
            t = nl.load(x)
            res = nl.ndarray((128, 4), dtype=nl.float32)
            for k in nl.sequential_range(4):
                cmd = nisa.reduce_cmd.reset_reduce if k == 0 else nisa.reduce_cmd.reduce
                nisa.activation(op=nl.exp, data=t[:, k * 64:(k + 1) * 64], reduce_op=nl.add, reduce_cmd=cmd)
            nisa.activation(op=nl.copy, data=t[:, 0:1], reduce_res=res[:, 0], reduce_cmd=nisa.reduce_cmd.idle)
            nisa.activation(op=nl.copy, data=t[:, 0:1], reduce_res=res[:, 1], reduce_cmd=nisa.reduce_cmd.reset)
            nisa.activation_reduce(op=nl.exp, data=t[:, 0:64], reduce_op=nl.add, reduce_res=res[:, 2])
            nisa.activation(op=nl.exp, data=t[:, 64:256], reduce_op=nl.add, reduce_res=res[:, 3],
                            reduce_cmd=nisa.reduce_cmd.reset_reduce)
            nl.store(out, res)
            return out
    """))


def test_accumulator_registers_never_reset_hold_garbage(kit):
    p = kit.problem({"x": ((128, 64), F32)}, {"out": ((128, 1), F32)},
                    "def reference(x):\n    return np.exp(x.astype(np.float64)).sum(axis=1, keepdims=True)\n")
    r = kit.evaluate(p, """
        @nki.jit
        def solution(x):
            out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
            res = nl.ndarray((128, 1), dtype=nl.float32)
            nisa.activation(op=nl.exp, data=nl.load(x), reduce_op=nl.add, reduce_res=res,
                            reduce_cmd=nisa.reduce_cmd.reduce)
            nl.store(out, res)
            return out
    """)
    assert not r.correct and r.error_kind == "wrong_result", explain(r)


# -- smaller calls of the NKI v1 API -------------------------------------------------------------
def test_more_nl_and_nisa_calls(kit):
    p = kit.problem({"a": ((128, 64), F32), "i": ((128, 64), "int32")}, {"out": ((9, 128, 64), F32)}, """
def reference(a, i):
    a = a.astype(np.float64)
    var = a.var(axis=1, keepdims=True)
    return np.stack([np.tan(a * 0.5), 2 / np.sqrt(np.pi) * np.exp(-a * a), a / (1 + np.exp(-1.702 * a)),
                     np.mod(a, 0.75), np.fmod(a, 0.75), np.broadcast_to(var, a.shape),
                     (i.astype(np.int64) << 2) + (i.astype(np.int64) >> 1), a + a, np.where(a > 0, a, -1.0)])
""", make_inputs="""
def make_inputs(rng):
    return {"a": rng.standard_normal((128, 64)).astype(np.float32),
            "i": rng.integers(0, 1000, size=(128, 64)).astype(np.int32)}
""", atol=1e-4, rtol=1e-4)
    ok(kit.evaluate(p, """
        @nki.jit
        def solution(a, i):
            out = nl.ndarray((9, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
            t = nl.load(a)
            n = nl.load(i)
            nl.store(out[0], nl.tan(nl.multiply(t, 0.5)))
            nl.store(out[1], nl.erf_dx(t))
            nl.store(out[2], nl.gelu_apprx_sigmoid(t))
            nl.store(out[3], nl.mod(t, 0.75))
            nl.store(out[4], nisa.tensor_scalar(t, np.fmod, 0.75))
            nl.store(out[5], nl.var(t, axis=1).broadcast_to((128, 64)))
            shifted = nl.add(nl.left_shift(n, 2), nisa.tensor_scalar(n, np.right_shift, 1))
            nl.store(out[6], nl.static_cast(shifted, nl.float32))
            nl.store(out[7], t)
            nisa.dma_copy(dst=out[7], src=t, dst_rmw_op=np.add)            # out[7] = a + a
            keep = nl.ndarray((128, 64), dtype=nl.float32)
            keep[...] = nl.full((128, 64), -1.0, nl.float32)
            nisa.tensor_copy_predicated(src=t, dst=keep, predicate=nl.greater(t, 0.0, dtype=nl.uint8))
            nl.store(out[8], keep)
            return out
    """))


def test_expand_dims_and_static_cast(kit):
    p = kit.problem({"a": ((128, 64), F32)}, {"out": ((128, 64, 3), F32)},
                    "def reference(a):\n    return np.broadcast_to(a[:, :, None], (128, 64, 3)) * 2\n")
    ok(kit.evaluate(p, """
        @nki.jit
        def solution(a):
            out = nl.ndarray((128, 64, 3), dtype=a.dtype, buffer=nl.shared_hbm)
            t = nl.load(a)
            e = nl.expand_dims(t, 2)                         # (128, 64, 1), a view of t
            two = nl.static_cast(2, nl.float32)
            nl.store(out, nl.multiply(e.broadcast_to((128, 64, 3)), two))
            return out
    """))


def test_dma_transpose(kit):
    p = kit.problem({"a": ((64, 128), F32)}, {"out": ((128, 64), F32)}, "def reference(a):\n    return a.T\n")
    ok(kit.evaluate(p, """
        @nki.jit
        def solution(a):
            out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nisa.dma_transpose(nl.load(a)))
            return out
    """))


def test_a_masked_activation_accumulates_its_masked_elements_only(kit):
    p = kit.problem({"x": ((128, 64), F32)}, {"out": ((128, 1), F32)},
                    "def reference(x):\n    return np.exp(x[:, :40].astype(np.float64)).sum(axis=1, keepdims=True)\n",
                    atol=1e-3, rtol=1e-4)
    ok(kit.evaluate(p, """
        @nki.jit
        def solution(x):
            out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
            res = nl.ndarray((128, 1), dtype=nl.float32)
            i_p, i_f = nl.mgrid[0:128, 0:64]
            nisa.activation(op=nl.exp, data=nl.load(x)[i_p, i_f], reduce_op=nl.add, reduce_res=res,
                            reduce_cmd=nisa.reduce_cmd.reset_reduce, mask=i_f < 40)
            nl.store(out, res)
            return out
    """))
