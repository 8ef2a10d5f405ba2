/* Parameters of Gemmini's FP32DefaultConfig (ucb-bar/gemmini src/main/scala/gemmini/ConfigsFP.scala:
 * defaultFPConfig with tile_latency = 2), the configuration TinyMPC's ADMM kernels ran on, with the
 * names and types Gemmini's generated gemmini_params.h gives them. Included by gemmini_params.h when
 * the build defines GEMMINI_CONFIG_FP32 (never by kernels directly).
 *
 *   meshRows = meshColumns = 4, tileRows = tileColumns = 1       -> DIM 4
 *   inputType = weightType = accType = Float(8, 24)               -> elem_t and acc_t are float
 *   sp_capacity 256 KiB, sp_banks 4 (16-byte rows)                -> 4 banks x 4096 rows
 *   acc_capacity 64 KiB, acc_banks 1 (16-byte rows)               -> 4096 rows
 *   dma_maxbytes 64                                               -> MAX_BYTES 64
 *   mvin_scale_args, mvin_scale_acc_args, acc_scale_args: an fp32 multiply, c_str "((x) * (scale))" */
#ifndef GEMMINI_PARAMS_FP32_H
#define GEMMINI_PARAMS_FP32_H
#include <stdint.h>
#include <limits.h>
#include <math.h>

#define XCUSTOM_ACC 3
#define DIM 4
#define ADDR_LEN 32
#define BANK_NUM 4
#define BANK_ROWS 4096
#define ACC_ROWS 4096
#define MAX_BYTES 64
#define MAX_BLOCK_LEN (MAX_BYTES / (DIM * 4))      /* 4 blocks of 4 float columns */
#define MAX_BLOCK_LEN_ACC (MAX_BYTES / (DIM * 4))  /* the same for accumulator rows */

#define ELEM_T_IS_FLOAT
#define ELEM_T_EXP_BITS 8
#define ELEM_T_SIG_BITS 24
#define ACC_T_EXP_BITS 8
#define ACC_T_SIG_BITS 24
typedef float elem_t;
typedef uint32_t elem_t_bits;
static const elem_t elem_t_max = 3.4028235e38f;
static const elem_t elem_t_min = -3.4028235e38f;
typedef float acc_t;
typedef uint32_t acc_t_bits;
typedef double full_t;
#define acc_t_max 3.4028235e38f
#define acc_t_min -3.4028235e38f

#define HAS_MVIN_SCALE
#define HAS_MVIN_ACC_SCALE
typedef float scale_t;
typedef uint32_t scale_t_bits;
typedef float scale_acc_t;
typedef uint32_t scale_acc_t_bits;
typedef float acc_scale_t;
typedef uint32_t acc_scale_t_bits;
#define ACC_SCALE_T_IS_FLOAT
#define ACC_SCALE_EXP_BITS 8
#define ACC_SCALE_SIG_BITS 24
#define ACC_READ_SMALL_WIDTH
#define ACC_READ_FULL_WIDTH

#define MVIN_SCALE_IDENTITY 1.0
#define ACC_SCALE_IDENTITY 1.0

#define row_align(blocks) __attribute__((aligned(blocks * DIM * sizeof(elem_t))))
#define row_align_acc(blocks) __attribute__((aligned(blocks * DIM * sizeof(acc_t))))

#define ROUND_NEAR_EVEN(x) ((float)nearbyintf((float)(x)))
/* Gemmini's Float >> multiplies by 2^-shift (Arithmetic.scala FloatArithmetic) */
#define ROUNDING_RIGHT_SHIFT(x, shift) ((x) * ldexpf(1.0f, -(int)(shift)))
#define ROUNDING_RIGHT_SHIFT_BITS(x, shift) ROUNDING_RIGHT_SHIFT(x, shift)
/* The scale units are one fp32 multiply each (the c_str of the Scala config) */
#define MVIN_SCALE(x, scale) ((elem_t)((x) * (scale)))
#define MVIN_SCALE_ACC(x, scale) ((acc_t)((x) * (scale)))
#define ACC_SCALE(x, scale) ((acc_t)((x) * (scale)))

#define GARBAGE_ADDR ((uint32_t)0xFFFFFFFF)
#endif
