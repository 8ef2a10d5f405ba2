// Hardware-loop baseline: the convolution is cut into tiles of whole output
// rows (all 3x3 taps and all input channels per tile; the number of output
// rows and output channels that fit half of the scratchpad and of the
// accumulator and balance loads against computes best), and each tile is
// handed to the LoopConv FSM (gemmini_loop_conv_ws), which issues every
// instruction itself; consecutive tiles double-buffer. The input is already
// padded, so each tile reads rows p .. p + rows + 1 with no padding.
#include "include/gemmini.h"

static int fits(int rows, int ochs) {
  int in_rows = (rows + 2) * (P + 2) * (C / DIM), w_rows = (ochs / DIM) * 9 * C, out_rows = (ochs / DIM) * rows * P;
  return in_rows + w_rows <= BANK_NUM * BANK_ROWS / 2 && out_rows <= ACC_ROWS / 2;
}

void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]) {
  int ochs = DIM, rows = 1;
  long best = -1;
  for (int o = DIM; o <= K; o += DIM)          // cycles per tile: computes vs bytes loaded at 16 B/cycle
    for (int r = 1; r <= P && fits(r, o); r++) {
      long tiles = 4L * ((P + r - 1) / r) * ((K + o - 1) / o);
      long compute = (long)(o / DIM) * 9 * (C / DIM) * ((P + DIM - 1) / DIM) * r * DIM;
      long load = (9L * C * o + (long)(r + 2) * (P + 2) * C) / 16;
      long cost = tiles * ((compute > load ? compute : load) + 64);
      if (best < 0 || cost < best) best = cost, ochs = o, rows = r;
    }
  gemmini_extended_config_st(K, NO_ACTIVATION, ACC_SCALE_IDENTITY);   // output pixels are K bytes apart
  gemmini_extended3_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, ACC_SCALE_IDENTITY, 1, 1, false, false, false);
  for (int n = 0; n < 4; n++)
    for (int p = 0; p < P; p += rows)
      for (int k = 0; k < K; k += ochs) {
        int r = P - p < rows ? P - p : rows, o = K - k < ochs ? K - k : ochs;
        gemmini_loop_conv_ws(4, P + 2, P + 2, C, K, P, P, P, P, 1, 0, 3, 1, 1, 1, 0,
                             1, r, P, o, 3, 3, C, 0, 0, 0, 0, 0, 0, 0, 0, r, P,
                             &weights[0][0][0][k], &output[n][p][0][k], &bias[0][k], &inp[n][p][0][0],
                             false, true, false, false, false, NO_ACTIVATION, false, false, false, false, 1,
                             C, K, K, false, 0, 0);
      }
  gemmini_fence();
}
