"""The single-channel GEMM inside OpenFold3's triangle multiplication (Autocomp's trn-internal workload 10):
result = a_ki.T @ b_kj, a_ki in lhsT layout [K, I]; as harnesses/trn-internal/10_openfold3_trimul_test.py's CPU
reference computes it (exactly, float64)."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # as the harness draws them: 0.1 * standard normal, cast to bfloat16 (on loading)
    return {name: 0.1 * rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes.items()}


def reference(a_ki, b_kj):
    return a_ki.astype(np.float64).T @ b_kj.astype(np.float64)
