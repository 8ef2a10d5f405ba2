// Gemmini's software library: tiled_matmul_auto picks the tiles (the largest
// that fit half of the scratchpad and accumulator, for double buffering) and
// runs each on the loop FSM, as a Gemmini user would write it.
#include "include/gemmini.h"

void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {
  tiled_matmul_auto(I, J, K, (elem_t *)A, (elem_t *)B, NULL, (elem_t *)C, K, J, J, J,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION,
                    ACC_SCALE_IDENTITY, 0, false, false, false, false, false, 0, WS);
}
