"""RMSNorm in the form of the NKI "RMSNorm" tutorial (nki-samples, src/nki_samples/tutorials/rmsnorm):
out = a / sqrt(mean(a^2 along the row)) * g, 128 rows per tile, written with nki.language calls."""
import math

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def nki_rmsnorm_kernel(a_tensor, g_tensor):
    out_tensor = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, num_cols = a_tensor.shape
    assert g_tensor.shape[0] == num_cols

    # Row index (partitions), a single-row index for the weight, and the column index.
    i_r, i_one, i_c = nl.mgrid[0:128, 0:1, 0:num_cols]

    # The weight vector is loaded once as a [1, num_cols] tile and reused by every row tile.
    g_row = nl.load(g_tensor.reshape((1, num_cols))[i_one, i_c])

    # Rows are independent, so the 128-row tiles are too.
    for t in nl.affine_range(math.ceil(num_rows / 128)):
        rows_ok = t * 128 + i_r < num_rows          # the last tile may be partial
        a_tile = nl.load(a_tensor[t * 128 + i_r, i_c], mask=rows_ok)

        sq = nl.square(a_tile)
        sq_sum = nl.sum(sq, axis=[1])               # [128, 1]: reduce along the free axis
        mean_sq = sq_sum / num_cols
        inv_rms = nl.rsqrt(mean_sq)                 # one Scalar-engine instruction

        scaled = nl.multiply(a_tile, inv_rms)       # broadcast [128, 1] along the row
        g_all = g_row.broadcast_to((128, num_cols))
        scaled[...] = nl.multiply(scaled, g_all, mask=rows_ok)

        nl.store(out_tensor[t * 128 + i_r, i_c], value=scaled, mask=rows_ok)
    return out_tensor
