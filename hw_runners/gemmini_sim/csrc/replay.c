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

void op_config_ex(void);

/* Bytes a row of this move touches in DRAM, or 0 when the dimensions are invalid (the model reports it). */
static uint64_t row_bytes(uint32_t local, uint32_t cols, int mvout) {
  int acc = local != GARBAGE_ADDR && (local >> 31);
  if (cols == 0 || cols > DIM * MAX_BLOCK_LEN) return 0;
  return (uint64_t)cols * (acc && (!mvout || (local >> 29 & 1)) ? 4 : 1);
}

/* An mvin of the replayer's view of DRAM: a problem array, zeros, or memory outside the arrays, where
 * bytes an earlier mvout wrote come from here and the others from the kernel's copy (shipped). */
static void replay_mvin(const rec_t *r) {
  uint32_t cols = r->d[0], rows = r->d[1];
  uint64_t rb = row_bytes(r->x0, cols, 0);
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
  if (!r->dram || !rb || rows == 0 || rows > DIM) {   /* zeros, or invalid dims reported by the model */
    op_mvin(NULL, r->x0, cols, rows, r->stride, r->scale, r->x2, r->fsm);
    return;
  }
  if (r->stride > (1ull << 40)) sim_fail("DRAM stride %llu is implausible", (unsigned long long)r->stride);
  for (uint32_t i = 0; i < rows; i++) dram_check_unfenced(r->dram + i * r->stride, rb);
  uint8_t *p = dram_in_region(r->dram, (rows - 1) * r->stride + rb);
  if (p) {
    op_mvin(p, r->x0, cols, rows, r->stride, r->scale, r->x2, r->fsm);
    return;
  }
  uint8_t tmp[MAX_MVIN_BYTES], kernel_bytes[MAX_MVIN_BYTES];
  size_t n = rows * rb, from_kernel = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t addr = r->dram + (i / rb) * r->stride + i % rb;
    kernel_bytes[i] = 0;
    if (dram_mvout_byte(addr, &tmp[i])) continue;
    if (nshipped != n)
      sim_fail("reads DRAM at 0x%llx that is neither a problem array nor data written by an earlier mvout",
               (unsigned long long)addr);
    tmp[i] = kernel_bytes[i] = shipped[i];
    from_kernel++;
  }
  if (from_kernel) dram_check_constant(instr_number(), kernel_bytes, n);
  op_mvin(tmp, r->x0, cols, rows, rb, r->scale, r->x2, r->fsm);
}

static void replay_mvout(const rec_t *r) {
  uint32_t cols = r->d[0], rows = r->d[1];
  uint64_t rb = row_bytes(r->x0, cols, 1);
  int act = r->flags & RF_RELU ? RELU : NO_ACTIVATION;
  if (!r->dram || !rb || rows == 0 || rows > DIM || cols > DIM) {
    op_mvout(r->dram ? (void *)1 : NULL, r->x0, cols, rows, r->stride, act, r->fsm);  /* reports the error */
    return;
  }
  if (r->stride > (1ull << 40)) sim_fail("DRAM stride %llu is implausible", (unsigned long long)r->stride);
  uint8_t *p = dram_in_region(r->dram, (rows - 1) * r->stride + rb);
  if (p) {
    op_mvout(p, r->x0, cols, rows, r->stride, act, r->fsm);
  } else {
    uint8_t tmp[DIM * DIM * 4];
    op_mvout(tmp, r->x0, cols, rows, rb, act, r->fsm);
    for (uint32_t i = 0; i < rows; i++) dram_write(r->dram + i * r->stride, tmp + i * rb, rb);
  }
  for (uint32_t i = 0; i < rows; i++) dram_note_mvout(r->dram + i * r->stride, rb, instr_number(), r->fsm);
}

static exconf_t exconf_of(const rec_t *r) {
  return (exconf_t){r->flags & RF_OS ? OUTPUT_STATIONARY : WEIGHT_STATIONARY, r->flags & RF_RELU ? RELU : NO_ACTIVATION,
                    r->x2, (r->flags & RF_A_T) != 0, (r->flags & RF_B_T) != 0};
}

/* ---- what the loop FSM issues (fsm.c runs here, from the recorded loop arguments) ---- */
static const char *fsm_names[3] = {"", "gemmini_loop_ws", "gemmini_loop_conv_ws"};

void fsm_mvin(int which, uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows, uint64_t stride,
              uint32_t block_stride) {
  op_begin("mvin", which);
  replay_mvin(&(rec_t){.op = R_MVIN, .fsm = (uint8_t)which, .d = {cols, rows}, .x0 = local, .x2 = block_stride,
                       .scale = 1.0f, .dram = dram, .stride = stride});
}

void fsm_mvout(int which, uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows, uint64_t stride, int act) {
  op_begin("mvout", which);
  replay_mvout(&(rec_t){.op = R_MVOUT, .fsm = (uint8_t)which, .flags = act == RELU ? RF_RELU : 0,
                        .d = {cols, rows}, .x0 = local, .dram = dram, .stride = stride});
}

void fsm_preload(int which, const exconf_t *ex, uint32_t b, uint32_t c, uint32_t bc, uint32_t br, uint32_t cc,
                 uint32_t cr) {
  op_begin("preload", which);
  op_preload(ex, b, c, bc, br, cc, cr, which);
}

