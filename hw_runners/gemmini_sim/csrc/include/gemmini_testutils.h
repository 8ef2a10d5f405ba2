/* gemmini_testutils.h as provided by gemmini-sim: the CPU-side helpers of
 * Gemmini's header of that name that make sense inside a kernel (cycle
 * counter, printing, comparing, the deterministic rand()). read_cycles()
 * returns the simulated CPU's cycle count (rdcycle), from the timing model. */
#ifndef AUTOCOMP_GEMMINI_TESTUTILS_H
#define AUTOCOMP_GEMMINI_TESTUTILS_H
#include "gemmini.h"

static inline uint64_t read_cycles(void) { return gemmini_sim_read_cycles(); }

static inline int gemmini_testutils_rand(void) {   /* Gemmini's LCG */
  static uint32_t x = 777;
  x = x * 1664525 + 1013904223;
  return (int)(x >> 24);
}
#define rand gemmini_testutils_rand

static inline void printMatrix(elem_t m[DIM][DIM]) {
  for (size_t i = 0; i < DIM; ++i) {
#ifdef ELEM_T_IS_FLOAT
    for (size_t j = 0; j < DIM; ++j) printf("%g ", (double)m[i][j]);
#else
    for (size_t j = 0; j < DIM; ++j) printf("%d ", m[i][j]);
#endif
    printf("\n");
  }
}

static inline void printMatrixAcc(acc_t m[DIM][DIM]) {
  for (size_t i = 0; i < DIM; ++i) {
    for (size_t j = 0; j < DIM; ++j) printf("%d ", (int)m[i][j]);
    printf("\n");
  }
}

static inline int is_equal(elem_t x[DIM][DIM], elem_t y[DIM][DIM]) {
  for (size_t i = 0; i < DIM; ++i)
    for (size_t j = 0; j < DIM; ++j)
      if (x[i][j] != y[i][j]) return 0;
  return 1;
}

#define MAT_IS_EQUAL(dim_i, dim_j, x, y) ({ \
  int equal = 1; \
  for (size_t i_ = 0; i_ < (dim_i) && equal; ++i_) \
    for (size_t j_ = 0; j_ < (dim_j); ++j_) \
      if ((x)[i_][j_] != (y)[i_][j_]) { equal = 0; break; } \
  equal; })
#endif
