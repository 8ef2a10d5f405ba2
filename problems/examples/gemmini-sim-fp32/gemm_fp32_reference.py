"""Reference of gemm_fp32.toml: the float64 product, rounded once to float32 (the file's tolerance covers the
float32 roundings of the hardware's sums)."""
import numpy as np


def reference(A, B):
    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
