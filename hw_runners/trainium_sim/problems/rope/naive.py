import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def solution(x_in, cos, sin, lnc_shard=False, first_second_half_impl=True):
    # RoPE on a [d_head, S] embedding, 512 positions at a time. The first half of the head dims pairs
    # with the second half (first_second_half_impl) or even dims pair with odd dims (interleaved):
    #   out_first  = first * cos - second * sin
    #   out_second = second * cos + first * sin
    d_head, S = x_in.shape
    h = d_head // 2
    assert d_head <= 128 and tuple(cos.shape) == (h, S) and cos.shape == sin.shape
    out = nl.ndarray((d_head, S), dtype=x_in.dtype, buffer=nl.shared_hbm)
    F = 512
    assert S % F == 0
    i_h, i_f = nl.mgrid[0:h, 0:F]
    # rows of the two halves of each pair
    first_rows = i_h if first_second_half_impl else 2 * i_h
    second_rows = i_h + h if first_second_half_impl else 2 * i_h + 1

    for j in nl.affine_range(S // F):
        cols = j * F + i_f
        first = nl.load(x_in[first_rows, cols])
        second = nl.load(x_in[second_rows, cols])
        c = nl.load(cos[i_h, cols])
        s = nl.load(sin[i_h, cols])

        first_cos = nisa.tensor_tensor(first, c, np.multiply)
        second_sin = nisa.tensor_tensor(second, s, np.multiply)
        second_cos = nisa.tensor_tensor(second, c, np.multiply)
        first_sin = nisa.tensor_tensor(first, s, np.multiply)
        out_first = nisa.tensor_tensor(first_cos, second_sin, np.subtract)
        out_second = nisa.tensor_tensor(second_cos, first_sin, np.add)

        nl.store(out[first_rows, cols], value=out_first)
        nl.store(out[second_rows, cols], value=out_second)
    return out
