/* Kernel side of gemmini-sim: the instructions of include/gemmini.h record
 * themselves into the trace pipe; nothing is executed or timed here. The
 * trusted replayer executes the trace (replay.c), so nothing a kernel does in
 * its own process can change its verdict or its cycles: at most it can write
 * a different program into the pipe, and that program is what gets checked
 * and timed. Arguments are recorded as given (full width); the replayer
 * checks them. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "sim.h"
#include "include/gemmini.h"

#define FD_REPLIES 3   /* the replayer's pipe: inputs, then answers to counter reads */
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

void rec_payload(const void *bytes, size_t n) {
  rec_emit(&(rec_t){.op = R_DATA, .d = {(uint32_t)n}});
  for (size_t off = 0; off < n; off += sizeof(rec_t)) {
    rec_t chunk = {0};
    memcpy(&chunk, (const uint8_t *)bytes + off, n - off < sizeof chunk ? n - off : sizeof chunk);
    rec_emit(&chunk);
  }
}

void rec_cpu_work(uint32_t cycles) {
  if (cycles) rec_emit(&(rec_t){.op = R_CPU, .d = {cycles < MAX_CPU_WORK ? cycles : MAX_CPU_WORK}});
}

static uintptr_t arr_base[MAX_ARGS];
static size_t arr_bytes[MAX_ARGS];
static int narr;

void rec_set_arrays(void **bases, const size_t *bytes, int n) {
  for (int i = 0; i < n; i++) arr_base[i] = (uintptr_t)bases[i], arr_bytes[i] = bytes[i];
  narr = n;
}

static int in_arrays(uintptr_t addr, uint64_t span) {
  for (int i = 0; i < narr; i++)
    if (addr >= arr_base[i] && span <= arr_bytes[i] && addr - arr_base[i] <= arr_bytes[i] - span) return 1;
  return 0;
}

/* What the kernel side needs of each load state: where the bytes of an mvin are. */
static struct { uint64_t stride; bool shrunk; } ld_state[3];

void intrinsics_reset(void) {
  memset(ld_state, 0, sizeof ld_state);
  diag_reset();
}

/* An mvin from the kernel's own memory (constant tables, or buffers mvout filled) ships the bytes it
 * reads, so the replayer can check that they do not depend on the inputs. */
static void emit_mvin(rec_t r) {
  uint32_t cols = r.d[0], rows = r.d[1];
  int acc = r.x0 != GARBAGE_ADDR && (r.x0 >> 31);
  uint64_t rb = (uint64_t)cols * (acc && !ld_state[r.id].shrunk ? sizeof(acc_t) : sizeof(elem_t));
  uint64_t stride = ld_state[r.id].stride;
  int foreign = r.dram && cols && rb <= MAX_BYTES * 4 && rows >= 1 && rows <= DIM && stride <= (1ull << 40) &&
                !in_arrays((uintptr_t)r.dram, (rows - 1) * stride + rb);
  if (foreign) r.flags |= RF_DATA;
  rec_emit(&r);
  if (!foreign) return;
  uint8_t bytes[MAX_MVIN_BYTES];
  size_t n = 0;
  for (uint32_t i = 0; i < rows && n + rb <= sizeof bytes; i++, n += (size_t)rb)
    memcpy(bytes + n, (const uint8_t *)(uintptr_t)r.dram + i * stride, (size_t)rb);
  rec_payload(bytes, n);
}

/* ---- Gemmini's instructions ------------------------------------------------------------------ */
void gemmini_sim_config_ex(int dataflow, int act, uint32_t sys_shift, float acc_scale, uint32_t c_stride,
                           uint32_t a_stride, bool a_transpose, bool b_transpose, bool set_only_strides) {
  op_begin("config_ex", 0);
  rec_emit(&(rec_t){.op = R_CONFIG, .id = Q_EX, .d = {(uint32_t)act, (uint32_t)dataflow},
                    .flags = (uint8_t)((a_transpose ? RF_A_T : 0) | (b_transpose ? RF_B_T : 0) |
                                       (dataflow == OUTPUT_STATIONARY ? RF_OS : 0) |
                                       (set_only_strides ? RF_SET_ONLY_STRIDES : 0)),
                    .x0 = a_stride, .x1 = c_stride, .x2 = sys_shift, .scale = acc_scale});
}

