"""Triangle multiplication of the Boltz-2 pairformer (Autocomp's trn-internal workload 4), per channel d:
out[i, j, d] = sum_k a[i, k, d] * b[j, k, d]; written from harnesses/trn-internal/4_trimul_test.py's reference
kernel (`ref`), exactly (float64)."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # as the harness draws them: 0.1 * standard normal, cast to bfloat16 (on loading)
    return {name: 0.1 * rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes.items()}


def reference(a, b):
    return np.einsum("ikd,jkd->ijd", a.astype(np.float64), b.astype(np.float64))
