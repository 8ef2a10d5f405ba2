/* Functional model of Gemmini, run by the trusted replayer: scratchpad,
 * accumulator and systolic-array semantics, bit-exact, plus the checks that
 * give each limit violation a clear error naming the instruction. Every
 * primitive also hands a description of its work to the timing model. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sim.h"
#include "include/gemmini.h"

simstats_t g_stats;
int8_t *g_spad;
int32_t *g_acc;

static bool timing_on;

typedef struct { bool acc, accumulate, full, garbage; uint32_t row; } laddr_t;

static laddr_t decode(uint32_t a) {
  laddr_t l = {0};
  if (a == GARBAGE_ADDR) { l.garbage = true; return l; }
  l.acc = (a >> 31) & 1;
  l.accumulate = (a >> 30) & 1;
  l.full = (a >> 29) & 1;
  l.row = a & 0x1FFFFFFFu;
  return l;
}

/* ---- state ---------------------------------------------------------------- */

/* Weight-stationary array: weights staged by preload, active after compute_preloaded. */
static int32_t staged[DIM][DIM], active[DIM][DIM];
static struct { bool valid; laddr_t c; uint32_t cc, cr; } pend;
/* Output-stationary array: the tile being accumulated in the PEs. */
static int32_t pe[DIM][DIM];
static struct { bool active; laddr_t c; uint32_t cc, cr; int act; } os_tile;

static uint8_t *out_base, *out_mask;
static size_t out_bytes, out_cap;

void sim_alloc(void) {
  g_spad = malloc((size_t)g_cfg.spad_rows * DIM);
  g_acc = malloc((size_t)g_cfg.acc_rows * DIM * sizeof(int32_t));
  if (!g_spad || !g_acc) harness_fail("cannot allocate scratchpad/accumulator model");
}

