/* Trusted replayer of gemmini-sim: executes the instruction trace recorded by
 * the kernel process on its own copy of the inputs, with the functional and
 * timing models, and reports the outputs and the cycles that count.
 *
 * fd 3: job (same file the kernel process read)   fd 7: trace (pipe from the kernel process)
 * fd 4: raw output arrays of every set              fd 5: stats ("key value" lines)
 * fd 8: optional human-readable timing trace
 *
 * DRAM addresses in the trace are the kernel process's pointers. Those inside
 * a problem array map onto the replayer's copy; NULL means zeros; anything
 * else must be memory an earlier mvout wrote (kept in a sparse map here), so
 * results computed by CPU code cannot be smuggled in through mvin.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sim.h"
#include "include/gemmini.h"

#define FD_JOB 3
#define FD_OUT 4
#define FD_STATS 5
#define FD_TRACE_IN 7
#define FD_TIMING 8

void op_config_ex(void);

/* ---- trace input ------------------------------------------------------------- */
static rec_t tbuf[4096];
static size_t tpos, tlen;

static int next_record(rec_t *r) {
  if (tpos == tlen) {
    size_t got = 0;
    char *p = (char *)tbuf;
    while (got < sizeof(rec_t)) {   /* at least one whole record, then whatever else is there */
      ssize_t n = read(FD_TRACE_IN, p + got, sizeof tbuf - got);
      if (n <= 0) {
        if (got == 0) return 0;
        harness_fail("the trace ends in the middle of a record");
      }
      got += (size_t)n;
    }
    while (got % sizeof(rec_t)) {
      ssize_t n = read(FD_TRACE_IN, p + got, sizeof(rec_t) - got % sizeof(rec_t));
      if (n <= 0) harness_fail("the trace ends in the middle of a record");
      got += (size_t)n;
    }
    tpos = 0;
    tlen = got / sizeof(rec_t);
  }
  *r = tbuf[tpos++];
  return 1;
}

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
    if (!next_record(&head) || head.op != R_DATA || head.d[0] > MAX_MVIN_BYTES) sim_fail("malformed trace (mvin data)");
    nshipped = head.d[0];
    for (size_t off = 0; off < nshipped; off += sizeof(rec_t))
      if (!next_record((rec_t *)(shipped + off))) sim_fail("malformed trace (mvin data)");
  }
  if (!r->dram || !rb || rows == 0 || rows > DIM) {   /* zeros, or invalid dims reported by the model */
    op_mvin(NULL, r->x0, cols, rows, r->stride, r->scale, r->x2, r->fsm);
    return;
  }
  if (r->stride > (1ull << 40)) sim_fail("DRAM stride %llu is implausible", (unsigned long long)r->stride);
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
    return;
  }
  uint8_t tmp[DIM * DIM * 4];
  op_mvout(tmp, r->x0, cols, rows, rb, act, r->fsm);
  for (uint32_t i = 0; i < rows; i++) dram_write(r->dram + i * r->stride, tmp + i * rb, rb);
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

/* Every input set must record the same stream (instructions, addresses, loop arguments; mvin data is
 * checked separately): the first set's is kept and later ones are compared byte for byte. */
static uint8_t *first_stream;
static size_t first_len, first_cap, stream_pos;
static int stream_set;
static const char *op_names[] = {"?", "config", "mvin", "mvout", "preload", "compute", "fence", "loop call"};

static void stream_diverged(const void *now, size_t n) {
  char msg[500];
  const char *why = "different instructions or operands";
  if (n == sizeof(rec_t) && stream_pos + n <= first_len) {
    const rec_t *a = (const rec_t *)(first_stream + stream_pos), *b = now;
    if (a->op == b->op && a->dram != b->dram && !dram_in_region(b->dram, 1))
      why = "a DRAM address outside the problem's arrays (memory the kernel allocates must be at the same "
            "address in every call: allocate it statically, or free it before returning)";
    else if (a->op != b->op)
      why = "a different instruction";
  } else if (stream_pos + n > first_len) {
    why = "more instructions";
  }
  snprintf(msg, sizeof msg, "the kernel issued %s for input set %d than for input set 1 (around instruction #%llu, "
           "%s): what it issues must not depend on the input values", why, stream_set + 1,
           (unsigned long long)instr_number() + 1, n == sizeof(rec_t) && ((const rec_t *)now)->op < 8
           ? op_names[((const rec_t *)now)->op] : "loop arguments");
  harness_fail(msg);
}

static void stream_note(const void *p, size_t n) {
  if (stream_set == 0) {
    if (first_len + n > first_cap) {
      first_cap = (first_len + n) * 2;
      first_stream = realloc(first_stream, first_cap);
      if (!first_stream) harness_fail("out of memory for the instruction stream");
    }
    memcpy(first_stream + first_len, p, n);
    first_len += n;
  } else {
    if (stream_pos + n > first_len || memcmp(first_stream + stream_pos, p, n)) stream_diverged(p, n);
    stream_pos += n;
  }
}

static void read_payload(void *dst, size_t n) {
  rec_t head;
  if (!next_record(&head) || head.op != R_DATA || head.d[0] != n) sim_fail("malformed trace (loop arguments)");
  uint8_t buf[((sizeof(loop_ws_args_t) > sizeof(loop_conv_args_t) ? sizeof(loop_ws_args_t)
                : sizeof(loop_conv_args_t)) / sizeof(rec_t) + 1) * sizeof(rec_t)];
  for (size_t off = 0; off < n; off += sizeof(rec_t))
    if (!next_record((rec_t *)(buf + off))) sim_fail("malformed trace (loop arguments)");
  memcpy(dst, buf, n);
  stream_note(dst, n);
}

