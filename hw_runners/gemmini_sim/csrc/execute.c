/* Functional model of Gemmini's systolic array (ExecuteController.scala,
 * Mesh.scala), run by the trusted replayer: preload and compute in both
 * dataflows, operands from the scratchpad or the accumulator, and where the
 * results go.
 *
 * - Weight-stationary: a preload stages B (or zeros for GARBAGE_ADDR) and
 *   names C; compute_preloaded makes the staged weights active,
 *   compute_accumulated keeps the active ones; C = A * W (+ D).
 * - Output-stationary: a preload with a C address starts a new output tile
 *   initialised with D; computes add A * B into it; the tile is written at
 *   the next preload with a C address, at config_ex, at a fence or at the end.
 * - Operands read from the accumulator pass config_ex's scale and activation.
 * - Results written to the scratchpad are saturated to int8 and pass the
 *   config_ex activation; in the output-stationary dataflow results are first
 *   shifted right (rounding) by config_ex's sys_shift. C rows are c_stride
 *   rows apart, A rows a_stride rows apart.
 * - With float elements (GEMMINI_CONFIG_FP32) every PE does one fused
 *   multiply-add (hardfloat MulAddRecFN, one rounding: PE.scala, Arithmetic.scala
 *   FloatArithmetic.mac), modelled with fmaf in the order the hardware adds:
 *   weight-stationary partial sums start at the top of a column with D and
 *   pass the DIM rows in k order; output-stationary PEs add in place, k by k.
 *   All DIM rows take part (a padded operand is zero there), so the result is
 *   the hardware's bit for bit. Nothing saturates; the OS shift multiplies by
 *   2^-shift (FloatArithmetic's >>). */
#define _GNU_SOURCE
#include <math.h>
#include <string.h>
#include "sim.h"
#include "include/gemmini.h"

/* What a PE holds and adds: int32 for int8 data (results saturate on the way out), else acc_t */
#ifdef ELEM_T_IS_FLOAT
typedef acc_t pe_t;
#else
typedef int32_t pe_t;
#endif
static pe_t staged[DIM][DIM], active[DIM][DIM];   /* WS weights: preloaded / in use */
static struct { bool valid; laddr_t c; uint32_t cc, cr; } pend;   /* the preload a compute must follow */
static pe_t pe[DIM][DIM];                          /* OS: the output tile in the PEs */
static struct { bool active; laddr_t c; uint32_t cc, cr; exconf_t ex; } os_tile;

void execute_reset(void) {
  memset(staged, 0, sizeof staged);
  memset(active, 0, sizeof active);
  memset(&pend, 0, sizeof pend);
  memset(&os_tile, 0, sizeof os_tile);
}

#ifdef ELEM_T_IS_FLOAT
static pe_t out_shift(pe_t x, uint32_t shift) { return shift ? x * ldexpf(1.0f, -(int)shift) : x; }
static acc_t acc_write(acc_t old, pe_t v) { return old + v; }
static acc_t acc_set(pe_t v) { return v; }
static elem_t to_elem(pe_t v) { return v; }
#else
static int64_t out_shift(int64_t x, uint32_t shift) {   /* rounding right shift (to nearest even) */
  if (!shift) return x;
  if (shift > 62) return 0;
  int64_t q = x >> shift, rem = x & ((1LL << shift) - 1), half = 1LL << (shift - 1);
  return q + (rem > half || (rem == half && (q & 1)));
}
static acc_t acc_write(acc_t old, int64_t v) {
  v += old;
  return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}
static acc_t acc_set(int64_t v) { return acc_write(0, v); }
static elem_t to_elem(int64_t v) { return sat8(v); }
#endif

static void write_result(laddr_t c, uint32_t cols, uint32_t rows, pe_t res[DIM][DIM], const exconf_t *ex,
                         tinstr_t *t) {
  uint32_t shift = ex->dataflow == OUTPUT_STATIONARY ? ex->shift : 0;
  for (uint32_t i = 0; i < rows; i++) {
    uint32_t row = row_at(c, (int64_t)i * ex->c_stride);
    if (ex->c_stride == 1 && i == 0) add_rows(t, c, row, rows, true);
    else if (ex->c_stride != 1) add_rows(t, c, row, 1, true);
    if (c.acc) {
      acc_t *dst = g_acc + (size_t)row * DIM;
      for (uint32_t j = 0; j < cols; j++)
        dst[j] = c.accumulate ? acc_write(dst[j], out_shift(res[i][j], shift)) : acc_set(out_shift(res[i][j], shift));
    } else {
      elem_t *dst = g_spad + (size_t)row * DIM;
      for (uint32_t j = 0; j < cols; j++) {
        elem_t v = to_elem(out_shift(res[i][j], shift));
        dst[j] = ex->act == RELU && v < 0 ? 0 : v;
      }
    }
  }
}

