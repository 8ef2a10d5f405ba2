"""DeltaNet's recurrent forward for one (batch, head) (Autocomp's trn-internal workload 8), as
harnesses/trn-internal/8_deltanet_recurrent_test.py's CPU reference (deltanet_recurrent_cpu) computes it: a
128 x 128 state decays by exp(g_t), is read at k_t, corrected towards v_t by the gate beta_t, and read at q_t."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # as the harness draws them: q, k, v 0.1 * standard normal; a log-decay g in [-0.5, -0.01) and a gate
    # beta = sigmoid(standard normal) per step, each broadcast over the 128 columns
    s, d = shapes["query"]
    out = {n: 0.1 * rng.standard_normal((s, d), dtype=np.float32) for n in ("query", "key", "value")}
    g = rng.uniform(-0.5, -0.01, size=(s, 1))
    beta = 1.0 / (1.0 + np.exp(-rng.standard_normal((s, 1))))
    out["g_in"] = np.broadcast_to(g, (s, d)).astype(np.float32)
    out["beta_in"] = np.broadcast_to(beta, (s, d)).astype(np.float32)
    return out


def reference(query, key, value, g_in, beta_in):
    query, key, value, g_in, beta_in = (np.asarray(a, dtype=np.float64) for a in (query, key, value, g_in, beta_in))
    s, d = query.shape
    state = np.zeros((d, d))
    out = np.zeros((s, d))
    for t in range(s):
        state *= np.exp(g_in[t, 0])
        delta = (value[t] - state.T @ key[t]) * beta_in[t, 0]
        state += np.outer(key[t], delta)
        out[t] = state.T @ query[t]
    return out
