import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def solution(in_tensor, pool_size):
    # Stride-1 k x k max pooling (NKI v2), 128 output rows at a time: copy in the k row-shifted copies of the
    # rows the tile needs, then take the maximum over all k*k shifted windows, one window offset at a time.
    k = pool_size
    h_in, w_in = in_tensor.shape
    h_out, w_out = h_in - (k - 1), w_in - (k - 1)
    out = nl.ndarray((h_out, w_out), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax

    for t in nl.static_range(math.ceil(h_out / P)):
        r0 = t * P
        n = min(P, h_out - r0)          # the last tile is partial
        shifted = []
        for a in nl.static_range(k):
            rows = nl.ndarray((P, w_in), dtype=in_tensor.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=rows[0:n, :], src=in_tensor[r0 + a:r0 + a + n, :])
            shifted.append(rows)
        best = nl.ndarray((P, w_out), dtype=in_tensor.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=best[0:n, :], src=shifted[0][0:n, 0:w_out])
        for a in nl.static_range(k):
            for b in nl.static_range(k):
                if a + b > 0:
                    nisa.tensor_tensor(dst=best[0:n, :], data1=best[0:n, :], data2=shifted[a][0:n, b:b + w_out],
                                       op=nl.maximum)
        nisa.dma_copy(dst=out[r0:r0 + n, :], src=best[0:n, :])
    return out
