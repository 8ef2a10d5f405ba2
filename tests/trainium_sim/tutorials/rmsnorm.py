"""RMSNorm written the way the NKI "RMSNorm" tutorial (nki-samples, src/nki_samples/tutorials/rmsnorm)
writes it: out = a / sqrt(mean(a^2 along the row)) * g, 128 rows per tile, with index vectors from
nl.arange(...)[:, None] / [None, :] and nki.language calls only."""
import math

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def nki_rmsnorm_kernel(a_tensor, g_tensor):
    out_tensor = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    assert a_tensor.shape[1] == g_tensor.shape[0]

    # Partition (row) index, a one-row index for the weight, and the column index.
    ix = nl.arange(128)[:, None]
    iw = nl.arange(1)[:, None]
    iy = nl.arange(a_tensor.shape[1])[None, :]
    num_rows = a_tensor.shape[0]

    # The weight is loaded once as a [1, cols] tile and reused by every row tile.
    g_tile = nl.load(g_tensor.reshape((1, g_tensor.shape[0]))[iw, iy])

    # Row tiles are independent of each other.
    for i in nl.affine_range(math.ceil(a_tensor.shape[0] / 128)):
        a_tile = nl.load(a_tensor[i * 128 + ix, iy], mask=(i * 128 + ix < num_rows))

        in_square = nl.square(a_tile)
        square_sum = nl.sum(in_square, axis=[1])            # [128, 1]
        mean = square_sum / a_tensor.shape[1]
        rms_reciprocal = nl.rsqrt(mean)                     # one Scalar-engine instruction

        out_tile = nl.multiply(a_tile, rms_reciprocal)      # [128, 1] broadcast along the row
        g_bcast = g_tile.broadcast_to((128, g_tensor.shape[0]))
        out_tile[...] = nl.multiply(out_tile, g_bcast, mask=(i * 128 + ix < num_rows))

        nl.store(out_tensor[i * 128 + ix, iy], value=out_tile, mask=(i * 128 + ix < num_rows))
    return out_tensor
