// Technique: hand the whole schedule to the hardware loop FSM (gemmini_loop_ws)
// with explicitly chosen block sizes. One call computes a block of
// bI x bJ output tiles over bK reduction tiles; the FSM issues every mvin,
// preload, compute and mvout itself at 1 cycle each (no 6-cycle CPU issue
// cost), loads 4 tiles per mvin, keeps loads running ahead of computes, and
// alternates scratchpad and accumulator halves between calls, so consecutive
// calls are double-buffered. The FSM loads A and B with config_ld states 0 and
// 1 (their row strides) and stores C with config_st, so those come first.
// Block-size rules used here (limits of one call):
//   bI * bJ tiles <= 32                 (half the accumulator: 512 rows)
//   (bI + bJ) * bK tiles * 16 <= 8192   (A and B blocks in half the scratchpad)
// A large bI*bJ gives bI*bJ*bK computes per (bI+bJ)*bK tile loads, so the
// DMA stays well below the execute unit. When bK < K/16, the K chain of one
// output block leaves partial sums in the accumulator (C == NULL) and the
// following calls continue it with ex_accumulate = true; only the last call
// of a chain stores C. Ragged edges (I/16 not a multiple of bI, ...) get a
// smaller block; one chain must keep the same bI and bJ throughout.
// Verified on gemmini-sim (tests/gemmini_sim/test_prompt_examples.py).
#include "include/gemmini.h"

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {
  const size_t tI = I / DIM, tJ = J / DIM, tK = K / DIM;   // all sizes are multiples of 16
  const size_t bI = min_sz(tI, 4);
  const size_t bJ = min_sz(tJ, 32 / bI);                     // bI * bJ <= 32
  size_t bK = min_sz(tK, (BANK_NUM * BANK_ROWS / 2 / DIM) / (bI + bJ));
  while (tK % bK) bK--;                                      // equal K blocks

  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended3_config_ld(K, MVIN_SCALE_IDENTITY, false, 0);      // A rows are K bytes apart
  gemmini_extended3_config_ld(J, MVIN_SCALE_IDENTITY, false, 1);      // B rows are J bytes apart
  gemmini_extended_config_st(J, NO_ACTIVATION, ACC_SCALE_IDENTITY);   // C rows are J bytes apart
  for (size_t i0 = 0; i0 < tI; i0 += bI)
    for (size_t j0 = 0; j0 < tJ; j0 += bJ) {
      const size_t ni = min_sz(bI, tI - i0), nj = min_sz(bJ, tJ - j0);
      for (size_t k0 = 0; k0 < tK; k0 += bK) {
        const int last = k0 + bK == tK;
        gemmini_loop_ws(ni, nj, bK, 0, 0, 0,
                        &A[i0 * DIM][k0 * DIM], &B[k0 * DIM][j0 * DIM], NULL,
                        last ? (void *)&C[i0 * DIM][j0 * DIM] : NULL,
                        K, J, 0, J,                 // strides in elements
                        false, false, false, false, // no transposes, int8 C, D unused
                        k0 > 0,                     // continue the K chain
                        NO_ACTIVATION, 0, 0, false); // act (mvout's is config_st's), spad ids, resadd
      }
    }
  gemmini_fence();
}
