/* Trusted replayer of gemmini-sim: executes the instruction trace recorded by
 * the kernel process on its own copy of the inputs, with the functional and
 * timing models, and reports the outputs and the cycles that count.
 *
 * fd 3: job file (header, public and hidden input sets)   fd 7: trace (pipe from the kernel process)
 * fd 9: pipe to the kernel process: the header, then one public input set at a time, each sent only
 *       once the kernel's trace for the previous set has ended
 * fd 4: raw output arrays of every set (public, then hidden)   fd 5: stats ("key value" lines)
 * fd 8: optional human-readable timing trace
 *
 * After the public sets, the kept instruction stream of set 1 is replayed on
 * the hidden input sets (stream.c), which the kernel process never receives.
 *
 * DRAM addresses in the trace are the kernel process's pointers. Those inside
 * a problem array map onto the replayer's copy; NULL means zeros; anything
 * else must be memory an earlier mvout wrote (kept in a sparse map here), so
 * results computed by CPU code cannot be smuggled in through mvin.
 */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sim.h"
#include "include/gemmini.h"

#define FD_JOB 3
#define FD_OUT 4
#define FD_STATS 5
#define FD_TIMING 8
#define FD_KERNEL_IN 9

/* ---- configuration state: what config_ex / config_ld / config_st set, as Gemmini holds it ---- */
exconf_t g_ex;
ldconf_t g_ld[3];
stconf_t g_st;

/* State at the start of every solution() call (documented in prompts/gemmini-sim/isa.md). */
static void reset_config(void) {
  g_ex = (exconf_t){WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1.0f, 1, 1, false, false};
  for (int i = 0; i < 3; i++) g_ld[i] = (ldconf_t){0, 1.0f, false, DIM, 1};
  g_st = (stconf_t){0, NO_ACTIVATION, 1.0f};
}

static const char *act_name(uint32_t act) {
  static const char *names[] = {"NO_ACTIVATION", "RELU", "LAYERNORM", "IGELU", "SOFTMAX"};
  return act < 5 ? names[act] : "an unknown activation";
}

static int check_act(uint32_t act) {
  if (act > RELU)
    sim_fail("act=%u (%s) is not modelled: gemmini-sim supports NO_ACTIVATION and RELU", act, act_name(act));
  return (int)act;
}

static float check_scale(float scale) {
  if (!isfinite(scale)) sim_fail("scale is not a finite number");
  return scale;
}

static void replay_config(const rec_t *r) {
  switch (r->id) {
  case Q_EX: {
    if (r->x0 == 0 || r->x0 > 0xFFFF) sim_fail("A_stride=%u is out of range (1..65535)", r->x0);
    if (r->x1 == 0 || r->x1 > 0xFFFF) sim_fail("C_stride=%u is out of range (1..65535)", r->x1);
    g_ex.a_stride = r->x0;
    g_ex.c_stride = r->x1;
    if (!(r->flags & RF_SET_ONLY_STRIDES)) {
      if (r->d[1] != OUTPUT_STATIONARY && r->d[1] != WEIGHT_STATIONARY)
        sim_fail("dataflow=%u (use WEIGHT_STATIONARY or OUTPUT_STATIONARY)", r->d[1]);
      if (r->x2 > 31) sim_fail("sys_shift=%u is out of range (0..31)", r->x2);
      g_ex.dataflow = (int)r->d[1];
      g_ex.act = check_act(r->d[0]);
      g_ex.shift = r->x2;
      g_ex.acc_scale = check_scale(r->scale);
      g_ex.a_t = (r->flags & RF_A_T) != 0;
      g_ex.b_t = (r->flags & RF_B_T) != 0;
    }
    op_config_ex();
    break;
  }
  case Q_LD: {
    if (r->d[0] > 2) sim_fail("id=%u (0 for mvin, 1 for mvin2, 2 for mvin3)", r->d[0]);
    if (r->x2 > 0xFFFF) sim_fail("block stride %u is out of range (0..65535)", r->x2);
    if (r->d[1] > 1) sim_fail("pixel_repeats=%u is not modelled (only 1)", r->d[1]);
    g_ld[r->d[0]] = (ldconf_t){r->stride, check_scale(r->scale), (r->flags & RF_SHRUNK) != 0, r->x2, 1};
    op_config(Q_LD, 0);
    break;
  }
  case Q_ST:
    if (r->d[1] || r->d[2] || r->d[3])
      sim_fail("max-pooling on mvout (pool_stride/pool_size and the pooling dimensions) is not modelled");
    g_st = (stconf_t){r->stride, check_act(r->d[0]), check_scale(r->scale)};
    op_config(Q_ST, 0);
    break;
  default:
    sim_fail("gemmini_config_norm (LayerNorm, Softmax and I-GELU statistics) is not modelled");
  }
}

