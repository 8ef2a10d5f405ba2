"""Trusted numpy reference for attention: out = softmax(q.T @ k) @ v.T, with head-dim-major inputs.

q, k and v are all [d_head, seq_len] (d_head on the partition axis, as the NKI attention tutorial keeps
them); scores are not scaled and not masked; the softmax runs over keys; out is [seq_len, d_head].
"""
import numpy as np


D_HEAD, SEQ = 128, 4096


def make_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    # Scores of std ~2 keep about 75 keys with weight per query: the softmax is neither flat nor one-hot.
    # v of std 3 puts outputs (weighted averages of v) around 0.3-0.5, well above the absolute tolerance.
    sigma = np.float32(np.sqrt(2.0 / np.sqrt(D_HEAD)))
    q = rng.standard_normal((D_HEAD, SEQ), dtype=np.float32) * sigma
    k = rng.standard_normal((D_HEAD, SEQ), dtype=np.float32) * sigma
    v = rng.standard_normal((D_HEAD, SEQ), dtype=np.float32) * np.float32(3.0)
    return {"q": q, "k": k, "v": v}


def reference(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = q64.T @ k64
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v64.T
