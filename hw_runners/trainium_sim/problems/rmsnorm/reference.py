"""rmsnorm: x / sqrt(mean(x^2)) * g per row, no epsilon (as in the NKI RMSNorm tutorial)."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # Rows of different scales, so a wrong or missing per-row normalization is caught; weights away from 1
    # and distinct per column, so a missing or misaligned weight is too.
    m, n = shapes["a_tensor"]
    scale = rng.uniform(0.5, 4.0, size=(m, 1)).astype(np.float32)
    a = (rng.standard_normal((m, n), dtype=np.float32) * scale).astype(np.float32)
    g = rng.uniform(0.25, 2.0, size=n).astype(np.float32)
    return {"a_tensor": a, "g_tensor": g}


def reference(a_tensor, g_tensor):
    a = a_tensor.astype(np.float64)
    return a / np.sqrt(np.mean(a * a, axis=1, keepdims=True)) * g_tensor[None, :]
