"""transpose-small, transpose on a (32, 512, 512) input: view as (D0, B, N) around `dim`, return (D0, N, B)
with out[d0, n, b] = ref[d0, b, n]."""
import math

import numpy as np


def make_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    # Distinct values everywhere, so any misplaced element is caught.
    return {"ref": rng.standard_normal((32, 512, 512), dtype=np.float32)}


def reference(ref, dim):
    d0 = math.prod(ref.shape[:dim])
    b = ref.shape[dim]
    n = math.prod(ref.shape[dim + 1:])
    return ref.reshape(d0, b, n).transpose(0, 2, 1)
