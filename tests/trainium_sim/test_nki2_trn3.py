"""NeuronCore-v4 (trn3) features AWS documents, each made explicit on trainium-sim's NKI v2 front end
(frontend/nki/_trn3.py): the fast exponential, MX matmul, MX quantization and MX dtypes refused by name with the
reason on trn3 and as not available on trn1/trn2; BF16 PSUM accumulation modelled on trn3 and refused elsewhere;
the background transpose accepted with its overlap not credited."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.trainium_sim.simkit import SimKit, explain, ok

pytestmark = pytest.mark.system

V2 = "import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\n"

KERNEL = V2 + """
@nki.jit
def solution(a, b):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    a_tile = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.sbuf)
    b_tile = nl.ndarray((128, 128), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_tile, src=a)
    nisa.dma_copy(dst=b_tile, src=b)
    c_tile = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    USE
    nisa.dma_copy(dst=out, src=c_tile)
    return out
"""


@pytest.fixture(scope="module")
def kits(tmp_path_factory):
    base = tmp_path_factory.mktemp("trn3")
    return {p: SimKit(base / p, platform=p) for p in ("trn1", "trn2", "trn3")}


@pytest.fixture(scope="module")
def probs(kits):
    ref = "def reference(a, b):\n    return a.astype(np.float64).T @ b\n"
    return {p: k.problem({"a": ((128, 128), "bfloat16"), "b": ((128, 128), "bfloat16")},
                         {"out": ((128, 128), "float32")}, ref, atol=0.5, rtol=2e-2) for p, k in kits.items()}


REFUSED = {
    "fast exponential": ("nisa.exponential(dst=c_tile, src=a_tile)", "nisa.exponential"),
    "MX matmul": ("nisa.nc_matmul_mx(dst=c_tile, stationary=a_tile, moving=b_tile, stationary_scale=a_tile, "
                  "moving_scale=b_tile)", "nisa.nc_matmul_mx"),
    "MX quantization": ("nisa.quantize_mx(dst=c_tile, src=a_tile, dst_scale=c_tile)", "nisa.quantize_mx"),
    "MX dtypes": ("x = nl.ndarray((128, 32), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)", "nl.float8_e4m3fn_x4"),
}


@pytest.mark.parametrize("feature", sorted(REFUSED))
@pytest.mark.parametrize("platform", ["trn1", "trn2", "trn3"])
def test_unsimulated_trn3_features_are_refused_by_name(kits, probs, feature, platform):
    use, name = REFUSED[feature]
    r = kits[platform].evaluate(probs[platform], KERNEL.replace("USE", use), header=False)
    assert not r.correct and r.error_kind == "compile", explain(r)
    assert name in r.error and feature in r.error, explain(r)
    if platform == "trn3":
        assert "trainium-sim does not simulate it" in r.error, explain(r)
    else:
        assert f"available on trn3 only, not {platform}" in r.error, explain(r)


BF16_PSUM = """acc = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a_tile[0:128, 0:128], moving=b_tile)
    nisa.nc_matmul(dst=acc, stationary=a_tile, moving=b_tile)
    nisa.tensor_copy(dst=c_tile, src=acc)"""


def test_bf16_psum_accumulation_is_modelled_on_trn3(kits, probs):
    # two accumulated matmuls: 2 * a.T @ b, accumulated in BF16 PSUM with round-to-nearest-even
    kit = kits["trn3"]
    p = kit.problem({"a": ((128, 128), "bfloat16"), "b": ((128, 128), "bfloat16")}, {"out": ((128, 128), "float32")},
                    "def reference(a, b):\n    return 2 * (a.astype(np.float64).T @ b)\n", atol=0.5, rtol=2e-2)
    ok(kit.evaluate(p, KERNEL.replace("USE", BF16_PSUM), header=False))


def test_bf16_psum_accumulation_rounds_to_bf16():
    # the replayer's value model: each accumulation is rounded to BF16 (a value between two BF16 neighbours
    # lands on one of them), unlike an FP32 PSUM
    from autocomp_zmq.hw_runners.trainium_sim.ops import round_to
    x = np.float32(1.0) + np.float32(2.0 ** -10)
    assert round_to(np.array([x]), "bfloat16")[0] == 1.0 and round_to(np.array([x]), "float32")[0] == x


@pytest.mark.parametrize("platform", ["trn1", "trn2"])
def test_bf16_psum_accumulation_is_refused_before_trn3(kits, probs, platform):
    r = kits[platform].evaluate(probs[platform], KERNEL.replace("USE", BF16_PSUM), header=False)
    assert not r.correct and r.error_kind == "compile", explain(r)
    assert "BF16 PSUM accumulation" in r.error and f"trn3 only, not {platform}" in r.error, explain(r)


def test_a_tensor_engine_transpose_is_accepted_on_trn3_without_background_overlap(kits):
    kit = kits["trn3"]
    p = kit.problem({"a": ((128, 128), "bfloat16"), "b": ((128, 128), "bfloat16")}, {"out": ((128, 128), "float32")},
                    "def reference(a, b):\n    return a.astype(np.float64).T\n", atol=1e-2, rtol=1e-2)
    use = """t = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=t, data=a_tile, engine=nisa.tensor_engine)
    nisa.tensor_copy(dst=c_tile, src=t)"""
    r = kit.evaluate(p, KERNEL.replace("USE", use), header=False)
    ok(r)
    assert r.feedback["instructions"]["Tensor"] == 1, r.feedback


def test_every_trn3_feature_is_explicit():
    # read in a child process: the front end's packages (nki, neuronxcc) stay out of the test process
    front = Path(__file__).resolve().parents[2] / "hw_runners" / "trainium_sim" / "frontend"
    code = (f"import sys, json; sys.path.insert(0, {str(front)!r}); from nki import _trn3; "
            "print(json.dumps({f: s for f, (_, s, _) in _trn3.FEATURES.items()}))")
    got = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert got == {"fast exponential": "refused", "MX matmul": "refused", "MX quantization": "refused",
                   "MX dtypes": "refused", "BF16 PSUM accumulation": "modelled",
                   "background transpose": "timing not modelled"}
