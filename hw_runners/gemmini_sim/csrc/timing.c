/* Cycle-approximate timing model of Gemmini's decoupled access/execute design.
 *
 * The CPU (or a loop FSM) issues instructions in program order into three
 * in-order queues: load (mvin, config_ld), execute (preload, compute,
 * config_ex) and store (mvout, config_st). Each queue has reservation-station
 * entries; when they are full the issuer stalls. An instruction starts when
 * its queue is free and every conflicting instruction of another queue (same
 * scratchpad/accumulator rows: read-after-write, write-after-read,
 * write-after-write) has completed: Gemmini's reservation station tracks
 * local rows only, never DRAM addresses. The memory paths (DMA, bank ports)
 * are in memtiming.c; every parameter and the RTL fact behind it is in
 * hw_runners/gemmini_sim/timing.py.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sim.h"

void dma_reset(void);
int64_t dma_transfer(int dir, int64_t start, int64_t n, int64_t bytes, int64_t *first_data, int64_t *issued);
void ports_reset(void);
void port_write(int mem, int bank, int64_t from, int64_t to, int64_t rows);
int64_t port_read_delay(int mem, int bank, int64_t from, int64_t len);

typedef struct { int64_t w[NQ], r[NQ]; } rowdep_t;

static rowdep_t *sp_dep, *acc_dep;
static uint8_t *sp_used, *acc_used;
static int64_t *rs_ring[NQ], rs_depth[NQ];
static int rs_head[NQ];
static int64_t cpu_t, unit_free[NQ], busy_until[NQ], makespan, dram_writes_done, ex_results_done;
static int64_t ld_cmds[64];   /* completion of the last mvins: only dma_inflight_cmds may be in flight */
static int ld_cmd_head;
static struct { int kind; int64_t start, occ, issue; int bank_a; } last_ex;
/* loop FSMs: issue clocks per queue, the shared one-command-per-cycle port, the loops in flight */
static int64_t fsm_t[NQ], fsm_sent, loop_start, loops_issued_until, loop_done[8], loop_busy_until;
static int loop_head;
static int trace_fd = -1;
static int64_t trace_left;

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

void timing_trace_to(int fd) { trace_fd = fd; }

/* Rows from a read request to the result landing in the accumulator: the scratchpad read, the mesh's
 * input register, the skew of the inputs, the traversal, the output delay and the accumulator write. */
static int64_t array_latency(void) {
  return 1 + g_cfg.spad_read_delay + 1 + (DIM - 1) + DIM * (g_cfg.tile_latency + 1) + g_cfg.mesh_output_delay +
         g_cfg.acc_latency;
}

void timing_reset(void) {
  if (!sp_dep) {
    sp_dep = malloc(sizeof(rowdep_t) * g_cfg.spad_rows);
    acc_dep = malloc(sizeof(rowdep_t) * g_cfg.acc_rows);
    sp_used = malloc(g_cfg.spad_rows);
    acc_used = malloc(g_cfg.acc_rows);
    rs_depth[Q_LD] = g_cfg.ld_rs; rs_depth[Q_EX] = g_cfg.ex_rs; rs_depth[Q_ST] = g_cfg.st_rs;
    for (int q = 0; q < NQ; q++) rs_ring[q] = malloc(sizeof(int64_t) * rs_depth[q]);
    if (!sp_dep || !acc_dep || !sp_used || !acc_used || !rs_ring[0] || !rs_ring[1] || !rs_ring[2])
      harness_fail("cannot allocate the timing model");
  }
  memset(sp_dep, 0, sizeof(rowdep_t) * g_cfg.spad_rows);
  memset(acc_dep, 0, sizeof(rowdep_t) * g_cfg.acc_rows);
  memset(sp_used, 0, g_cfg.spad_rows);
  memset(acc_used, 0, g_cfg.acc_rows);
  for (int q = 0; q < NQ; q++) {
    memset(rs_ring[q], 0, sizeof(int64_t) * rs_depth[q]);
    rs_head[q] = 0; fsm_t[q] = 0; unit_free[q] = 0; busy_until[q] = 0;
  }
  memset(ld_cmds, 0, sizeof ld_cmds);
  memset(loop_done, 0, sizeof loop_done);
  ld_cmd_head = loop_head = 0;
  cpu_t = makespan = dram_writes_done = ex_results_done = fsm_sent = loop_start = loops_issued_until = loop_busy_until = 0;
  memset(&last_ex, 0, sizeof last_ex);
  last_ex.kind = K_CONFIG;
  last_ex.bank_a = -1;
  trace_left = 200000;
  dma_reset();
  ports_reset();
}

