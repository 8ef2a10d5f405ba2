"""Reference of edge_gemm.toml: what C must hold, computed with numpy (trusted: it runs on the evaluator)."""
import numpy as np


def reference(A, B):
    # int32 accumulation, then saturation to int8 as Gemmini's mvout does
    return np.clip(A.astype(np.int32) @ B.astype(np.int32), -128, 127).astype(np.int8)
