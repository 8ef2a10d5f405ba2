// Hardware-loop baseline: software picks the block of tiles that best balances
// loads against computes within half of the scratchpad and half of the
// accumulator, then hands each block to the loop FSM (gemmini_loop_ws), which
// issues all instructions itself and double-buffers consecutive blocks. Blocks
// that split K leave partial sums in the accumulator (C == NULL) and the next
// block accumulates onto them (ex_accumulate). The FSM loads A, B and D with
// the row strides of config_ld states 0, 1, 2 and stores with config_st's.
#include "include/gemmini.h"

static size_t largest_divisor_at_most(size_t n, size_t cap) {
  for (size_t d = cap < n ? cap : n; d > 1; d--)
    if (n % d == 0) return d;
  return 1;
}

void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {
  const size_t tiles_I = I / DIM, tiles_J = J / DIM, tiles_K = K / DIM;
  const size_t spad_tiles = BANK_NUM * BANK_ROWS / 2 / DIM;  // half the scratchpad, in tiles
  const size_t acc_tiles = ACC_ROWS / 2 / DIM;               // half the accumulator, in tiles
  size_t bI = 1, bJ = 1, bK = 1;
  unsigned long long best = ~0ull;
  for (size_t ti = 1; ti <= tiles_I && ti <= acc_tiles; ti++) {
    if (tiles_I % ti) continue;
    for (size_t tj = 1; tj <= tiles_J && ti * tj <= acc_tiles; tj++) {
      if (tiles_J % tj) continue;
      size_t tk = largest_divisor_at_most(tiles_K, spad_tiles / (ti + tj));
      if (tk * (ti + tj) > spad_tiles) continue;
      // in tile times (16 cycles: one tile computed, or one tile loaded at full DMA rate); every call
      // adds a few for the pipeline, and among equally fast blockings the one moving less data wins
      unsigned long long calls = (tiles_I / ti) * (tiles_J / tj) * (tiles_K / tk);
      unsigned long long compute = ti * tj * tk, load = tk * (ti + tj);
      unsigned long long cost = calls * ((compute > load ? compute : load) + 4) * 16 + calls * load;
      if (cost < best) best = cost, bI = ti, bJ = tj, bK = tk;
    }
  }
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended_config_st(J, NO_ACTIVATION, ACC_SCALE_IDENTITY);   // C rows are J bytes apart
  gemmini_extended3_config_ld(K, MVIN_SCALE_IDENTITY, false, 0);      // A rows are K bytes apart
  gemmini_extended3_config_ld(J, MVIN_SCALE_IDENTITY, false, 1);      // B rows are J bytes apart
  for (size_t i = 0; i < tiles_I; i += bI)
    for (size_t j = 0; j < tiles_J; j += bJ)
      for (size_t k = 0; k < tiles_K; k += bK) {
        int last = k + bK == tiles_K;
        gemmini_loop_ws(bI, bJ, bK, 0, 0, 0, &A[i * DIM][k * DIM], &B[k * DIM][j * DIM], NULL,
                        last ? &C[i * DIM][j * DIM] : NULL, K, J, 0, J, false, false, false, false,
                        k > 0, NO_ACTIVATION, 0, 0, false);
      }
  fence();
}
