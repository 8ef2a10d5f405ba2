/* Internal interface of the gemmini-sim model (not visible to kernels:
 * kernels only see include/gemmini.h). */
#ifndef GEMMINI_SIM_H
#define GEMMINI_SIM_H
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include "include/gemmini_params.h"

/* Timing parameters; names and meaning mirror hw_runners/gemmini_sim/timing.py,
 * which sends them in the job header. */
typedef struct {
  int64_t spad_rows, spad_banks, acc_rows;
  int64_t dma_beat_bytes, dma_latency, dma_inflight_bytes;
  int64_t ld_rs, ex_rs, st_rs;
  int64_t cpu_issue_cycles, config_cycles, unfused_preload_cycles, min_compute_cycles;
  int64_t array_latency, fsm_issue_cycles, loop_issue_instrs, max_instructions;
} simcfg_t;

enum { Q_LD, Q_EX, Q_ST, NQ };
enum { K_CONFIG, K_MVIN, K_MVOUT, K_PRELOAD, K_COMPUTE, NKIND };
enum { MEM_SPAD, MEM_ACC };
/* Why an instruction started later than its queue allowed. */
enum { WAIT_LD, WAIT_EX, WAIT_ST, WAIT_DMA, NWAIT };

typedef struct { uint8_t mem, write; uint32_t start, count; } range_t;

typedef struct {
  int queue, kind, fsm;
  int nranges;
  range_t r[6];
  int64_t beats, bytes;     /* DMA work (mvin/mvout) */
  int rows_a, rows_b, rows_d; /* execute work */
  int bank_a, bank_b, bank_d;
  bool b_garbage;
} tinstr_t;

typedef struct {
  int64_t cycles, cpu_busy, busy[NQ], cpu_stall_full[NQ], fence_wait;
  int64_t wait[NQ][NWAIT];
  int64_t count[NKIND], fsm_instrs, instrs;
  int64_t bytes_rd, bytes_wr, macs, bank_conflicts, unfused_preloads;
  int64_t spad_rows_used, acc_rows_used;
} simstats_t;

extern simcfg_t g_cfg;
extern simstats_t g_stats;
extern int8_t *g_spad;   /* spad_rows x DIM */
extern int32_t *g_acc;   /* acc_rows x DIM */

/* functional.c */
void sim_alloc(void);
void sim_reset(uint64_t garbage_seed, bool timing_on);
void sim_register_output(void *base, size_t bytes);
void sim_finish(void);                      /* flush pending work, final fence */
int64_t sim_output_unwritten(size_t *first_offset);
int64_t sim_output_cpu_modified(size_t *first_offset);
void sim_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
const char *sim_current_instr(void);

/* Primitive operations shared by intrinsics and loop FSMs. */
typedef struct { int dataflow, act; uint32_t a_stride; bool a_t, b_t; } exconf_t;
void op_begin(const char *name, int fsm);
void op_mvin(const void *dram, uint32_t local, uint32_t cols, uint32_t rows,
             size_t stride, float scale, uint32_t block_stride, int fsm);
void op_mvout(void *dram, uint32_t local, uint32_t cols, uint32_t rows, size_t stride,
              int act, int fsm);
void op_preload(const exconf_t *ex, uint32_t b, uint32_t c, uint32_t bc, uint32_t br,
                uint32_t cc, uint32_t cr, int fsm);
void op_compute(const exconf_t *ex, bool accumulated, uint32_t a, uint32_t d, uint32_t ac,
                uint32_t ar, uint32_t dc, uint32_t dr, int fsm);
void op_config(int queue);

/* timing.c */
void timing_reset(void);
void timing_issue(tinstr_t *ti);
void timing_fence(void);
void timing_loop_call(void);
void timing_finish(void);
void timing_trace_to(int fd);
#endif
