"""The four kernels of the NKI "Matrix multiplication" tutorial, re-expressed for calibration: the same
algorithm, loop nests, tile sizes and loads as the tutorial's kernels (SDK 2.20-2.26, when the tutorial
published their latencies at [4096, 8192] @ [8192, 8192] in bf16 on trn1.32xlarge), written anew.

All take lhsT [K, M] (the left operand transposed: K must lie on the partitions of both operands) and
rhs [K, N], and return [M, N] in lhsT's dtype.

  tiled            - one PSUM accumulator per 128 x 512 output tile, both operand tiles loaded for every k
  hoist_load       - optimization 1: a column of lhsT tiles loaded once per m, a column of rhs tiles per n
  block_free       - optimization 2: 2 x 2 output tiles share their operand columns
  fully_optimized  - optimization 3: K blocked too (8 tiles), 16 x 2 output tiles per block, partial sums
                     kept in an SBUF result block, wide (2 KiB / 4 KiB per partition) loads and stores
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

PART = 128       # contraction rows per matmul (partitions)
COLS_S = 128     # stationary columns (output partitions)
COLS_M = 512     # moving columns (one PSUM bank of fp32)


@nki.jit
def tiled(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for mi in nl.affine_range(M // COLS_S):
        for ni in nl.affine_range(N // COLS_M):
            acc = nl.zeros((COLS_S, COLS_M), nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(K // PART):
                a = nl.ndarray((PART, COLS_S), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((PART, COLS_M), dtype=rhs.dtype, buffer=nl.sbuf)
                a[...] = nl.load(lhsT[ki * PART:(ki + 1) * PART, mi * COLS_S:(mi + 1) * COLS_S])
                b[...] = nl.load(rhs[ki * PART:(ki + 1) * PART, ni * COLS_M:(ni + 1) * COLS_M])
                acc += nl.matmul(a[...], b[...], transpose_x=True)
            res = nl.copy(acc, dtype=out.dtype)
            nl.store(out[mi * COLS_S:(mi + 1) * COLS_S, ni * COLS_M:(ni + 1) * COLS_M], value=res)
    return out


@nki.jit
def hoist_load(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    kt = K // PART
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    ia = nl.mgrid[0:PART, 0:COLS_S]
    ib = nl.mgrid[0:PART, 0:COLS_M]
    io = nl.mgrid[0:COLS_S, 0:COLS_M]
    for mi in nl.affine_range(M // COLS_S):
        # every K tile of this column of lhsT, loaded once and reused for all n
        # (the tutorial declares this buffer TILE_N wide; only TILE_M columns are ever used)
        a_col = nl.ndarray((kt, nl.par_dim(PART), COLS_S), dtype=lhsT.dtype, buffer=nl.sbuf)
        for ki in nl.affine_range(kt):
            a_col[ki, ia.p, ia.x] = nl.load(lhsT[ki * PART + ia.p, mi * COLS_S + ia.x])
        for ni in nl.affine_range(N // COLS_M):
            b_col = nl.ndarray((kt, nl.par_dim(PART), COLS_M), dtype=rhs.dtype, buffer=nl.sbuf)
            for ki in nl.affine_range(kt):
                b_col[ki, ib.p, ib.x] = nl.load(rhs[ki * PART + ib.p, ni * COLS_M + ib.x])
            acc = nl.zeros((COLS_S, COLS_M), nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(kt):
                acc[...] += nl.matmul(a_col[ki, ia.p, ia.x], b_col[ki, ib.p, ib.x], transpose_x=True)
            res = nl.copy(acc, dtype=out.dtype)
            nl.store(out[mi * COLS_S + io.p, ni * COLS_M + io.x], value=res)
    return out


@nki.jit
def block_free(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    kt = K // PART
    bm_tiles, bn_tiles = 2, 2
    assert M % (COLS_S * bm_tiles) == 0 and N % (COLS_M * bn_tiles) == 0
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    ia = nl.mgrid[0:PART, 0:COLS_S]
    ib = nl.mgrid[0:PART, 0:COLS_M]
    io = nl.mgrid[0:COLS_S, 0:COLS_M]
    for mb in nl.affine_range(M // (COLS_S * bm_tiles)):
        a_blk = nl.ndarray((bm_tiles, kt, nl.par_dim(PART), COLS_S), dtype=lhsT.dtype, buffer=nl.sbuf)
        for j in nl.affine_range(bm_tiles):
            for ki in nl.affine_range(kt):
                a_blk[j, ki, ia.p, ia.x] = nl.load(lhsT[ki * PART + ia.p, (mb * bm_tiles + j) * COLS_S + ia.x])
        for nb in nl.affine_range(N // (COLS_M * bn_tiles)):
            b_blk = nl.ndarray((bn_tiles, kt, nl.par_dim(PART), COLS_M), dtype=rhs.dtype, buffer=nl.sbuf)
            for j in nl.affine_range(bn_tiles):
                for ki in nl.affine_range(kt):
                    b_blk[j, ki, ib.p, ib.x] = nl.load(rhs[ki * PART + ib.p, (nb * bn_tiles + j) * COLS_M + ib.x])
            for jm in nl.affine_range(bm_tiles):
                for jn in nl.affine_range(bn_tiles):
                    acc = nl.zeros((COLS_S, COLS_M), nl.float32, buffer=nl.psum)
                    for ki in nl.affine_range(kt):
                        acc += nl.matmul(a_blk[jm, ki, ia.p, ia.x], b_blk[jn, ki, ib.p, ib.x], transpose_x=True)
                    res = nl.copy(acc, dtype=out.dtype)
                    nl.store(out[(mb * bm_tiles + jm) * COLS_S + io.p, (nb * bn_tiles + jn) * COLS_M + io.x],
                             value=res)
    return out


@nki.jit
def fully_optimized(lhsT, rhs, m_tiles=16, n_tiles=2, k_tiles=8):
    K, M = lhsT.shape
    _, N = rhs.shape
    wm, wn, wk = COLS_S * m_tiles, COLS_M * n_tiles, PART * k_tiles      # block widths
    assert M % wm == 0 and N % wn == 0 and K % wk == 0
    m_blocks = M // wm
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for nb in nl.affine_range(N // wn):
        # partial sums of every output tile of this column block, summed over the K blocks in SBUF
        partial = nl.zeros((m_blocks, m_tiles, n_tiles, nl.par_dim(COLS_S), COLS_M), dtype=lhsT.dtype,
                           buffer=nl.sbuf)
        for kb in nl.sequential_range(K // wk):
            ib = nl.mgrid[0:PART, 0:wn]
            b_blk = nl.ndarray((k_tiles, nl.par_dim(PART), wn), dtype=rhs.dtype, buffer=nl.sbuf)
            for j in nl.affine_range(k_tiles):      # one load per K tile, wn columns wide
                b_blk[j, ib.p, ib.x] = nl.load(rhs[(kb * k_tiles + j) * PART + ib.p, nb * wn + ib.x])
            for mb in nl.affine_range(m_blocks):
                ia = nl.mgrid[0:PART, 0:wm]
                a_blk = nl.ndarray((k_tiles, nl.par_dim(PART), wm), dtype=lhsT.dtype, buffer=nl.sbuf)
                for j in nl.affine_range(k_tiles):  # one load per K tile, wm columns wide
                    a_blk[j, ia.p, ia.x] = nl.load(lhsT[(kb * k_tiles + j) * PART + ia.p, mb * wm + ia.x])
                sa = nl.mgrid[0:PART, 0:COLS_S]
                sb = nl.mgrid[0:PART, 0:COLS_M]
                so = nl.mgrid[0:COLS_S, 0:COLS_M]
                for jn in nl.affine_range(n_tiles):
                    for jm in nl.affine_range(m_tiles):
                        acc = nl.zeros((COLS_S, COLS_M), dtype=nl.float32, buffer=nl.psum)
                        for j in nl.affine_range(k_tiles):
                            acc[...] += nisa.nc_matmul(a_blk[j, sa.p, jm * COLS_S + sa.x],
                                                       b_blk[j, sb.p, jn * COLS_M + sb.x])
                        partial[mb, jm, jn, so.p, so.x] += acc[so.p, so.x]
        # gather each row of output tiles into one wide tile, then one store per row of tiles
        for mb in nl.affine_range(m_blocks):
            for jm in nl.affine_range(m_tiles):
                it = nl.mgrid[0:COLS_S, 0:COLS_M]
                iw = nl.mgrid[0:COLS_S, 0:wn]
                row = nl.ndarray((COLS_S, wn), dtype=partial.dtype, buffer=nl.sbuf)
                for jn in nl.affine_range(n_tiles):
                    row[it.p, jn * COLS_M + it.x] = nl.copy(partial[mb, jm, jn, it.p, it.x])
                nl.store(out[(mb * m_tiles + jm) * COLS_S + iw.p, nb * wn + iw.x], value=row[iw.p, iw.x])
    return out
