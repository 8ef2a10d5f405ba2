/* Gemmini's performance counters and the CPU's cycle counter, answered by the
 * replayer (CounterController.scala's interface: 8 counters, each counting
 * one event chosen by counter_configure; a snapshot freezes what reads
 * return). Values come from the timing model as if every instruction issued
 * before the access had completed, which is what a kernel sees on the
 * hardware after gemmini_fence(). Events of hardware the model does not have
 * (TLB, im2col, normalisation) count 0.
 *
 * The kernel process waits for each answer on its input pipe. The timing
 * model runs for the first input set only; later public sets get the first
 * set's answers in order (their instruction streams are identical), and the
 * hidden sets, which the kernel process never runs, get none. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sim.h"
#include "include/gemmini_counter.h"

#define FD_KERNEL_IN 9

static struct { int event; int64_t base; } counter[NUM_COUNTERS];
static bool snapshot_on;
static int64_t snapshot[NUM_COUNTERS];
static int64_t *answers;
static size_t nanswers, cap_answers, next_answer;
static int mode;   /* 0: compute (first set), 1: repeat the first set's answers, 2: silent (hidden sets) */

static int64_t event_total(int event) {
  const simstats_t *s = &g_stats;
  switch (event) {
  case LOAD_ACTIVE_CYCLE: return s->busy[Q_LD];
  case STORE_ACTIVE_CYCLE: return s->busy[Q_ST];
  case EXE_ACTIVE_CYCLE: return s->busy[Q_EX];
  case LOAD_DMA_WAIT_CYCLE: return s->wait[Q_LD][WAIT_DMA];
  case STORE_DMA_WAIT_CYCLE: return s->wait[Q_ST][WAIT_DMA];
  case SCRATCHPAD_A_WAIT_CYCLE: return s->bank_wait_cycles;
  case RESERVATION_STATION_FULL_CYCLES: return s->cpu_stall_full[Q_LD] + s->cpu_stall_full[Q_EX] + s->cpu_stall_full[Q_ST];
  case LOOP_MATMUL_ACTIVE_CYCLES: return s->loop_active_cycles;
  case RDMA_ACTIVE_CYCLE: return s->dma_busy[0];
  case WDMA_ACTIVE_CYCLE: return s->dma_busy[1];
  case RDMA_READ_REQUESTS: return s->requests[0];
  case WDMA_WRITE_REQUESTS: return s->requests[1];
  case RDMA_BYTES_REC: return s->bytes_rd;
  case WDMA_BYTES_SENT: return s->bytes_wr;
  case SCRATCHPAD_READS: return s->spad_reads;
  case SCRATCHPAD_WRITES: return s->spad_writes;
  case ACCUMULATOR_READS: return s->acc_reads;
  case ACCUMULATOR_WRITES: return s->acc_writes;
  default: return 0;
  }
}

void counters_begin_set(int set, int hidden) {
  mode = hidden ? 2 : set == 0 ? 0 : 1;
  next_answer = 0;
  memset(counter, 0, sizeof counter);
  snapshot_on = false;
}

static int64_t counter_access(uint64_t reg) {
  int index = (int)((reg >> 4) & 7);
  if (reg & 1) {   /* global reset */
    for (int i = 0; i < NUM_COUNTERS; i++) counter[i].base = event_total(counter[i].event);
    return 0;
  }
  if (reg & 2) snapshot_on = false;
  if (reg & 4) {
    for (int i = 0; i < NUM_COUNTERS; i++) snapshot[i] = event_total(counter[i].event) - counter[i].base;
    snapshot_on = true;
  }
  if (reg & 8) {   /* configure: the counter restarts from zero */
    int event = (int)((reg >> 12) & 0x3f) + (reg >> 31 & 1 ? INCREMENTAL_COUNTERS : 0);
    if (event >= NUM_EVENTS) sim_fail("counter event %d does not exist (events are 0..%d)", event, NUM_EVENTS - 1);
    counter[index].event = event;
    counter[index].base = event_total(event);
    return 0;
  }
  if (reg & 6) return 0;
  return snapshot_on ? snapshot[index] : event_total(counter[index].event) - counter[index].base;
}

/* what: 0 = a counter access (configuration register `reg`), 1 = read_cycles() */
void answer_counter(int what, uint64_t reg) {
  int64_t value;
  if (mode == 0) {
    value = what ? timing_cpu_now() : counter_access(reg);
    if (nanswers == cap_answers) {
      cap_answers = cap_answers ? 2 * cap_answers : 64;
      answers = realloc(answers, cap_answers * sizeof *answers);
      if (!answers) harness_fail("out of memory for counter reads");
    }
    answers[nanswers++] = value;
  } else {
    if (next_answer >= nanswers) harness_fail("the kernel read more counters than in input set 1");
    value = answers[next_answer++];
  }
  if (mode == 2) return;
  uint64_t v = (uint64_t)value;
  if (write(FD_KERNEL_IN, &v, sizeof v) != sizeof v) harness_fail("the trace ended early: the kernel process stopped");
}