static void os_flush(tinstr_t *t) {
  if (!os_tile.active) return;
  if (!os_tile.c.garbage) write_result(os_tile.c, os_tile.cc, os_tile.cr, pe, &os_tile.ex, t);
  os_tile.active = false;
}

/* Read a rows x cols operand (zero padded to DIM x DIM); a transposed operand is stored as cols x rows.
 * Row i is at `stride * i` rows from the start. */
static void read_operand(laddr_t l, uint32_t rows, uint32_t cols, uint32_t stride, bool transposed,
                         const exconf_t *ex, pe_t m[DIM][DIM], tinstr_t *t, const char *what) {
  uint32_t nrows = transposed ? cols : rows, ncols = transposed ? rows : cols;
  check_address(l, (int64_t)(nrows - 1) * stride + 1, false, false, what);
  memset(m, 0, sizeof(pe_t) * DIM * DIM);
  for (uint32_t i = 0; i < nrows; i++) {
    uint32_t row = row_at(l, (int64_t)i * stride);
    if (stride == 1 && i == 0) add_rows(t, l, row, nrows, false);
    else if (stride != 1) add_rows(t, l, row, 1, false);
    for (uint32_t j = 0; j < ncols; j++) {
      pe_t v = l.acc ? acc_to_elem(g_acc[(size_t)row * DIM + j], ex->acc_scale, ex->act)
                     : g_spad[(size_t)row * DIM + j];
      if (transposed) m[j][i] = v; else m[i][j] = v;
    }
  }
}

static int bank_of(laddr_t l) { return l.acc ? -1 : spad_bank(l.row); }

void op_preload(const exconf_t *ex, uint32_t b, uint32_t c, uint32_t bc, uint32_t br, uint32_t cc, uint32_t cr,
                int fsm) {
  laddr_t lb = decode(b), lc = decode(c);
  tinstr_t t = {.queue = Q_EX, .kind = K_PRELOAD, .fsm = fsm, .b_garbage = lb.garbage, .bank_a = -1, .bank_d = -1};
  if (pend.valid) sim_fail("preload after a preload: every preload must be followed by one compute");
  if (!lb.garbage) {
    check_dims("B_cols", bc, DIM);
    check_dims("B_rows", br, DIM);
  }
  if (!lc.garbage) {
    check_dims("C_cols", cc, DIM);
    check_dims("C_rows", cr, DIM);
    check_address(lc, (int64_t)(cr - 1) * ex->c_stride + 1, true, false, "C");
  }
  bool ws = ex->dataflow == WEIGHT_STATIONARY;
  pe_t m[DIM][DIM];
  if (lb.garbage) memset(m, 0, sizeof m);
  else read_operand(lb, br, bc, 1, ws && ex->b_t, ex, m, &t, ws ? "B" : "D");
  if (ws) {
    memcpy(staged, m, sizeof m);
  } else if (!lc.garbage) {
    os_flush(&t);
    memcpy(pe, m, sizeof m);
    os_tile.active = true;
    os_tile.c = lc; os_tile.cc = cc; os_tile.cr = cr; os_tile.ex = *ex;
  }
  pend.valid = true;
  pend.c = lc; pend.cc = cc; pend.cr = cr;
  t.rows_b = lb.garbage ? 0 : (int)(ws && ex->b_t ? bc : br);
  t.bank_b = lb.garbage ? -1 : bank_of(lb);
  t.transposed = ex->a_t || ex->b_t;
  issue(&t);
}

