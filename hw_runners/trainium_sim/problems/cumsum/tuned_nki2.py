import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def solution(x, axis=None, p_size=None, f_size=None, acc_dtype=None):
    # Partition p owns the consecutive rows p*RPP .. p*RPP + RPP - 1 (NKI v2), so every DMA moves one long
    # contiguous run per partition. R of those rows lie end to end along the free axis and ONE
    # tensor_tensor_scan handles them all: the multiplier tile is 1 everywhere except 0 at the first column
    # of each row, which restarts the running sum there (out[k] = out[k - 1] * 0 + x[k]).
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
    xv = x.reshape((P, RPP * cols))     # [p, r*cols + c] = x[p*RPP + r, c]: a partition's rows are contiguous
    yv = y.reshape((P, RPP * cols))

    def load_chunk(c):              # the chunk's R rows of every partition: one contiguous run, one DMA
        data = nl.ndarray((P, R * cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=data, src=xv[:, c * R * cols:(c + 1) * R * cols])
        return data

    restart = nl.ndarray((P, R * cols), dtype=acc, buffer=nl.sbuf)
    nisa.memset(dst=restart, value=1.0)
    nisa.memset(dst=restart[:, 0:R * cols:cols], value=0.0)
    # Software pipeline: the loads of chunks c + 1 and c + 2 are issued before the scan and the store of
    # chunk c (instructions issue in program order), so the DMA queues never sit idle behind a store that
    # waits for the Vector engine.
    ahead = 2
    chunks = [load_chunk(c) for c in range(min(ahead, n_chunks))]
    for c in nl.static_range(n_chunks):
        if c + ahead < n_chunks:
            chunks.append(load_chunk(c + ahead))
        sums = nl.ndarray((P, R * cols), dtype=acc, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=sums, data0=restart, data1=chunks[c], initial=0.0, op0=nl.multiply,
                                op1=nl.add)
        nisa.dma_copy(dst=yv[:, c * R * cols:(c + 1) * R * cols], src=sums)
    return y
