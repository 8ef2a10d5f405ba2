// Hand-tuned 3x3 convolution reference. Weights for 64 output channels (all
// taps, all input channels) stay in banks 0-2 of the scratchpad while every
// output row is computed. For each 16-pixel output strip the three input rows
// it needs are loaded once, 18 pixels wide, and the three horizontal taps
// read them at row offsets 0, 1, 2, so each input pixel is loaded three
// times instead of nine. Bias is broadcast into the accumulator with a
// stride-0 mvin. Not double-buffered: the next strip's input overwrites the
// rows the current computes read.
#include "include/gemmini.h"

#define KT 4                       // output-channel tiles per weight block (64 channels)
#define CT (C / DIM)               // input-channel tiles
#define SEG (DIM + 2)              // rows per input segment: 16 pixels + 2 halo
#define IN_SP (3 * BANK_ROWS)      // input segments in bank 3
#define W_TILE(r, s, ct, kt) ((uint32_t)(((((r) * 3 + (s)) * CT + (ct)) * KT + (kt)) * DIM))

void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]) {
  const int kt_n = K / DIM < KT ? K / DIM : KT;
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(C, 1.0f, SEG, 0);      // input: block stride SEG puts 16-channel tiles one segment apart
  config_ld(K, 1.0f, DIM, 1);      // weights: 64 columns land in consecutive tiles
  config_ld(0, 1.0f, DIM, 2);      // bias broadcast
  config_st(K);
  for (int kb = 0; kb < K; kb += KT * DIM) {
    for (int r = 0; r < 3; r++)
      for (int s = 0; s < 3; s++)
        for (int ct = 0; ct < CT; ct++)
          mvin2(&weights[r][s][ct * DIM][kb], W_TILE(r, s, ct, 0), kt_n * DIM, DIM);
    for (int n = 0; n < 4; n++)
      for (int p = 0; p < P; p++)
        for (int q = 0; q < P; q += DIM) {
          int rows = P - q < DIM ? P - q : DIM;
          for (int r = 0; r < 3; r++)
            for (int ct = 0; ct < CT; ct += 4) {
              int cols = (CT - ct < 4 ? CT - ct : 4) * DIM;
              uint32_t dst = IN_SP + (r * CT + ct) * SEG;
              int first = rows + 2 < DIM ? rows + 2 : DIM;  // rows per mvin are limited to 16
              mvin(&inp[n][p + r][q][ct * DIM], dst, cols, first);
              if (rows + 2 > DIM) mvin(&inp[n][p + r][q + DIM][ct * DIM], dst + DIM, cols, rows + 2 - DIM);
            }
          for (int kt = 0; kt < kt_n; kt++)
            mvin3(&bias[0][kb + kt * DIM], ACC_ADDR_BIT | (kt * DIM), DIM, rows);
          for (int r = 0; r < 3; r++)
            for (int s = 0; s < 3; s++)
              for (int ct = 0; ct < CT; ct++)
                for (int kt = 0; kt < kt_n; kt++) {
                  preload(W_TILE(r, s, ct, kt), ACC_ADDR_BIT | ACCUMULATE_BIT | (kt * DIM), DIM, DIM, DIM, rows);
                  compute_preloaded(IN_SP + (r * CT + ct) * SEG + s, GARBAGE_ADDR, DIM, rows, DIM, DIM);
                }
          for (int kt = 0; kt < kt_n; kt++)
            mvout(&output[n][p][q][kb + kt * DIM], ACC_ADDR_BIT | (kt * DIM), DIM, rows);
        }
  }
  fence();
}
