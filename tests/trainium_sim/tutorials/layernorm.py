"""LayerNorm written the way the NKI "LayerNorm" tutorial (nki-samples, src/nki_samples/tutorials/
layernorm) writes it: version 1 with nki.language calls only; version 2 takes mean and variance from
the bn_stats/bn_aggr instructions and shifts and scales with one two-stage tensor_scalar instruction."""
import math

import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def nki_layernorm_kernel_v1(input_tensor, epsilon, gamma_vector, beta_vector):
    output_tensor = nl.ndarray(input_tensor.shape, dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    assert input_tensor.shape[1] == gamma_vector.shape[0] == beta_vector.shape[0]

    i_p_io = nl.arange(nl.tile_size.pmax)[:, None]
    i_f_io = nl.arange(input_tensor.shape[1])[None, :]
    i_p_param = nl.arange(1)[:, None]
    num_rows = input_tensor.shape[0]

    # gamma and beta: loaded once as one-row tiles, broadcast to every partition.
    gamma_sb = nl.load(gamma_vector.reshape((1, gamma_vector.shape[0]))[i_p_param, i_f_io])
    beta_sb = nl.load(beta_vector.reshape((1, beta_vector.shape[0]))[i_p_param, i_f_io])
    gamma_sb_bcast = gamma_sb.broadcast_to((nl.tile_size.pmax, gamma_vector.shape[0]))
    beta_sb_bcast = beta_sb.broadcast_to((nl.tile_size.pmax, beta_vector.shape[0]))

    for i in nl.affine_range(math.ceil(input_tensor.shape[0] / nl.tile_size.pmax)):
        input_sb = nl.load(input_tensor[i * nl.tile_size.pmax + i_p_io, i_f_io],
                           mask=(i * nl.tile_size.pmax + i_p_io < num_rows))
        mean = nl.mean(input_sb, axis=1)
        # Variance as E[x^2] - E[x]^2, so no centred copy of the tile is needed.
        var = nl.mean(nl.square(input_sb), axis=1) - mean * mean
        shift_scale_tensor = (input_sb - mean) * nl.rsqrt(var + epsilon)
        output_sb = shift_scale_tensor * gamma_sb_bcast + beta_sb_bcast
        nl.store(output_tensor[i * nl.tile_size.pmax + i_p_io, i_f_io], value=output_sb,
                 mask=(i * nl.tile_size.pmax + i_p_io < num_rows))
    return output_tensor


@nki.jit
def nki_layernorm_kernel_v2(input_tensor, epsilon, gamma_vector, beta_vector):
    output_tensor = nl.ndarray(input_tensor.shape, dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    assert input_tensor.shape[1] == gamma_vector.shape[0] == beta_vector.shape[0]

    i_p_io = nl.arange(nl.tile_size.pmax)[:, None]
    i_f_io = nl.arange(input_tensor.shape[1])[None, :]
    i_p_param = nl.arange(1)[:, None]
    num_rows = input_tensor.shape[0]

    gamma_sb = nl.load(gamma_vector.reshape((1, gamma_vector.shape[0]))[i_p_param, i_f_io])
    beta_sb = nl.load(beta_vector.reshape((1, beta_vector.shape[0]))[i_p_param, i_f_io])
    gamma_sb_bcast = gamma_sb.broadcast_to((nl.tile_size.pmax, gamma_vector.shape[0]))
    beta_sb_bcast = beta_sb.broadcast_to((nl.tile_size.pmax, beta_vector.shape[0]))

    for i in nl.affine_range(math.ceil(input_tensor.shape[0] / nl.tile_size.pmax)):
        input_sb = nl.load(input_tensor[i * nl.tile_size.pmax + i_p_io, i_f_io],
                           mask=(i * nl.tile_size.pmax + i_p_io < num_rows))

        # bn_stats takes at most bn_stats_fmax elements per partition: cover the row in chunks, each
        # leaving 6 statistics that bn_aggr combines into the row's mean and variance.
        i_f_bn = nl.arange(nl.tile_size.bn_stats_fmax)[None, :]
        i_f_stats = nl.arange(6)[None, :]
        num_bn_stats = math.ceil(input_tensor.shape[1] / nl.tile_size.bn_stats_fmax)
        stats_results = nl.ndarray((nl.tile_size.pmax, 6 * num_bn_stats), dtype=np.float32)
        for j in nl.affine_range(num_bn_stats):
            stats_results[i_p_io, j * 6 + i_f_stats] = nisa.bn_stats(
                input_sb[i_p_io, j * nl.tile_size.bn_stats_fmax + i_f_bn],
                mask=(j * nl.tile_size.bn_stats_fmax + i_f_bn < input_tensor.shape[1]),
                dtype=np.float32)
        i_f_aggr = nl.arange(6 * num_bn_stats)[None, :]
        mean_var = nisa.bn_aggr(stats_results[i_p_io, i_f_aggr])
        mean = mean_var[i_p_io, 0]
        var = mean_var[i_p_io, 1]
        scale_var = nl.rsqrt(var + epsilon)

        # (x - mean) * scale_var as one instruction with two ALU stages.
        shift_scale_tensor = nisa.tensor_scalar(data=input_sb, op0=np.subtract, operand0=mean,
                                                op1=np.multiply, operand1=scale_var)
        output_sb = shift_scale_tensor * gamma_sb_bcast + beta_sb_bcast
        nl.store(output_tensor[i * nl.tile_size.pmax + i_p_io, i_f_io], value=output_sb,
                 mask=(i * nl.tile_size.pmax + i_p_io < num_rows))
    return output_tensor