static void replay_instruction(const rec_t *r) {
  static const char *mvins[3] = {"mvin", "mvin2", "mvin3"};
  static const char *configs[NQ] = {"config_ld", "config_ex", "config_st"};
  exconf_t ex = exconf_of(r);
  if (r->fsm) {
    char msg[200];
    snprintf(msg, sizeof msg, "instruction #%llu: malformed trace: only the replayer's loop FSM issues loop "
             "instructions", (unsigned long long)instr_number() + 1);
    harness_fail(msg);
  }
  switch (r->op) {
  case R_CONFIG:
    if (r->id >= NQ) sim_fail("malformed trace record (config queue %d)", r->id);
    op_begin(configs[r->id], 0);
    if (r->id == Q_EX) op_config_ex(); else op_config(r->id);
    break;
  case R_MVIN: op_begin(mvins[r->id % 3], r->fsm); replay_mvin(r); break;
  case R_MVOUT: op_begin("mvout", r->fsm); replay_mvout(r); break;
  case R_PRELOAD:
    op_begin("preload", r->fsm);
    op_preload(&ex, r->x0, r->x1, r->d[0], r->d[1], r->d[2], r->d[3], r->fsm);
    break;
  case R_COMPUTE:
    op_begin(r->flags & RF_ACCUMULATED ? "compute_accumulated" : "compute_preloaded", r->fsm);
    op_compute(&ex, r->flags & RF_ACCUMULATED, r->x0, r->x1, r->d[0], r->d[1], r->d[2], r->d[3], r->fsm);
    break;
  case R_FENCE: op_begin("fence", 0); op_fence(); break;
  case R_LOOP:
    if (r->id != 1 && r->id != 2) sim_fail("malformed trace (loop kind %d)", r->id);
    op_begin(fsm_names[r->id], 0);
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
  default: sim_fail("malformed trace record (op %d)", r->op);
  }
}

static void write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) harness_fail("cannot write results");
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
  char msg[400];
  size_t first = 0;
  int64_t bad;
  const char *which = job->sets > 1 ? " of input set " : "";
  char setno[16] = "";
  if (job->sets > 1) snprintf(setno, sizeof setno, "%d", set + 1);
  if (g_stats.macs < job->macs_required) {
    snprintf(msg, sizeof msg, "the kernel issued %lld multiply-accumulates on the systolic array, fewer than the "
             "%lld the problem needs: results must be computed by Gemmini, not by the CPU",
             (long long)g_stats.macs, job->macs_required);
    harness_fail(msg);
  }
  if ((bad = sim_output_unwritten(&first))) {
    snprintf(msg, sizeof msg, "%lld of %zu output bytes%s%s were never written by mvout (first at byte offset %zu)",
             (long long)bad, job->bytes[job->out_arg], which, setno, first);
    harness_fail(msg);
  }
}

int main(void) {
  job_t job;
  job_read_header(FD_JOB, &job);
  void *bufs[MAX_ARGS];
  for (int i = 0; i < job.nargs; i++)
    if (!(bufs[i] = aligned_alloc(64, (job.bytes[i] + 63) / 64 * 64))) harness_fail("out of memory for inputs");
  sim_alloc();
  if (job.trace) timing_trace_to(FD_TIMING);
  rec_t r;
  for (int set = 0; set < job.sets; set++) {
    if (!next_record(&r)) harness_fail("the trace ended early: the kernel process stopped");
    if (r.op != R_SET || r.id != set) harness_fail("malformed trace: expected the start of an input set");
    for (int i = 0; i < job.nargs; i++) {
      if (job.is_input[i]) job_read(FD_JOB, bufs[i], job.bytes[i]);
      else memset(bufs[i], 0xA5 ^ set, job.bytes[i]);
      if (!next_record(&r) || r.op != R_BUF || r.id != i || r.stride != job.bytes[i])
        harness_fail("malformed trace: bad array table");
      dram_set_region(i, r.dram, job.bytes[i], bufs[i]);
    }
    dram_begin_set(set, job.nargs);
    sim_reset(0x5eed + set, set == 0);
    fsm_reset();
    sim_register_output(bufs[job.out_arg], job.bytes[job.out_arg]);
    stream_set = set;
    stream_pos = 0;
    for (;;) {
      if (!next_record(&r)) harness_fail("the trace ended early: the kernel process stopped");
      if (r.op == R_END) break;
      stream_note(&r, sizeof r);
      replay_instruction(&r);
    }
    sim_finish();
    if (set > 0 && stream_pos != first_len) {
      char msg[300];
      snprintf(msg, sizeof msg, "the kernel issued fewer instructions for input set %d than for input set 1: "
               "what it issues must not depend on the input values", set + 1);
      harness_fail(msg);
    }
    uint64_t changed_constant = dram_changed_constant();
    if (changed_constant) {
      char msg[300];
      snprintf(msg, sizeof msg, "instruction #%llu loads data from the kernel's own memory that changes with the "
               "input values: tensor data must come from the problem's arrays (or from results an mvout wrote); "
               "the CPU may not prepare it", (unsigned long long)changed_constant);
      harness_fail(msg);
    }
    check_set(&job, set);
    write_all(FD_OUT, bufs[job.out_arg], job.bytes[job.out_arg]);
    if (set == 0) write_stats();
  }
  diag_put("ok 1\n");
  return 0;
}
