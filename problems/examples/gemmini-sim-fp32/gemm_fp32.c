// Starting kernel of gemm_fp32.toml: C = A x B one 4x4 output tile at a time on the fp32 4x4 array
// (DIM is 4 in this configuration); edge tiles use the rows and columns that exist.
#include "include/gemmini.h"

static int min_int(int a, int b) { return a < b ? a : b; }

void solution(float A[I][K], float B[K][J], float C[I][J]) {
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended3_config_ld(K * sizeof(float), MVIN_SCALE_IDENTITY, false, 0);   // strides are in bytes
  gemmini_extended3_config_ld(J * sizeof(float), MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended_config_st(J * sizeof(float), NO_ACTIVATION, ACC_SCALE_IDENTITY);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      int rows = min_int(DIM, I - i), cols = min_int(DIM, J - j);
      for (int k = 0; k < K; k += DIM) {
        int ks = min_int(DIM, K - k);
        gemmini_extended_mvin(&A[i][k], 0, ks, rows);
        gemmini_extended_mvin2(&B[k][j], DIM, cols, ks);
        gemmini_extended_preload(DIM, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), cols, ks, cols, rows);
        gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, ks, rows, ks, rows);
      }
      gemmini_extended_mvout(&C[i][j], ACC_ADDR_BIT, cols, rows);
    }
  gemmini_fence();
}
