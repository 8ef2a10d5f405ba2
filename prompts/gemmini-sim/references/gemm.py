# The gemm family's reference, as numpy: what a gemmini-sim GEMM kernel must compute (int8 in and out).
import numpy as np


def reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C[I][J] = saturate_int8(round(sum_k A[i][k] * B[k][j])): int32 sums of int8 products, scale 1, no activation."""
    acc = A.astype(np.int64) @ B.astype(np.int64)
    return np.clip(acc, -128, 127).astype(np.int8)
