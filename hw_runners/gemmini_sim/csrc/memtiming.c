/* Timing of Gemmini's memory paths (part of the timing model, timing.c):
 * the DMA engines and the local-memory ports. Parameters and the RTL facts
 * behind them: hw_runners/gemmini_sim/timing.py.
 *
 * - DMA (DMA.scala): one memory request per DRAM row (at most dma_max_bytes),
 *   at most one new request per cycle, at most dma_inflight_reqs requests in
 *   flight per direction, data in dma_beat_bytes beats, dma_latency cycles from
 *   request to data (or to write acknowledge). Reads and writes have their own
 *   trackers; a direction moves one beat per cycle.
 * - Scratchpad banks are single-ported for writes against execute reads
 *   (Scratchpad.scala: writes take precedence): rows an mvin lands in a bank
 *   delay execute reads of that bank in the same cycles. Accumulator banks
 *   give compute writes precedence over mvout reads (AccumulatorMem.scala).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "sim.h"

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- DMA --------------------------------------------------------------------------------------- */
#define MAX_INFLIGHT 256
static int64_t inflight[2][MAX_INFLIGHT];   /* completion times of the last requests, per direction */
static int head[2];
static int64_t next_request[2], bus_free[2];

void dma_reset(void) {
  memset(inflight, 0, sizeof inflight);
  memset(head, 0, sizeof head);
  memset(next_request, 0, sizeof next_request);
  memset(bus_free, 0, sizeof bus_free);
}

/* `n` requests of `bytes` each in direction dir (0 read, 1 write), the first no earlier than `start`.
 * Returns when the last one's data is in (read) or acknowledged (write); *first_data is when data
 * starts to arrive (read) or leave (write), *issued when the last request left. */
int64_t dma_transfer(int dir, int64_t start, int64_t n, int64_t bytes, int64_t *first_data, int64_t *issued) {
  int64_t slots = g_cfg.dma_inflight_reqs < MAX_INFLIGHT ? g_cfg.dma_inflight_reqs : MAX_INFLIGHT;
  int64_t beats = (bytes + g_cfg.dma_beat_bytes - 1) / g_cfg.dma_beat_bytes, done = start, t = start;
  *first_data = -1;
  for (int64_t i = 0; i < n; i++) {
    int64_t *slot = &inflight[dir][head[dir]];
    t = max64(max64(t, next_request[dir]), *slot);   /* a free tracker entry, one request per cycle */
    next_request[dir] = t + 1;
    int64_t data;
    if (dir == 0) {   /* read: request out, data back after the latency, beats on the bus */
      data = max64(t + g_cfg.dma_latency, bus_free[0]);
      bus_free[0] = data + beats;
      done = data + beats;
    } else {          /* write: the data beats go out with the request, acknowledged after the latency */
      data = max64(t, bus_free[1]);
      bus_free[1] = data + beats;
      next_request[1] = bus_free[1];   /* the writer takes a new row only when idle */
      done = bus_free[1] + g_cfg.dma_latency;
    }
    if (*first_data < 0) *first_data = data;
    *slot = done;
    head[dir] = (int)((head[dir] + 1) % slots);
    g_stats.dma_busy[dir] += beats;
  }
  g_stats.requests[dir] += n;
  *issued = t + 1;
  return done;
}

/* ---- local-memory ports -------------------------------------------------------------------------
 * Per bank, recent write bursts [from, to) with the rows they write; a read of the bank overlapping a
 * burst loses the cycles the writes take in the overlap. */
#define BURSTS 16
typedef struct { int64_t from, to, rows; } burst_t;
static burst_t *bursts;   /* [bank][BURSTS]: scratchpad banks, then accumulator banks */
static int *next_burst;
static int nbanks;

void ports_reset(void) {
  int n = (int)(g_cfg.spad_banks + g_cfg.acc_banks);
  if (n != nbanks) {
    free(bursts);
    free(next_burst);
    bursts = calloc((size_t)n * BURSTS, sizeof *bursts);
    next_burst = calloc((size_t)n, sizeof *next_burst);
    if (!bursts || !next_burst) harness_fail("cannot allocate the timing model");
    nbanks = n;
  }
  memset(bursts, 0, (size_t)n * BURSTS * sizeof *bursts);
  memset(next_burst, 0, (size_t)n * sizeof *next_burst);
}

static int port(int mem, int bank) { return mem == MEM_SPAD ? bank : (int)g_cfg.spad_banks + bank; }

void port_write(int mem, int bank, int64_t from, int64_t to, int64_t rows) {
  if (bank < 0 || rows <= 0) return;
  int p = port(mem, bank);
  bursts[p * BURSTS + next_burst[p]] = (burst_t){from, max64(to, from + 1), rows};
  next_burst[p] = (next_burst[p] + 1) % BURSTS;
}

/* Cycles a read of `bank` during [from, from + len) waits for writes that take precedence. */
int64_t port_read_delay(int mem, int bank, int64_t from, int64_t len) {
  if (bank < 0) return 0;
  int p = port(mem, bank);
  int64_t to = from + len, lost = 0;
  for (int i = 0; i < BURSTS; i++) {
    const burst_t *b = &bursts[p * BURSTS + i];
    int64_t overlap = min64(to, b->to) - max64(from, b->from);
    if (b->rows && overlap > 0) lost += b->rows * overlap / (b->to - b->from);
  }
  return lost;
}
