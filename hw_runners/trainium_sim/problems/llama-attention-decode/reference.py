"""Llama-3.2-1B grouped-query attention at decode (Autocomp's trn-e2e workload 5): one new token per sequence
attends to a 512-token KV cache under a boolean mask and to its own key and value, which are always visible.

Written from the computation of harnesses/trn-e2e/5_llama_attention_nki.py's reference kernel (`ref`): scores
q . k / sqrt(64), masked cache positions excluded, one softmax over the cache and the new token, weights times
values. 16 query heads share 4 KV heads (head h reads KV head h // 4). Computed exactly (float64); the kernel's
bfloat16 roundings are what the tolerance allows for."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # as the harness draws them: standard normal tensors (cast to bfloat16 on loading) and a mask of independent
    # fair coin flips (np.random.randint(0, 2).astype(np.bool_)), held as bytes 0 / 1
    out = {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes.items()
           if name != "attention_mask"}
    out["attention_mask"] = rng.integers(0, 2, size=shapes["attention_mask"]).astype(np.uint8)
    return out


def attend(Q, K, V, past_k, past_v, mask):
    """Q (B, 16, 1, D); K, V (B, 4, 1, D); past_k, past_v (B, 4, S, D); mask broadcastable to (B, 16, 1, S)."""
    b, heads, _, d = Q.shape
    group = heads // K.shape[1]
    q = Q[:, :, 0, :].astype(np.float64)                                   # (B, H, D)
    keys = np.repeat(np.concatenate([past_k, K], axis=2), group, axis=1)    # (B, H, S + 1, D): cache, then new
    vals = np.repeat(np.concatenate([past_v, V], axis=2), group, axis=1)
    scores = np.einsum("bhd,bhsd->bhs", q, keys) / np.sqrt(d)
    visible = np.concatenate([np.broadcast_to(mask != 0, (b, heads, 1, mask.shape[-1]))[:, :, 0, :],
                              np.ones((b, heads, 1), dtype=bool)], axis=2)
    scores = np.where(visible, scores, -np.inf)
    w = np.exp(scores - scores.max(axis=2, keepdims=True))
    w /= w.sum(axis=2, keepdims=True)
    return np.einsum("bhs,bhsd->bhd", w, vals)[:, :, None, :]


def reference(Q, K, V, past_k, past_v, attention_mask):
    return attend(Q, K, V, past_k, past_v, attention_mask)
