// Gemmini's software library: tiled_conv_auto picks the tiles and runs each on
// the LoopConv FSM, as a Gemmini user would write it. The input is already
// padded (P + 2 rows and columns), so the convolution itself has padding 0.
#include "include/gemmini.h"

void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]) {
  tiled_conv_auto(4, P + 2, P + 2, C, K, P, P, 1, 1, 1, 0, 3, false, false, false, false, false,
                  &inp[0][0][0][0], &weights[0][0][0][0], &bias[0][0], &output[0][0][0][0], NO_ACTIVATION,
                  ACC_SCALE_IDENTITY, 0, 0, 0, WS);
}
