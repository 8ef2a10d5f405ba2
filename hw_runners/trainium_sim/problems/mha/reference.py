"""Trusted numpy reference for mha: causal self-attention over several heads with flash-attention outputs.

Per head h the layouts are q[h] [S, D], k[h] [D, S] (already transposed), v[h] [S, D]. Scores s = q[h] @ k[h]
are not scaled; key j is visible to query i when j <= i. Per query row: m = max of the visible scores,
p = exp(s - m), l = log(sum p) + m, o = p @ v (NOT divided by sum p).
Kernels in NKI v2 also get causal_mask [S, S] float32 for every head (problem.toml's [nki2]; Autocomp's v2 harness
builds it on the host): 1.0 where key j <= query i, 0.0 above; the reference masks by the mask it is given.
"""
import numpy as np


HEADS, SEQ, D_HEAD = 8, 2048, 128


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # Scores of std ~2 (softmax neither flat nor one-hot); positive v so the unnormalised o cannot cancel.
    sigma = np.float32(np.sqrt(2.0 / np.sqrt(D_HEAD)))
    q = rng.standard_normal((HEADS, SEQ, D_HEAD), dtype=np.float32) * sigma
    k = rng.standard_normal((HEADS, D_HEAD, SEQ), dtype=np.float32) * sigma
    v = rng.uniform(0.5, 1.5, (HEADS, SEQ, D_HEAD)).astype(np.float32)
    out = {"q": q, "k": k, "v": v}
    if "causal_mask" in shapes:      # the v2 definition's: the same mask in every input set, as the harness's
        out["causal_mask"] = (np.arange(SEQ)[None, :] <= np.arange(SEQ)[:, None]).astype(np.float32)
    return out


def _causal_olm(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None):
    s = np.asarray(q, dtype=np.float64) @ np.asarray(k, dtype=np.float64)
    if mask is None:
        s[np.triu_indices(s.shape[0], 1)] = -np.inf
    else:
        s[np.asarray(mask) == 0] = -np.inf
    mx = s.max(axis=1, keepdims=True)
    p = np.exp(s - mx)
    return p @ np.asarray(v, dtype=np.float64), np.log(p.sum(axis=1, keepdims=True)) + mx, mx


def reference(q, k, v, kernel_dtype, acc_type, num_heads=HEADS, seq_len=SEQ, d_head=D_HEAD, causal_mask=None):
    assert q.shape == (num_heads, seq_len, d_head) and k.shape == (num_heads, d_head, seq_len)
    heads = [_causal_olm(q[h], k[h], v[h], causal_mask) for h in range(num_heads)]
    return tuple(np.stack([hd[i] for hd in heads]) for i in range(3))