/* ---- what the loop FSMs issue (fsm.c runs here, from the recorded loop arguments) ---- */
static const char *fsm_names[3] = {"", "gemmini_loop_ws", "gemmini_loop_conv_ws"};

void fsm_config_ld(int which, int id, const ldconf_t *ld) {
  op_begin("config_ld", which);
  g_ld[id] = *ld;   /* stays after the loop, as on the hardware */
  op_config(Q_LD, which);
}

void fsm_mvin(int which, int id, uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows) {
  static const char *names[3] = {"mvin", "mvin2", "mvin3"};
  op_begin(names[id], which);
  replay_mvin(dram, local, cols, rows, &g_ld[id], which, NULL, 0);
}

void fsm_mvout(int which, uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows) {
  op_begin("mvout", which);
  replay_mvout(dram, local, cols, rows, &g_st, which);
}

void fsm_preload(int which, uint32_t b, uint32_t c, uint32_t bc, uint32_t br, uint32_t cc, uint32_t cr) {
  op_begin("preload", which);
  op_preload(&g_ex, b, c, bc, br, cc, cr, which);
}

void fsm_compute(int which, bool accumulated, uint32_t a, uint32_t d, uint32_t ac, uint32_t ar, uint32_t dc,
                 uint32_t dr) {
  op_begin(accumulated ? "compute_accumulated" : "compute_preloaded", which);
  op_compute(&g_ex, accumulated, a, d, ac, ar, dc, dr, which);
}

void fsm_sync(int queue, int after_queue) {
  if (g_timing_on) timing_fsm_sync(queue, after_queue);
}

static void read_payload(void *dst, size_t n) {
  rec_t head;
  if (!stream_next(&head, STREAM_INSTR) || head.op != R_DATA || head.d[0] != n)
    sim_fail("malformed trace (loop arguments)");
  uint8_t buf[((sizeof(loop_ws_args_t) > sizeof(loop_conv_args_t) ? sizeof(loop_ws_args_t)
                : sizeof(loop_conv_args_t)) / sizeof(rec_t) + 1) * sizeof(rec_t)];
  for (size_t off = 0; off < n; off += sizeof(rec_t))
    if (!stream_next((rec_t *)(buf + off), STREAM_LOOP_ARGS)) sim_fail("malformed trace (loop arguments)");
  memcpy(dst, buf, n);
}

/* Every field of a record the kernel process sent is checked before anything uses it: the kernel
 * can write any bytes into the trace pipe. Sizes (rows, cols) are checked by the functional model,
 * configuration fields when the configuration is applied. */
