"""The NKI tutorial kernels (matmul, RMSNorm, LayerNorm), written as a Trainium user writes them, run
unchanged on trainium-sim: each file in tutorials/ is evaluated as it stands (only a `solution = ...`
alias is appended) and must be correct, on shapes that include partial row tiles where the tutorial's
masks allow them."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainium_sim.simkit import SimKit, explain

pytestmark = pytest.mark.system

TUTORIALS = Path(__file__).parent / "tutorials"
F32, BF16 = "float32", "bfloat16"

MATMUL_REF = """
def reference(lhsT, rhs):
    return lhsT.astype(np.float64).T @ rhs.astype(np.float64)
"""
RMSNORM_REF = """
def reference(a, g):
    a = a.astype(np.float64)
    return a / np.sqrt(np.mean(a * a, axis=1, keepdims=True)) * g[None, :]
"""
LAYERNORM_REF = """
def reference(x, arg1, gamma, beta):      # SimKit names the constant epsilon by its position
    x, epsilon = x.astype(np.float64), arg1
    mean = x.mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + epsilon) * gamma[None, :] + beta[None, :]
"""


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return SimKit(tmp_path_factory.mktemp("trn-tutorials"))


def run_tutorial(kit: SimKit, problem, file: str, kernel: str):
    code = (TUTORIALS / file).read_text() + f"\n\nsolution = {kernel}\n"
    result = kit.evaluate(problem, code, header=False)
    assert result.correct, explain(result)
    assert result.latency and result.latency > 0 and result.latency_unit == "us"
    return result


@pytest.mark.parametrize("kernel,k,m,n", [("nki_matmul_basic_", 128, 64, 512),
                                          ("nki_matmul_tiled_", 256, 256, 1024)])
def test_matmul_tutorial(kit, kernel, k, m, n):
    problem = kit.problem({"lhsT": ((k, m), BF16), "rhs": ((k, n), BF16)}, {"out": ((m, n), BF16)},
                          MATMUL_REF, atol=0.1, rtol=2e-2)   # bf16 sums of ~128 products
    run_tutorial(kit, problem, "matmul.py", kernel)


def test_rmsnorm_tutorial_with_a_partial_row_tile(kit):
    problem = kit.problem({"a": ((300, 512), F32), "g": ((512,), F32)}, {"out": ((300, 512), F32)},
                          RMSNORM_REF, atol=1e-4, rtol=1e-2)
    run_tutorial(kit, problem, "rmsnorm.py", "nki_rmsnorm_kernel")


@pytest.mark.parametrize("kernel", ["nki_layernorm_kernel_v1", "nki_layernorm_kernel_v2"])
def test_layernorm_tutorials_with_a_partial_row_tile(kit, kernel):
    # 1000 columns: version 2's second bn_stats chunk is ragged, so its mask matters too
    problem = kit.problem({"x": ((250, 1000), F32), "gamma": ((1000,), F32), "beta": ((1000,), F32)},
                          {"out": ((250, 1000), F32)}, LAYERNORM_REF, call=["x", 1e-5, "gamma", "beta"],
                          atol=1e-3, rtol=1e-2)
    run_tutorial(kit, problem, "layernorm.py", kernel)
