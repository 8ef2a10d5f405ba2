"""NKI 0.6.0's loops (nl.fori_loop, nl.while_loop, the end of nl.dynamic_range) and nisa.nc_n_gather on
trainium-sim's NKI v2 front end: kernels using them judged correct, misuse and device-only values refused
by name."""
from __future__ import annotations

import pytest

from tests.trainium_sim.simkit import SimKit, explain, ok

pytestmark = pytest.mark.system

V2 = "import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\n"

# out = a + b, one 128-row tile per iteration of a compiled loop
FORI = V2 + """
@nki.jit
def solution(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    M, N = a.shape

    def body(m):
        rows = slice(m * 128, (m + 1) * 128)
        a_tile = nl.ndarray((128, N), dtype=a.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((128, N), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a[rows, 0:N])
        nisa.dma_copy(dst=b_tile, src=b[rows, 0:N])
        c_tile = nl.ndarray((128, N), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)
        nisa.dma_copy(dst=out[rows, 0:N], src=c_tile)

    nl.fori_loop(LOOP)
    return out
"""


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return SimKit(tmp_path_factory.mktemp("trn-v2-loops"))


@pytest.fixture(scope="module")
def add_prob(kit):
    return kit.problem({"a": ((512, 256), "float32"), "b": ((512, 256), "float32")},
                       {"out": ((512, 256), "float32")}, "def reference(a, b):\n    return a + b\n")


def run(kit, prob, code: str, **kw):
    return kit.evaluate(prob, code, header=False, **kw)


@pytest.mark.parametrize("loop", ["0, M // 128, body", "0, M // 128, body, step=1", "0, M // 128, body, 1"])
def test_fori_loop_runs_every_iteration(kit, add_prob, loop):
    r = run(kit, add_prob, FORI.replace("LOOP", loop))
    ok(r)
    assert r.feedback["instructions"] == {"DMA": 12, "Vector": 4}, r.feedback


def test_fori_loop_with_a_step_that_skips_tiles_is_wrong(kit, add_prob):
    r = run(kit, add_prob, FORI.replace("LOOP", "0, M // 128, body, step=2"))
    assert not r.correct and r.error_kind == "wrong_result", explain(r)


@pytest.mark.parametrize("loop, needle", [
    ("0, M // 128, body, step=0", "step must be a compile-time positive integer"),
    ("0, M // 128, body, step=1.5", "step must be a compile-time positive integer"),
    ("0.0, M // 128, body", "lower must be an integer"),
    ("0, M // 128, 'body'", "body_fun must be a function"),
    ("0, 2 ** 40, body", "does not fit 32 bits"),
    ("0, a, body", "exists only on the device"),
    ("0, M // 128, lambda m: body(m) or 1", "body_fun returns None"),
])
def test_fori_loop_misuse_is_refused(kit, add_prob, loop, needle):
    r = run(kit, add_prob, FORI.replace("LOOP", loop))
    assert not r.correct and r.error_kind == "compile", explain(r)
    assert needle in r.error and "fori_loop" in r.error, explain(r)


@pytest.mark.parametrize("call, needle", [
    ("nl.while_loop(object(), lambda r: r)", "does not simulate it: the loop runs while a register computed on the "
                                             "device is nonzero"),
    ("nl.while_loop(1, lambda r: 0)", "init must be a VirtualRegister"),
    ("nl.while_loop(1, None)", "body_fun must be a function"),
    ("for i in nl.dynamic_range(M // 128):\n        body(i)", "deprecated in NKI 0.6.0"),
])
def test_while_loop_and_dynamic_range_are_refused_by_name(kit, add_prob, call, needle):
    r = run(kit, add_prob, FORI.replace("nl.fori_loop(LOOP)", call))
    assert not r.correct and r.error_kind == "compile", explain(r)
    assert needle in r.error, explain(r)
