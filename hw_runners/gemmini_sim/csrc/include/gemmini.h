/* gemmini.h as provided by the gemmini-sim target.
 *
 * The programming interface of Gemmini's own gemmini.h: the same macro and
 * function names, argument lists and constants, so kernels written for
 * Gemmini compile unchanged. Every instruction is recorded and executed by a
 * bit-exact functional model with a cycle-approximate timing model; what each
 * does, and the parts of Gemmini's interface that are not modelled, are in
 * prompts/gemmini-sim/isa.md.
 *
 * Local addresses count rows. Bit 31 selects the accumulator, bit 30 makes a
 * write to the accumulator accumulate, bit 29 makes an mvout from the
 * accumulator read full int32. GARBAGE_ADDR (0xFFFFFFFF) means "no data".
 */
#ifndef AUTOCOMP_GEMMINI_H
#define AUTOCOMP_GEMMINI_H
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gemmini_params.h"
#include "gemmini_counter.h"

/* RoCC function codes of Gemmini's instructions (for reference; the macros below issue them) */
#define k_CONFIG 0
#define k_MVIN2 1
#define k_MVIN 2
#define k_MVOUT 3
#define k_COMPUTE_PRELOADED 4
#define k_COMPUTE_ACCUMULATE 5
#define k_PRELOAD 6
#define k_FLUSH 7
#define k_LOOP_WS 8
#define k_MVIN3 14
#define k_LOOP_CONV_WS 15
#define k_COUNTER 126

#define CONFIG_EX 0
#define CONFIG_LD 1
#define CONFIG_ST 2
#define CONFIG_BERT 3

#define OUTPUT_STATIONARY 0
#define WEIGHT_STATIONARY 1

#define NO_ACTIVATION 0
#define RELU 1
#define LAYERNORM 2   /* not modelled: rejected with an error */
#define IGELU 3       /* not modelled */
#define SOFTMAX 4     /* not modelled */

#define ACC_ADDR_BIT (1u << 31)
#define ACCUMULATE_BIT (1u << 30)
#define FULL_READ_BIT (1u << 29)

enum tiled_matmul_type_t { OS, WS, CPU };

static inline acc_scale_t_bits acc_scale_t_to_acc_scale_t_bits(acc_scale_t x) {
  union { acc_scale_t f; acc_scale_t_bits b; } u = {.f = x};
  return u.b;
}
static inline acc_scale_t acc_scale_t_bits_to_acc_scale_t(acc_scale_t_bits x) {
  union { acc_scale_t f; acc_scale_t_bits b; } u = {.b = x};
  return u.f;
}
static inline scale_t_bits scale_t_to_scale_t_bits(scale_t x) {
  union { scale_t f; scale_t_bits b; } u = {.f = x};
  return u.b;
}
static inline scale_t scale_t_bits_to_scale_t(scale_t_bits x) {
  union { scale_t f; scale_t_bits b; } u = {.b = x};
  return u.f;
}

/* ---- the instructions (each records one Gemmini instruction) --------------------------------- */
void gemmini_sim_config_ex(int dataflow, int act, uint32_t sys_shift, float acc_scale, uint32_t c_stride,
                           uint32_t a_stride, bool a_transpose, bool b_transpose, bool set_only_strides);
void gemmini_sim_config_ld(uint64_t stride, float scale, bool shrunk, uint32_t block_stride,
                           uint32_t pixel_repeats, int id);
void gemmini_sim_config_st(uint64_t stride, int act, float acc_scale, int pool_stride, int pool_size,
                           int pool_out_dim, int porows, int pocols, int orows, int ocols, int upad, int lpad);
void gemmini_sim_config_norm(int64_t q_const, int q_const_type, int set_stats_id_only, int act_msb, int stat_id,
                             int64_t igelu_qb, int64_t igelu_qc);
void gemmini_sim_mvin(int id, uint64_t dram_addr, uint32_t local, uint32_t cols, uint32_t rows);
void gemmini_sim_mvout(uint64_t dram_addr, uint32_t local, uint32_t cols, uint32_t rows);
void gemmini_sim_preload(uint32_t bd, uint32_t c, uint32_t bd_cols, uint32_t bd_rows, uint32_t c_cols,
                         uint32_t c_rows);
void gemmini_sim_compute(bool accumulated, uint32_t a, uint32_t bd, uint32_t a_cols, uint32_t a_rows,
                         uint32_t bd_cols, uint32_t bd_rows);
