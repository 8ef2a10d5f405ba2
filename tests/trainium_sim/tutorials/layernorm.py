"""LayerNorm in the form of the NKI "LayerNorm" tutorial (nki-samples, src/nki_samples/tutorials/layernorm):
version 1 uses nki.language calls only; version 2 takes the mean and variance from the bn_stats/bn_aggr
instructions and shifts and scales with a single two-operator tensor_scalar instruction."""
import math

import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def nki_layernorm_kernel_v1(input_tensor, epsilon, gamma_vector, beta_vector):
    out_tensor = nl.ndarray(input_tensor.shape, dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, num_cols = input_tensor.shape
    assert gamma_vector.shape[0] == beta_vector.shape[0] == num_cols
    P = nl.tile_size.pmax

    i_r, i_c, i_one = nl.mgrid[0:P, 0:num_cols, 0:1]

    # gamma and beta are loaded once as [1, num_cols] rows, then broadcast to all partitions.
    gamma_row = nl.load(gamma_vector.reshape((1, num_cols))[i_one, i_c])
    beta_row = nl.load(beta_vector.reshape((1, num_cols))[i_one, i_c])
    gamma_all = gamma_row.broadcast_to((P, num_cols))
    beta_all = beta_row.broadcast_to((P, num_cols))

    for t in nl.affine_range(math.ceil(num_rows / P)):
        rows_ok = t * P + i_r < num_rows
        x = nl.load(input_tensor[t * P + i_r, i_c], mask=rows_ok)

        mean = nl.mean(x, axis=1)
        # Variance as E[x^2] - E[x]^2: one more pass over the tile, no centred copy needed.
        var = nl.mean(nl.square(x), axis=1) - mean * mean
        normed = (x - mean) * nl.rsqrt(var + epsilon)
        y = normed * gamma_all + beta_all

        nl.store(out_tensor[t * P + i_r, i_c], value=y, mask=rows_ok)
    return out_tensor


@nki.jit
def nki_layernorm_kernel_v2(input_tensor, epsilon, gamma_vector, beta_vector):
    out_tensor = nl.ndarray(input_tensor.shape, dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, num_cols = input_tensor.shape
    assert gamma_vector.shape[0] == beta_vector.shape[0] == num_cols
    P = nl.tile_size.pmax

    i_r, i_c, i_one = nl.mgrid[0:P, 0:num_cols, 0:1]

    gamma_row = nl.load(gamma_vector.reshape((1, num_cols))[i_one, i_c])
    beta_row = nl.load(beta_vector.reshape((1, num_cols))[i_one, i_c])
    gamma_all = gamma_row.broadcast_to((P, num_cols))
    beta_all = beta_row.broadcast_to((P, num_cols))

    # bn_stats takes at most bn_stats_fmax elements per partition, so the row is covered in chunks;
    # each chunk leaves 6 statistics that bn_aggr combines into mean and variance.
    FMAX = nl.tile_size.bn_stats_fmax
    n_chunks = math.ceil(num_cols / FMAX)
    i_chunk, i_stat = nl.mgrid[0:FMAX, 0:6]

    for t in nl.affine_range(math.ceil(num_rows / P)):
        rows_ok = t * P + i_r < num_rows
        x = nl.load(input_tensor[t * P + i_r, i_c], mask=rows_ok)

        stats = nl.ndarray((P, 6 * n_chunks), dtype=np.float32)
        for j in nl.affine_range(n_chunks):
            stats[i_r, j * 6 + i_stat] = nisa.bn_stats(x[i_r, j * FMAX + i_chunk],
                                                      mask=(j * FMAX + i_chunk < num_cols), dtype=np.float32)
        mean_var = nisa.bn_aggr(stats[i_r, nl.arange(6 * n_chunks)[None, :]])
        mean = mean_var[i_r, 0]
        var = mean_var[i_r, 1]

        inv_std = nl.rsqrt(var + epsilon)
        # (x - mean) * inv_std in one instruction with two ALU stages.
        normed = nisa.tensor_scalar(data=x, op0=np.subtract, operand0=mean, op1=np.multiply, operand1=inv_std)
        y = normed * gamma_all + beta_all

        nl.store(out_tensor[t * P + i_r, i_c], value=y, mask=rows_ok)
    return out_tensor
