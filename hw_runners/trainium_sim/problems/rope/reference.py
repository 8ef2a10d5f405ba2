"""rope: rotate (first half, second half) pairs of head dims by per-position angles."""
import numpy as np


def make_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    d_half, s = 64, 4096
    # Real rotary tables (base 10000), so cos and sin differ in every row and column and swapping them,
    # or a sign error, is caught; the embedding itself is standard normal.
    inv_freq = 1.0 / (10000.0 ** (np.arange(d_half) / d_half))
    angles = inv_freq[:, None] * np.arange(s)[None, :]
    return {"x_in": rng.standard_normal((2 * d_half, s), dtype=np.float32),
            "cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)}


def reference(x_in, cos, sin, lnc_shard=False, first_second_half_impl=True):
    x = x_in.astype(np.float64)
    h = x.shape[0] // 2
    if first_second_half_impl:
        lo, hi = x[:h], x[h:]
        return np.concatenate([lo * cos - hi * sin, hi * cos + lo * sin])
    even, odd = x[0::2], x[1::2]             # interleaved pairs (2i, 2i + 1)
    out = np.empty_like(x)
    out[0::2] = even * cos - odd * sin
    out[1::2] = odd * cos + even * sin
    return out
