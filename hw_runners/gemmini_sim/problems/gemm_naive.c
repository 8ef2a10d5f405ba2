// Naive GEMM: one 16x16 output tile at a time. A and B tiles are reloaded for
// every use into the same two scratchpad slots, so loads, computes and stores
// never overlap. I, J and K are the problem sizes, any >= 1: the last tile along
// each dimension may be partial (mvin, preload, compute and mvout take fewer
// than 16 rows or columns, as on Gemmini).
#include "include/gemmini.h"

void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {
  const uint32_t A_sp = 0, B_sp = DIM, C_acc = ACC_ADDR_BIT;
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K * sizeof(int8_t), 1.0f, DIM, 0);  // rows of A are K bytes apart
  config_ld(J * sizeof(int8_t), 1.0f, DIM, 1);  // rows of B are J bytes apart
  config_st(J * sizeof(int8_t));
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      const int rows = I - i < DIM ? I - i : DIM, cols = J - j < DIM ? J - j : DIM;
      for (int k = 0; k < K; k += DIM) {
        const int depth = K - k < DIM ? K - k : DIM;
        mvin(&A[i][k], A_sp, depth, rows);
        mvin2(&B[k][j], B_sp, cols, depth);
        preload(B_sp, C_acc | (k ? ACCUMULATE_BIT : 0), cols, depth, cols, rows);
        compute_preloaded(A_sp, GARBAGE_ADDR, depth, rows, DIM, DIM);
      }
      mvout(&C[i][j], C_acc, cols, rows);
    }
  fence();
}