static void check_record(const rec_t *r) {
  static const uint8_t flags_allowed[R_LAST + 1] = {
    [R_CONFIG] = RF_A_T | RF_B_T | RF_OS | RF_SET_ONLY_STRIDES | RF_SHRUNK, [R_MVIN] = RF_DATA,
    [R_COMPUTE] = RF_ACCUMULATED};
  if (r->op < R_CONFIG || r->op > R_LAST || r->op == R_SET || r->op == R_BUF || r->op == R_END || r->op == R_DATA)
    sim_fail("malformed trace record (op %d)", r->op);
  if (r->flags & ~flags_allowed[r->op]) sim_fail("malformed trace record (flags 0x%x)", r->flags);
  if (r->fsm) {
    char msg[200];
    snprintf(msg, sizeof msg, "instruction #%llu: malformed trace: only the replayer's loop FSM issues loop "
             "instructions", (unsigned long long)instr_number());
    harness_fail(msg);
  }
  if (r->op == R_CONFIG && r->id > Q_NORM) sim_fail("malformed trace record (config kind %d)", r->id);
  if (r->op == R_MVIN && r->id > 2) sim_fail("malformed trace record (mvin load state %d)", r->id);
  if (r->op == R_LOOP && r->id != 1 && r->id != 2) sim_fail("malformed trace (loop kind %d)", r->id);
  if (r->op == R_COUNTER && r->id > 1) sim_fail("malformed trace record (counter access %d)", r->id);
  if (r->op == R_CPU && r->d[0] > MAX_CPU_WORK) sim_fail("malformed trace record (CPU work %u)", r->d[0]);
  if (r->op == R_CPUOP && r->id > CPUOP_NEGATE) sim_fail("malformed trace record (CPU helper %d)", r->id);
}

/* The name an instruction gets in messages, from fields used only if they are in range. */
static const char *record_name(const rec_t *r) {
  static const char *mvins[3] = {"mvin", "mvin2", "mvin3"};
  static const char *configs[] = {"config_ld", "config_ex", "config_st", "config_norm"};
  switch (r->op) {
  case R_CONFIG: return r->id <= Q_NORM ? configs[r->id] : "config";
  case R_MVIN: return r->id < 3 ? mvins[r->id] : "mvin";
  case R_MVOUT: return "mvout";
  case R_PRELOAD: return "preload";
  case R_COMPUTE: return r->flags & RF_ACCUMULATED ? "compute_accumulated" : "compute_preloaded";
  case R_FENCE: return "fence";
  case R_FLUSH: return "flush";
  case R_COUNTER: return r->id ? "read_cycles" : "counter";
  case R_LOOP: return r->id == 1 || r->id == 2 ? fsm_names[r->id] : "loop call";
  default: return "malformed record";
  }
}

static void replay_instruction(const rec_t *r) {
  if (r->op == R_CPU) {   /* not an instruction: the CPU's scalar work before the next one (it only adds time) */
    check_record(r);
    if (g_timing_on) timing_cpu_work(r->d[0]);
    return;
  }
  if (r->op == R_CPUOP) {   /* a harness helper on the CPU (cpuops.c): not a Gemmini instruction */
    check_record(r);
    diag_context(r->id == CPUOP_ADD ? "add_matrix" : "negate_matrix");
    cpuop_args_t a;
    read_payload(&a, sizeof a);
    replay_cpuop(r->id, &a);
    return;
  }
  if (r->op == R_COUNTER && r->id == 1) diag_context("read_cycles");   /* a CPU instruction, not Gemmini's */
  else op_begin(record_name(r), 0);
  check_record(r);
  switch (r->op) {
  case R_CONFIG: replay_config(r); break;
  case R_MVIN: {
    uint8_t shipped[MAX_MVIN_BYTES + sizeof(rec_t)];
    size_t nshipped = 0;
    if (r->flags & RF_DATA) {
      rec_t head;
      if (!stream_next(&head, STREAM_INSTR) || head.op != R_DATA || head.d[0] > MAX_MVIN_BYTES)
        sim_fail("malformed trace (mvin data)");
      nshipped = head.d[0];
      for (size_t off = 0; off < nshipped; off += sizeof(rec_t))
        if (!stream_next((rec_t *)(shipped + off), STREAM_DATA)) sim_fail("malformed trace (mvin data)");
    }
    replay_mvin(r->dram, r->x0, r->d[0], r->d[1], &g_ld[r->id], 0, shipped, nshipped);
    break;
  }
  case R_MVOUT: replay_mvout(r->dram, r->x0, r->d[0], r->d[1], &g_st, 0); break;
  case R_PRELOAD: op_preload(&g_ex, r->x0, r->x1, r->d[0], r->d[1], r->d[2], r->d[3], 0); break;
  case R_COMPUTE: op_compute(&g_ex, r->flags & RF_ACCUMULATED, r->x0, r->x1, r->d[0], r->d[1], r->d[2], r->d[3], 0); break;
  case R_FENCE: op_fence(); dram_fence(); break;
  case R_FLUSH: op_flush(); break;
  case R_COUNTER: answer_counter(r->id, r->stride); break;
  case R_LOOP:
    if (r->id == 1) {
      loop_ws_args_t a;
      read_payload(&a, sizeof a);
      fsm_loop_ws(&a);
    } else {
      loop_conv_args_t a;
      read_payload(&a, sizeof a);
      fsm_loop_conv(&a);
    }
    break;
  }
}

