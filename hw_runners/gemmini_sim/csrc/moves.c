/* mvin and mvout as the replayer executes them (for CPU-issued and loop-FSM
 * instructions alike): DRAM addresses are the kernel process's, translated
 * onto the replayer's view of DRAM (dram.c) before the functional model
 * (functional.c) moves the data, with the hazard check of reads against
 * unfenced mvout writes. */
#define _GNU_SOURCE
#include <string.h>
#include "sim.h"
#include "include/gemmini.h"

#define MAX_STRIDE (1ull << 40)

/* Bytes one row of the move touches in DRAM, 0 when the sizes are invalid (the model reports them). */
static uint64_t row_bytes(laddr_t l, uint32_t cols, uint32_t rows, bool int32_elems) {
  if (l.garbage || cols == 0 || cols > DIM * MAX_BLOCK_LEN || rows == 0 || rows > DIM) return 0;
  return (uint64_t)cols * (int32_elems ? sizeof(acc_t) : sizeof(elem_t));
}

/* An mvin of the replayer's view of DRAM: a problem array, zeros (address 0), or memory outside the
 * arrays, where bytes an earlier mvout wrote come from here and the others from the kernel's copy
 * (`shipped` by the kernel process with the record; loop FSMs ship nothing). */
void replay_mvin(uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows, const ldconf_t *ld, int fsm,
                 const uint8_t *shipped, size_t nshipped) {
  laddr_t l = decode(local);
  uint64_t rb = row_bytes(l, cols, rows, l.acc && !ld->shrunk), stride = ld->stride;
  if (!dram || !rb) {   /* zeros, or invalid sizes the model reports */
    op_mvin(NULL, stride, local, cols, rows, ld, fsm);
    return;
  }
  if (stride > MAX_STRIDE) sim_fail("DRAM stride %llu is implausible", (unsigned long long)stride);
  for (uint32_t i = 0; i < rows; i++) dram_check_unfenced(dram + i * stride, rb);
  uint8_t *p = dram_in_region(dram, (rows - 1) * stride + rb);
  if (p) {
    op_mvin(p, stride, local, cols, rows, ld, fsm);
    return;
  }
  uint8_t tmp[MAX_MVIN_BYTES], kernel_bytes[MAX_MVIN_BYTES];
  size_t n = rows * rb, from_kernel = 0;
  if (n > sizeof tmp) sim_fail("mvin of %zu bytes is too large", n);
  for (size_t i = 0; i < n; i++) {
    uint64_t addr = dram + (i / rb) * stride + i % rb;
    kernel_bytes[i] = 0;
    if (dram_mvout_byte(addr, &tmp[i])) continue;
    if (nshipped != n)
      sim_fail("reads DRAM at 0x%llx that is neither a problem array nor data written by an earlier mvout",
               (unsigned long long)addr);
    tmp[i] = kernel_bytes[i] = shipped[i];
    from_kernel++;
  }
  if (from_kernel) dram_check_constant(instr_number(), kernel_bytes, n);
  op_mvin(tmp, rb, local, cols, rows, ld, fsm);
}

void replay_mvout(uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows, const stconf_t *st, int fsm) {
  laddr_t l = decode(local);
  uint64_t rb = row_bytes(l, cols, rows, l.acc && l.full), stride = st->stride;
  if (!dram || !rb) {   /* nothing to write, or invalid sizes the model reports */
    op_mvout(dram ? (uint8_t *)1 : NULL, stride, local, cols, rows, st, fsm);
    return;
  }
  if (stride > MAX_STRIDE) sim_fail("DRAM stride %llu is implausible", (unsigned long long)stride);
  uint8_t *p = dram_in_region(dram, (rows - 1) * stride + rb);
  if (p) {
    op_mvout(p, stride, local, cols, rows, st, fsm);
  } else {
    uint8_t tmp[MAX_MVIN_BYTES];
    op_mvout(tmp, rb, local, cols, rows, st, fsm);
    for (uint32_t i = 0; i < rows; i++) dram_write(dram + i * stride, tmp + i * rb, rb);
  }
  for (uint32_t i = 0; i < rows; i++) dram_note_mvout(dram + i * stride, rb, instr_number(), fsm);
}
