"""transpose (and transpose-small): view as (D0, B, N) around `dim`, return (D0, N, B) with out[d0, n, b] = ref[d0, b, n]."""
import math

import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # Distinct values everywhere, so any misplaced element is caught.
    return {"ref": rng.standard_normal(shapes["ref"], dtype=np.float32)}


def reference(ref, dim):
    d0 = math.prod(ref.shape[:dim])
    b = ref.shape[dim]
    n = math.prod(ref.shape[dim + 1:])
    return ref.reshape(d0, b, n).transpose(0, 2, 1)
