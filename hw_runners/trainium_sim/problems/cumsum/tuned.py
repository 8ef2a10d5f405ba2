import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def solution(x, axis=None, p_size=None, f_size=None, acc_dtype=None):
    # Partition p owns the consecutive rows p*RPP .. p*RPP + RPP - 1, so every DMA moves one 8 KiB contiguous
    # row per partition. R of those rows lie end to end along the free axis and ONE tensor_tensor_scan
    # handles them all: the multiplier tile is 1 everywhere except 0 at the first column of each row, which
    # restarts the running sum there (out[k] = out[k - 1] * 0 + x[k]).
    assert axis in (None, -1, len(x.shape) - 1), "only the last axis is supported"
    rows, cols = x.shape
    P = nl.tile_size.pmax
    acc = nl.float32 if acc_dtype is None else acc_dtype
    assert rows % P == 0
    RPP = rows // P                 # rows per partition (16)
    R = 2                           # rows per scan: 2 x 2048 fp32 = 16 KiB per partition
    while RPP % R:
        R -= 1
    n_chunks = RPP // R
    y = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:P, 0:cols]

    def load_chunk(c):
        data = nl.ndarray((P, R * cols), dtype=x.dtype, buffer=nl.sbuf)
        for r in nl.static_range(R):
            data[:, r * cols:(r + 1) * cols] = nl.load(x[RPP * i_p + c * R + r, i_f])
        return data

    # Software pipeline: the load of chunk c + 1 is issued before the scan and the store of chunk c, so the
    # DMA queues never sit idle behind a store that waits for the Vector engine.
    chunks = [load_chunk(0)]
    restart = nl.ones((P, R * cols), dtype=acc)
    restart[:, 0:R * cols:cols] = 0.0
    for c in nl.static_range(n_chunks):
        if c + 1 < n_chunks:
            chunks.append(load_chunk(c + 1))
        sums = nl.ndarray((P, R * cols), dtype=acc, buffer=nl.sbuf)
        sums[...] = nisa.tensor_tensor_scan(restart, chunks[c], 0.0, np.multiply, np.add, dtype=acc)
        for r in nl.static_range(R):
            nl.store(y[RPP * i_p + c * R + r, i_f], value=sums[:, r * cols:(r + 1) * cols])
    return y