void op_compute(const exconf_t *ex, bool accumulated, uint32_t a, uint32_t d, uint32_t ac, uint32_t ar, uint32_t dc,
                uint32_t dr, int fsm) {
  if (!pend.valid) sim_fail("no preload before this compute: every compute must follow a preload");
  laddr_t la = decode(a), ld = decode(d);
  tinstr_t t = {.queue = Q_EX, .kind = K_COMPUTE, .fsm = fsm, .bank_b = -1, .bank_d = -1};
  if (la.garbage) sim_fail("A is GARBAGE_ADDR; a compute needs an A operand");
  check_dims("A_cols", ac, DIM);
  check_dims("A_rows", ar, DIM);
  pe_t A[DIM][DIM], X[DIM][DIM];
  read_operand(la, ar, ac, ex->a_stride, ex->a_t, ex, A, &t, "A");
  bool ws = ex->dataflow == WEIGHT_STATIONARY, has_x = !ld.garbage;
  if (has_x) {
    check_dims("D_cols", dc, DIM);
    check_dims("D_rows", dr, DIM);
    read_operand(ld, dr, dc, 1, !ws && ex->b_t, ex, X, &t, ws ? "D" : "B");
    t.rows_d = (int)(!ws && ex->b_t ? dc : dr);
    t.bank_d = bank_of(ld);
  }
  if (ws) {
    pe_t res[DIM][DIM];
    if (!accumulated) memcpy(active, staged, sizeof active);
    memset(res, 0, sizeof res);
#ifdef ELEM_T_IS_FLOAT
    /* a column's partial sum enters at the top with D and meets the DIM weight rows in k order */
    for (uint32_t i = 0; i < ar; i++)
      for (int j = 0; j < DIM; j++) {
        pe_t sum = has_x ? X[i][j] : 0;
        for (int k = 0; k < DIM; k++) sum = fmaf(A[i][k], active[k][j], sum);
        res[i][j] = sum;
      }
#else
    for (uint32_t i = 0; i < ar; i++)
      for (uint32_t k = 0; k < ac; k++) {
        int32_t av = A[i][k];
        if (!av) continue;
        for (int j = 0; j < DIM; j++) res[i][j] += av * active[k][j];
      }
    if (has_x) for (int i = 0; i < DIM; i++) for (int j = 0; j < DIM; j++) res[i][j] += X[i][j];
#endif
    if (!pend.c.garbage) write_result(pend.c, pend.cc, pend.cr, res, ex, &t);
    g_stats.macs += (int64_t)ar * ac * (pend.c.garbage ? DIM : pend.cc);
  } else {
    if (!os_tile.active) sim_fail("output-stationary compute with no output tile: preload a C address first");
    if (!has_x) sim_fail("output-stationary compute needs a B operand (second address)");
#ifdef ELEM_T_IS_FLOAT
    for (uint32_t i = 0; i < ar; i++)   /* each PE adds in place, k by k */
      for (int k = 0; k < DIM; k++)
        for (int j = 0; j < DIM; j++) pe[i][j] = fmaf(A[i][k], X[k][j], pe[i][j]);
#else
    for (uint32_t i = 0; i < ar; i++)
      for (uint32_t k = 0; k < ac; k++) {
        int32_t av = A[i][k];
        if (!av) continue;
        for (int j = 0; j < DIM; j++) pe[i][j] += av * X[k][j];
      }
#endif
    g_stats.macs += (int64_t)ar * ac * dc;
    if (!os_tile.c.garbage) add_rows(&t, os_tile.c, os_tile.c.row, os_tile.cr, true);
  }
  pend.valid = false;
  t.rows_a = (int)(ex->a_t ? ac : ar);
  t.bank_a = bank_of(la);
  t.transposed = ex->a_t || ex->b_t;
  t.d_garbage = !has_x;
  issue(&t);
}

/* config_ex ends an output-stationary tile, and may not split a preload from its compute. */
void op_config_ex(void) {
  if (pend.valid) sim_fail("config_ex between a preload and its compute");
  tinstr_t t = {.queue = Q_EX, .kind = K_CONFIG};
  os_flush(&t);
  issue(&t);
}

void op_fence(void) {
  tinstr_t t = {0};
  os_flush(&t);
  if (g_timing_on) timing_fence();
}

void execute_finish(void) {
  if (pend.valid) sim_fail("the kernel ended with a preload that no compute used");
  tinstr_t t = {0};
  os_flush(&t);
}