void sim_reset(uint64_t seed, bool with_timing) {
  /* Real local memories hold leftovers, not zeros: fill them with noise so a
   * kernel that reads rows it never wrote produces a wrong result. */
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  uint64_t *sp = (uint64_t *)g_spad;
  for (size_t i = 0; i < (size_t)g_cfg.spad_rows * DIM / 8; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17; sp[i] = x;
  }
  for (size_t i = 0; i < (size_t)g_cfg.acc_rows * DIM; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17; g_acc[i] = (int32_t)(x >> 40) - (1 << 23);
  }
  memset(staged, 0, sizeof staged);
  memset(active, 0, sizeof active);
  memset(&pend, 0, sizeof pend);
  memset(&os_tile, 0, sizeof os_tile);
  memset(&g_stats, 0, sizeof g_stats);
  diag_reset();
  timing_on = with_timing;
  if (timing_on) timing_reset();
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

int64_t sim_output_unwritten(size_t *first) {
  int64_t n = 0;
  for (size_t i = 0; i < out_bytes; i++) if (!out_mask[i]) { if (!n) *first = i; n++; }
  return n;
}


/* ---- helpers -------------------------------------------------------------- */
static inline int32_t sat32(int64_t v) { return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v; }
static inline int8_t sat8(int64_t v) { return v > 127 ? 127 : v < -128 ? -128 : (int8_t)v; }

static int64_t scaled(int64_t v, float scale) {
  if (scale == 1.0f) return v;
  return (int64_t)nearbyintf((float)v * scale); /* round half to even, as Gemmini's scaler */
}

static void check_dims(const char *what, uint32_t v, uint32_t max) {
  if (v == 0 || v > max) sim_fail("%s=%u is out of range (must be 1..%u)", what, v, max);
}

/* Rows are checked in 64 bits: a row, stride or count from the trace may be anything. */
static void check_rows(laddr_t l, int64_t first, int64_t count, const char *what) {
  int64_t lim = l.acc ? g_cfg.acc_rows : g_cfg.spad_rows;
  if (first + count > lim)
    sim_fail("%s rows %lld..%lld are outside the %s (rows 0..%lld)", what, (long long)first,
             (long long)(first + count - 1), l.acc ? "accumulator" : "scratchpad", (long long)lim - 1);
}

static void spad_only(laddr_t l, const char *what) {
  if (l.acc) sim_fail("%s must be a scratchpad address (bit 31 clear)", what);
  if (l.accumulate || l.full) sim_fail("%s: bits 30/29 are only meaningful on accumulator addresses", what);
}

static int bank_of(uint32_t row) { return (int)(row / (g_cfg.spad_rows / g_cfg.spad_banks)); }

static int64_t beats_for(uint32_t rows, uint32_t row_bytes) {
  return (int64_t)rows * ((row_bytes + g_cfg.dma_beat_bytes - 1) / g_cfg.dma_beat_bytes);
}

static void add_range(tinstr_t *t, int mem, int write, uint32_t start, uint32_t count) {
  t->r[t->nranges++] = (range_t){(uint8_t)mem, (uint8_t)write, start, count};
}

static void issue(tinstr_t *t) {
  g_stats.instrs = (int64_t)instr_number();
  g_stats.count[t->kind]++;
  if (t->fsm) g_stats.fsm_instrs++;
  if (timing_on) timing_issue(t);
}

/* ---- output-stationary tile flush ---------------------------------------- */
static void write_result(laddr_t c, uint32_t cols, uint32_t rows, int32_t res[DIM][DIM], int act) {
  for (uint32_t i = 0; i < rows; i++) {
    if (c.acc) {
      int32_t *dst = g_acc + (size_t)(c.row + i) * DIM;
      for (uint32_t j = 0; j < cols; j++) dst[j] = c.accumulate ? sat32((int64_t)dst[j] + res[i][j]) : res[i][j];
    } else {
      int8_t *dst = g_spad + (size_t)(c.row + i) * DIM;
      for (uint32_t j = 0; j < cols; j++) {
        int32_t v = res[i][j];
        dst[j] = sat8(act == RELU && v < 0 ? 0 : v);
      }
    }
  }
}

static void os_flush(void) {
  if (!os_tile.active) return;
  if (!os_tile.c.garbage) write_result(os_tile.c, os_tile.cc, os_tile.cr, pe, os_tile.act);
  os_tile.active = false;
}

/* ---- primitives ----------------------------------------------------------- */
void op_config(int queue) {
  tinstr_t t = {.queue = queue, .kind = K_CONFIG};
  issue(&t);
}

void op_mvin(const void *dram, uint32_t local, uint32_t cols, uint32_t rows, size_t stride,
             float scale, uint32_t block_stride, int fsm) {
  laddr_t l = decode(local);
  if (l.garbage) sim_fail("local address is GARBAGE_ADDR; mvin needs a destination");
  check_dims("rows", rows, DIM);
  tinstr_t t = {.queue = Q_LD, .kind = K_MVIN, .fsm = fsm};
  if (l.acc) {
    check_dims("cols", cols, DIM * MAX_BLOCK_LEN_ACC);
    if (l.full) sim_fail("bit 29 (read full int32) applies to mvout, not mvin");
    check_rows(l, l.row, rows, "destination");
    for (uint32_t r = 0; r < rows; r++) {
      const int32_t *src = dram ? (const int32_t *)((const char *)dram + r * stride) : NULL;
      int32_t *dst = g_acc + (size_t)(l.row + r) * DIM;
      for (uint32_t c = 0; c < cols; c++) {
        int32_t v = src ? sat32(scaled(src[c], scale)) : 0;
        dst[c] = l.accumulate ? sat32((int64_t)dst[c] + v) : v;
      }
    }
    add_range(&t, MEM_ACC, 1, l.row, rows);
    t.bytes = (int64_t)rows * cols * 4;
    t.beats = beats_for(rows, cols * 4);
  } else {
    spad_only(l, "mvin destination");
    check_dims("cols", cols, DIM * MAX_BLOCK_LEN);
    uint32_t nblocks = (cols + DIM - 1) / DIM;
    for (uint32_t b = 0; b < nblocks; b++) {
      int64_t row0 = (int64_t)l.row + (int64_t)b * block_stride;
      check_rows(l, row0, rows, nblocks > 1 ? "destination block" : "destination");
      add_range(&t, MEM_SPAD, 1, (uint32_t)row0, rows);
    }
    for (uint32_t r = 0; r < rows; r++) {
      const int8_t *src = dram ? (const int8_t *)dram + r * stride : NULL;
      for (uint32_t b = 0; b < nblocks; b++) {
        uint32_t n = cols - b * DIM < DIM ? cols - b * DIM : DIM;
        int8_t *dst = g_spad + ((size_t)l.row + (size_t)b * block_stride + r) * DIM;
        if (!src) memset(dst, 0, n);
        else if (scale == 1.0f) memcpy(dst, src + b * DIM, n);
        else for (uint32_t c = 0; c < n; c++) dst[c] = sat8(scaled(src[b * DIM + c], scale));
      }
    }
    t.bytes = (int64_t)rows * cols;
    t.beats = beats_for(rows, cols);
  }
  issue(&t);
}

void op_mvout(void *dram, uint32_t local, uint32_t cols, uint32_t rows, size_t stride, int act, int fsm) {
  laddr_t l = decode(local);
  if (l.garbage) sim_fail("local address is GARBAGE_ADDR; mvout needs a source");
  if (!dram) sim_fail("DRAM address is NULL");
  check_dims("rows", rows, DIM);
  check_dims("cols", cols, DIM);
  tinstr_t t = {.queue = Q_ST, .kind = K_MVOUT, .fsm = fsm};
  uint32_t esize = 1;
  check_rows(l, l.row, rows, "source");
  if (l.acc) {
    esize = l.full ? 4 : 1;
    for (uint32_t r = 0; r < rows; r++) {
      const int32_t *src = g_acc + (size_t)(l.row + r) * DIM;
      char *dst = (char *)dram + r * stride;
      for (uint32_t c = 0; c < cols; c++) {
        int32_t v = src[c];
        if (l.full) memcpy(dst + 4 * c, &v, 4);
        else dst[c] = sat8(act == RELU && v < 0 ? 0 : v);
      }
      shadow_note(dst, cols * esize);
    }
    add_range(&t, MEM_ACC, 0, l.row, rows);
  } else {
    spad_only(l, "mvout source");
    for (uint32_t r = 0; r < rows; r++) {
      char *dst = (char *)dram + r * stride;
      memcpy(dst, g_spad + (size_t)(l.row + r) * DIM, cols);
      shadow_note(dst, cols);
    }
    add_range(&t, MEM_SPAD, 0, l.row, rows);
  }
  t.bytes = (int64_t)rows * cols * esize;
  t.beats = beats_for(rows, cols * esize);
  issue(&t);
}

/* Read a rows x cols operand from the scratchpad into m (zero padded);
 * transposed operands are stored as cols x rows. */
static void read_operand(laddr_t l, uint32_t rows, uint32_t cols, uint32_t stride, bool transposed,
                         int32_t m[DIM][DIM], tinstr_t *t, const char *what) {
  spad_only(l, what);
  uint32_t nrows = transposed ? cols : rows;
  int64_t span = (int64_t)(nrows - 1) * stride + 1;
  check_rows(l, l.row, span, what);
  memset(m, 0, sizeof(int32_t) * DIM * DIM);
  for (uint32_t i = 0; i < nrows; i++) {
    const int8_t *src = g_spad + ((size_t)l.row + (size_t)i * stride) * DIM;
    for (uint32_t j = 0; j < (transposed ? rows : cols); j++) {
      if (transposed) m[j][i] = src[j];
      else m[i][j] = src[j];
    }
  }
  add_range(t, MEM_SPAD, 0, l.row, (uint32_t)span);
}

void op_preload(const exconf_t *ex, uint32_t b, uint32_t c, uint32_t bc, uint32_t br, uint32_t cc,
                uint32_t cr, int fsm) {
  laddr_t lb = decode(b), lc = decode(c);
  tinstr_t t = {.queue = Q_EX, .kind = K_PRELOAD, .fsm = fsm, .b_garbage = lb.garbage};
  if (pend.valid) sim_fail("preload after a preload: every preload must be followed by one compute");
  if (!lb.garbage) {
    check_dims("B_cols", bc, DIM);
    check_dims("B_rows", br, DIM);
  }
  if (!lc.garbage) {
    check_dims("C_cols", cc, DIM);
    check_dims("C_rows", cr, DIM);
    check_rows(lc, lc.row, cr, "C");
    if (!lc.acc && lc.accumulate) sim_fail("C: the accumulate bit needs an accumulator address");
  }
  int32_t m[DIM][DIM];
  if (lb.garbage) memset(m, 0, sizeof m);
  else read_operand(lb, br, bc, 1, ex->dataflow == WEIGHT_STATIONARY && ex->b_t, m, &t,
                    ex->dataflow == WEIGHT_STATIONARY ? "B" : "D");
  if (ex->dataflow == WEIGHT_STATIONARY) {
    memcpy(staged, m, sizeof m);
    pend.valid = true;
    pend.c = lc; pend.cc = cc; pend.cr = cr;
  } else if (!lc.garbage) {
    os_flush();
    memcpy(pe, m, sizeof m);
    os_tile.active = true;
    os_tile.c = lc; os_tile.cc = cc; os_tile.cr = cr; os_tile.act = ex->act;
  }
  if (ex->dataflow == OUTPUT_STATIONARY) pend.valid = true, pend.c = lc, pend.cc = cc, pend.cr = cr;
  t.rows_b = lb.garbage ? 0 : (int)br;
  t.bank_b = lb.garbage ? -1 : bank_of(lb.row);
  issue(&t);
}

void op_compute(const exconf_t *ex, bool accumulated, uint32_t a, uint32_t d, uint32_t ac,
                uint32_t ar, uint32_t dc, uint32_t dr, int fsm) {
  if (!pend.valid) sim_fail("no preload before this compute: every compute must follow a preload");
  laddr_t la = decode(a), ld = decode(d);
  tinstr_t t = {.queue = Q_EX, .kind = K_COMPUTE, .fsm = fsm, .bank_d = -1};
  if (la.garbage) sim_fail("A is GARBAGE_ADDR; a compute needs an A operand");
  check_dims("A_cols", ac, DIM);
  check_dims("A_rows", ar, DIM);
  int32_t A[DIM][DIM], X[DIM][DIM];
  read_operand(la, ar, ac, ex->a_stride, ex->a_t, A, &t, "A");
  bool has_x = !ld.garbage;
  if (has_x) {
    check_dims("D_cols", dc, DIM);
    check_dims("D_rows", dr, DIM);
    bool os = ex->dataflow == OUTPUT_STATIONARY;
    read_operand(ld, dr, dc, 1, os && ex->b_t, X, &t, os ? "B" : "D");
    t.rows_d = (int)dr;
    t.bank_d = bank_of(ld.row);
  }
  int32_t res[DIM][DIM];
  if (ex->dataflow == WEIGHT_STATIONARY) {
    if (!accumulated) memcpy(active, staged, sizeof active);
    memset(res, 0, sizeof res);
    for (uint32_t i = 0; i < ar; i++)
      for (uint32_t k = 0; k < ac; k++) {
        int32_t av = A[i][k];
        if (!av) continue;
        for (int j = 0; j < DIM; j++) res[i][j] += av * active[k][j];
      }
    if (has_x) for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) res[i][j] += X[i][j];
    if (!pend.c.garbage) {
      write_result(pend.c, pend.cc, pend.cr, res, ex->act);
      add_range(&t, pend.c.acc ? MEM_ACC : MEM_SPAD, 1, pend.c.row, pend.cr);
    }
    g_stats.macs += (int64_t)ar * ac * (pend.c.garbage ? DIM : pend.cc);
  } else {
    if (!os_tile.active) sim_fail("output-stationary compute with no output tile: preload a C address first");
    if (!has_x) sim_fail("output-stationary compute needs a B operand (second address)");
    for (uint32_t i = 0; i < ar; i++)
      for (uint32_t k = 0; k < ac; k++) {
        int32_t av = A[i][k];
        if (!av) continue;
        for (int j = 0; j < DIM; j++) pe[i][j] += av * X[k][j];
      }
    g_stats.macs += (int64_t)ar * ac * dc;
    if (!os_tile.c.garbage) add_range(&t, os_tile.c.acc ? MEM_ACC : MEM_SPAD, 1, os_tile.c.row, os_tile.cr);
  }
  pend.valid = false;
  t.rows_a = (int)ar;
  t.bank_a = bank_of(la.row);
  issue(&t);
}

/* ---- replay-only operations ---------------------------------------------------- */
void op_config_ex(void) {
  if (pend.valid) sim_fail("config_ex between a preload and its compute");
  os_flush();
  op_config(Q_EX);
}

void op_fence(void) {
  os_flush();
  if (timing_on) timing_fence();
}

void op_loop_call(int which) {
  (void)which;   /* both loop FSMs cost the same to start */
  if (timing_on) timing_loop_call();
}

void sim_finish(void) {
  diag_context("end of kernel");   /* not an instruction: does not count against the budget */
  if (pend.valid)
    sim_fail("the kernel ended with a preload that no compute used");
  os_flush();
  if (timing_on) timing_finish();
}
