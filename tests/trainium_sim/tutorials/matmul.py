"""Matrix multiplication kernels in the form of the NKI "Matrix multiplication" tutorial
(nki-samples, src/nki_samples/tutorials/matrix_multiplication): the single-tile basic kernel and the
tiled kernel that loops over 128 x 128 x 512 tiles and accumulates partial products in PSUM.

Both take the left operand already transposed (lhsT is [K, M]): the Tensor engine contracts over the
partition axis, so K has to be on the partitions of both operands.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def nki_matmul_basic_(lhsT, rhs):
    """[64, 128] x [128, 512] in one matmul instruction (tutorial: "Basic compute kernel")."""
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2 == 128 and M == 64 and N == 512, "the basic kernel is written for one 64x128x512 tile"
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    # Index grids for the two operands and the result; the first axis is the partition axis.
    i_kp, i_mf = nl.mgrid[0:K, 0:M]
    i_rp, i_nf = nl.mgrid[0:K, 0:N]
    i_op, i_of = nl.mgrid[0:M, 0:N]

    lhsT_sb = nl.load(lhsT[i_kp, i_mf])
    rhs_sb = nl.load(rhs[i_rp, i_nf])
    # transpose_x=True: lhsT_sb is already [K, M], so no on-chip transpose is needed.
    prod_psum = nl.matmul(lhsT_sb, rhs_sb, transpose_x=True)
    # PSUM holds fp32; copy to SBUF in the output dtype before storing.
    prod_sb = nl.copy(prod_psum, dtype=result.dtype)
    nl.store(result[i_op, i_of], value=prod_sb)
    return result


@nki.jit
def nki_matmul_tiled_(lhsT, rhs):
    """[M, K] x [K, N] with K, M multiples of 128 and N a multiple of 512 (tutorial: "Tiling matrix
    multiplications"): every output tile sums K/128 partial products in one PSUM accumulator."""
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2, "lhsT and rhs must share the contraction dimension"
    TILE_M = nl.tile_size.gemm_stationary_fmax      # 128: stationary free size
    TILE_K = nl.tile_size.pmax                      # 128: partitions
    TILE_N = nl.tile_size.gemm_moving_fmax          # 512: moving free size
    assert M % TILE_M == 0 and K % TILE_K == 0 and N % TILE_N == 0
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                a_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                b_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                a_tile[...] = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                b_tile[...] = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                # Accumulating into the same PSUM tile across k sums the partial products in place.
                acc += nl.matmul(a_tile[...], b_tile[...], transpose_x=True)
            out_tile = nl.copy(acc, dtype=result.dtype)
            nl.store(result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], value=out_tile)
    return result