void gemmini_sim_flush(uint64_t skip);
void gemmini_sim_fence(void);
uint64_t gemmini_sim_counter(uint64_t config_reg);
uint64_t gemmini_sim_read_cycles(void);
/* (prototype parameter names avoid I, J, K, P and C: problems define them as macros) */
void gemmini_sim_loop_ws(size_t tiles_i, size_t tiles_j, size_t tiles_k, size_t pad_I, size_t pad_J, size_t pad_K,
                         uint64_t A, uint64_t B, uint64_t D, uint64_t c_dram, size_t A_stride, size_t B_stride, size_t D_stride,
                         size_t C_stride, bool A_transpose, bool B_transpose, bool full_C, bool low_D,
                         bool ex_accumulate, int act, int a_spad_id, int b_spad_id, bool is_resadd);
void gemmini_sim_loop_conv_ws(
    int batch_size, int in_row_dim, int in_col_dim, int in_channels, int out_channels, int out_row_dim,
    int out_col_dim, int pool_out_row_dim, int pool_out_col_dim, int stride, int padding, int kernel_dim,
    int kernel_dilation, int pool_size, int pool_stride, int pool_padding, int batches, int porows, int pocols,
    int pochs, int krows, int kcols, int kchs, int lpad, int rpad, int upad, int dpad, int plpad, int prpad,
    int pupad, int pdpad, int orows, int ocols, uint64_t weights, uint64_t output, uint64_t bias, uint64_t input,
    bool no_bias, bool no_pool, bool downsample, bool wrot180, bool input_dilated, int act, bool trans_output_1203,
    bool trans_weight_1203, bool trans_weight_0132, bool trans_input_3120, int max_pixels_per_row, int in_stride,
    int weight_stride, int out_stride, bool dw, int a_spad_id, int b_spad_id);

/* Autocomp's ADMM harness helpers (harnesses/admm-multifunction): out = a + b and out = -in on rows x cols
 * contiguous elem_t, run by the CPU. A problem whose harness has them names them add_matrix and
 * negate_matrix (its harness macros); the replayer executes them and charges the Rocket core's cycles. */
void gemmini_sim_add_matrix(const void *a, const void *b, void *out, int rows, int cols);
void gemmini_sim_negate_matrix(const void *in, void *out, int rows, int cols);

#define GEMMINI_SIM_DRAM(p) ((uint64_t)(uintptr_t)(p))

/* ---- Gemmini's configuration macros --------------------------------------------------------- */
#define gemmini_extended3_config_ex(dataflow, sys_act, sys_shift, sys_acc_scale, C_stride, A_stride, A_transpose, \
                                    B_transpose, set_only_strides) \
  gemmini_sim_config_ex(dataflow, sys_act, sys_shift, sys_acc_scale, C_stride, A_stride, A_transpose, B_transpose, \
                        set_only_strides)
#define gemmini_extended2_config_ex(dataflow, sys_act, sys_shift, A_stride, A_transpose, B_transpose) \
  gemmini_extended3_config_ex(dataflow, sys_act, sys_shift, ACC_SCALE_IDENTITY, 1, A_stride, A_transpose, B_transpose, \
                              false)
#define gemmini_extended_config_ex(dataflow, sys_act, sys_shift, A_stride, A_transpose, B_transpose) \
  gemmini_extended2_config_ex(dataflow, sys_act, sys_shift, A_stride, A_transpose, B_transpose)
#define gemmini_config_ex(dataflow, sys_act, sys_shift) \
  gemmini_extended_config_ex(dataflow, sys_act, sys_shift, 1, 0, 0)

#define gemmini_extended5_config_ld(stride, scale, shrunk, block_mvin_stride, pixel_repeats, id) \
  gemmini_sim_config_ld(stride, scale, shrunk, block_mvin_stride, pixel_repeats, id)
#define gemmini_extended4_config_ld(stride, scale, shrunk, block_mvin_stride, id) \
  gemmini_extended5_config_ld(stride, scale, shrunk, block_mvin_stride, 1, id)
#define gemmini_extended3_config_ld(stride, scale, shrunk, id) \
  gemmini_extended4_config_ld(stride, scale, shrunk, DIM, id)
#define gemmini_extended2_config_ld(stride, scale, shrunk) gemmini_extended3_config_ld(stride, scale, shrunk, 0)
#define gemmini_extended_config_ld(stride, scale) gemmini_extended2_config_ld(stride, scale, false)
#define gemmini_config_ld(stride) gemmini_extended_config_ld(stride, MVIN_SCALE_IDENTITY)

#define gemmini_extended2_config_st(stride, acc_act, acc_scale, pool_stride, pool_size, pool_out_dim, porows, \
                                    pocols, orows, ocols, upad, lpad) \
  gemmini_sim_config_st(stride, acc_act, acc_scale, pool_stride, pool_size, pool_out_dim, porows, pocols, orows, \
                        ocols, upad, lpad)
