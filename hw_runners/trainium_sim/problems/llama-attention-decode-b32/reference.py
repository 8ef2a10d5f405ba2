"""Llama-3.2-1B grouped-query attention at decode, a batch of 32 (Autocomp's trn-e2e workload 9), as
harnesses/trn-e2e/9_llama_attention_b32_nki.py's reference kernel computes it: as at batch 1
(../llama-attention-decode/reference.py), with a mask per sequence and query head and the KV cache passed as one
argument, past_key_value (K then V on its leading axis)."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # standard normal tensors (bfloat16 on loading), the mask of fair coin flips as bytes 0 / 1
    out = {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes.items()
           if name != "attention_mask"}
    out["attention_mask"] = rng.integers(0, 2, size=shapes["attention_mask"]).astype(np.uint8)
    return out


def reference(Q, K, V, past_key_value, attention_mask):
    b, heads, _, d = Q.shape
    group = heads // K.shape[1]
    past_k, past_v = past_key_value[0], past_key_value[1]
    q = Q[:, :, 0, :].astype(np.float64)
    keys = np.repeat(np.concatenate([past_k, K], axis=2), group, axis=1)    # cache positions, then the new token
    vals = np.repeat(np.concatenate([past_v, V], axis=2), group, axis=1)
    scores = np.einsum("bhd,bhsd->bhs", q, keys) / np.sqrt(d)
    visible = np.concatenate([attention_mask[:, :, 0, :] != 0, np.ones((b, heads, 1), dtype=bool)], axis=2)
    scores = np.where(visible, scores, -np.inf)
    w = np.exp(scores - scores.max(axis=2, keepdims=True))
    w /= w.sum(axis=2, keepdims=True)
    return np.einsum("bhs,bhsd->bhd", w, vals)[:, :, None, :]
