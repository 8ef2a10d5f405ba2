// Compiler-style GEMM: what a straightforward tensor compiler (e.g. Exo before
// any scheduling) emits, and the starting point under --isa fine. Every 16x16
// output tile is computed on its own: its accumulator tile is zeroed with an
// mvin of zeros, then for each k one 16x16 tile of A and one of B are loaded
// (each load preceded by the config_ld of its stride, as the compiler emits a
// config with every instruction) into the same two scratchpad slots and
// multiplied into the accumulator, and the tile is stored. No reuse across
// tiles, no overlap of loads, computes and stores. Any I, J, K >= 1: the last
// tile along each dimension may be partial.
#include "include/gemmini.h"

void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {
  const uint32_t A_sp = 0, B_sp = DIM, C_acc = ACC_ADDR_BIT;
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      const int rows = I - i < DIM ? I - i : DIM, cols = J - j < DIM ? J - j : DIM;
      config_ld(0, 1.0f, DIM, 2);
      mvin3(NULL, C_acc, cols, rows);  // address 0: zeros
      for (int k = 0; k < K; k += DIM) {
        const int depth = K - k < DIM ? K - k : DIM;
        config_ld(K * sizeof(int8_t), 1.0f, DIM, 0);
        mvin(&A[i][k], A_sp, depth, rows);
        config_ld(J * sizeof(int8_t), 1.0f, DIM, 1);
        mvin2(&B[k][j], B_sp, cols, depth);
        preload(B_sp, C_acc | ACCUMULATE_BIT, cols, depth, cols, rows);
        compute_preloaded(A_sp, GARBAGE_ADDR, depth, rows, DIM, DIM);
      }
      config_st(J * sizeof(int8_t));
      mvout(&C[i][j], C_acc, cols, rows);
    }
  fence();
}
