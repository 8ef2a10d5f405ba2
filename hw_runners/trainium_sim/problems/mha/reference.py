"""Trusted numpy reference for mha: causal self-attention over several heads with flash-attention outputs.

Per head h the layouts are q[h] [S, D], k[h] [D, S] (already transposed), v[h] [S, D]. Scores s = q[h] @ k[h]
are not scaled; key j is visible to query i when j <= i. Per query row: m = max of the visible scores,
p = exp(s - m), l = log(sum p) + m, o = p @ v (NOT divided by sum p).
"""
import numpy as np


HEADS, SEQ, D_HEAD = 8, 2048, 128


def make_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    # Scores of std ~2 (softmax neither flat nor one-hot); positive v so the unnormalised o cannot cancel.
    sigma = np.float32(np.sqrt(2.0 / np.sqrt(D_HEAD)))
    q = rng.standard_normal((HEADS, SEQ, D_HEAD), dtype=np.float32) * sigma
    k = rng.standard_normal((HEADS, D_HEAD, SEQ), dtype=np.float32) * sigma
    v = rng.uniform(0.5, 1.5, (HEADS, SEQ, D_HEAD)).astype(np.float32)
    return {"q": q, "k": k, "v": v}


def _causal_olm(q: np.ndarray, k: np.ndarray, v: np.ndarray):
    s = np.asarray(q, dtype=np.float64) @ np.asarray(k, dtype=np.float64)
    s[np.triu_indices(s.shape[0], 1)] = -np.inf
    mx = s.max(axis=1, keepdims=True)
    p = np.exp(s - mx)
    return p @ np.asarray(v, dtype=np.float64), np.log(p.sum(axis=1, keepdims=True)) + mx, mx


def reference(q, k, v, kernel_dtype, acc_type, num_heads=HEADS, seq_len=SEQ, d_head=D_HEAD):
    assert q.shape == (num_heads, seq_len, d_head) and k.shape == (num_heads, d_head, seq_len)
    heads = [_causal_olm(q[h], k[h], v[h]) for h in range(num_heads)]
    return tuple(np.stack([hd[i] for hd in heads]) for i in range(3))
