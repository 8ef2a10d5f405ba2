"""maxpool: stride-1, unpadded k x k max pooling of a 2-D image."""
import numpy as np


def make_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    # Continuous random values: every window has a unique maximum, so a window off by one row or column
    # (or a missing tap) changes most outputs.
    return {"in_tensor": rng.standard_normal((4096, 4096), dtype=np.float32)}


def reference(in_tensor, pool_size):
    k = pool_size
    h, w = in_tensor.shape
    rows = in_tensor[0:h - k + 1]
    for a in range(1, k):                       # vertical max over k rows
        rows = np.maximum(rows, in_tensor[a:h - k + 1 + a])
    out = rows[:, 0:w - k + 1]
    for b in range(1, k):                       # then horizontal max over k columns
        out = np.maximum(out, rows[:, b:w - k + 1 + b])
    return out
