/* The harness's CPU helpers (add_matrix, negate_matrix of Autocomp's ADMM
 * harness), run by the trusted replayer: the kernel process only records the
 * call and its arguments, so the values the CPU produces come from the
 * replayer's own view of DRAM, and the cycles they cost from the Rocket
 * model's parameters (timing.py scalar_*), never from a count the kernel
 * could forge. A helper reads data like an mvin does (a problem array, or
 * bytes an mvout or an earlier helper wrote, and only after a fence when an
 * mvout wrote them) and writes like an mvout (into the replayer's copy of a
 * problem array, or into its map of other DRAM). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "sim.h"

#define MAX_CPUOP_ELEMS (1 << 20)

static const char *name_of(int op) { return op == CPUOP_ADD ? "add_matrix" : "negate_matrix"; }

/* n bytes at addr as the replayer sees them, or a failure naming the helper */
static void read_bytes(int op, uint64_t addr, uint8_t *dst, size_t n) {
  dram_check_unfenced(addr, n);
  const uint8_t *p = dram_in_region(addr, n);
  if (p) {
    memcpy(dst, p, n);
    return;
  }
  for (size_t i = 0; i < n; i++)
    if (!dram_mvout_byte(addr + i, &dst[i]))
      sim_fail("%s reads DRAM at 0x%llx, which is neither a problem array nor data written by an mvout or an "
               "earlier add_matrix/negate_matrix", name_of(op), (unsigned long long)(addr + i));
}

void replay_cpuop(int op, const cpuop_args_t *a) {
  if (a->rows < 1 || a->cols < 1 || (int64_t)a->rows * a->cols > MAX_CPUOP_ELEMS)
    sim_fail("%s(rows=%d, cols=%d): rows and cols must be >= 1 and rows * cols <= %d", name_of(op), a->rows,
             a->cols, MAX_CPUOP_ELEMS);
  size_t n = (size_t)a->rows * (size_t)a->cols, bytes = n * sizeof(elem_t);
  elem_t *x = malloc(bytes), *y = malloc(bytes);
  if (!x || !y) harness_fail("out of memory for a CPU helper");
  read_bytes(op, a->a, (uint8_t *)x, bytes);
  if (op == CPUOP_ADD) read_bytes(op, a->b, (uint8_t *)y, bytes);
  /* Rocket's fadd.s and fsgnjn.s are IEEE binary32 operations rounding to nearest even, as the host's
   * SSE arithmetic is; int8 elements wrap as the harness's C does */
  for (size_t i = 0; i < n; i++) x[i] = op == CPUOP_ADD ? (elem_t)(x[i] + y[i]) : (elem_t)-x[i];
  uint8_t *mine = dram_in_region(a->out, bytes);
  if (mine) {
    memcpy(mine, x, bytes);
    sim_note_written(mine, bytes);
  } else {
    dram_write(a->out, (const uint8_t *)x, bytes);
  }
  free(x);
  free(y);
  if (g_timing_on)
    timing_cpu_work(g_cfg.scalar_call_cycles +
                    (int64_t)n * (op == CPUOP_ADD ? g_cfg.scalar_add_cycles : g_cfg.scalar_negate_cycles));
}
