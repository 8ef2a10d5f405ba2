import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def solution(lhsT, rhs):
    """result = lhsT.T @ rhs, one output tile at a time (NKI v2).

    Every (M, N) output tile copies its lhsT and rhs operand tiles from HBM for each step of the
    contraction; the matmuls of one tile accumulate in one PSUM tile (the first write overwrites,
    later ones add), which is copied to SBUF with the cast to bfloat16 and then to HBM.
    """
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2
    TILE_K = nl.tile_size.pmax                  # 128: contraction on the partitions
    TILE_M = nl.tile_size.gemm_stationary_fmax  # 128
    TILE_N = nl.tile_size.gemm_moving_fmax      # 512
    assert K % TILE_K == 0 and M % TILE_M == 0 and N % TILE_N == 0

    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile)
            res_sb = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=res_sb)
    return result
