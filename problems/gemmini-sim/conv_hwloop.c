// Hardware-loop baseline: the whole convolution is handed to the simulated
// LoopConv FSM (gemmini_loop_conv_ws), which keeps a block of weights in the
// scratchpad, streams input rows through a ring of buffers and double-buffers
// output tiles in the accumulator, issuing every instruction itself.
#include "include/gemmini.h"

void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]) {
  gemmini_loop_conv_ws(4, P + 2, C, K, P, 3, &inp[0][0][0][0], &weights[0][0][0][0], &bias[0][0],
                       &output[0][0][0][0], NO_ACTIVATION);
  fence();
}