void gemmini_sim_config_ld(uint64_t stride, float scale, bool shrunk, uint32_t block_stride, uint32_t pixel_repeats,
                           int id) {
  op_begin("config_ld", 0);
  if (id >= 0 && id < 3) ld_state[id].stride = stride, ld_state[id].shrunk = shrunk;
  rec_emit(&(rec_t){.op = R_CONFIG, .id = Q_LD, .flags = shrunk ? RF_SHRUNK : 0,
                    .d = {(uint32_t)id, pixel_repeats}, .x2 = block_stride, .scale = scale, .stride = stride});
}

void gemmini_sim_config_st(uint64_t stride, int act, float acc_scale, int pool_stride, int pool_size, int pool_out_dim,
                           int porows, int pocols, int orows, int ocols, int upad, int lpad) {
  op_begin("config_st", 0);
  uint32_t other_pool_fields = (pool_out_dim | porows | pocols | orows | ocols | upad | lpad) != 0;
  rec_emit(&(rec_t){.op = R_CONFIG, .id = Q_ST, .d = {(uint32_t)act, (uint32_t)pool_stride, (uint32_t)pool_size,
                                                      other_pool_fields},
                    .scale = acc_scale, .stride = stride});
}

void gemmini_sim_config_norm(int64_t q_const, int q_const_type, int set_stats_id_only, int act_msb, int stat_id,
                             int64_t igelu_qb, int64_t igelu_qc) {
  (void)q_const, (void)q_const_type, (void)set_stats_id_only, (void)act_msb, (void)stat_id, (void)igelu_qb,
      (void)igelu_qc;
  op_begin("config_norm", 0);
  rec_emit(&(rec_t){.op = R_CONFIG, .id = Q_NORM});
}

void gemmini_sim_mvin(int id, uint64_t dram_addr, uint32_t local, uint32_t cols, uint32_t rows) {
  static const char *names[3] = {"mvin", "mvin2", "mvin3"};
  op_begin(id >= 0 && id < 3 ? names[id] : "mvin", 0);
  emit_mvin((rec_t){.op = R_MVIN, .id = (uint8_t)(id >= 0 && id < 3 ? id : 3), .d = {cols, rows}, .x0 = local,
                    .dram = dram_addr});
}

void gemmini_sim_mvout(uint64_t dram_addr, uint32_t local, uint32_t cols, uint32_t rows) {
  op_begin("mvout", 0);
  rec_emit(&(rec_t){.op = R_MVOUT, .d = {cols, rows}, .x0 = local, .dram = dram_addr});
}

void gemmini_sim_preload(uint32_t bd, uint32_t c, uint32_t bd_cols, uint32_t bd_rows, uint32_t c_cols,
                         uint32_t c_rows) {
  op_begin("preload", 0);
  rec_emit(&(rec_t){.op = R_PRELOAD, .d = {bd_cols, bd_rows, c_cols, c_rows}, .x0 = bd, .x1 = c});
}

void gemmini_sim_compute(bool accumulated, uint32_t a, uint32_t bd, uint32_t a_cols, uint32_t a_rows,
                         uint32_t bd_cols, uint32_t bd_rows) {
  op_begin(accumulated ? "compute_accumulated" : "compute_preloaded", 0);
  rec_emit(&(rec_t){.op = R_COMPUTE, .flags = accumulated ? RF_ACCUMULATED : 0,
                    .d = {a_cols, a_rows, bd_cols, bd_rows}, .x0 = a, .x1 = bd});
}

void gemmini_sim_flush(uint64_t skip) {
  op_begin("flush", 0);
  rec_emit(&(rec_t){.op = R_FLUSH, .dram = skip});
}

void gemmini_sim_fence(void) {
  op_begin("fence", 0);
  rec_emit(&(rec_t){.op = R_FENCE});
}

/* Counter accesses and cycle reads are answered by the replayer, which runs the timing model: the
 * record goes out and the kernel waits for the value (the same in every input set, since what a kernel
 * issues may not depend on its inputs). */
static uint64_t ask_replayer(uint8_t what, uint64_t config_reg) {
  rec_emit(&(rec_t){.op = R_COUNTER, .id = what, .stride = config_reg});
  rec_flush();
  uint64_t value = 0;
  size_t got = 0;
  while (got < sizeof value) {
    ssize_t n = read(FD_REPLIES, (char *)&value + got, sizeof value - got);
    if (n <= 0) harness_fail("the replayer did not answer a counter read");
    got += (size_t)n;
  }
  return value;
}

uint64_t gemmini_sim_counter(uint64_t config_reg) {
  op_begin("counter", 0);
  return ask_replayer(0, config_reg);
}

uint64_t gemmini_sim_read_cycles(void) {
  diag_context("read_cycles");   /* a CPU instruction (rdcycle), not a Gemmini one */
  return ask_replayer(1, 0);
}

