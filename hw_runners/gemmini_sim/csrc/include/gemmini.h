/* gemmini.h -- Gemmini intrinsics as provided by the gemmini-sim target.
 *
 * Every call is executed by a functional model of the accelerator (bit-exact
 * scratchpad/accumulator contents) and fed to a cycle-approximate timing model.
 * Semantics are documented in prompts/gemmini-sim/isa.md.
 *
 * Local addresses count rows. Bit 31 selects the accumulator, bit 30 makes a
 * write accumulate instead of overwrite, bit 29 makes mvout read full int32.
 * GARBAGE_ADDR (0xFFFFFFFF) means "no data".
 */
#ifndef AUTOCOMP_GEMMINI_H
#define AUTOCOMP_GEMMINI_H
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include "gemmini_params.h"

#define OUTPUT_STATIONARY 0
#define WEIGHT_STATIONARY 1
#define NO_ACTIVATION 0
#define RELU 1

#define ACC_ADDR_BIT (1u << 31)
#define ACCUMULATE_BIT (1u << 30)
#define FULL_READ_BIT (1u << 29)

/* Configuration. */
void config_ex(int dataflow, int act, uint32_t A_stride, bool A_transpose, bool B_transpose);
void config_ld(size_t dram_stride_bytes, float scale, uint32_t spad_block_stride, int id);
void config_st(size_t dram_stride_bytes);
/* config_st that also sets the activation applied when results leave the accumulator by mvout. */
void config_st_act(size_t dram_stride_bytes, int act);

/* Data movement between DRAM and the scratchpad/accumulator. mvin uses the
 * config_ld state of id 0, mvin2 of id 1, mvin3 of id 2. */
void mvin(const void *dram_addr, uint32_t local_addr, uint32_t cols, uint32_t rows);
void mvin2(const void *dram_addr, uint32_t local_addr, uint32_t cols, uint32_t rows);
void mvin3(const void *dram_addr, uint32_t local_addr, uint32_t cols, uint32_t rows);
void mvout(void *dram_addr, uint32_t local_addr, uint32_t cols, uint32_t rows);

/* Execution on the systolic array. */
void preload(uint32_t B_addr, uint32_t C_addr, uint32_t B_cols, uint32_t B_rows, uint32_t C_cols, uint32_t C_rows);
void compute_preloaded(uint32_t A_addr, uint32_t D_addr, uint32_t A_cols, uint32_t A_rows, uint32_t D_cols, uint32_t D_rows);
void compute_accumulated(uint32_t A_addr, uint32_t D_addr, uint32_t A_cols, uint32_t A_rows, uint32_t D_cols, uint32_t D_rows);
void fence(void);

/* Hardware loop FSM (Gemmini's LoopMatmul): C = A*B (+D) for one block of
 * I x J x K tiles of DIM. The FSM issues every mvin/preload/compute/mvout
 * itself, in one half of the scratchpad and of the accumulator, alternating
 * halves between consecutive calls (double buffering). Strides are in elements. */
void gemmini_loop_ws(size_t tiles_I, size_t tiles_J, size_t tiles_K, size_t pad_I, size_t pad_J,
                     size_t pad_K, const elem_t *A_dram, const elem_t *B_dram, const acc_t *D_dram,
                     void *C_dram,
                     size_t A_stride, size_t B_stride, size_t D_stride, size_t C_stride,
                     bool A_transpose, bool B_transpose, bool full_C, bool low_D,
                     bool ex_accumulate, int act);

/* Hardware loop FSM for convolutions (a simplified LoopConv): stride 1,
 * already padded NHWC input [batch][in_dim][in_dim][in_channels], weights
 * [kernel_dim][kernel_dim][in_channels][out_channels], int32 bias
 * [out_channels] (may be NULL), output [batch][out_dim][out_dim][out_channels]
 * with out_dim = in_dim - kernel_dim + 1. */
void gemmini_loop_conv_ws(int batch_size, int in_dim, int in_channels, int out_channels,
                          int out_dim, int kernel_dim, const elem_t *input,
                          const elem_t *weights, const acc_t *bias, elem_t *output, int act);

/* Names used by Gemmini's own gemmini.h, so existing kernels compile unchanged. */
#define gemmini_config_ex(dataflow, act, sys_shift) config_ex(dataflow, act, 1, false, false)
#define gemmini_extended_config_ex(dataflow, act, sys_shift, A_stride, A_transpose, B_transpose) \
  config_ex(dataflow, act, A_stride, A_transpose, B_transpose)
#define gemmini_config_ld(stride) config_ld(stride, 1.0f, DIM, 0)
#define gemmini_extended_config_ld(stride, scale) config_ld(stride, scale, DIM, 0)
#define gemmini_extended3_config_ld(stride, scale, shrunk, id) config_ld(stride, scale, DIM, id)
#define gemmini_extended4_config_ld(stride, scale, shrunk, block_stride, id) \
  config_ld(stride, scale, block_stride, id)
#define gemmini_config_st(stride) config_st(stride)
#define gemmini_extended_config_st(stride, act, scale) config_st_act(stride, act)
#define gemmini_mvin(dram, local) mvin(dram, local, DIM, DIM)
#define gemmini_extended_mvin(dram, local, cols, rows) mvin(dram, local, cols, rows)
#define gemmini_extended_mvin2(dram, local, cols, rows) mvin2(dram, local, cols, rows)
#define gemmini_extended_mvin3(dram, local, cols, rows) mvin3(dram, local, cols, rows)
#define gemmini_mvout(dram, local) mvout(dram, local, DIM, DIM)
#define gemmini_extended_mvout(dram, local, cols, rows) mvout(dram, local, cols, rows)
#define gemmini_preload(BD, C) preload(BD, C, DIM, DIM, DIM, DIM)
#define gemmini_preload_zeros(C) preload(GARBAGE_ADDR, C, DIM, DIM, DIM, DIM)
#define gemmini_extended_preload(BD, C, BD_cols, BD_rows, C_cols, C_rows) \
  preload(BD, C, BD_cols, BD_rows, C_cols, C_rows)
#define gemmini_compute_preloaded(A, BD) compute_preloaded(A, BD, DIM, DIM, DIM, DIM)
#define gemmini_compute_accumulated(A, BD) compute_accumulated(A, BD, DIM, DIM, DIM, DIM)
#define gemmini_extended_compute_preloaded(A, BD, A_cols, A_rows, BD_cols, BD_rows) \
  compute_preloaded(A, BD, A_cols, A_rows, BD_cols, BD_rows)
#define gemmini_extended_compute_accumulated(A, BD, A_cols, A_rows, BD_cols, BD_rows) \
  compute_accumulated(A, BD, A_cols, A_rows, BD_cols, BD_rows)
#define gemmini_fence() fence()
#define gemmini_flush(skip) ((void)0)

/* Entry point of the current problem, declared here so that a kernel whose
 * solution() has the wrong signature fails to compile with a clear message. */
#if defined(AUTOCOMP_GEMM)
void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]);
#elif defined(AUTOCOMP_CONV3X3)
void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]);
#endif
#endif
