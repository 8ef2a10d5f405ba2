/* Functional model of Gemmini's local memories, run by the trusted replayer:
 * local addresses, the scratchpad and accumulator contents (bit-exact), mvin
 * and mvout with their scale units, and the checks that give each invalid
 * instruction a clear error naming it. execute.c models the systolic array.
 * Every primitive also hands a description of its work to the timing model.
 *
 * Semantics follow Gemmini's RTL (LocalAddr.scala, LoadController.scala,
 * StoreController.scala, Scratchpad.scala, AccumulatorMem.scala):
 * - a local address uses bit 31 (accumulator), bit 30 (accumulate: writes to
 *   the accumulator only), bit 29 (read full int32: mvout from the
 *   accumulator only) and its low log2(rows) bits as the row: row arithmetic
 *   wraps around the end of the memory, and the other bits are ignored;
 * - mvin from DRAM address 0 writes zeros; a DRAM stride of 0 repeats one row;
 * - an mvin into the accumulator reads int32 data (not scaled in this
 *   configuration) unless the load state is "shrunk": then int8 data passes
 *   the mvin scale unit and is sign-extended;
 * - mvout from the accumulator applies config_st's scale and activation
 *   (unless it reads full int32), and an mvout to GARBAGE_ADDR writes nothing.
 * Where a kernel relies on something the hardware ignores (an address bit, a
 * wrap-around, a scale that does not apply) the result carries a warning.
 *
 * Built with -DGEMMINI_CONFIG_FP32 (FP32DefaultConfig), elem_t and acc_t are
 * float: the scale units are one fp32 multiply (mvin_scale_args,
 * mvin_scale_acc_args, acc_scale_args in ConfigsFP.scala), nothing saturates,
 * accumulation is one fp32 add, and an mvin into the accumulator is scaled. */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sim.h"
#include "include/gemmini.h"

simstats_t g_stats;
elem_t *g_spad;
acc_t *g_acc;
bool g_timing_on;

static uint8_t *out_base, *out_mask;
static size_t out_bytes, out_cap;

/* ---- warnings: things the hardware does silently that a kernel probably did not mean ------------ */
#define MAX_WARNINGS 8
static char warnings[MAX_WARNINGS][240];
static int nwarnings;
static bool warnings_on;

void sim_warn(const char *fmt, ...) {
  if (!warnings_on || nwarnings == MAX_WARNINGS) return;
  char msg[240];
  va_list ap;
  va_start(ap, fmt);
  int n = diag_format(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *what = msg + n;   /* one warning per kind of problem, not one per instruction */
  for (int i = 0; i < nwarnings; i++)
    if (!strcmp(strchr(warnings[i], ':') + 2, what)) return;
  snprintf(warnings[nwarnings++], sizeof warnings[0], "%s", msg);
}

void sim_write_warnings(char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; i < nwarnings && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, "warning %s\n", warnings[i]);
}

/* ---- local addresses ----------------------------------------------------------------------------- */
laddr_t decode(uint32_t a) {
  laddr_t l = {.raw = a};
  /* LocalAddr.is_garbage: the three flag bits, every row bit and the bit above them all set */
  uint32_t garbage_mask = 0xE0000000u | (uint32_t)(2 * g_cfg.spad_rows - 1);
  if ((a & garbage_mask) == garbage_mask) { l.garbage = true; return l; }
  l.acc = (a >> 31) & 1;
  l.accumulate = (a >> 30) & 1;
  l.full = (a >> 29) & 1;
  l.row = a & (uint32_t)((l.acc ? g_cfg.acc_rows : g_cfg.spad_rows) - 1);
  return l;
}

uint32_t laddr_rows(laddr_t l) { return (uint32_t)(l.acc ? g_cfg.acc_rows : g_cfg.spad_rows); }

/* Row i of an access starting at l: the hardware adds in the row field, which wraps around. */
uint32_t row_at(laddr_t l, int64_t i) {
  uint32_t rows = laddr_rows(l);
  return (uint32_t)(((int64_t)l.row + i) & (rows - 1));
}