void fsm_compute(int which, const exconf_t *ex, uint32_t a, uint32_t ac, uint32_t ar) {
  op_begin("compute_preloaded", which);
  op_compute(ex, false, a, GARBAGE_ADDR, ac, ar, DIM, DIM, which);
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
 * can write any bytes into the trace pipe. Sizes (rows, cols) are checked by the functional model. */
static void check_record(const rec_t *r) {
  static const uint8_t flags_allowed[] = {
    [R_CONFIG] = RF_A_T | RF_B_T | RF_OS | RF_RELU, [R_MVIN] = RF_DATA, [R_MVOUT] = RF_RELU,
    [R_PRELOAD] = RF_A_T | RF_B_T | RF_OS | RF_RELU, [R_COMPUTE] = RF_ACCUMULATED | RF_A_T | RF_B_T | RF_OS | RF_RELU,
    [R_FENCE] = 0, [R_LOOP] = 0};
  if (r->op < R_CONFIG || r->op > R_LOOP) sim_fail("malformed trace record (op %d)", r->op);
  if (r->flags & ~flags_allowed[r->op]) sim_fail("malformed trace record (flags 0x%x)", r->flags);
  if (r->fsm) {
    char msg[200];
    snprintf(msg, sizeof msg, "instruction #%llu: malformed trace: only the replayer's loop FSM issues loop "
             "instructions", (unsigned long long)instr_number() + 1);
    harness_fail(msg);
  }
  switch (r->op) {
  case R_CONFIG: if (r->id >= NQ) sim_fail("malformed trace record (config queue %d)", r->id); break;
  case R_MVIN:
    if (r->id > 2) sim_fail("malformed trace record (mvin load state %d)", r->id);
    if (!isfinite(r->scale)) sim_fail("scale is not a finite number");
    if (r->x2 >= (uint64_t)g_cfg.spad_rows) sim_fail("block stride %u is out of range (0..%lld)", r->x2,
                                                     (long long)g_cfg.spad_rows - 1);
    break;
  case R_PRELOAD:
  case R_COMPUTE:
    if (r->x2 == 0 || r->x2 >= (uint64_t)g_cfg.spad_rows)
      sim_fail("A_stride=%u is out of range (1..%lld)", r->x2, (long long)g_cfg.spad_rows - 1);
    break;
  case R_LOOP: if (r->id != 1 && r->id != 2) sim_fail("malformed trace (loop kind %d)", r->id); break;
  }
}

/* The name an instruction gets in messages, from fields used only if they are in range. */
static const char *record_name(const rec_t *r) {
  static const char *mvins[3] = {"mvin", "mvin2", "mvin3"};
  static const char *configs[NQ] = {"config_ld", "config_ex", "config_st"};
  switch (r->op) {
  case R_CONFIG: return r->id < NQ ? configs[r->id] : "config";
  case R_MVIN: return r->id < 3 ? mvins[r->id] : "mvin";
  case R_MVOUT: return "mvout";
  case R_PRELOAD: return "preload";
  case R_COMPUTE: return r->flags & RF_ACCUMULATED ? "compute_accumulated" : "compute_preloaded";
  case R_FENCE: return "fence";
  case R_LOOP: return r->id == 1 || r->id == 2 ? fsm_names[r->id] : "loop call";
  default: return "malformed record";
  }
}

static void replay_instruction(const rec_t *r) {
  op_begin(record_name(r), 0);
  check_record(r);
  exconf_t ex = exconf_of(r);
  switch (r->op) {
  case R_CONFIG:
    if (r->id == Q_EX) op_config_ex(); else op_config(r->id);
    break;
  case R_MVIN: replay_mvin(r); break;
  case R_MVOUT: replay_mvout(r); break;
  case R_PRELOAD: op_preload(&ex, r->x0, r->x1, r->d[0], r->d[1], r->d[2], r->d[3], 0); break;
  case R_COMPUTE:
    op_compute(&ex, r->flags & RF_ACCUMULATED, r->x0, r->x1, r->d[0], r->d[1], r->d[2], r->d[3], 0);
    break;
  case R_FENCE: op_fence(); dram_fence(); break;
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

static void write_stats(void) {
  char b[4096];
  const simstats_t *s = &g_stats;
  static const char *qn[NQ] = {"ld", "ex", "st"};
  static const char *wn[NWAIT] = {"ld", "ex", "st", "dma"};
  static const char *kn[NKIND] = {"config", "mvin", "mvout", "preload", "compute"};
  int n = snprintf(b, sizeof b,
                   "cycles %lld\ncpu_busy %lld\nfence_wait %lld\nfsm_instrs %lld\ninstrs %lld\nbytes_rd %lld\n"
                   "bytes_wr %lld\nmacs %lld\nbank_conflicts %lld\nunfused_preloads %lld\nspad_rows_used %lld\n"
                   "acc_rows_used %lld\n",
                   (long long)s->cycles, (long long)s->cpu_busy, (long long)s->fence_wait, (long long)s->fsm_instrs,
                   (long long)s->instrs, (long long)s->bytes_rd, (long long)s->bytes_wr, (long long)s->macs,
                   (long long)s->bank_conflicts, (long long)s->unfused_preloads, (long long)s->spad_rows_used,
                   (long long)s->acc_rows_used);
  for (int q = 0; q < NQ; q++) {
    n += snprintf(b + n, sizeof b - n, "busy_%s %lld\ncpu_stall_%s %lld\n", qn[q], (long long)s->busy[q], qn[q],
                  (long long)s->cpu_stall_full[q]);
    for (int w = 0; w < NWAIT; w++)
      n += snprintf(b + n, sizeof b - n, "wait_%s_%s %lld\n", qn[q], wn[w], (long long)s->wait[q][w]);
  }
  for (int k = 0; k < NKIND; k++) n += snprintf(b + n, sizeof b - n, "count_%s %lld\n", kn[k], (long long)s->count[k]);
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
    if (set == job.sets - 1) close(FD_KERNEL_IN);   /* the kernel process gets nothing more */
    stream_begin_set(set, hidden);
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
