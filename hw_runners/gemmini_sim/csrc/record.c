/* Kernel side of gemmini-sim: the intrinsics of include/gemmini.h record
 * every primitive instruction into the trace pipe; nothing is executed or
 * timed here. The trusted replayer executes the trace (replay.c), so nothing
 * a kernel does in its own process can change its verdict or its cycles:
 * at most it can write a different program into the pipe, and that program
 * is what gets checked and timed. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "sim.h"
#include "include/gemmini.h"


#define FD_TRACE 6
static rec_t buf[4096];
static size_t nbuf;

void rec_flush(void) {
  const char *p = (const char *)buf;
  size_t n = nbuf * sizeof(rec_t);
  while (n) {
    ssize_t w = write(FD_TRACE, p, n);
    if (w <= 0) harness_fail("the trace pipe closed (the replayer stopped reading)");
    p += w; n -= (size_t)w;
  }
  nbuf = 0;
}

void rec_emit(const rec_t *r) {
  buf[nbuf++] = *r;
  if (nbuf == sizeof buf / sizeof *buf) rec_flush();
}

static uintptr_t arr_base[MAX_ARGS];
static size_t arr_bytes[MAX_ARGS];
static int narr;

void rec_set_arrays(void **bases, const size_t *bytes, int n) {
  for (int i = 0; i < n; i++) arr_base[i] = (uintptr_t)bases[i], arr_bytes[i] = bytes[i];
  narr = n;
}

int64_t mvin_row_bytes(uint32_t local, uint32_t cols) {
  if (cols == 0 || cols > DIM * MAX_BLOCK_LEN) return 0;
  return (int64_t)cols * (local != GARBAGE_ADDR && (local >> 31) ? 4 : 1);
}

static int in_arrays(uintptr_t addr, uint64_t span) {
  for (int i = 0; i < narr; i++)
    if (addr >= arr_base[i] && span <= arr_bytes[i] && addr - arr_base[i] <= arr_bytes[i] - span) return 1;
  return 0;
}

/* An mvin from the kernel's own memory (constant tables, or buffers mvout filled) ships the bytes it
 * reads, so the replayer can check that they do not depend on the inputs. */
static void emit_mvin(rec_t r) {
  int64_t rb = mvin_row_bytes(r.x0, r.d[0]);
  uint32_t rows = r.d[1];
  int foreign = r.dram && rb && rows >= 1 && rows <= DIM && r.stride <= (1ull << 40) &&
                !in_arrays((uintptr_t)r.dram, (rows - 1) * r.stride + (uint64_t)rb);
  if (foreign) r.flags |= RF_DATA;
  rec_emit(&r);
  if (!foreign) return;
  uint8_t bytes[MAX_MVIN_BYTES];
  size_t n = 0;
  for (uint32_t i = 0; i < rows; i++, n += (size_t)rb)
    memcpy(bytes + n, (const uint8_t *)(uintptr_t)r.dram + i * r.stride, (size_t)rb);
  rec_payload(bytes, n);
}

void rec_payload(const void *bytes, size_t n) {
  rec_emit(&(rec_t){.op = R_DATA, .d = {(uint32_t)n}});
  for (size_t off = 0; off < n; off += sizeof(rec_t)) {
    rec_t chunk = {0};
    memcpy(&chunk, (const uint8_t *)bytes + off, n - off < sizeof chunk ? n - off : sizeof chunk);
    rec_emit(&chunk);
  }
}

static uint8_t exflags(const exconf_t *ex) {
  return (uint8_t)((ex->a_t ? RF_A_T : 0) | (ex->b_t ? RF_B_T : 0) |
                   (ex->dataflow == OUTPUT_STATIONARY ? RF_OS : 0) | (ex->act == RELU ? RF_RELU : 0));
}

void op_config(int queue) { rec_emit(&(rec_t){.op = R_CONFIG, .id = (uint8_t)queue}); }
void op_fence(void) { rec_emit(&(rec_t){.op = R_FENCE}); }

void op_mvin(const void *dram, uint32_t local, uint32_t cols, uint32_t rows, size_t stride, float scale,
             uint32_t block_stride, int fsm) {
  emit_mvin((rec_t){.op = R_MVIN, .fsm = (uint8_t)fsm, .d = {cols, rows}, .x0 = local, .x2 = block_stride,
                    .scale = scale, .dram = (uintptr_t)dram, .stride = stride});
}