/* ---- hardware loops: recorded as calls, expanded by the FSM in the replayer ------------------- */
/* ... except in the CPU-issued library (library_loops_on_cpu; see the FSM hooks below). */
static bool loops_on_cpu, on_cpu;
static uint32_t cpu_block_cycles;

void library_loops_on_cpu(bool on, uint32_t block_cycles) { loops_on_cpu = on, cpu_block_cycles = block_cycles; }

void gemmini_sim_loop_ws(size_t tiles_i, size_t tiles_j, size_t tiles_k, size_t pad_I, size_t pad_J, size_t pad_K,
                         uint64_t A, uint64_t B, uint64_t D, uint64_t c_dram, size_t A_stride, size_t B_stride,
                         size_t D_stride, size_t C_stride, bool A_transpose, bool B_transpose, bool full_C,
                         bool low_D, bool ex_accumulate, int act, int a_spad_id, int b_spad_id, bool is_resadd) {
  op_begin("gemmini_loop_ws", 0);
  loop_ws_args_t a = {{tiles_i, tiles_j, tiles_k}, {pad_I, pad_J, pad_K}, A, B, D, c_dram,
                      {A_stride, B_stride, D_stride, C_stride}, A_transpose, B_transpose, full_C, low_D,
                      ex_accumulate, is_resadd, {0}, act, a_spad_id, b_spad_id, 0};
  rec_emit(&(rec_t){.op = R_LOOP, .id = 1});
  rec_payload(&a, sizeof a);
  fsm_loop_ws(&a);   /* numbering only (the hooks below count): both sides number every instruction alike */
}

void gemmini_sim_loop_conv_ws(
    int batch_size, int in_row_dim, int in_col_dim, int in_channels, int out_channels, int out_row_dim,
    int out_col_dim, int pool_out_row_dim, int pool_out_col_dim, int stride, int padding, int kernel_dim,
    int kernel_dilation, int pool_size, int pool_stride, int pool_padding, int batches, int porows, int pocols,
    int pochs, int krows, int kcols, int kchs, int lpad, int rpad, int upad, int dpad, int plpad, int prpad,
    int pupad, int pdpad, int orows, int ocols, uint64_t weights, uint64_t output, uint64_t bias, uint64_t input,
    bool no_bias, bool no_pool, bool downsample, bool wrot180, bool input_dilated, int act, bool trans_output_1203,
    bool trans_weight_1203, bool trans_weight_0132, bool trans_input_3120, int max_pixels_per_row, int in_stride,
    int weight_stride, int out_stride, bool dw, int a_spad_id, int b_spad_id) {
  loop_conv_args_t a = {
    batch_size, in_row_dim, in_col_dim, in_channels, out_channels, out_row_dim, out_col_dim, pool_out_row_dim,
    pool_out_col_dim, stride, padding, kernel_dim, kernel_dilation, pool_size, pool_stride, pool_padding, batches,
    porows, pocols, pochs, krows, kcols, kchs, lpad, rpad, upad, dpad, plpad, prpad, pupad, pdpad, orows, ocols,
    no_bias, no_pool, downsample, wrot180, input_dilated, act, trans_output_1203, trans_weight_1203,
    trans_weight_0132, trans_input_3120, max_pixels_per_row, in_stride, weight_stride, out_stride, dw, a_spad_id,
    b_spad_id, 0, weights, output, bias, input};
  if (loops_on_cpu) {
    on_cpu = true;
    fsm_loop_conv(&a);
    on_cpu = false;
    return;
  }
  op_begin("gemmini_loop_conv_ws", 0);
  rec_emit(&(rec_t){.op = R_LOOP, .id = 2});
  rec_payload(&a, sizeof a);
  fsm_loop_conv(&a);
}

/* ---- the harness's CPU helpers: recorded for the replayer, which executes and prices them; done here
 * too, so the kernel's own copy of its arrays reads as it would on the hardware where it can ---------- */
