/* Cycle-approximate timing model of Gemmini's decoupled access/execute design.
 *
 * The CPU (or a loop FSM) issues instructions in program order into three
 * in-order queues: load (mvin, config_ld), execute (preload, compute,
 * config_ex) and store (mvout, config_st). Each queue has a reservation
 * station of limited depth; when it is full the issuer stalls. An instruction
 * starts when its queue's unit is free and when every conflicting instruction
 * of another queue (same scratchpad/accumulator rows: read-after-write,
 * write-after-read, write-after-write) has completed, as in Gemmini's
 * reservation station. Instructions of one queue never wait on each other's
 * rows: the queue is in order. mvin and mvout use the DMA read and write
 * channels (TileLink carries read data and write data on separate channels).
 * Parameters and the hardware facts behind them: hw_runners/gemmini_sim/timing.py.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sim.h"

void harness_fail(const char *msg) __attribute__((noreturn));

typedef struct { int64_t w[NQ], r[NQ]; } rowdep_t;

static rowdep_t *sp_dep, *acc_dep;
static uint8_t *sp_used, *acc_used;
static int64_t *rs_ring[NQ];
static int64_t rs_depth[NQ];
static int rs_head[NQ];
static int64_t cpu_t, fsm_t[NQ], unit_free[NQ], chan_free[2], makespan;
static int last_ex_kind;
static int64_t last_compute_occ;
static int last_compute_bank;
static int trace_fd = -1;
static int64_t trace_left;

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

void timing_trace_to(int fd) { trace_fd = fd; }

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
    rs_head[q] = 0; fsm_t[q] = 0; unit_free[q] = 0;
  }
  cpu_t = chan_free[0] = chan_free[1] = makespan = 0;
  last_ex_kind = K_CONFIG;
  last_compute_occ = 0;
  last_compute_bank = -1;
  trace_left = 200000;
}

/* Cycles a DMA transfer of `beats` bus beats occupies its channel: one beat
 * per cycle unless the in-flight limit cannot cover the memory latency. */
static int64_t dma_occupancy(int64_t beats) {
  int64_t need = g_cfg.dma_beat_bytes * g_cfg.dma_latency; /* bytes in flight for full rate */
  if (need <= g_cfg.dma_inflight_bytes) return beats;
  return (beats * need + g_cfg.dma_inflight_bytes - 1) / g_cfg.dma_inflight_bytes;
}

static const char *kind_name[NKIND] = {"config", "mvin", "mvout", "preload", "compute"};

