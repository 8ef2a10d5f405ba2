/* Parameters of the simulated Gemmini (default configuration, as in Gemmini's
 * gemmini_params.h for the 16x16 int8 array). Kernels may use these names. */
#ifndef GEMMINI_PARAMS_H
#define GEMMINI_PARAMS_H
#include <stdint.h>
#include <limits.h>

#define DIM 16                 /* systolic array is DIM x DIM */
#define ADDR_LEN 32
#define BANK_NUM 4
#define BANK_ROWS 4096         /* scratchpad: 4 banks x 4096 rows x 16 B = 256 KiB */
#define ACC_ROWS 1024          /* accumulator: 1024 rows x 16 x int32 = 64 KiB */
#define MAX_BYTES 64           /* widest DMA row request */
#define MAX_BLOCK_LEN (MAX_BYTES / (DIM * 1))      /* 4 blocks of 16 int8 columns */
#define MAX_BLOCK_LEN_ACC (MAX_BYTES / (DIM * 4))  /* 1 block of 16 int32 columns */

typedef int8_t elem_t;
typedef int32_t acc_t;
typedef int64_t full_t;
#define elem_t_max INT8_MAX
#define elem_t_min INT8_MIN
#define acc_t_max INT32_MAX
#define acc_t_min INT32_MIN

#define GARBAGE_ADDR ((uint32_t)0xFFFFFFFF)
#endif