static void cpuop(int op, const void *a, const void *b, void *out, int rows, int cols) {
  diag_context(op == CPUOP_ADD ? "add_matrix" : "negate_matrix");   /* CPU code, not a Gemmini instruction */
  cpuop_args_t args = {(uintptr_t)a, (uintptr_t)b, (uintptr_t)out, rows, cols};
  rec_emit(&(rec_t){.op = R_CPUOP, .id = (uint8_t)op});
  rec_payload(&args, sizeof args);
  for (int i = 0; i < rows * cols; i++) {
    elem_t x = ((const elem_t *)a)[i];
    ((elem_t *)out)[i] = op == CPUOP_ADD ? (elem_t)(x + ((const elem_t *)b)[i]) : (elem_t)-x;
  }
}
void gemmini_sim_add_matrix(const void *a, const void *b, void *out, int rows, int cols) {
  cpuop(CPUOP_ADD, a, b, out, rows, cols);
}
void gemmini_sim_negate_matrix(const void *in, void *out, int rows, int cols) {
  cpuop(CPUOP_NEGATE, in, NULL, out, rows, cols);
}

/* ---- the short forms (include/gemmini.h) -------------------------------------------------------- */
void config_ex(int dataflow, int act, uint32_t A_stride, bool A_transpose, bool B_transpose) {
  gemmini_sim_config_ex(dataflow, act, 0, 1.0f, 1, A_stride, A_transpose, B_transpose, false);
}
void config_ld(size_t stride, float scale, uint32_t block_stride, int id) {
  gemmini_sim_config_ld(stride, scale, false, block_stride, 1, id);
}
void config_st(size_t stride) { gemmini_sim_config_st(stride, NO_ACTIVATION, 1.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0); }
void config_st_act(size_t stride, int act) { gemmini_sim_config_st(stride, act, 1.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0); }
void mvin(const void *d, uint32_t l, uint32_t c, uint32_t r) { gemmini_sim_mvin(0, (uintptr_t)d, l, c, r); }
void mvin2(const void *d, uint32_t l, uint32_t c, uint32_t r) { gemmini_sim_mvin(1, (uintptr_t)d, l, c, r); }
void mvin3(const void *d, uint32_t l, uint32_t c, uint32_t r) { gemmini_sim_mvin(2, (uintptr_t)d, l, c, r); }
void mvout(void *d, uint32_t l, uint32_t c, uint32_t r) { gemmini_sim_mvout((uintptr_t)d, l, c, r); }
void preload(uint32_t b, uint32_t c, uint32_t bc, uint32_t br, uint32_t cc, uint32_t cr) {
  gemmini_sim_preload(b, c, bc, br, cc, cr);
}
void compute_preloaded(uint32_t a, uint32_t d, uint32_t ac, uint32_t ar, uint32_t dc, uint32_t dr) {
  gemmini_sim_compute(false, a, d, ac, ar, dc, dr);
}
void compute_accumulated(uint32_t a, uint32_t d, uint32_t ac, uint32_t ar, uint32_t dc, uint32_t dr) {
  gemmini_sim_compute(true, a, d, ac, ar, dc, dr);
}
void fence(void) { gemmini_sim_fence(); }

/* The loop FSM's hooks on this side only count: the replayer issues the instructions. Except in the
 * CPU-issued library (library_loops_on_cpu): then gemmini_loop_conv_ws is expanded here and the hooks
 * issue each instruction from the CPU, as ordinary records, with `cpu_block_cycles` of scalar work
 * before every compute; the replayer sees no loop at all. */

void fsm_config_ld(int which, int id, const ldconf_t *ld) {
  if (on_cpu) gemmini_sim_config_ld(ld->stride, ld->scale, ld->shrunk, ld->block_stride, ld->pixel_repeats, id);
  else op_begin("config_ld", which);
}
void fsm_mvin(int which, int id, uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows) {
  if (on_cpu) gemmini_sim_mvin(id, dram, local, cols, rows);
  else op_begin("mvin", which);
}
void fsm_mvout(int which, uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows) {
  if (on_cpu) gemmini_sim_mvout(dram, local, cols, rows);
  else op_begin("mvout", which);
}
void fsm_preload(int which, uint32_t b, uint32_t c, uint32_t bc, uint32_t br, uint32_t cc, uint32_t cr) {
  if (on_cpu) gemmini_sim_preload(b, c, bc, br, cc, cr);
  else op_begin("preload", which);
}
void fsm_compute(int which, bool accumulated, uint32_t a, uint32_t d, uint32_t ac, uint32_t ar, uint32_t dc,
                 uint32_t dr) {
  if (!on_cpu) { op_begin(accumulated ? "compute_accumulated" : "compute_preloaded", which); return; }
  rec_cpu_work(cpu_block_cycles);
  gemmini_sim_compute(accumulated, a, d, ac, ar, dc, dr);
}
void fsm_sync(int queue, int after_queue) { (void)queue, (void)after_queue; }
void op_loop_call(int which) { (void)which; }
void op_loop_end(int which) { (void)which; }