void timing_issue(tinstr_t *t) {
  int q = t->queue;
  int64_t issue = t->fsm ? fsm_t[q] : cpu_t;
  int64_t slot = rs_ring[q][rs_head[q]];
  if (slot > issue) {
    if (!t->fsm) g_stats.cpu_stall_full[q] += slot - issue;
    issue = slot;
  }
  if (t->fsm) fsm_t[q] = issue + g_cfg.fsm_issue_cycles;
  else { cpu_t = issue + g_cfg.cpu_issue_cycles; g_stats.cpu_busy += g_cfg.cpu_issue_cycles; }

  int64_t ready = max64(issue, unit_free[q]);
  int64_t dep = 0;
  int cause = -1;
  for (int i = 0; i < t->nranges; i++) {
    const range_t *r = &t->r[i];
    rowdep_t *d = (r->mem == MEM_SPAD ? sp_dep : acc_dep) + r->start;
    for (uint32_t k = 0; k < r->count; k++, d++)
      for (int oq = 0; oq < NQ; oq++) {
        if (oq == q) continue;
        int64_t v = r->write ? max64(d->w[oq], d->r[oq]) : d->w[oq];
        if (v > dep) dep = v, cause = oq;
      }
  }
  int64_t start = max64(ready, dep);
  if (dep <= ready) cause = -1;

  int64_t occ = 0, lat = 0;
  switch (t->kind) {
  case K_CONFIG:
    occ = g_cfg.config_cycles;
    break;
  case K_MVIN:
  case K_MVOUT: {
    int ch = t->kind == K_MVIN ? 0 : 1;
    occ = dma_occupancy(t->beats);
    if (chan_free[ch] > start) start = chan_free[ch], cause = WAIT_DMA;
    chan_free[ch] = start + occ;
    lat = g_cfg.dma_latency;
    if (ch == 0) g_stats.bytes_rd += t->bytes; else g_stats.bytes_wr += t->bytes;
    break;
  }
  case K_PRELOAD: {
    /* The array double-buffers weights: a preload right after a compute shifts
     * its rows in while that compute streams A, unless both read one bank. */
    bool fused = last_ex_kind == K_COMPUTE;
    if (t->b_garbage) occ = fused ? 0 : 1;
    else if (!fused) occ = g_cfg.unfused_preload_cycles, g_stats.unfused_preloads++;
    else if (t->bank_b == last_compute_bank) occ = t->rows_b, g_stats.bank_conflicts++;
    else occ = max64(0, t->rows_b - last_compute_occ);
    break;
  }
  case K_COMPUTE:
    occ = max64(t->rows_a, g_cfg.min_compute_cycles);
    if (t->rows_d && t->bank_d == t->bank_a) occ += t->rows_d, g_stats.bank_conflicts++;
    lat = g_cfg.array_latency;
    last_compute_occ = occ;
    last_compute_bank = t->bank_a;
    break;
  }
  if (q == Q_EX) last_ex_kind = t->kind;
  if (start > ready && cause >= 0) g_stats.wait[q][cause] += start - ready;

  int64_t end = start + occ + lat;
  unit_free[q] = start + occ;
  g_stats.busy[q] += occ;
  rs_ring[q][rs_head[q]] = end;
  rs_head[q] = (int)((rs_head[q] + 1) % rs_depth[q]);
  for (int i = 0; i < t->nranges; i++) {
    const range_t *r = &t->r[i];
    bool spad = r->mem == MEM_SPAD;
    rowdep_t *d = (spad ? sp_dep : acc_dep) + r->start;
    for (uint32_t k = 0; k < r->count; k++, d++) {
      if (r->write) d->w[q] = max64(d->w[q], end);
      else d->r[q] = max64(d->r[q], end);
    }
    if (r->write) memset((spad ? sp_used : acc_used) + r->start, 1, r->count);
  }
  makespan = max64(makespan, end);

  if (trace_fd >= 0 && trace_left > 0) {
    trace_left--;
    char line[160];
    int n = snprintf(line, sizeof line, "%lld %s %s %lld %lld %lld\n",
                     (long long)g_stats.instrs, kind_name[t->kind], t->fsm ? "fsm" : "cpu",
                     (long long)issue, (long long)start, (long long)end);
    if (write(trace_fd, line, n) < 0) trace_fd = -1;
  }
}

void timing_fence(void) {
  int64_t t = max64(cpu_t, makespan);
  g_stats.fence_wait += t - cpu_t;
  cpu_t = t;
  for (int q = 0; q < NQ; q++) fsm_t[q] = max64(fsm_t[q], t);
}

/* The CPU hands a loop to the FSM with a few RoCC configuration commands;
 * the FSM then issues into every queue on its own. */
void timing_loop_call(void) {
  cpu_t += g_cfg.loop_issue_instrs * g_cfg.cpu_issue_cycles;
  g_stats.cpu_busy += g_cfg.loop_issue_instrs * g_cfg.cpu_issue_cycles;
  for (int q = 0; q < NQ; q++) fsm_t[q] = max64(fsm_t[q], cpu_t);
}

void timing_finish(void) {
  g_stats.cycles = max64(cpu_t, makespan);
  int64_t s = 0, a = 0;
  for (int64_t i = 0; i < g_cfg.spad_rows; i++) s += sp_used[i];
  for (int64_t i = 0; i < g_cfg.acc_rows; i++) a += acc_used[i];
  g_stats.spad_rows_used = s;
  g_stats.acc_rows_used = a;
}