/* Warn about the parts of an address the hardware ignores, and about accesses that wrap around. */
void check_address(laddr_t l, int64_t span, bool writes, bool reads_full_ok, const char *what) {
  const char *mem = l.acc ? "accumulator" : "scratchpad";
  uint32_t rows = laddr_rows(l);
  uint32_t used = 0xE0000000u | (rows - 1);
  if (!l.acc && (l.accumulate || l.full))
    sim_warn("%s: bits 30/29 have no effect on a scratchpad address (Gemmini ignores them)", what);
  else if (l.acc && l.accumulate && !writes)
    sim_warn("%s: bit 30 (accumulate) has no effect on a read (Gemmini ignores it)", what);
  else if (l.acc && l.full && !reads_full_ok)
    sim_warn("%s: bit 29 (read full int32) only applies to mvout from the accumulator (Gemmini ignores it)", what);
  if (l.raw & ~used & 0x1FFFFFFFu)
    sim_warn("%s: address bits above the %s's %u rows are ignored (row = address & %u)", what, mem, rows, rows - 1);
  if ((int64_t)l.row + span > rows)
    sim_warn("%s: rows %u..%lld run past the end of the %s and wrap around to row 0", what, l.row,
             (long long)l.row + span - 1, mem);
}

void check_dims(const char *what, uint32_t v, uint32_t max) {
  if (v == 0 || v > max) sim_fail("%s=%u is out of range (must be 1..%u)", what, v, max);
}

int spad_bank(uint32_t row) { return (int)(row / (g_cfg.spad_rows / g_cfg.spad_banks)); }
int acc_bank(uint32_t row) { return (int)(row / (g_cfg.acc_rows / g_cfg.acc_banks)); }

/* The rows [start, start+count) of a memory, wrapping: one or two ranges for the timing model. */
void add_rows(tinstr_t *t, laddr_t l, uint32_t start, uint32_t count, bool write) {
  uint32_t rows = laddr_rows(l), first = count < rows - start ? count : rows - start;
  if (t->nranges + 2 > MAX_RANGES) sim_fail("internal: too many row ranges");
  t->r[t->nranges++] = (range_t){(uint8_t)(l.acc ? MEM_ACC : MEM_SPAD), write, start, first};
  if (first < count) t->r[t->nranges++] = (range_t){(uint8_t)(l.acc ? MEM_ACC : MEM_SPAD), write, 0, count - first};
}

/* ---- state ------------------------------------------------------------------------------------- */
void sim_alloc(void) {
  g_spad = malloc((size_t)g_cfg.spad_rows * DIM * sizeof(elem_t));
  g_acc = malloc((size_t)g_cfg.acc_rows * DIM * sizeof(acc_t));
  if (!g_spad || !g_acc) harness_fail("cannot allocate scratchpad/accumulator model");
}

void sim_reset(uint64_t seed, bool with_timing) {
  /* Real local memories hold leftovers, not zeros: fill them with noise so a
   * kernel that reads rows it never wrote produces a wrong result. */
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  uint64_t *sp = (uint64_t *)g_spad;
  for (size_t i = 0; i < (size_t)g_cfg.spad_rows * DIM * sizeof(elem_t) / 8; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17; sp[i] = x;
  }
  for (size_t i = 0; i < (size_t)g_cfg.acc_rows * DIM; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17; g_acc[i] = (acc_t)((int32_t)(x >> 40) - (1 << 23));
  }
  execute_reset();
  memset(&g_stats, 0, sizeof g_stats);
  diag_reset();
  g_timing_on = warnings_on = with_timing;
  nwarnings = 0;
  if (g_timing_on) timing_reset();
}

void sim_register_output(void *base, size_t bytes) {
  if (bytes > out_cap) {
    free(out_mask);
    out_mask = malloc(bytes);
    if (!out_mask) harness_fail("cannot allocate the output mask");
    out_cap = bytes;
  }
  out_base = base; out_bytes = bytes;
  memset(out_mask, 0, bytes);
}

/* Remember which output bytes mvout wrote, to report outputs never written. */
static void shadow_note(const void *dst, size_t n) {
  const uint8_t *p = dst;
  if (p + n <= out_base || p >= out_base + out_bytes) return;
  size_t lo = p < out_base ? (size_t)(out_base - p) : 0;
  size_t off = (size_t)(p + lo - out_base);
  size_t len = n - lo;
  if (off + len > out_bytes) len = out_bytes - off;
  memset(out_mask + off, 1, len);
}

void sim_note_written(const void *dst, size_t n) { shadow_note(dst, n); }

int64_t sim_output_unwritten(size_t *first) {
  int64_t n = 0;
  for (size_t i = 0; i < out_bytes; i++) if (!out_mask[i]) { if (!n) *first = i; n++; }
  return n;
}

