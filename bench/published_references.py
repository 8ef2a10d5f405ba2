"""Trusted numpy references (and input draws) for published NKI kernels that compute something no problem of
ours does, or ours with other inputs: what bench_published_nki.py judges those kernels against (OWN, by name)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from autocomp_zmq.hw_runners.trainium_sim.workloads import load_specs  # noqa: E402

PROBLEMS = Path(__file__).resolve().parents[1] / "hw_runners" / "trainium_sim" / "problems"


# -- references written here (computations no problem of ours has) ----------------------------------------
def _csa_tile_inputs(rng, shapes):
    d, length = shapes["q"]
    q = rng.random((d, length), dtype=np.float32) * 0.3
    k = rng.random((d, length), dtype=np.float32) * 0.3
    v = rng.random(shapes["v"], dtype=np.float32)
    olm = rng.random(shapes["olm_prev"], dtype=np.float32)
    qt = 64    # the query tile the case asks for (q_tile_idx): query row i sees keys 0 .. 64 * 128 + i
    mask = np.arange(length)[None, :] <= (qt * 128 + np.arange(128))[:, None]
    return {"q": q, "k": k, "v": v, "olm_prev": olm, "tile_mask": mask.astype(np.uint8)}


def _csa_tile_reference(q, k, v, olm_prev, kernel_dtype, acc_type, tile_mask, q_tile_idx=None, Q_TILE_SIZE=128,
                        LARGE_KV_TILE_SIZE=2048, B_P_SIZE=128, B_F_SIZE=512, B_D_SIZE=128):
    """One flash-attention step for query tile q_tile_idx against a block of keys: new (o | l | m) columns
    from the previous ones. Scores of masked keys (tile_mask 0) are -9984 (the kernel's stand-in for -inf)."""
    q, k, v, olm_prev = (np.asarray(a, np.float64) for a in (q, k, v, olm_prev))
    rows = slice(q_tile_idx * Q_TILE_SIZE, (q_tile_idx + 1) * Q_TILE_SIZE)
    s = np.where(np.asarray(tile_mask) != 0, q[:, rows].T @ k, -9984.0)
    m_prev = olm_prev[:, B_D_SIZE + 1:B_D_SIZE + 2]
    m = np.maximum(s.max(axis=1, keepdims=True), m_prev)
    p = np.exp(s - m)
    values = v.transpose(1, 0, 2).reshape(-1, B_D_SIZE)     # v[p, t, d] is key t * B_P_SIZE + p
    alpha = np.exp(m_prev - m)
    o = olm_prev[:, :B_D_SIZE] * alpha + p @ values
    l_new = olm_prev[:, B_D_SIZE:B_D_SIZE + 1] * alpha + p.sum(axis=1, keepdims=True)
    return np.concatenate([o, l_new, m], axis=1)


def _mha_inputs(rng, shapes):
    q = rng.standard_normal(shapes["q"], dtype=np.float32) * 0.2
    k = rng.standard_normal(shapes["k"], dtype=np.float32) * 0.2
    return {"q": q, "k": k, "v": rng.uniform(0.5, 1.5, shapes["v"]).astype(np.float32)}


def _mha_published_reference(q, k, v, kernel_dtype, acc_type, num_heads=8, seq_len=2048, d_head=128):
    """What the published mha kernel and its harness's reference kernel compute: causal flash attention with
    (o, l, m) outputs, except that each 128-row query tile enters the score matmul as the stationary operand
    as loaded ([seq, d], transpose_x=True), so a tile's scores are q_tile.T @ k rather than q_tile @ k."""
    o, l, m = (np.empty((num_heads, seq_len, n)) for n in (d_head, 1, 1))
    pos = np.arange(seq_len)
    for h in range(num_heads):
        for t in range(seq_len // 128):
            rows = slice(t * 128, (t + 1) * 128)
            s = np.asarray(q[h, rows], np.float64).T @ k[h]
            s = np.where(pos[None, :] <= pos[rows, None], s, -9984.0)
            m[h, rows] = s.max(axis=1, keepdims=True)
            p = np.exp(s - m[h, rows])
            o[h, rows] = p @ v[h]
            l[h, rows] = np.log(p.sum(axis=1, keepdims=True)) + m[h, rows]
    return o, l, m


def _uniform_inputs(*names, low=0.0, high=1.0):
    def make(rng, shapes):
        return {n: rng.uniform(low, high, shapes[n]).astype(np.float32) for n in names}
    return make


def _add_reference(a_input, b_input):
    return np.asarray(a_input, np.float64) + b_input


def _transpose2d_reference(in_tensor, shape2D):
    """Each row holds a row-major (a, b) matrix; the result holds its transpose, row-major."""
    a, b = shape2D
    rows = in_tensor.shape[0]
    return np.asarray(in_tensor, np.float64).reshape(rows, a, b).transpose(0, 2, 1).reshape(rows, a * b)


def _softmax_reference(in_tensor):
    x = np.asarray(in_tensor, np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _avgpool_reference(in_tensor, pool_size):
    c, h, w = in_tensor.shape
    x = np.asarray(in_tensor, np.float64).reshape(c, h // pool_size, pool_size, w // pool_size, pool_size)
    return x.mean(axis=(2, 4))


def _rotary_reference(q, k, cos, sin):
    """Rotary embedding of q and k ([batch, heads, seq, dim]) with cos/sin ([batch, seq, dim]), rotating halves:
    x * cos + concat(-x2, x1) * sin; the two results stacked."""
    def rope(x):
        x = np.asarray(x, np.float64)
        half = x.shape[-1] // 2
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos[:, None] + rotated * sin[:, None]
    return np.stack([rope(q), rope(k)])


def _rotary_inputs(rng, shapes):
    b, s, d = shapes["cos"]
    angles = rng.uniform(0, 2 * np.pi, (b, s, d // 2))
    angles = np.concatenate([angles, angles], axis=-1)
    return {"q": rng.standard_normal(shapes["q"]).astype(np.float32),
            "k": rng.standard_normal(shapes["k"]).astype(np.float32),
            "cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)}


def _harness_uniform(*names):
    """Inputs as Autocomp's harnesses draw them: np.random.rand, uniform in [0, 1)."""
    def make(rng, shapes):
        return {n: rng.random(shapes[n], dtype=np.float32) for n in names}
    return make


def _harness_signed(*names):
    """Inputs as Autocomp's attention harness draws them: (np.random.random_sample - 0.5) * 2, in [-1, 1)."""
    def make(rng, shapes):
        return {n: rng.random(shapes[n], dtype=np.float32) * 2 - 1 for n in names}
    return make


def _attention_reference(q, k, v):
    return load_specs(PROBLEMS)["attention"].module.reference(q, k, v)


def _sd_attention_reference(q_ref, k_ref, v_ref, use_causal_mask=False, mixed_precision=True):
    return load_specs(PROBLEMS)["sd-attention"].module.reference(q_ref, k_ref, v_ref, use_causal_mask,
                                                                 mixed_precision)


OWN = {
    "attention-harness-inputs": SimpleNamespace(make_inputs=_harness_signed("q", "k", "v"),
                                                reference=_attention_reference),
    "sd-attention-harness-inputs": SimpleNamespace(make_inputs=_harness_uniform("q_ref", "k_ref", "v_ref"),
                                                   reference=_sd_attention_reference),
    "rotary": SimpleNamespace(make_inputs=_rotary_inputs, reference=_rotary_reference),
    "mha-as-published": SimpleNamespace(make_inputs=_mha_inputs, reference=_mha_published_reference),
    "csa-tile": SimpleNamespace(make_inputs=_csa_tile_inputs, reference=_csa_tile_reference),
    "add": SimpleNamespace(make_inputs=_uniform_inputs("a_input", "b_input"), reference=_add_reference),
    "transpose2d": SimpleNamespace(make_inputs=_uniform_inputs("in_tensor"), reference=_transpose2d_reference),
    "softmax": SimpleNamespace(make_inputs=_uniform_inputs("in_tensor", low=-3, high=3),
                               reference=_softmax_reference),
    "avgpool": SimpleNamespace(make_inputs=_uniform_inputs("in_tensor"), reference=_avgpool_reference),
}