int64_t timing_cpu_now(void) { return max64(cpu_t, makespan); }

/* Busy time of a queue: the union of its instructions' active intervals. */
static void add_busy(int q, int64_t from, int64_t to) {
  from = max64(from, busy_until[q]);
  if (to > from) g_stats.busy[q] += to - from, busy_until[q] = to;
}

/* When the CPU or a loop FSM can hand this instruction to its queue. */
static int64_t issue_time(tinstr_t *t) {
  int q = t->queue;
  int64_t issue;
  if (t->fsm) {   /* each FSM queue issues in order; the FSM sends at most one command per cycle in all */
    issue = max64(fsm_t[q], loop_start + fsm_sent++);
  } else {        /* non-loop commands wait while loops are still issuing (LoopMatmul blocks them) */
    issue = max64(cpu_t, loops_issued_until);
    g_stats.loop_wait += issue - cpu_t;
  }
  int64_t slot = rs_ring[q][rs_head[q]];
  if (slot > issue) {
    if (!t->fsm) g_stats.cpu_stall_full[q] += slot - issue;
    issue = slot;
  }
  if (t->fsm) fsm_t[q] = issue + 1;
  else { cpu_t = issue + g_cfg.cpu_issue_cycles; g_stats.cpu_busy += g_cfg.cpu_issue_cycles; }
  return issue;
}

/* Latest completion of another queue's instruction on the rows this one touches. */
static int64_t row_dependencies(const tinstr_t *t, int *cause) {
  int64_t dep = 0;
  for (int i = 0; i < t->nranges; i++) {
    const range_t *r = &t->r[i];
    rowdep_t *d = (r->mem == MEM_SPAD ? sp_dep : acc_dep) + r->start;
    for (uint32_t k = 0; k < r->count; k++, d++)
      for (int oq = 0; oq < NQ; oq++) {
        if (oq == t->queue) continue;
        int64_t v = r->write ? max64(d->w[oq], d->r[oq]) : d->w[oq];
        if (v > dep) dep = v, *cause = oq;
      }
  }
  return dep;
}

static void note_rows(const tinstr_t *t, int64_t end) {
  for (int i = 0; i < t->nranges; i++) {
    const range_t *r = &t->r[i];
    bool spad = r->mem == MEM_SPAD;
    rowdep_t *d = (spad ? sp_dep : acc_dep) + r->start;
    for (uint32_t k = 0; k < r->count; k++, d++) {
      if (r->write) d->w[t->queue] = max64(d->w[t->queue], end);
      else d->r[t->queue] = max64(d->r[t->queue], end);
    }
    if (r->write) memset((spad ? sp_used : acc_used) + r->start, 1, r->count);
    if (spad) *(r->write ? &g_stats.spad_writes : &g_stats.spad_reads) += r->count;
    else *(r->write ? &g_stats.acc_writes : &g_stats.acc_reads) += r->count;
  }
}

static int first_bank(const tinstr_t *t, int mem, int write) {
  for (int i = 0; i < t->nranges; i++)
    if (t->r[i].mem == mem && t->r[i].write == write)
      return mem == MEM_SPAD ? spad_bank(t->r[i].start) : acc_bank(t->r[i].start);
  return -1;
}

/* ---- per kind: when the work ends, given when it may start ---------------------------------------- */
static int64_t run_mvin(tinstr_t *t, int64_t *start, int64_t *unit_done) {
  int64_t *cmd = &ld_cmds[ld_cmd_head];   /* a DMA command tracker entry */
  *start = max64(*start, *cmd);
  int64_t first, issued, end;
  if (t->zero) {   /* ZeroWriter: one row per cycle, no memory traffic */
    first = *start;
    end = *start + t->local_rows;
    *unit_done = end;
  } else {
    end = dma_transfer(0, *start, t->requests, t->req_bytes, &first, &issued) + g_cfg.mvin_scale_latency;
    *unit_done = issued;
  }
  for (int i = 0; i < t->nranges; i++)   /* rows land in their banks as the data arrives */
    if (t->r[i].mem == MEM_SPAD) port_write(MEM_SPAD, spad_bank(t->r[i].start), first, end, t->r[i].count);
  *cmd = end;
  ld_cmd_head = (int)((ld_cmd_head + 1) % (g_cfg.dma_inflight_cmds < 64 ? g_cfg.dma_inflight_cmds : 64));
  return end;
}

