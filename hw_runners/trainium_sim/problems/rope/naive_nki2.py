import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def solution(x_in, cos, sin, lnc_shard=False, first_second_half_impl=True):
    # RoPE on a [d_head, S] embedding (NKI v2), 512 positions at a time. The first half of the head dims pairs
    # with the second half (first_second_half_impl) or even dims pair with odd dims (interleaved):
    #   out_first  = first * cos - second * sin
    #   out_second = second * cos + first * sin
    d_head, S = x_in.shape
    h = d_head // 2
    assert d_head <= 128 and tuple(cos.shape) == (h, S) and cos.shape == sin.shape
    out = nl.ndarray((d_head, S), dtype=x_in.dtype, buffer=nl.shared_hbm)
    F = 512
    assert S % F == 0

    def half(t, k, cols):       # rows of half k (0: first, 1: second) of every rotation pair
        return t[k * h:(k + 1) * h, cols] if first_second_half_impl else t[k:d_head:2, cols]

    for j in nl.affine_range(S // F):
        cols = slice(j * F, (j + 1) * F)
        first = nl.ndarray((h, F), dtype=x_in.dtype, buffer=nl.sbuf)
        second = nl.ndarray((h, F), dtype=x_in.dtype, buffer=nl.sbuf)
        c = nl.ndarray((h, F), dtype=cos.dtype, buffer=nl.sbuf)
        s = nl.ndarray((h, F), dtype=sin.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=first, src=half(x_in, 0, cols))
        nisa.dma_copy(dst=second, src=half(x_in, 1, cols))
        nisa.dma_copy(dst=c, src=cos[:, cols])
        nisa.dma_copy(dst=s, src=sin[:, cols])

        first_cos = nl.ndarray((h, F), dtype=nl.float32, buffer=nl.sbuf)
        second_sin = nl.ndarray((h, F), dtype=nl.float32, buffer=nl.sbuf)
        second_cos = nl.ndarray((h, F), dtype=nl.float32, buffer=nl.sbuf)
        first_sin = nl.ndarray((h, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=first_cos, data1=first, data2=c, op=nl.multiply)
        nisa.tensor_tensor(dst=second_sin, data1=second, data2=s, op=nl.multiply)
        nisa.tensor_tensor(dst=second_cos, data1=second, data2=c, op=nl.multiply)
        nisa.tensor_tensor(dst=first_sin, data1=first, data2=s, op=nl.multiply)
        out_first = nl.ndarray((h, F), dtype=x_in.dtype, buffer=nl.sbuf)
        out_second = nl.ndarray((h, F), dtype=x_in.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=out_first, data1=first_cos, data2=second_sin, op=nl.subtract)
        nisa.tensor_tensor(dst=out_second, data1=second_cos, data2=first_sin, op=nl.add)

        nisa.dma_copy(dst=half(out, 0, cols), src=out_first)
        nisa.dma_copy(dst=half(out, 1, cols), src=out_second)
    return out
