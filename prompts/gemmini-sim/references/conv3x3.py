# The conv3x3 family's reference, as numpy: what a gemmini-sim 3x3 convolution kernel must compute.
import numpy as np


def reference(inp: np.ndarray, weights: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """output[n][p][q][k] = saturate_int8(bias[0][k] + sum_{r,s,c} inp[n][p+r][q+s][c] * weights[r][s][c][k]).

    inp: int8 [4][P+2][P+2][C] (NHWC, already padded by 1), weights: int8 [3][3][C][K], bias: int32 [1][K],
    output: int8 [4][P][P][K]; batch 4, stride 1, int32 accumulation, no activation."""
    n, padded, _, c = inp.shape
    p = padded - 2
    out = np.zeros((n, p, p, weights.shape[3]), dtype=np.int64) + bias[0].astype(np.int64)
    for r in range(3):
        for s in range(3):
            out += inp[:, r:r + p, s:s + p, :].astype(np.int64) @ weights[r, s].astype(np.int64)
    return np.clip(out, -128, 127).astype(np.int8)
