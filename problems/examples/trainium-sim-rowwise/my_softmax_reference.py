"""Reference of my_softmax.toml (trusted numpy: it runs on the evaluator)."""
import numpy as np


def reference(scores):
    s = scores.astype(np.float64)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
