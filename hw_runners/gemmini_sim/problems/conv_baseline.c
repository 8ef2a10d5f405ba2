// Compiler-style 3x3 convolution: what a straightforward tensor compiler emits,
// and the starting point under --isa fine. For every 16-pixel strip of an
// output row and every 16 output channels: the bias is broadcast into the
// accumulator tile (an mvin with DRAM stride 0), then for each filter tap and
// 16 input channels one input tile and one weight tile are loaded (each load
// preceded by the config_ld of its stride) into the same two scratchpad slots
// and multiplied into the accumulator, and the tile is stored. No reuse across
// tiles, no overlap of loads, computes and stores. Any P, C >= 1: the last strip
// of a row and the last tile of the channels may be partial.
#include "include/gemmini.h"

void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]) {
  const uint32_t A_sp = 0, B_sp = DIM, acc = ACC_ADDR_BIT;
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  for (int n = 0; n < 4; n++)
    for (int p = 0; p < P; p++)
      for (int q = 0; q < P; q += DIM) {
        int rows = P - q < DIM ? P - q : DIM;
        for (int k = 0; k < K; k += DIM) {
          const int kc = K - k < DIM ? K - k : DIM;   // output channels of this tile
          config_ld(0, 1.0f, DIM, 2);
          mvin3(&bias[0][k], acc, kc, rows);
          for (int r = 0; r < 3; r++)
            for (int s = 0; s < 3; s++)
              for (int c = 0; c < C; c += DIM) {
                const int cc = C - c < DIM ? C - c : DIM;   // input channels of this tile
                config_ld(C, 1.0f, DIM, 0);
                mvin(&inp[n][p + r][q + s][c], A_sp, cc, rows);
                config_ld(K, 1.0f, DIM, 1);
                mvin2(&weights[r][s][c][k], B_sp, kc, cc);
                preload(B_sp, acc | ACCUMULATE_BIT, kc, cc, kc, rows);
                compute_preloaded(A_sp, GARBAGE_ADDR, cc, rows, DIM, DIM);
              }
          config_st(K);
          mvout(&output[n][p][q][k], acc, kc, rows);
        }
      }
  fence();
}
