"""FlashVSR's attention without a mask (Autocomp's trn-internal workload 12): out = softmax(scale * q @ k) @ v per
batch, k given transposed (batch, d_head, seqlen_kv); as harnesses/trn-internal/12_flashvsr_fp32attn_test.py's CPU
reference (reference_attention_cpu) computes it, exactly (float64)."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # as the harness draws them: 0.1 * standard normal, cast to bfloat16 (on loading)
    return {name: 0.1 * rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes.items()}


def reference(q, k, v, scale):
    s = scale * np.einsum("bqd,bdk->bqk", q.astype(np.float64), k.astype(np.float64))
    w = np.exp(s - s.max(axis=2, keepdims=True))
    w /= w.sum(axis=2, keepdims=True)
    return np.einsum("bqk,bkd->bqd", w, v.astype(np.float64))
