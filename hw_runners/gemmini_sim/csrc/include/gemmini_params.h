/* Parameters of the simulated Gemmini: the default configuration of Gemmini's
 * generator (16x16 int8 systolic array, int32 accumulators, 256 KiB
 * scratchpad, 64 KiB accumulator, float scale factors), with the names and
 * types Gemmini's generated gemmini_params.h gives them, so kernels written
 * for Gemmini compile unchanged. A build with -DGEMMINI_CONFIG_FP32 gets
 * FP32DefaultConfig's parameters instead (gemmini_params_fp32.h): the shim and
 * the replayer are built once per configuration (hw_runners/gemmini_sim/configs.py). */
#ifndef GEMMINI_PARAMS_H
#define GEMMINI_PARAMS_H
#ifdef GEMMINI_CONFIG_FP32
#include "gemmini_params_fp32.h"
#else
#include <stdint.h>
#include <limits.h>
#include <math.h>

#define XCUSTOM_ACC 3
#define DIM 16                 /* systolic array is DIM x DIM */
#define ADDR_LEN 32
#define BANK_NUM 4
#define BANK_ROWS 4096         /* scratchpad: 4 banks x 4096 rows x 16 B = 256 KiB */
#define ACC_ROWS 1024          /* accumulator: 2 banks x 512 rows x 16 x int32 = 64 KiB */
#define MAX_BYTES 64           /* widest DMA row request */
#define MAX_BLOCK_LEN (MAX_BYTES / (DIM * 1))      /* 4 blocks of 16 int8 columns */
#define MAX_BLOCK_LEN_ACC (MAX_BYTES / (DIM * 4))  /* 1 block of 16 int32 columns */

typedef int8_t elem_t;
static const elem_t elem_t_max = 127;
static const elem_t elem_t_min = -128;
typedef int32_t acc_t;
typedef int64_t full_t;
#define acc_t_max INT32_MAX
#define acc_t_min INT32_MIN

#define HAS_MVIN_SCALE
typedef float scale_t;
typedef uint32_t scale_t_bits;
typedef int32_t scale_acc_t;      /* no mvin scaling of int32 accumulator data in this configuration */
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

/* Alignment of DRAM arrays to `blocks` scratchpad (or accumulator) rows. */
#define row_align(blocks) __attribute__((aligned(blocks * DIM * sizeof(elem_t))))
#define row_align_acc(blocks) __attribute__((aligned(blocks * DIM * sizeof(acc_t))))

/* Round to nearest, ties to even, on a float (what Gemmini's scale units do). */
#define ROUND_NEAR_EVEN(x) ((float)nearbyintf((float)(x)))
/* x >> shift rounded to nearest even; a negative shift shifts left. */
#define ROUNDING_RIGHT_SHIFT(x, shift) \
  ((shift) > 0 ? (((x) >> (shift)) + \
     ((((x) & ((1LL << (shift)) - 1)) > (1LL << ((shift) - 1))) || \
      ((((x) & ((1LL << (shift)) - 1)) == (1LL << ((shift) - 1))) && (((x) >> (shift)) & 1)))) \
   : ((x) << (-(shift))))
#define ROUNDING_RIGHT_SHIFT_BITS(x, shift) ROUNDING_RIGHT_SHIFT(x, shift)
/* What the mvin and mvout scale units compute: round(x * scale), saturated to int8. */
#define MVIN_SCALE(x, scale) \
  ((elem_t)(ROUND_NEAR_EVEN((float)(x) * (scale)) > elem_t_max ? elem_t_max : \
            ROUND_NEAR_EVEN((float)(x) * (scale)) < elem_t_min ? elem_t_min : ROUND_NEAR_EVEN((float)(x) * (scale))))
#define MVIN_SCALE_ACC(x, scale) (x)
#define ACC_SCALE(x, scale) \
  ((acc_t)(ROUND_NEAR_EVEN((float)(x) * (scale)) > elem_t_max ? elem_t_max : \
           ROUND_NEAR_EVEN((float)(x) * (scale)) < elem_t_min ? elem_t_min : ROUND_NEAR_EVEN((float)(x) * (scale))))

#define GARBAGE_ADDR ((uint32_t)0xFFFFFFFF)
#endif /* GEMMINI_CONFIG_FP32 */
#endif
