import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def solution(lhsT, rhs):
    """result = lhsT.T @ rhs with resident stationary blocks, streamed rhs and prefetched DMA (NKI v2).

    The schedule of the NKI v1 tuned kernel (tuned.py), written the v2 way: tiles are nl.ndarray with the
    partition axis first (no par_dim), every instruction writes the dst it is given, and the PSUM
    accumulators of a block are a list of tiles. Work is split into items (mb, nb): BM rows of the result
    (a block of lhsT columns, resident in SBUF for the whole contraction) times 512 columns (rhs [K, 512],
    streamed in chunks of k-tiles). Each item keeps BM/128 accumulators live in PSUM and walks the
    contraction k-tile by k-tile, so an rhs chunk is reused by every stationary tile while it is in SBUF
    and each operand is read from HBM about once per block. The next rhs chunk, and row by row the next
    lhsT block, are copied in while the current chunk computes (their DMAs are issued first, so stores
    never queue in front of them).
    """
    # Every loop is nl.static_range (unrolled while tracing): the schedule branches on loop indices and
    # keeps Python lists of tiles.
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2
    P = nl.tile_size.pmax                   # 128 contraction rows per matmul
    TM = nl.tile_size.gemm_stationary_fmax  # 128 result rows per matmul
    TN = nl.tile_size.gemm_moving_fmax      # 512 result columns per matmul (one PSUM bank)
    assert K % P == 0 and M % TM == 0 and N % TN == 0
    KT = K // P

    # Up to 8 stationary tiles per block (8 PSUM banks of accumulators), at most 64 KiB per partition
    # (two blocks are alive while the next one is prefetched).
    BM = TM
    while BM < 1024 and M % (2 * BM) == 0 and KT * 2 * BM * 2 <= 64 * 1024:
        BM *= 2
    MT = BM // TM
    # rhs streams in chunks of KC k-tiles [KC * 128, 512]; two in flight (current, prefetched). Large
    # contractions use small chunks so two lhsT blocks and two chunks fit in SBUF together.
    KC = KT
    while KC > (16 if KT <= 16 else 8) and KC % 2 == 0:
        KC //= 2
    NM, NN, NC = M // BM, N // TN, KT // KC
    items = [(mb, nb) for mb in range(NM) for nb in range(NN)]
    chunks = [(w, kc) for w in range(len(items)) for kc in range(NC)]

    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    def new_block():
        return nl.ndarray((P, KT, BM), dtype=lhsT.dtype, buffer=nl.sbuf)

    def load_block_row(block, mb, kt):
        nisa.dma_copy(dst=block[:, kt, :], src=lhsT[kt * P:(kt + 1) * P, mb * BM:(mb + 1) * BM])

    def load_chunk(x):
        """rhs rows of chunk x: [KC k-tiles, 512 columns] of item x's column block."""
        w, kc = chunks[x]
        nb = items[w][1]
        slab = nl.ndarray((P, KC, TN), dtype=rhs.dtype, buffer=nl.sbuf)
        for k in range(KC):
            kt = kc * KC + k
            nisa.dma_copy(dst=slab[:, k, :], src=rhs[kt * P:(kt + 1) * P, nb * TN:(nb + 1) * TN])
        return slab

    # Prologue: the first block and rhs chunk, interleaved row by row so the first matmuls start early.
    block = new_block()
    slab = nl.ndarray((P, KC, TN), dtype=rhs.dtype, buffer=nl.sbuf)
    for kt in range(KT):
        load_block_row(block, 0, kt)
        if kt < KC:
            nisa.dma_copy(dst=slab[:, kt, :], src=rhs[kt * P:(kt + 1) * P, 0:TN])
    next_block = None
    spread = NN * NC            # chunks of one block, over which the next block's rows are loaded

    for x, (w, kc) in enumerate(chunks):
        mb, nb = items[w]
        if nb == 0 and kc == 0 and w > 0:
            block, next_block = next_block, None
        # Prefetch: the next rhs chunk, and a share of the next block's rows.
        next_slab = load_chunk(x + 1) if x + 1 < len(chunks) else None
        if mb + 1 < NM:
            y = nb * NC + kc
            if y == 0:
                next_block = new_block()
            for kt in range(y * KT // spread, (y + 1) * KT // spread):
                load_block_row(next_block, mb + 1, kt)

        if kc == 0:       # a fresh accumulator per stationary tile: its first matmul overwrites
            acc = [nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum) for _ in range(MT)]
        for k in nl.static_range(KC):
            kt = kc * KC + k
            for mt in nl.static_range(MT):
                nisa.nc_matmul(dst=acc[mt], stationary=block[:, kt, mt * TM:(mt + 1) * TM], moving=slab[:, k, :])

        if kc == NC - 1:
            # Evacuate PSUM with the bf16 cast, alternating the Scalar and Vector engines.
            out = nl.ndarray((TM, MT, TN), dtype=result.dtype, buffer=nl.sbuf)
            for mt in nl.static_range(MT):
                if mt % 2 == 0:
                    nisa.activation(dst=out[:, mt, :], op=nl.copy, data=acc[mt])
                else:
                    nisa.tensor_copy(dst=out[:, mt, :], src=acc[mt])
                row = mb * BM + mt * TM
                nisa.dma_copy(dst=result[row:row + TM, nb * TN:(nb + 1) * TN], src=out[:, mt, :])
        slab = next_slab
    return result