#define gemmini_extended_config_st(stride, acc_act, acc_scale) \
  gemmini_extended2_config_st(stride, acc_act, acc_scale, 0, 0, 0, 0, 0, 0, 0, 0, 0)
#define gemmini_config_st(stride) gemmini_extended_config_st(stride, NO_ACTIVATION, ACC_SCALE_IDENTITY)

#define gemmini_config_norm(q_const, q_const_type, set_stats_id_only, act_msb, stat_id, igelu_qb, igelu_qc) \
  gemmini_sim_config_norm(q_const, q_const_type, set_stats_id_only, act_msb, stat_id, igelu_qb, igelu_qc)

/* ---- data movement, execution, ordering -------------------------------------------------------- */
#define gemmini_extended_mvin(dram_addr, spad_addr, cols, rows) \
  gemmini_sim_mvin(0, GEMMINI_SIM_DRAM(dram_addr), spad_addr, cols, rows)
#define gemmini_extended_mvin2(dram_addr, spad_addr, cols, rows) \
  gemmini_sim_mvin(1, GEMMINI_SIM_DRAM(dram_addr), spad_addr, cols, rows)
#define gemmini_extended_mvin3(dram_addr, spad_addr, cols, rows) \
  gemmini_sim_mvin(2, GEMMINI_SIM_DRAM(dram_addr), spad_addr, cols, rows)
#define gemmini_mvin(dram_addr, spad_addr) gemmini_extended_mvin(dram_addr, spad_addr, DIM, DIM)
#define gemmini_block_mvin(dram_addr, spad_addr, len) gemmini_extended_mvin(dram_addr, spad_addr, (len) * DIM, DIM)
#define gemmini_extended_mvout(dram_addr, spad_addr, cols, rows) \
  gemmini_sim_mvout(GEMMINI_SIM_DRAM(dram_addr), spad_addr, cols, rows)
#define gemmini_mvout(dram_addr, spad_addr) gemmini_extended_mvout(dram_addr, spad_addr, DIM, DIM)

#define gemmini_extended_preload(BD, C, BD_cols, BD_rows, C_cols, C_rows) \
  gemmini_sim_preload(BD, C, BD_cols, BD_rows, C_cols, C_rows)
#define gemmini_preload(BD, C) gemmini_extended_preload(BD, C, DIM, DIM, DIM, DIM)
#define gemmini_preload_zeros(C) gemmini_preload(GARBAGE_ADDR, C)
#define gemmini_extended_compute_preloaded(A, BD, A_cols, A_rows, BD_cols, BD_rows) \
  gemmini_sim_compute(false, A, BD, A_cols, A_rows, BD_cols, BD_rows)
#define gemmini_extended_compute_accumulated(A, BD, A_cols, A_rows, BD_cols, BD_rows) \
  gemmini_sim_compute(true, A, BD, A_cols, A_rows, BD_cols, BD_rows)
#define gemmini_compute_preloaded(A, BD) gemmini_extended_compute_preloaded(A, BD, DIM, DIM, DIM, DIM)
#define gemmini_compute_accumulated(A, BD) gemmini_extended_compute_accumulated(A, BD, DIM, DIM, DIM, DIM)

#define gemmini_flush(skip) gemmini_sim_flush(skip)
#define gemmini_fence() gemmini_sim_fence()

/* ---- hardware loop FSMs ------------------------------------------------------------------------- */
#define gemmini_loop_ws(I, J, K, pad_I, pad_J, pad_K, A, B, D, C, A_stride, B_stride, D_stride, C_stride, \
                        A_transpose, B_transpose, full_C, low_D, ex_accumulate, act, a_spad_id, b_spad_id, is_resadd) \
  gemmini_sim_loop_ws(I, J, K, pad_I, pad_J, pad_K, GEMMINI_SIM_DRAM(A), GEMMINI_SIM_DRAM(B), GEMMINI_SIM_DRAM(D), \
                      GEMMINI_SIM_DRAM(C), A_stride, B_stride, D_stride, C_stride, A_transpose, B_transpose, full_C, \
                      low_D, ex_accumulate, act, a_spad_id, b_spad_id, is_resadd)

