"""Trusted numpy reference for mamba: the selective-scan (SSM) step of a Mamba-v1 layer.

For batch b, channel c, state n and time t:
    h[t] = exp(delta[b,c,t] * A[c,n]) * h[t-1] + delta[b,c,t] * B[b,n,t] * u[b,c,t],   h[-1] = 0
    out[b,c,t] = sum_n C[b,n,t] * h[t]
Kernels in NKI v2 get B and C pre-broadcast instead, B_exp and C_exp [batch, state * 128, seq] (problem.toml's
[nki2]; Autocomp's v2 harness's prebroadcast): rows n*128 .. n*128+127 are B[:, n, :]; the reference reads the
first row of each state's block.
"""
import numpy as np

BATCH, CHANNELS, SEQ, STATE = 1, 256, 2048, 16


ROWS = 128      # rows per state of B_exp and C_exp: one per channel partition


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # delta is a positive step size (softplus output in Mamba) and A is negative, so every state decays
    # (factor exp(delta*A) in (0, 1)) and the scan stays bounded; memory spans roughly 1 to 200 steps,
    # which makes a scan that drops its carry between tiles visibly wrong.
    delta = rng.uniform(0.005, 0.2, (BATCH, CHANNELS, SEQ)).astype(np.float32)
    u = rng.standard_normal((BATCH, CHANNELS, SEQ), dtype=np.float32)
    A = -rng.uniform(0.5, 8.0, (CHANNELS, STATE)).astype(np.float32)
    B = rng.standard_normal((BATCH, STATE, SEQ), dtype=np.float32)
    C = rng.standard_normal((BATCH, STATE, SEQ), dtype=np.float32)
    if "B_exp" in shapes:           # the v2 definition: each state's row copied to 128 rows
        return {"delta": delta, "u": u, "A": A, "B_exp": prebroadcast(B), "C_exp": prebroadcast(C)}
    return {"delta": delta, "u": u, "A": A, "B": B, "C": C}


def prebroadcast(x: np.ndarray) -> np.ndarray:
    """[batch, state, seq] -> [batch, state * 128, seq], rows n*128 .. n*128+127 equal to x[:, n, :]."""
    return np.repeat(x, ROWS, axis=1)


def reference(delta, u, A, B=None, C=None, B_exp=None, C_exp=None):
    if B is None:      # the v2 inputs: one row per state's block (every row of it is the same)
        B, C = B_exp[:, ::ROWS, :], C_exp[:, ::ROWS, :]
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
