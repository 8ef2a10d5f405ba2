"""Triangle attention, starting node (row-wise), of the Boltz-2 / OpenFold3 pairformer (Autocomp's trn-internal
workload 3): for every row i of the pair representation and head h, the entries j of that row attend over the
entries k of the same row, with a bias shared by all rows.

    out[i, j, h*d:(h+1)*d] = sum_k softmax_k(scale * q[i, j, h] . k[i, k, h] + bias[j, k, h]) v[i, k, h]

Written from harnesses/trn-internal/3_triattn_test.py's reference kernel (`ref`), exactly (float64)."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # as the harness draws them: 0.1 * standard normal, cast to bfloat16 (on loading)
    return {name: 0.1 * rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes.items()}


def reference(q, k, v, bias, scale):
    n, _, hd = q.shape
    heads = bias.shape[2]
    d = hd // heads
    split = lambda t: t.astype(np.float64).reshape(n, n, heads, d)  # noqa: E731  (row, entry, head, d)
    qs, ks, vs = split(q), split(k), split(v)
    logits = scale * np.einsum("ijhd,ikhd->ihjk", qs, ks) + np.transpose(bias, (2, 0, 1))[None]
    w = np.exp(logits - logits.max(axis=3, keepdims=True))
    w /= w.sum(axis=3, keepdims=True)
    return np.einsum("ihjk,ikhd->ijhd", w, vs).reshape(n, n, hd)
