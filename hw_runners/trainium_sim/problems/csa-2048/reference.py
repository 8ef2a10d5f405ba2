"""Trusted numpy reference for csa-2048 (and its siblings csa-4096, csa-16384): causal self-attention forward with flash-attention outputs.

Layouts follow the kernel's: q [S, D], k [D, S] (already transposed), v [S, D]. Scores s = q @ k are not
scaled; key j is visible to query i when j <= i. Per query row: m = max of the visible scores,
p = exp(s - m), l = log(sum p) + m (the log-sum-exp), o = p @ v (NOT divided by sum p).
Kernels in NKI v2 also get causal_mask [S, S] float32 (problem.toml's [nki2]; Autocomp's v2 harness builds it on the
host): 1.0 where key j <= query i, 0.0 above; the reference masks by the mask it is given.
"""
import numpy as np


SEQ, D_HEAD = 2048, 128
ROW_BLOCK = 1024   # rows per step, so the S x S score matrix never has to exist at once


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # q and k entries of std 0.42 give scores of std ~2 over d_head 128: softmax neither flat nor one-hot.
    # v is positive so the unnormalised o (a sum of positive weights) cannot cancel towards zero, where
    # bf16 rounding of p would otherwise dominate the tolerance.
    seq, d_head = shapes["q"]
    sigma = np.float32(np.sqrt(2.0 / np.sqrt(d_head)))
    q = rng.standard_normal((seq, d_head), dtype=np.float32) * sigma
    k = rng.standard_normal((d_head, seq), dtype=np.float32) * sigma
    v = rng.uniform(0.5, 1.5, (seq, d_head)).astype(np.float32)
    out = {"q": q, "k": k, "v": v}
    if "causal_mask" in shapes:      # the v2 definition's: the same mask in every input set, as the harness's
        out["causal_mask"] = causal_mask(seq)
    return out


def causal_mask(seq: int) -> np.ndarray:
    """Autocomp's v2 harness's mask: row i is 1.0 in columns 0..i and 0.0 after."""
    return (np.arange(seq)[None, :] <= np.arange(seq)[:, None]).astype(np.float32)


def causal_olm(q: np.ndarray, k: np.ndarray, v: np.ndarray,
               mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(o, l, m) of one head in float64, a block of query rows at a time; query i sees key j where mask[i, j] is
    not 0 (None: where j <= i)."""
    seq = q.shape[0]
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    o = np.empty((seq, v.shape[1]))
    l = np.empty((seq, 1))
    m = np.empty((seq, 1))
    for r0 in range(0, seq, ROW_BLOCK):
        r1 = min(seq, r0 + ROW_BLOCK)
        if mask is None:
            visible = np.arange(r1)[None, :] <= np.arange(r0, r1)[:, None]
        else:       # scores only up to the last key a row of the block sees (r1 for the causal mask)
            rows = np.asarray(mask[r0:r1]) != 0
            seen = np.flatnonzero(rows.any(axis=0))
            visible = rows[:, :seen[-1] + 1 if seen.size else 1]
        s = q64[r0:r1] @ k64[:, :visible.shape[1]]
        s = np.where(visible, s, -np.inf)
        mx = s.max(axis=1, keepdims=True)
        p = np.exp(s - mx)
        o[r0:r1] = p @ v64[:visible.shape[1]]
        l[r0:r1] = np.log(p.sum(axis=1, keepdims=True)) + mx
        m[r0:r1] = mx
    return o, l, m


def reference(q, k, v, kernel_dtype, acc_type, seq_len=SEQ, d_head=D_HEAD, causal_mask=None):
    assert q.shape == (seq_len, d_head) and k.shape == (d_head, seq_len) and v.shape == (seq_len, d_head)
    return causal_olm(q, k, v, causal_mask)
