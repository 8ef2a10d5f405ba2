"""layernorm: (x - mean) / sqrt(var + eps) * gamma + beta per row, biased variance."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    m, n = shapes["input_tensor"]
    # Each row has its own mean and spread, so skipping the shift or the scale is caught; the means stay
    # comparable to the spreads, so computing the variance as E[x^2] - E[x]^2 in float32 remains accurate.
    shift = rng.uniform(-1.0, 1.0, size=(m, 1)).astype(np.float32)
    spread = rng.uniform(0.5, 2.0, size=(m, 1)).astype(np.float32)
    x = (rng.standard_normal((m, n), dtype=np.float32) * spread + shift).astype(np.float32)
    gamma = rng.uniform(0.25, 2.0, size=n).astype(np.float32)
    beta = rng.uniform(-1.0, 1.0, size=n).astype(np.float32)
    return {"input_tensor": x, "gamma_vector": gamma, "beta_vector": beta}


def reference(input_tensor, epsilon, gamma_vector, beta_vector):
    x = input_tensor.astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * gamma_vector[None, :] + beta_vector[None, :]
