/* Gemmini's software library for gemmini-sim: tiled_matmul(_auto) and
 * tiled_conv(_auto) with the signatures of Gemmini's gemmini.h and the same
 * strategy (this is our own implementation of it): pick the largest tiles
 * that fit half of the scratchpad and of the accumulator (double buffering),
 * configure the load/store/execute state once, then run every tile in one of
 * two ways, as the timing parameter library_hwloop says:
 *  - 1, mainline gemmini-rocc-tests: hand the tile to the hardware loop FSM
 *    (gemmini_loop_ws), reusing A or B tiles when there are at most two;
 *  - 0 (default), the library the Autocomp paper measured: the CPU walks the
 *    tile's 16x16 blocks itself (the block-by-block stream Gemmini's library
 *    issued before the loop FSMs, kept in gemmini-rocc-tests' gemmini.h as a
 *    commented-out body of sp_tiled_matmul_ws) and spends
 *    library_block_cycles of scalar code per block (timing.py says where that
 *    number comes from).
 * Linked into the kernel process; everything it issues is recorded like any
 * kernel's instructions. The CPU type (results computed by the CPU) is
 * refused: the evaluator only accepts results Gemmini computed. */
#include <math.h>
#include <stdint.h>
#include "sim.h"
#include "include/gemmini.h"

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* Output-stationary tile (Gemmini's sp_tiled_matmul_os): CPU-issued instructions. */
static void tile_os(const elem_t *A, const elem_t *B, const void *D, void *C, size_t I, size_t J, size_t K,
                    size_t pad_I, size_t pad_J, size_t pad_K, size_t sA, size_t sB, size_t sD, size_t sC, bool full_C,
                    bool low_D, bool no_bias) {
  const uint32_t b_base = BANK_NUM * BANK_ROWS - (uint32_t)(K * J * DIM), acc_base = ACC_ADDR_BIT;
  const size_t szD = low_D ? sizeof(elem_t) : sizeof(acc_t), szC = full_C ? sizeof(acc_t) : sizeof(elem_t);
  for (size_t i = 0; i < I; i++)
    for (size_t j = 0; j < J; j++) {
      size_t rows = DIM - (i == I - 1 ? pad_I : 0), cols = DIM - (j == J - 1 ? pad_J : 0);
      uint32_t c_acc = acc_base | (uint32_t)((i * J + j) * DIM);
      if (D && !no_bias)
        gemmini_extended_mvin3((const char *)D + (i * DIM * sD + j * DIM) * szD, c_acc, cols, rows);
    }
  for (size_t k = 0; k < K; k++)
    for (size_t j = 0; j < J; j++)
      gemmini_extended_mvin2(B + k * DIM * sB + j * DIM, b_base + (uint32_t)((k * J + j) * DIM),
                             DIM - (j == J - 1 ? pad_J : 0), DIM - (k == K - 1 ? pad_K : 0));
  for (size_t i = 0; i < I; i++)
    for (size_t k = 0; k < K; k++)
      gemmini_extended_mvin(A + i * DIM * sA + k * DIM, (uint32_t)((i * K + k) * DIM),
                            DIM - (k == K - 1 ? pad_K : 0), DIM - (i == I - 1 ? pad_I : 0));
  for (size_t i = 0; i < I; i++)
    for (size_t j = 0; j < J; j++) {
      size_t rows = DIM - (i == I - 1 ? pad_I : 0), cols = DIM - (j == J - 1 ? pad_J : 0);
      uint32_t c_acc = (3u << 30) | (full_C ? FULL_READ_BIT : 0) | (uint32_t)((i * J + j) * DIM);
      if (no_bias || !D) c_acc &= ~ACCUMULATE_BIT;
      for (size_t k = 0; k < K; k++) {
        size_t kk = DIM - (k == K - 1 ? pad_K : 0);
        /* gemmini-sim's output-stationary protocol: the tile starts at the preload that names C */
        gemmini_extended_preload(GARBAGE_ADDR, k == 0 ? c_acc : GARBAGE_ADDR, DIM, DIM, cols, rows);
        if (k == 0)
          gemmini_extended_compute_preloaded((uint32_t)((i * K + k) * DIM), b_base + (uint32_t)((k * J + j) * DIM),
                                             kk, rows, cols, kk);
        else
          gemmini_extended_compute_accumulated((uint32_t)((i * K + k) * DIM), b_base + (uint32_t)((k * J + j) * DIM),
                                               kk, rows, cols, kk);
      }
    }
  gemmini_fence();   /* the last tile leaves the array */
  for (size_t i = 0; C && i < I; i++)
    for (size_t j = 0; j < J; j++)
      gemmini_extended_mvout((char *)C + (i * DIM * sC + j * DIM) * szC,
                             ACC_ADDR_BIT | (full_C ? FULL_READ_BIT : 0) | (uint32_t)((i * J + j) * DIM),
                             DIM - (j == J - 1 ? pad_J : 0), DIM - (i == I - 1 ? pad_I : 0));
}

/* Weight-stationary tile issued block by block by the CPU (k, j, i order): A and B go to the scratchpad
 * half `half`, C to the accumulator half `acc_half`; B is preloaded once per (k, j) and every block
 * computes into its own C rows. D (bias, may be NULL) is loaded first; `accumulate` adds to what an
 * earlier K tile left in the accumulator; C (may be NULL) is written after the last k. */
static void tile_ws_cpu(const elem_t *A, const elem_t *B, const void *D, void *C, size_t I, size_t J, size_t K,
                        size_t pad_I, size_t pad_J, size_t pad_K, size_t sA, size_t sB, size_t sD, size_t sC,
                        bool a_t, bool b_t, bool full_C, bool low_D, bool accumulate, int half, int acc_half) {
  const uint32_t spad_half = BANK_NUM * BANK_ROWS / 2, acc_half_rows = ACC_ROWS / 2;
  const uint32_t a_base = half * spad_half, b_base = a_base + spad_half - (uint32_t)(K * J * DIM);
  const uint32_t c_base = ACC_ADDR_BIT | ACCUMULATE_BIT | (full_C ? FULL_READ_BIT : 0) | (acc_half * acc_half_rows);
  const size_t a_blocks = min_sz(a_t ? I : K, MAX_BLOCK_LEN), b_blocks = min_sz(b_t ? K : J, MAX_BLOCK_LEN);
  const size_t c_blocks = full_C ? 1 : min_sz(J, MAX_BLOCK_LEN), szD = low_D ? sizeof(elem_t) : sizeof(acc_t), szC = full_C ? sizeof(acc_t) : sizeof(elem_t);
  const size_t d_blocks = min_sz(J, low_D ? MAX_BLOCK_LEN : MAX_BLOCK_LEN_ACC);
  for (size_t i = 0; D && i < I; i++)
    for (size_t j = 0; j < J; j += d_blocks) {
      size_t blocks = min_sz(d_blocks, J - j), cols = blocks * DIM - (j + blocks >= J ? pad_J : 0);
      gemmini_extended_mvin3((const char *)D + (i * DIM * sD + j * DIM) * szD,
                             (c_base & ~(ACCUMULATE_BIT | FULL_READ_BIT)) + (uint32_t)((i * J + j) * DIM), cols,
                             DIM - (i == I - 1 ? pad_I : 0));
    }
  for (size_t k = 0; k < K; k++)
    for (size_t j = 0; j < J; j++)
      for (size_t i = 0; i < I; i++) {
        uint32_t a_sp = a_base + (uint32_t)((a_t ? k * I + i : i * K + k) * DIM);
        uint32_t b_sp = b_base + (uint32_t)((b_t ? j * K + k : k * J + j) * DIM);
        uint32_t c_sp = c_base + (uint32_t)((i * J + j) * DIM);
        size_t rows_i = DIM - (i == I - 1 ? pad_I : 0), cols_j = DIM - (j == J - 1 ? pad_J : 0);
        size_t kk = DIM - (k == K - 1 ? pad_K : 0);
        rec_cpu_work((uint32_t)g_cfg.library_block_cycles);
        if (j == 0 && (a_t ? i : k) % a_blocks == 0) {
          size_t at = a_t ? i : k, n = a_t ? I : K, blocks = min_sz(a_blocks, n - at);
          size_t cols = blocks * DIM - (at + blocks >= n ? (a_t ? pad_I : pad_K) : 0);
          gemmini_extended_mvin(a_t ? A + k * DIM * sA + i * DIM : A + i * DIM * sA + k * DIM, a_sp, cols,
                                a_t ? kk : rows_i);
        }
        if (i == 0 && (b_t ? k : j) % b_blocks == 0) {
          size_t at = b_t ? k : j, n = b_t ? K : J, blocks = min_sz(b_blocks, n - at);
          size_t cols = blocks * DIM - (at + blocks >= n ? (b_t ? pad_K : pad_J) : 0);
          gemmini_extended_mvin2(b_t ? B + j * DIM * sB + k * DIM : B + k * DIM * sB + j * DIM, b_sp, cols,
                                 b_t ? cols_j : kk);
        }
        uint32_t out = !D && !accumulate && k == 0 ? c_sp & ~ACCUMULATE_BIT : c_sp;
        gemmini_extended_preload(i == 0 ? b_sp : GARBAGE_ADDR, out, cols_j, kk, cols_j, rows_i);
        if (i == 0) gemmini_extended_compute_preloaded(a_sp, GARBAGE_ADDR, kk, rows_i, DIM, DIM);
        else gemmini_extended_compute_accumulated(a_sp, GARBAGE_ADDR, kk, rows_i, DIM, DIM);
        if (C && k == K - 1 && (j == J - 1 || j % c_blocks == c_blocks - 1)) {
          size_t j0 = j / c_blocks * c_blocks, blocks = min_sz(c_blocks, J - j0);
          gemmini_extended_mvout((char *)C + (i * DIM * sC + j0 * DIM) * szC,
                                 (c_base & ~ACCUMULATE_BIT) + (uint32_t)((i * J + j0) * DIM),
                                 blocks * DIM - (j0 + blocks >= J ? pad_J : 0), rows_i);
        }
      }
}

void tiled_matmul(size_t dim_I, size_t dim_J, size_t dim_K, const elem_t *A, const elem_t *B, const void *D,
                  void *c_dram, size_t stride_A, size_t stride_B, size_t stride_D, size_t stride_C,
                  scale_t A_scale_factor, scale_t B_scale_factor, scale_acc_t D_scale_factor, int act,
                  acc_scale_t scale, acc_scale_t bert_scale, bool repeating_bias, size_t tile_I, size_t tile_J,
                  size_t tile_K, bool transpose_A, bool transpose_B, bool full_C, bool low_D, uint8_t weightA,
                  enum tiled_matmul_type_t type) {
  (void)bert_scale, (void)weightA;
  if (type == CPU) sim_fail("tiled_matmul with CPU computes on the CPU; gemmini-sim accepts only results Gemmini computed");
  if (type == OS && (transpose_A || transpose_B)) sim_fail("tiled_matmul: OS does not support transposed inputs");
  if (transpose_A && transpose_B) sim_fail("tiled_matmul: transpose_A and transpose_B cannot both be set");
  size_t Ip = ceil_div(dim_I, DIM) * DIM, Jp = ceil_div(dim_J, DIM) * DIM, Kp = ceil_div(dim_K, DIM) * DIM;
  bool db = type == WS;
  if (!tile_I || !tile_J || !tile_K || tile_I * DIM > Ip || tile_J * DIM > Jp || tile_K * DIM > Kp)
    sim_fail("tiled_matmul: tile sizes must be at least 1 and fit the (padded) matrices");
  if ((tile_I * tile_K + tile_K * tile_J) * DIM > (size_t)BANK_NUM * BANK_ROWS / (db ? 2 : 1) ||
      tile_I * tile_J * DIM > (size_t)ACC_ROWS / (db ? 2 : 1))
    sim_fail("tiled_matmul: the tiles do not fit the scratchpad and accumulator");
  size_t I0 = ceil_div(Ip, tile_I * DIM), J0 = ceil_div(Jp, tile_J * DIM), K0 = ceil_div(Kp, tile_K * DIM);
  size_t last_I = Ip % (tile_I * DIM) ? (Ip / DIM) % tile_I : tile_I;
  size_t last_J = Jp % (tile_J * DIM) ? (Jp / DIM) % tile_J : tile_J;
  size_t last_K = Kp % (tile_K * DIM) ? (Kp / DIM) % tile_K : tile_K;
  size_t padding_I = Ip - dim_I, padding_J = Jp - dim_J, padding_K = Kp - dim_K;
  bool no_bias = D == NULL;
  if (no_bias) D = (const void *)1;   /* as Gemmini's library: a non-NULL dummy, never loaded */
  size_t szD = low_D ? sizeof(elem_t) : sizeof(acc_t), szC = full_C ? sizeof(acc_t) : sizeof(elem_t);
  gemmini_extended_config_ex(type == OS ? OUTPUT_STATIONARY : WEIGHT_STATIONARY, act & 3, 0, 1, transpose_A, transpose_B);
  gemmini_extended_config_st(stride_C * szC, act & 3, scale);
  gemmini_extended3_config_ld(stride_A, A_scale_factor, false, 0);
  gemmini_extended3_config_ld(stride_B, B_scale_factor, false, 1);
  gemmini_extended3_config_ld(repeating_bias ? 0 : stride_D * szD, (float)D_scale_factor, low_D, 2);
  bool hw = g_cfg.library_hwloop, a_reuse = hw && db && I0 * K0 <= 2, b_reuse = hw && db && J0 * K0 <= 2;
  int tile = 0;
  for (size_t i0 = 0; i0 < I0; i0++)
    for (size_t j0 = 0; j0 < J0; j0++)
      for (size_t k0 = 0; k0 < K0; k0++) {
        size_t bias_row = repeating_bias ? 0 : i0 * tile_I * DIM;
        const void *pre = k0 ? NULL : (const char *)D + (bias_row * stride_D + j0 * tile_J * DIM) * szD;
        void *out = k0 == K0 - 1 ? (char *)c_dram + (i0 * tile_I * DIM * stride_C + j0 * tile_J * DIM) * szC : NULL;
        size_t I = i0 < I0 - 1 ? tile_I : last_I, J = j0 < J0 - 1 ? tile_J : last_J, K = k0 < K0 - 1 ? tile_K : last_K;
        size_t pI = i0 == I0 - 1 ? padding_I : 0, pJ = j0 == J0 - 1 ? padding_J : 0, pK = k0 == K0 - 1 ? padding_K : 0;
        const elem_t *a = transpose_A ? A + k0 * tile_K * DIM * stride_A + i0 * tile_I * DIM
                                      : A + i0 * tile_I * DIM * stride_A + k0 * tile_K * DIM;
        const elem_t *b = transpose_B ? B + j0 * tile_J * DIM * stride_B + k0 * tile_K * DIM
                                      : B + k0 * tile_K * DIM * stride_B + j0 * tile_J * DIM;
        int a_id = a_reuse ? (i0 + k0 == 0 ? 1 : 2) : 0, b_id = b_reuse ? (j0 + k0 == 0 ? 1 : 2) : 0;
        if (a_reuse && j0 >= 1) a = NULL;
        if (b_reuse && i0 >= 1) b = NULL;
        if (type == OS) {
          tile_os(a, b, no_bias ? NULL : pre, out, I, J, K, pI, pJ, pK, stride_A, stride_B,
                  repeating_bias ? 0 : stride_D, stride_C, full_C, low_D, no_bias || !pre);
          continue;
        }
        if (!hw) {
          tile_ws_cpu(a, b, no_bias ? NULL : pre, out, I, J, K, pI, pJ, pK, stride_A, stride_B,
                      repeating_bias ? 0 : stride_D, stride_C, transpose_A, transpose_B, full_C, low_D, k0 > 0,
                      tile++ & 1, (int)((i0 * J0 + j0) & 1));
          continue;
        }
        gemmini_loop_ws(I, J, K, pI, pJ, pK, a, b, no_bias ? NULL : pre, out, stride_A, stride_B,
                        repeating_bias ? 0 : stride_D, stride_C, transpose_A, transpose_B, full_C, low_D,
                        !no_bias || pre == NULL, act, a_id, b_id, false);
      }
  gemmini_fence();
}

void tiled_matmul_auto(size_t dim_I, size_t dim_J, size_t dim_K, const elem_t *A, const elem_t *B, const void *D,
                       void *c_dram, size_t stride_A, size_t stride_B, size_t stride_D, size_t stride_C,
                       scale_t A_scale_factor, scale_t B_scale_factor, scale_acc_t D_scale_factor, int act,
                       acc_scale_t scale, acc_scale_t bert_scale, bool repeating_bias, bool transpose_A,
                       bool transpose_B, bool full_C, bool low_D, uint8_t weightA, enum tiled_matmul_type_t type) {
  size_t Ib = ceil_div(dim_I, DIM), Jb = ceil_div(dim_J, DIM), Kb = ceil_div(dim_K, DIM);
  bool db = type == WS;
  size_t max_spad = (size_t)BANK_NUM * BANK_ROWS / (db ? 2 : 1), max_acc = (size_t)ACC_ROWS / (db ? 2 : 1);
  /* start from square output tiles that fit the accumulator, K filling the rest of a partition */
  size_t mats_in_partition = (size_t)BANK_NUM * BANK_ROWS / (db ? 4 : 2) / DIM;
  size_t max_ij = (size_t)sqrt((double)((size_t)ACC_ROWS / (db ? 2 : 1) / DIM)), max_k = mats_in_partition / max_ij;
  size_t tI = min_sz(Ib, max_ij), tJ = min_sz(Jb, max_ij), tK = min_sz(Kb, max_k);
  for (bool grew = true; grew;) {   /* then grow J, I, K by one tile at a time while everything fits */
    grew = false;
    if (tJ < Jb && (tI * tK + tK * (tJ + 1)) * DIM <= max_spad && tI * (tJ + 1) * DIM <= max_acc) tJ++, grew = true;
    if (tI < Ib && ((tI + 1) * tK + tK * tJ) * DIM <= max_spad && (tI + 1) * tJ * DIM <= max_acc) tI++, grew = true;
    if (tK < Kb && (tI * (tK + 1) + (tK + 1) * tJ) * DIM <= max_spad) tK++, grew = true;
  }
  tiled_matmul(dim_I, dim_J, dim_K, A, B, D, c_dram, stride_A, stride_B, stride_D, stride_C, A_scale_factor,
               B_scale_factor, D_scale_factor, act, scale, bert_scale, repeating_bias, tI, tJ, tK, transpose_A,
               transpose_B, full_C, low_D, weightA, type);
}