/* Writes everything or fails with `why`. */
static void write_all(int fd, const void *p, size_t n, const char *why) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) harness_fail(why);
    c += w; n -= (size_t)w;
  }
}

/* The first input set's statistics, as "key value" lines (hw_runners/gemmini_sim/feedback.py reads them). */
static void write_stats(void) {
  char b[6144];
  const simstats_t *s = &g_stats;
  static const char *qn[NQ] = {"ld", "ex", "st"};
  static const char *wn[NWAIT] = {"ld", "ex", "st", "dma", "port"};
  static const char *kn[NKIND] = {"config", "mvin", "mvout", "preload", "compute", "flush"};
  const struct { const char *name; int64_t value; } scalars[] = {
    {"cycles", s->cycles}, {"cpu_busy", s->cpu_busy}, {"cpu_work", s->cpu_work}, {"fence_wait", s->fence_wait}, {"loop_wait", s->loop_wait},
    {"fsm_instrs", s->fsm_instrs}, {"instrs", s->instrs}, {"bytes_rd", s->bytes_rd}, {"bytes_wr", s->bytes_wr},
    {"macs", s->macs}, {"bank_conflicts", s->bank_conflicts}, {"bank_wait_cycles", s->bank_wait_cycles},
    {"port_wait_cycles", s->port_wait_cycles}, {"unfused_preloads", s->unfused_preloads},
    {"rd_requests", s->requests[0]}, {"wr_requests", s->requests[1]}, {"dma_rd_busy", s->dma_busy[0]},
    {"dma_wr_busy", s->dma_busy[1]}, {"loop_active_cycles", s->loop_active_cycles},
    {"spad_rows_used", s->spad_rows_used}, {"acc_rows_used", s->acc_rows_used}};
  int n = 0;
  for (size_t i = 0; i < sizeof scalars / sizeof *scalars; i++)
    n += snprintf(b + n, sizeof b - n, "%s %lld\n", scalars[i].name, (long long)scalars[i].value);
  for (int q = 0; q < NQ; q++) {
    n += snprintf(b + n, sizeof b - n, "busy_%s %lld\ncpu_stall_%s %lld\n", qn[q], (long long)s->busy[q], qn[q],
                  (long long)s->cpu_stall_full[q]);
    for (int w = 0; w < NWAIT; w++)
      n += snprintf(b + n, sizeof b - n, "wait_%s_%s %lld\n", qn[q], wn[w], (long long)s->wait[q][w]);
  }
  for (int k = 0; k < NKIND; k++) n += snprintf(b + n, sizeof b - n, "count_%s %lld\n", kn[k], (long long)s->count[k]);
  diag_put(b);
  sim_write_warnings(b, sizeof b);
  diag_put(b);
}