void op_mvout(void *dram, uint32_t local, uint32_t cols, uint32_t rows, size_t stride, int act, int fsm) {
  rec_emit(&(rec_t){.op = R_MVOUT, .fsm = (uint8_t)fsm, .flags = act == RELU ? RF_RELU : 0, .d = {cols, rows},
                    .x0 = local, .dram = (uintptr_t)dram, .stride = stride});
}

void op_preload(const exconf_t *ex, uint32_t b, uint32_t c, uint32_t bc, uint32_t br, uint32_t cc, uint32_t cr,
                int fsm) {
  rec_emit(&(rec_t){.op = R_PRELOAD, .fsm = (uint8_t)fsm, .flags = exflags(ex), .d = {bc, br, cc, cr},
                    .x0 = b, .x1 = c, .x2 = ex->a_stride});
}

void op_compute(const exconf_t *ex, bool accumulated, uint32_t a, uint32_t d, uint32_t ac, uint32_t ar,
                uint32_t dc, uint32_t dr, int fsm) {
  rec_emit(&(rec_t){.op = R_COMPUTE, .fsm = (uint8_t)fsm,
                    .flags = (uint8_t)(exflags(ex) | (accumulated ? RF_ACCUMULATED : 0)), .d = {ac, ar, dc, dr},
                    .x0 = a, .x1 = d, .x2 = ex->a_stride});
}

/* ---- intrinsics: configuration state lives here, each record carries what it uses ---- */
static exconf_t ex_state;
static struct { size_t stride; float scale; uint32_t block_stride; } ld_state[3];
static size_t st_stride;
static int st_act;   /* activation applied by mvout: config_ex sets it, config_st_act overrides it */

void intrinsics_reset(void) {
  ex_state = (exconf_t){WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false};
  for (int i = 0; i < 3; i++) ld_state[i].stride = 0, ld_state[i].scale = 1.0f, ld_state[i].block_stride = DIM;
  st_stride = 0;
  st_act = NO_ACTIVATION;
  diag_reset();
}

void config_ex(int dataflow, int act, uint32_t A_stride, bool A_transpose, bool B_transpose) {
  op_begin("config_ex", 0);
  if (dataflow != WEIGHT_STATIONARY && dataflow != OUTPUT_STATIONARY)
    sim_fail("dataflow=%d (use WEIGHT_STATIONARY or OUTPUT_STATIONARY)", dataflow);
  if (act != NO_ACTIVATION && act != RELU) sim_fail("act=%d (use NO_ACTIVATION or RELU)", act);
  if (A_stride == 0 || A_stride >= (uint32_t)g_cfg.spad_rows) sim_fail("A_stride=%u out of range", A_stride);
  ex_state = (exconf_t){dataflow, act, A_stride, A_transpose, B_transpose};
  st_act = act;
  rec_emit(&(rec_t){.op = R_CONFIG, .id = Q_EX, .flags = exflags(&ex_state), .x2 = A_stride});
}

void config_ld(size_t stride, float scale, uint32_t block_stride, int id) {
  op_begin("config_ld", 0);
  if (id < 0 || id > 2) sim_fail("id=%d (0 for mvin, 1 for mvin2, 2 for mvin3)", id);
  if (!isfinite(scale)) sim_fail("scale is not a finite number");
  ld_state[id].stride = stride;
  ld_state[id].scale = scale;
  ld_state[id].block_stride = block_stride;
  op_config(Q_LD);
}

void config_st(size_t stride) {
  op_begin("config_st", 0);
  st_stride = stride;
  op_config(Q_ST);
}

void config_st_act(size_t stride, int act) {
  op_begin("config_st", 0);
  if (act != NO_ACTIVATION && act != RELU) sim_fail("act=%d (use NO_ACTIVATION or RELU)", act);
  st_stride = stride;
  st_act = act;
  op_config(Q_ST);
}

static void mvin_id(const char *name, int id, const void *dram, uint32_t local, uint32_t cols, uint32_t rows) {
  op_begin(name, 0);
  emit_mvin((rec_t){.op = R_MVIN, .id = (uint8_t)id, .d = {cols, rows}, .x0 = local, .x2 = ld_state[id].block_stride,
                    .scale = ld_state[id].scale, .dram = (uintptr_t)dram, .stride = ld_state[id].stride});
}
void mvin(const void *d, uint32_t l, uint32_t c, uint32_t r) { mvin_id("mvin", 0, d, l, c, r); }
void mvin2(const void *d, uint32_t l, uint32_t c, uint32_t r) { mvin_id("mvin2", 1, d, l, c, r); }
void mvin3(const void *d, uint32_t l, uint32_t c, uint32_t r) { mvin_id("mvin3", 2, d, l, c, r); }

