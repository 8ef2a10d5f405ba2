"""Trusted numpy reference for mamba: the selective-scan (SSM) step of a Mamba-v1 layer.

For batch b, channel c, state n and time t:
    h[t] = exp(delta[b,c,t] * A[c,n]) * h[t-1] + delta[b,c,t] * B[b,n,t] * u[b,c,t],   h[-1] = 0
    out[b,c,t] = sum_n C[b,n,t] * h[t]
"""
import numpy as np

BATCH, CHANNELS, SEQ, STATE = 1, 256, 2048, 16


def make_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    # delta is a positive step size (softplus output in Mamba) and A is negative, so every state decays
    # (factor exp(delta*A) in (0, 1)) and the scan stays bounded; memory spans roughly 1 to 200 steps,
    # which makes a scan that drops its carry between tiles visibly wrong.
    delta = rng.uniform(0.005, 0.2, (BATCH, CHANNELS, SEQ)).astype(np.float32)
    u = rng.standard_normal((BATCH, CHANNELS, SEQ), dtype=np.float32)
    A = -rng.uniform(0.5, 8.0, (CHANNELS, STATE)).astype(np.float32)
    B = rng.standard_normal((BATCH, STATE, SEQ), dtype=np.float32)
    C = rng.standard_normal((BATCH, STATE, SEQ), dtype=np.float32)
    return {"delta": delta, "u": u, "A": A, "B": B, "C": C}


def reference(delta, u, A, B, C):
    delta, u, A, B, C = (np.asarray(x, dtype=np.float64) for x in (delta, u, A, B, C))
    batch, channels, seq = delta.shape
    out = np.empty((batch, channels, seq))
    for b in range(batch):
        decay = np.exp(delta[b][:, None, :] * A[:, :, None])            # [C, N, T]
        drive = (delta[b] * u[b])[:, None, :] * B[b][None, :, :]         # [C, N, T]
        h = np.zeros(A.shape)
        for t in range(seq):
            h = decay[:, :, t] * h + drive[:, :, t]
            out[b, :, t] = h @ C[b, :, t]
    return out
