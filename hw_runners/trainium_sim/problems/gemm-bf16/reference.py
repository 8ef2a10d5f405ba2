"""A bfloat16 GEMM of the xpu-perf Neuron backend (Autocomp's trn-internal workload 15): C = A @ B with A given
transposed, a_t_hbm = A.T [K, M]; as harnesses/trn-internal/15_gemm_test.py's CPU reference computes it (exactly,
float64)."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # as the harness draws them: A (M, K) and B 0.1 * standard normal, A passed transposed; bfloat16 on loading
    k, m = shapes["a_t_hbm"]
    a = 0.1 * rng.standard_normal((m, k), dtype=np.float32)
    return {"a_t_hbm": np.ascontiguousarray(a.T), "b_hbm": 0.1 * rng.standard_normal(shapes["b_hbm"], dtype=np.float32)}


def reference(a_t_hbm, b_hbm):
    return a_t_hbm.astype(np.float64).T @ b_hbm.astype(np.float64)