static int64_t run_mvout(tinstr_t *t, int64_t *start) {
  int bank = first_bank(t, MEM_ACC, 0);
  int64_t read = t->local_rows;
  int64_t lost = port_read_delay(MEM_ACC, bank, *start, read);   /* compute writes to the bank win */
  if (lost) g_stats.wait[Q_ST][WAIT_PORT] += lost, g_stats.port_wait_cycles += lost;
  int64_t read_done = *start + lost + read + g_cfg.spad_read_delay + (bank >= 0 ? g_cfg.acc_scale_latency : 0);
  int64_t first, issued;
  int64_t acked = dma_transfer(1, read_done - read, t->requests, t->req_bytes, &first, &issued);
  dram_writes_done = max64(dram_writes_done, acked);
  return max64(read_done, issued);   /* done for the reservation station once its rows are read out */
}

static int64_t rows_cycles(int rows, bool fast) { return fast ? (rows > g_cfg.min_rows ? rows : g_cfg.min_rows) : DIM; }

static int64_t run_execute(tinstr_t *t, int64_t issue, int64_t *start) {
  bool fast = !t->transposed;   /* ExecuteController: fewer than DIM rows only without transposes */
  int64_t occ;
  if (t->kind == K_PRELOAD) {
    /* The array double-buffers weights: a preload shifts its rows in while the previous compute
     * streams A, if it was in the execute queue when that compute started (the controller pairs a
     * compute with the next preload only when it can see them). */
    bool paired = last_ex.kind == K_COMPUTE && issue <= last_ex.start;
    int64_t rows = t->b_garbage ? 1 : t->rows_b;
    if (paired && t->bank_b >= 0 && t->bank_b == last_ex.bank_a)   /* B and the compute's A: one bank */
      occ = rows_cycles((int)rows, fast), g_stats.bank_conflicts++;
    else if (paired) occ = max64(0, rows_cycles((int)rows, fast) - last_ex.occ);
    else occ = t->b_garbage ? 1 : rows_cycles((int)rows, fast), g_stats.unfused_preloads += !t->b_garbage;
  } else {
    fast = fast && t->d_garbage;
    occ = rows_cycles(t->rows_a, fast);
    if (t->rows_d && t->bank_d >= 0 && t->bank_d == t->bank_a) occ += t->rows_d, g_stats.bank_conflicts++;
  }
  int64_t lost = port_read_delay(MEM_SPAD, t->kind == K_PRELOAD ? t->bank_b : t->bank_a, *start, occ);
  if (lost) g_stats.bank_wait_cycles += lost, g_stats.wait[Q_EX][WAIT_PORT] += lost;
  occ += lost;
  int acc = first_bank(t, MEM_ACC, 1);
  if (acc >= 0) port_write(MEM_ACC, acc, *start + array_latency() - g_cfg.acc_latency,
                           *start + occ + array_latency(), t->rows_a);
  last_ex.kind = t->kind;
  last_ex.start = *start;
  last_ex.occ = occ;
  last_ex.bank_a = t->bank_a;
  return *start + occ;
}

