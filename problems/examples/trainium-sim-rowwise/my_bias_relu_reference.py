"""Reference of my_bias_relu.toml (trusted numpy: it runs on the evaluator)."""
import numpy as np


def reference(h, gamma, beta):
    return np.maximum(h * gamma[None, :] + beta[None, :], 0.0)