#define gemmini_loop_conv_ws(batch_size, in_row_dim, in_col_dim, in_channels, out_channels, out_row_dim, \
    out_col_dim, pool_out_row_dim, pool_out_col_dim, stride, padding, kernel_dim, kernel_dilation, pool_size, \
    pool_stride, pool_padding, batches, porows, pocols, pochs, krows, kcols, kchs, lpad, rpad, upad, dpad, plpad, \
    prpad, pupad, pdpad, orows, ocols, weights, output, bias, input, no_bias, no_pool, downsample, wrot180, \
    input_dilated, activation, trans_output_1203, trans_weight_1203, trans_weight_0132, trans_input_3120, \
    max_pixels_per_row, in_stride, weight_stride, out_stride, dw, a_spad_id, b_spad_id) \
  gemmini_sim_loop_conv_ws(batch_size, in_row_dim, in_col_dim, in_channels, out_channels, out_row_dim, out_col_dim, \
    pool_out_row_dim, pool_out_col_dim, stride, padding, kernel_dim, kernel_dilation, pool_size, pool_stride, \
    pool_padding, batches, porows, pocols, pochs, krows, kcols, kchs, lpad, rpad, upad, dpad, plpad, prpad, pupad, \
    pdpad, orows, ocols, GEMMINI_SIM_DRAM(weights), GEMMINI_SIM_DRAM(output), GEMMINI_SIM_DRAM(bias), \
    GEMMINI_SIM_DRAM(input), no_bias, no_pool, downsample, wrot180, input_dilated, activation, trans_output_1203, \
    trans_weight_1203, trans_weight_0132, trans_input_3120, max_pixels_per_row, in_stride, weight_stride, \
    out_stride, dw, a_spad_id, b_spad_id)

/* ---- performance counters: values come from the timing model, as if every instruction issued before
 * the read had completed (call gemmini_fence() first, as on the hardware) ---------------------------- */
#define gemmini_counter_access(rd, config_reg) ((rd) = gemmini_sim_counter(config_reg))
static inline uint32_t counter_read(size_t index) { return (uint32_t)gemmini_sim_counter((index & 0x7) << 4); }
static inline void counter_configure(size_t index, size_t counter_code) {
  int external = counter_code > INCREMENTAL_COUNTERS;
  if (external) counter_code -= INCREMENTAL_COUNTERS;
  gemmini_sim_counter(((index & 0x7) << 4) | 0x8 | ((counter_code & 0x3f) << 12) | ((uint64_t)external << 31));
}
static inline void counter_snapshot_take(void) { gemmini_sim_counter(0x4); }
static inline void counter_snapshot_reset(void) { gemmini_sim_counter(0x2); }
static inline void counter_reset(void) { gemmini_sim_counter(0x1); }

/* ---- Gemmini's software library (our implementation of the same tiling and loop-FSM use) -------- */
void tiled_matmul(size_t dim_I, size_t dim_J, size_t dim_K, const elem_t *A, const elem_t *B, const void *D,
                  void *c_dram,
                  size_t stride_A, size_t stride_B, size_t stride_D, size_t stride_C, scale_t A_scale_factor,
                  scale_t B_scale_factor, scale_acc_t D_scale_factor, int act, acc_scale_t scale,
                  acc_scale_t bert_scale, bool repeating_bias, size_t tile_I, size_t tile_J, size_t tile_K,
                  bool transpose_A, bool transpose_B, bool full_C, bool low_D, uint8_t weightA,
                  enum tiled_matmul_type_t tiled_matmul_type);
void tiled_matmul_auto(size_t dim_I, size_t dim_J, size_t dim_K, const elem_t *A, const elem_t *B, const void *D,
                       void *c_dram, size_t stride_A, size_t stride_B, size_t stride_D, size_t stride_C,
                       scale_t A_scale_factor, scale_t B_scale_factor, scale_acc_t D_scale_factor, int act,
                       acc_scale_t scale, acc_scale_t bert_scale, bool repeating_bias, bool transpose_A,
                       bool transpose_B, bool full_C, bool low_D, uint8_t weightA,
                       enum tiled_matmul_type_t tiled_matmul_type);
void tiled_conv(int batch_size, int in_row_dim, int in_col_dim, int in_channels, int out_channels, int out_row_dim,
                int out_col_dim, int stride, int input_dilation, int kernel_dilation, int padding, int kernel_dim,
                int in_stride, int weight_stride, int out_stride, bool wrot180, bool trans_output_1203,
                bool trans_input_3120, bool trans_weight_1203, bool trans_weight_0132, int batches, int porows,
                int pocols, int pochs, int krows, int kcols, int kchs, const elem_t *input, const elem_t *weights,
                const acc_t *bias, elem_t *output, int act, acc_scale_t scale, int pool_size, int pool_stride,
                int pool_padding, enum tiled_matmul_type_t tiled_conv_type);