void issue(tinstr_t *t) {
  g_stats.instrs = (int64_t)instr_number();
  g_stats.count[t->kind]++;
  if (t->fsm) g_stats.fsm_instrs++;
  if (g_timing_on) timing_issue(t);
}

/* ---- scale units ------------------------------------------------------------------------------ */
int8_t sat8(int64_t v) { return v > 127 ? 127 : v < -128 ? -128 : (int8_t)v; }
#ifdef ELEM_T_IS_FLOAT
/* One fp32 multiply, as the Float scale units compute it (identity 1.0 included: x * 1.0f is x) */
static inline elem_t mvin_scaled(elem_t x, float scale) { return x * scale; }
static inline acc_t acc_sum(acc_t a, acc_t b) { return a + b; }   /* the accumulator's fp32 adder */

elem_t acc_to_elem(acc_t v, float scale, int act) {   /* accumulator -> elem_t: ACC_SCALE, then ReLU */
  elem_t e = v * scale;
  return act == RELU && e < 0 ? 0 : e;
}
#else
static inline int32_t sat32(int64_t v) { return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v; }

/* round(v * scale) to nearest even in float arithmetic, as Gemmini's scale units compute it */
static int64_t scaled(int64_t v, float scale) {
  if (scale == 1.0f) return v;
  float y = nearbyintf((float)v * scale);
  return y >= 9.2e18f ? INT64_MAX : y <= -9.2e18f ? INT64_MIN : (int64_t)y;
}
static inline elem_t mvin_scaled(elem_t x, float scale) { return sat8(scaled(x, scale)); }
static inline acc_t acc_sum(acc_t a, acc_t b) { return sat32((int64_t)a + b); }

elem_t acc_to_elem(acc_t v, float scale, int act) {   /* accumulator -> int8: ACC_SCALE, then ReLU */
  int8_t e = sat8(scaled(v, scale));
  return act == RELU && e < 0 ? 0 : e;
}
#endif

/* ---- mvin ------------------------------------------------------------------------------------- */
void op_mvin(const uint8_t *dram, uint64_t stride, uint32_t local, uint32_t cols, uint32_t rows, const ldconf_t *ld,
             int fsm) {
  laddr_t l = decode(local);
  if (l.garbage) sim_fail("local address is GARBAGE_ADDR; mvin needs a destination");
  check_dims("rows", rows, DIM);
  bool acc_data = l.acc && !ld->shrunk;   /* int32 elements in DRAM */
  check_dims("cols", cols, acc_data ? DIM * MAX_BLOCK_LEN_ACC : DIM * MAX_BLOCK_LEN);
  uint32_t nblocks = (cols + DIM - 1) / DIM;
  if (nblocks > 1 && ld->block_stride < rows)
    sim_fail("block stride %u is smaller than rows=%u: the %u blocks of this mvin would overlap",
             ld->block_stride, rows, nblocks);
  check_address(l, (int64_t)(nblocks - 1) * ld->block_stride + rows, true, false, "mvin destination");
#ifndef HAS_MVIN_ACC_SCALE
  if (acc_data && ld->scale != 1.0f && dram)
    sim_warn("mvin of int32 data into the accumulator: this configuration has no scale unit for it, the "
             "config_ld scale is ignored (use a shrunk load of int8 data to scale)");
#endif
  tinstr_t t = {.queue = Q_LD, .kind = K_MVIN, .fsm = fsm, .zero = dram == NULL};
  for (uint32_t b = 0; b < nblocks; b++) {
    uint32_t n = cols - b * DIM < DIM ? cols - b * DIM : DIM;
    uint32_t row0 = row_at(l, (int64_t)b * ld->block_stride);
    add_rows(&t, l, row0, rows, true);
    for (uint32_t r = 0; r < rows; r++) {
      uint32_t row = row_at(l, (int64_t)b * ld->block_stride + r);
      const uint8_t *src = dram ? dram + r * stride : NULL;
      if (!l.acc) {
        elem_t *dst = g_spad + (size_t)row * DIM;
        if (!src) memset(dst, 0, n * sizeof(elem_t));
        else for (uint32_t c = 0; c < n; c++) {
          elem_t x;
          memcpy(&x, src + sizeof(elem_t) * (b * DIM + c), sizeof x);   /* DRAM rows need not be aligned */
          dst[c] = mvin_scaled(x, ld->scale);
        }
        continue;
      }
      acc_t *dst = g_acc + (size_t)row * DIM;
      for (uint32_t c = 0; c < n; c++) {
        acc_t v = 0;
        if (src && acc_data) {
          memcpy(&v, src + sizeof(acc_t) * (b * DIM + c), sizeof v);
#ifdef HAS_MVIN_ACC_SCALE
          v = v * ld->scale;   /* mvin_scale_acc_args: the same fp32 multiply */
#endif
        } else if (src) {
          elem_t x;
          memcpy(&x, src + sizeof(elem_t) * (b * DIM + c), sizeof x);
          v = mvin_scaled(x, ld->scale);
        }
        dst[c] = l.accumulate ? acc_sum(dst[c], v) : v;
      }
    }
  }
  uint64_t row_bytes = (uint64_t)cols * (acc_data ? sizeof(acc_t) : sizeof(elem_t));
  t.requests = dram ? (stride == 0 ? 1 : rows) : 0;   /* stride 0 reads one row and repeats it */
  t.bytes = dram ? (int64_t)(t.requests * row_bytes) : 0;
  t.req_bytes = (int64_t)row_bytes;
  t.local_rows = (int64_t)rows * nblocks;
  issue(&t);
}