void timing_issue(tinstr_t *t) {
  int q = t->queue, cause = -1;
  int64_t issue = issue_time(t);
  int64_t ready = max64(issue, unit_free[q]);
  int64_t dep = row_dependencies(t, &cause), start = max64(ready, dep);
  if (dep <= ready) cause = -1;
  int64_t end, unit_done;
  switch (t->kind) {
  case K_MVIN: {
    int64_t s0 = start;
    end = run_mvin(t, &start, &unit_done);
    if (start > s0) cause = WAIT_DMA;
    g_stats.bytes_rd += t->bytes;
    break;
  }
  case K_MVOUT:
    end = run_mvout(t, &start);
    unit_done = end;
    g_stats.bytes_wr += t->bytes;
    break;
  case K_PRELOAD:
  case K_COMPUTE:
    end = run_execute(t, issue, &start);
    unit_done = end;
    if (t->kind == K_COMPUTE) end += array_latency();   /* results land in the accumulator later */
    else if (!t->b_garbage) end += g_cfg.spad_read_delay + 1;
    ex_results_done = max64(ex_results_done, end);
    break;
  default:   /* configuration: passes its queue; config_ex first waits until no matmul is in flight */
    if (q == Q_EX && ex_results_done > start) {
      g_stats.wait[Q_EX][Q_EX] += ex_results_done - start;
      start = ex_results_done;
    }
    end = unit_done = start + g_cfg.config_cycles;
    if (q == Q_EX) last_ex.kind = K_CONFIG;
  }
  if (start > ready && cause >= 0) g_stats.wait[q][cause] += start - ready;
  add_busy(q, start, unit_done);
  unit_free[q] = unit_done;
  rs_ring[q][rs_head[q]] = end;
  rs_head[q] = (int)((rs_head[q] + 1) % rs_depth[q]);
  note_rows(t, end);
  makespan = max64(makespan, end);
  if (trace_fd >= 0 && trace_left > 0) {
    static const char *kind_name[NKIND] = {"config", "mvin", "mvout", "preload", "compute", "flush"};
    char line[160];
    trace_left--;
    int n = snprintf(line, sizeof line, "%lld %s %s %lld %lld %lld\n", (long long)g_stats.instrs,
                     kind_name[t->kind], t->fsm ? "fsm" : "cpu", (long long)issue, (long long)start, (long long)end);
    if (write(trace_fd, line, n) < 0) trace_fd = -1;
  }
}

void timing_issue_cpu_only(tinstr_t *t) {
  (void)t;
  cpu_t = max64(cpu_t, loops_issued_until) + g_cfg.cpu_issue_cycles;
  g_stats.cpu_busy += g_cfg.cpu_issue_cycles;
}

/* Scalar code the CPU runs before its next instruction (loop control and address arithmetic that a
 * record says it spent, R_CPU): it delays the CPU's issue, never Gemmini's queues. */
void timing_cpu_work(int64_t cycles) {
  cpu_t += cycles;
  g_stats.cpu_busy += cycles;
  g_stats.cpu_work += cycles;
}

/* fence: the CPU waits until every instruction has completed and every DRAM write is acknowledged. */
void timing_fence(void) {
  int64_t t = max64(max64(cpu_t, makespan), max64(dram_writes_done, loops_issued_until));
  g_stats.fence_wait += t - cpu_t;
  cpu_t = t;
  for (int q = 0; q < NQ; q++) fsm_t[q] = max64(fsm_t[q], t);
}

/* The CPU sends a loop's configuration commands; a loop slot takes them once one is free (at most
 * concurrent_loops loops are configured at a time), then the FSM starts issuing. */
void timing_loop_begin(int which) {
  int64_t commands = which == 1 ? g_cfg.loop_ws_commands : g_cfg.loop_conv_commands;
  int64_t slot_free = loop_done[loop_head];
  int64_t issue = max64(cpu_t, slot_free);
  g_stats.loop_wait += issue - cpu_t;
  cpu_t = issue + commands * g_cfg.cpu_issue_cycles;
  g_stats.cpu_busy += commands * g_cfg.cpu_issue_cycles;
  loop_start = cpu_t + g_cfg.fsm_start_cycles;
  for (int q = 0; q < NQ; q++) fsm_t[q] = max64(fsm_t[q], loop_start);
  fsm_sent = 0;
}

void timing_loop_end(void) {
  int slots = (int)(g_cfg.concurrent_loops < 8 ? g_cfg.concurrent_loops : 8);
  int64_t done = max64(fsm_t[0], max64(fsm_t[1], fsm_t[2]));
  int64_t from = max64(loop_start, loop_busy_until);
  if (done > from) g_stats.loop_active_cycles += done - from;
  loop_busy_until = max64(loop_busy_until, done);
  loop_done[loop_head] = done;
  loop_head = (loop_head + 1) % slots;
  loops_issued_until = max64(loops_issued_until, done);
}

void timing_fsm_sync(int queue, int after_queue) { fsm_t[queue] = max64(fsm_t[queue], fsm_t[after_queue]); }

void timing_finish(void) {
  g_stats.cycles = max64(max64(cpu_t, makespan), dram_writes_done);
  int64_t s = 0, a = 0;
  for (int64_t i = 0; i < g_cfg.spad_rows; i++) s += sp_used[i];
  for (int64_t i = 0; i < g_cfg.acc_rows; i++) a += acc_used[i];
  g_stats.spad_rows_used = s;
  g_stats.acc_rows_used = a;
}