void mvout(void *dram, uint32_t local, uint32_t cols, uint32_t rows) {
  op_begin("mvout", 0);
  op_mvout(dram, local, cols, rows, st_stride, st_act, 0);
}

void preload(uint32_t b, uint32_t c, uint32_t bc, uint32_t br, uint32_t cc, uint32_t cr) {
  op_begin("preload", 0);
  op_preload(&ex_state, b, c, bc, br, cc, cr, 0);
}

void compute_preloaded(uint32_t a, uint32_t d, uint32_t ac, uint32_t ar, uint32_t dc, uint32_t dr) {
  op_begin("compute_preloaded", 0);
  op_compute(&ex_state, false, a, d, ac, ar, dc, dr, 0);
}

void compute_accumulated(uint32_t a, uint32_t d, uint32_t ac, uint32_t ar, uint32_t dc, uint32_t dr) {
  op_begin("compute_accumulated", 0);
  op_compute(&ex_state, true, a, d, ac, ar, dc, dr, 0);
}

void fence(void) {
  op_begin("fence", 0);
  op_fence();
}

/* ---- hardware loops: recorded as calls, expanded by the FSM in the replayer ---- */
void gemmini_loop_ws(size_t tI, size_t tJ, size_t tK, size_t padI, size_t padJ, size_t padK,
                     const elem_t *A, const elem_t *B, const acc_t *D, void *C,
                     size_t A_stride, size_t B_stride, size_t D_stride, size_t C_stride,
                     bool A_transpose, bool B_transpose, bool full_C, bool low_D,
                     bool ex_accumulate, int act) {
  op_begin("gemmini_loop_ws", 0);
  loop_ws_args_t a = {{tI, tJ, tK}, {padI, padJ, padK}, (uintptr_t)A, (uintptr_t)B, (uintptr_t)D, (uintptr_t)C,
                      {A_stride, B_stride, D_stride, C_stride}, A_transpose, B_transpose, full_C, low_D,
                      ex_accumulate, {0}, act, 0};
  rec_emit(&(rec_t){.op = R_LOOP, .id = 1});
  rec_payload(&a, sizeof a);
  fsm_loop_ws(&a);   /* numbering only (hooks below): both sides number every instruction alike */
}

void gemmini_loop_conv_ws(int batch, int in_dim, int cin, int cout, int out_dim, int kd, const elem_t *input,
                          const elem_t *weights, const acc_t *bias, elem_t *output, int act) {
  op_begin("gemmini_loop_conv_ws", 0);
  loop_conv_args_t a = {batch, in_dim, cin, cout, out_dim, kd, act, 0, (uintptr_t)input, (uintptr_t)weights,
                        (uintptr_t)bias, (uintptr_t)output};
  rec_emit(&(rec_t){.op = R_LOOP, .id = 2});
  rec_payload(&a, sizeof a);
  fsm_loop_conv(&a);
}

/* The loop FSM's hooks on this side only count: the replayer issues the instructions. */
void fsm_mvin(int which, uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows, uint64_t stride,
              uint32_t block_stride) {
  (void)dram, (void)local, (void)cols, (void)rows, (void)stride, (void)block_stride;
  op_begin("mvin", which);
}
void fsm_mvout(int which, uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows, uint64_t stride, int act) {
  (void)dram, (void)local, (void)cols, (void)rows, (void)stride, (void)act;
  op_begin("mvout", which);
}
void fsm_preload(int which, const exconf_t *ex, uint32_t b, uint32_t c, uint32_t bc, uint32_t br, uint32_t cc,
                 uint32_t cr) {
  (void)ex, (void)b, (void)c, (void)bc, (void)br, (void)cc, (void)cr;
  op_begin("preload", which);
}
void fsm_compute(int which, const exconf_t *ex, uint32_t a, uint32_t ac, uint32_t ar) {
  (void)ex, (void)a, (void)ac, (void)ar;
  op_begin("compute_preloaded", which);
}
void op_loop_call(int which) { (void)which; }
