"""NkiTensor.reshape on SBUF tiles (NKI v2, _reshape.py): splits are views any instruction reads, merges are whole
nisa.dma_copy operands (the SDK's fully optimized matmul stores its (TILE_M, TILES_IN_BLOCK_N, TILE_N) result tiles
as (TILE_M, BLOCK_N)); what trainium-sim does not model is refused by name, and NKI v1 keeps its HBM-only rule."""
from __future__ import annotations

import pytest

from tests.trainium_sim.simkit import SimKit, explain, ok

pytestmark = pytest.mark.system
V2 = "import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\n"

SPLIT = V2 + """
@nki.jit
def solution(x):
    out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    r = t.reshape((128, 4, 128))
    v = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=v, src=r[0:128, 1, 0:128])
    nisa.dma_copy(dst=out, src=v)
    return out
"""

MERGE = V2 + """
@nki.jit
def solution(x):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 2, 256), dtype=x.dtype, buffer=nl.sbuf)
    for h in nl.affine_range(2):
        nisa.dma_copy(dst=t[0:128, h, 0:256], src=x[0:128, h * 256:(h + 1) * 256])
    m = t.reshape((128, 512))
    USE
    return out
"""


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return SimKit(tmp_path_factory.mktemp("v2-reshape"), platform="trn2")


def run(kit, code, out_shape, ref):
    prob = kit.problem({"x": ((128, 512), "float32")}, {"out": (out_shape, "float32")},
                       f"def reference(x):\n    return {ref}\n")
    return kit.evaluate(prob, code, header=False)


def refused(r, needle):
    assert not r.correct and r.error_kind == "compile" and needle in r.error, explain(r)


def test_a_split_is_a_view_any_instruction_reads(kit):
    ok(run(kit, SPLIT, (128, 128), "x[:, 128:256]"))


def test_a_merged_tile_is_stored_by_one_dma(kit):
    r = run(kit, MERGE.replace("USE", "nisa.dma_copy(dst=out[0:128, 0:512], src=m[0:128, 0:512])"), (128, 512), "x")
    ok(r)
    assert r.feedback["instructions"]["DMA"] == 3


@pytest.mark.parametrize("use,needle", [
    ("nisa.tensor_copy(dst=t[0:128, 0, 0:256], src=m)", "a nisa.dma_copy operand only"),
    ("nisa.dma_copy(dst=out[0:128, 0:256], src=m[0:128, 0:256])", "is used whole by trainium-sim"),
    ("m2 = t.reshape((64, 1024))", "the partition dimension (shape[0]) must stay the same"),
    ("m2 = t.reshape((128, 4, 128))", "by splitting or by merging free dimensions, not both"),
])
def test_what_is_not_modelled_is_refused(kit, use, needle):
    refused(run(kit, MERGE.replace("USE", use), (128, 512), "x"), needle)


def test_nki_v1_tiles_keep_the_hbm_only_rule(kit):
    code = """
@nki.jit
def solution(x):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    t[...] = nl.load(x)
    m = t.reshape((128, 2, 256))
    nl.store(out, value=m)
    return out
"""
    prob = kit.problem({"x": ((128, 512), "float32")}, {"out": ((128, 512), "float32")},
                       "def reference(x):\n    return x\n")
    v1 = SimKit(kit.base / "v1", platform="trn1")
    v1.sim.roots.update(kit.sim.roots)
    refused(v1.evaluate(prob, code), "only HBM tensors can be reshaped")
