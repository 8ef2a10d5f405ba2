// Hand-tuned GEMM reference. B is kept in the scratchpad one 64-column panel
// at a time (all of K), so every B element is loaded once; for each 16-row
// strip of A, the strip is loaded with 64-column mvins and the four 16x16
// output tiles of the panel accumulate over K in the accumulator before one
// mvout each. A and B live in different banks so preloads overlap computes.
// Not double-buffered: the next A strip overwrites the rows the current
// computes read, so loads and computes only partly overlap.
#include "include/gemmini.h"

#define PANEL 64                 // columns of B (and C) per panel: 4 tiles
#define B_SP 0                   // B panel: K/16 x 4 tiles from row 0 (banks 0-1)
#define A_SP (3 * BANK_ROWS)     // A strip: K/16 tiles in bank 3

void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);    // A rows are K bytes apart; 64-col mvins land in consecutive tiles
  config_ld(J, 1.0f, DIM, 1);    // B rows are J bytes apart
  config_st(J);
  for (int jb = 0; jb < J; jb += PANEL) {
    for (int k = 0; k < K; k += DIM)  // B tile (k/16, t) at B_SP + ((k/16) * 4 + t) * 16
      mvin2(&B[k][jb], B_SP + (k / DIM) * PANEL, PANEL, DIM);
    for (int i = 0; i < I; i += DIM) {
      for (int k = 0; k < K; k += PANEL)  // A tile k/16 at A_SP + k
        mvin(&A[i][k], A_SP + k, PANEL, DIM);
      for (int t = 0; t < PANEL / DIM; t++) {
        uint32_t acc = ACC_ADDR_BIT | (t * DIM);
        for (int k = 0; k < K; k += DIM) {
          preload(B_SP + (k / DIM) * PANEL + t * DIM, acc | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
          compute_preloaded(A_SP + k, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        }
      }
      for (int t = 0; t < PANEL / DIM; t++)
        mvout(&C[i][jb + t * DIM], ACC_ADDR_BIT | (t * DIM), DIM, DIM);
    }
  }
  fence();
}
