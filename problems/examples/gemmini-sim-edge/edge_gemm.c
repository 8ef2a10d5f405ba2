// My starting kernel for edge_gemm.toml: C = A x B one output tile at a time with gemmini.h calls. No size
// is a multiple of 16, so the last tile along each dimension is partial (fewer rows, columns or depth).
#include "include/gemmini.h"

void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended3_config_ld(K, MVIN_SCALE_IDENTITY, false, 0);   // A rows are K bytes apart
  gemmini_extended3_config_ld(J, MVIN_SCALE_IDENTITY, false, 1);   // B rows are J bytes apart
  gemmini_extended_config_st(J, NO_ACTIVATION, ACC_SCALE_IDENTITY);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      int rows = I - i < DIM ? I - i : DIM, cols = J - j < DIM ? J - j : DIM;
      for (int k = 0; k < K; k += DIM) {
        int depth = K - k < DIM ? K - k : DIM;
        gemmini_extended_mvin(&A[i][k], 0, depth, rows);
        gemmini_extended_mvin2(&B[k][j], DIM, cols, depth);
        // C tile in the accumulator: overwritten by the first k, accumulated by the others
        gemmini_extended_preload(DIM, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), cols, depth, cols, rows);
        gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, depth, rows, DIM, DIM);
      }
      gemmini_extended_mvout(&C[i][j], ACC_ADDR_BIT, cols, rows);
    }
  gemmini_fence();
}