/* ---- mvout ------------------------------------------------------------------------------------ */
void op_mvout(uint8_t *dram, uint64_t stride, uint32_t local, uint32_t cols, uint32_t rows, const stconf_t *st,
              int fsm) {
  laddr_t l = decode(local);
  tinstr_t t = {.queue = Q_ST, .kind = K_MVOUT, .fsm = fsm};
  check_dims("rows", rows, DIM);
  if (l.garbage) {   /* Scratchpad.scala skips DMA writes from GARBAGE_ADDR */
    sim_warn("mvout from GARBAGE_ADDR writes nothing");
    issue(&t);
    return;
  }
  if (!dram) sim_fail("DRAM address is NULL");
  bool full = l.acc && l.full;
  check_dims("cols", cols, full ? DIM * MAX_BLOCK_LEN_ACC : DIM * MAX_BLOCK_LEN);
  uint32_t nblocks = (cols + DIM - 1) / DIM;   /* blocks of 16 columns come from rows DIM apart */
  check_address(l, (int64_t)(nblocks - 1) * DIM + rows, false, true, "mvout source");
  uint32_t esize = full ? sizeof(acc_t) : sizeof(elem_t);
  for (uint32_t b = 0; b < nblocks; b++) {
    uint32_t n = cols - b * DIM < DIM ? cols - b * DIM : DIM;
    add_rows(&t, l, row_at(l, (int64_t)b * DIM), rows, false);
    for (uint32_t r = 0; r < rows; r++) {
      uint32_t row = row_at(l, (int64_t)b * DIM + r);
      uint8_t *dst = dram + r * stride + (size_t)b * DIM * esize;
      if (!l.acc) memcpy(dst, g_spad + (size_t)row * DIM, n * sizeof(elem_t));
      else if (full) memcpy(dst, g_acc + (size_t)row * DIM, sizeof(acc_t) * n);
      else for (uint32_t c = 0; c < n; c++) {
        elem_t e = acc_to_elem(g_acc[(size_t)row * DIM + c], st->acc_scale, st->act);
        memcpy(dst + c * sizeof(elem_t), &e, sizeof e);
      }
      shadow_note(dst, n * esize);
    }
  }
  t.requests = rows;
  t.req_bytes = (int64_t)cols * esize;
  t.bytes = (int64_t)rows * cols * esize;
  t.local_rows = (int64_t)rows * nblocks;
  issue(&t);
}

void op_config(int queue, int fsm) {
  tinstr_t t = {.queue = queue, .kind = K_CONFIG, .fsm = fsm};
  issue(&t);
}

void op_loop_call(int which) {
  if (g_timing_on) timing_loop_begin(which);
}

void op_loop_end(int which) {
  (void)which;
  if (g_timing_on) timing_loop_end();
}

void op_flush(void) {
  tinstr_t t = {.queue = Q_LD, .kind = K_FLUSH};   /* executes on receipt: costs only its issue */
  g_stats.instrs = (int64_t)instr_number();
  if (g_timing_on) timing_issue_cpu_only(&t);
}

void sim_finish(void) {
  diag_context("end of kernel");   /* not an instruction: does not count against the budget */
  execute_finish();
  if (g_timing_on) timing_finish();
}