static void check_set(const job_t *job, int set) {
  char msg[400], which[48] = "";
  size_t first = 0;
  int64_t bad;
  if (set >= job->sets) snprintf(which, sizeof which, " of hidden input set %d", set - job->sets + 1);
  else if (job->sets > 1) snprintf(which, sizeof which, " of input set %d", set + 1);
  if (g_stats.macs < job->macs_required) {
    snprintf(msg, sizeof msg, "the kernel issued %lld multiply-accumulates on the systolic array, fewer than the "
             "%lld the problem needs: results must be computed by Gemmini, not by the CPU",
             (long long)g_stats.macs, job->macs_required);
    harness_fail(msg);
  }
  if ((bad = sim_output_unwritten(&first))) {
    snprintf(msg, sizeof msg, "%lld of %zu output bytes%s were never written by mvout (first at byte offset %zu)",
             (long long)bad, job->bytes[job->out_arg], which, first);
    harness_fail(msg);
  }
}

#define KERNEL_STOPPED "the trace ended early: the kernel process stopped"

/* The start of a public set in the trace: the kernel's array table, which must not move between sets. */
static void read_array_table(const job_t *job, int set, uint64_t *bases) {
  rec_t r;
  if (!stream_next(&r, STREAM_RAW)) harness_fail(KERNEL_STOPPED);
  if (r.op != R_SET || r.id != set) harness_fail("malformed trace: expected the start of an input set");
  for (int i = 0; i < job->nargs; i++) {
    if (!stream_next(&r, STREAM_RAW) || r.op != R_BUF || r.id != i || r.stride != job->bytes[i] ||
        (set > 0 && r.dram != bases[i]))
      harness_fail("malformed trace: bad array table");
    bases[i] = r.dram;
  }
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);   /* a kernel process that died shows as EPIPE on fd 9 */
  job_t job;
  job_read_header(FD_JOB, &job);
  void *bufs[MAX_ARGS];
  uint64_t bases[MAX_ARGS] = {0};
  for (int i = 0; i < job.nargs; i++)
    if (!(bufs[i] = aligned_alloc(64, (job.bytes[i] + 63) / 64 * 64))) harness_fail("out of memory for inputs");
  sim_alloc();
  if (job.trace) timing_trace_to(FD_TIMING);
  write_all(FD_KERNEL_IN, job.text, job.text_len, KERNEL_STOPPED);
  for (int set = 0; set < job.sets + job.hidden; set++) {
    int hidden = set >= job.sets;
    for (int i = 0; i < job.nargs; i++) {
      if (!job.is_input[i]) {
        memset(bufs[i], 0xA5 ^ set, job.bytes[i]);
        continue;
      }
      job_read(FD_JOB, bufs[i], job.bytes[i]);
      if (!hidden) write_all(FD_KERNEL_IN, bufs[i], job.bytes[i], KERNEL_STOPPED);
    }
    stream_begin_set(set, hidden);
    counters_begin_set(set, hidden);
    reset_config();
    if (!hidden) read_array_table(&job, set, bases);
    for (int i = 0; i < job.nargs; i++) dram_set_region(i, bases[i], job.bytes[i], bufs[i]);
    dram_begin_set(set, job.nargs);
    sim_reset(0x5eed + set, set == 0);
    fsm_reset();
    sim_register_output(bufs[job.out_arg], job.bytes[job.out_arg]);
    rec_t r;
    for (;;) {
      if (!stream_next(&r, STREAM_INSTR)) harness_fail(KERNEL_STOPPED);
      if (r.op == R_END) break;
      replay_instruction(&r);
    }
    sim_finish();
    if (set == job.sets - 1) close(FD_KERNEL_IN);   /* the kernel process gets nothing more */
    uint64_t changed_constant = dram_changed_constant();
    if (changed_constant) {
      char msg[300];
      snprintf(msg, sizeof msg, "instruction #%llu loads data from the kernel's own memory that changes with the "
               "input values: tensor data must come from the problem's arrays (or from results an mvout wrote); "
               "the CPU may not prepare it", (unsigned long long)changed_constant);
      harness_fail(msg);
    }
    check_set(&job, set);
    write_all(FD_OUT, bufs[job.out_arg], job.bytes[job.out_arg], "cannot write results");
    if (set == 0) write_stats();
  }
  diag_put("ok 1\n");
  return 0;
}