void tiled_conv_auto(int batch_size, int in_row_dim, int in_col_dim, int in_channels, int out_channels,
                     int out_row_dim, int out_col_dim, int stride, int input_dilation, int kernel_dilation,
                     int padding, int kernel_dim, bool wrot180, bool trans_output_1203, bool trans_input_3120,
                     bool trans_weight_1203, bool trans_weight_0132, const elem_t *input, const elem_t *weights,
                     const acc_t *bias, elem_t *output, int act, acc_scale_t scale, int pool_size, int pool_stride,
                     int pool_padding, enum tiled_matmul_type_t tiled_conv_type);

/* ---- the short forms used by this project's problems and examples ------------------------------ */
void config_ex(int dataflow, int act, uint32_t A_stride, bool A_transpose, bool B_transpose);
void config_ld(size_t dram_stride_bytes, float scale, uint32_t spad_block_stride, int id);
void config_st(size_t dram_stride_bytes);
void config_st_act(size_t dram_stride_bytes, int act);   /* config_st with the mvout activation */
void mvin(const void *dram_addr, uint32_t local_addr, uint32_t cols, uint32_t rows);
void mvin2(const void *dram_addr, uint32_t local_addr, uint32_t cols, uint32_t rows);
void mvin3(const void *dram_addr, uint32_t local_addr, uint32_t cols, uint32_t rows);
void mvout(void *dram_addr, uint32_t local_addr, uint32_t cols, uint32_t rows);
void preload(uint32_t B_addr, uint32_t C_addr, uint32_t B_cols, uint32_t B_rows, uint32_t C_cols, uint32_t C_rows);
void compute_preloaded(uint32_t A_addr, uint32_t D_addr, uint32_t A_cols, uint32_t A_rows, uint32_t D_cols,
                       uint32_t D_rows);
void compute_accumulated(uint32_t A_addr, uint32_t D_addr, uint32_t A_cols, uint32_t A_rows, uint32_t D_cols,
                         uint32_t D_rows);
void fence(void);

/* Autocomp's prompts and kernels call config_ld and config_st with different argument lists, so these
 * two pick their form by argument count. The 4-argument config_ld and the 1-argument config_st select
 * the functions above themselves (a macro does not expand its own name again); any other count also
 * reaches them, so the compiler's "too many/few arguments to function" error names the real call.
 *   config_ld(dram_stride, scale, spad_block_stride, id)   the project's and Autocomp's usual form
 *   config_ld(dram_stride, scale, id)                      block stride DIM, as gemmini_extended3_config_ld
 *   config_st(dram_stride)                                 bytes (Autocomp's conv prompt says "cols": the
 *                                                          same number for int8 output)
 *   config_st(dram_stride, scale)                          scale applied on mvout from the accumulator */
#define GEMMINI_SIM_BY_COUNT(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, form, ...) form
#define GEMMINI_SIM_CONFIG_LD3(stride, scale, id) gemmini_sim_config_ld(stride, scale, false, DIM, 1, id)
#define GEMMINI_SIM_CONFIG_ST2(stride, scale) \
  gemmini_sim_config_st(stride, NO_ACTIVATION, scale, 0, 0, 0, 0, 0, 0, 0, 0, 0)
#define config_ld(...) GEMMINI_SIM_BY_COUNT(__VA_ARGS__, config_ld, config_ld, config_ld, config_ld, config_ld, \
  config_ld, config_ld, config_ld, config_ld, GEMMINI_SIM_CONFIG_LD3, config_ld, config_ld)(__VA_ARGS__)
#define config_st(...) GEMMINI_SIM_BY_COUNT(__VA_ARGS__, config_st, config_st, config_st, config_st, config_st, \
  config_st, config_st, config_st, config_st, config_st, GEMMINI_SIM_CONFIG_ST2, config_st)(__VA_ARGS__)

/* Gemmini's own toolchain (an older gcc) only warns when an integer is passed as a DRAM pointer or a 2-D
 * array as an elem_t pointer, and Autocomp's kernels do both (mvout(uint64_t, ...), tiled_matmul_auto(A,
 * ...)); gcc 14 makes these errors by default. Keep them warnings, as on gcc 12. */
#pragma GCC diagnostic warning "-Wint-conversion"
#pragma GCC diagnostic warning "-Wincompatible-pointer-types"

/* Entry point of the current problem, declared here so that a kernel whose
 * solution() has the wrong signature fails to compile with a clear message. */
#if defined(AUTOCOMP_GEMM)
void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]);
#elif defined(AUTOCOMP_CONV3X3)
void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]);
#endif
#endif
