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

typedef struct { int dataflow, act; uint32_t a_stride; bool a_t, b_t; } exconf_t;

/* ---- the instruction trace ----------------------------------------------
 * The kernel process only records instructions (record.c, fsm.c); the
 * trusted replayer (replay.c) executes them with the functional and timing
 * models on its own copy of the inputs. One fixed-size record per
 * instruction, written to a pipe. */
enum { R_CONFIG = 1, R_MVIN, R_MVOUT, R_PRELOAD, R_COMPUTE, R_FENCE, R_LOOP, R_SET, R_BUF, R_END, R_DATA };
#define RF_ACCUMULATED 1   /* compute_accumulated */
#define RF_A_T 2
#define RF_B_T 4
#define RF_OS 8            /* output-stationary dataflow */
#define RF_RELU 16
#define RF_DATA 32         /* mvin from kernel memory: R_DATA records with the bytes follow */
#define MAX_MVIN_BYTES (DIM * DIM * MAX_BLOCK_LEN * 4)

typedef struct __attribute__((packed)) {
  uint8_t op, fsm, flags, id;   /* id: queue (config), set index (set), buffer index (buf) */
  uint32_t d[4];                /* dims: cols, rows, ... (full width: bad values are reported exactly) */
  uint32_t x0, x1, x2;          /* local addresses; x2: A stride or spad block stride */
  float scale;
  uint64_t dram;                /* DRAM address (buf: base) */
  uint64_t stride;              /* DRAM row stride in bytes (buf: size) */
} rec_t;

/* job.c: the job (the replayer reads the file, the kernel process what the replayer forwards) */
#define MAX_ARGS 8
typedef struct {
  int nargs, out_arg, sets, hidden, trace;   /* sets: public input sets; hidden: sets only the replayer sees */
  char text[4096];                            /* the header as read, to forward to the kernel process */
  size_t text_len;
  size_t bytes[MAX_ARGS];
  int is_input[MAX_ARGS];
  long long macs_required;
} job_t;
void job_read_header(int fd, job_t *job);   /* fills g_cfg too */
void job_read(int fd, void *dst, size_t n);
void harness_fail(const char *msg) __attribute__((noreturn));

/* Arguments of a hardware-loop call, recorded by the kernel process and
 * expanded into instructions by the loop FSM inside the replayer, so the
 * kernel cannot claim FSM timing for instructions it issues itself. */
typedef struct {
  uint64_t tiles[3], pads[3], a, b, d, c, strides[4];
  uint8_t a_t, b_t, full_c, low_d, ex_accumulate, pad[3];
  int32_t act, pad2;
} loop_ws_args_t;
typedef struct {
  int32_t batch, in_dim, cin, cout, out_dim, kd, act, pad;
  uint64_t input, weights, bias, output;
} loop_conv_args_t;

/* replay.c: what the loop FSM (fsm.c) issues, with the kernel's DRAM addresses */
void fsm_mvin(int which, uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows, uint64_t stride,
              uint32_t block_stride);
void fsm_mvout(int which, uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows, uint64_t stride, int act);
void fsm_preload(int which, const exconf_t *ex, uint32_t b, uint32_t c, uint32_t bc, uint32_t br, uint32_t cc,
                 uint32_t cr);
void fsm_compute(int which, const exconf_t *ex, uint32_t a, uint32_t ac, uint32_t ar);
void fsm_reset(void);
void fsm_loop_ws(const loop_ws_args_t *a);
void fsm_loop_conv(const loop_conv_args_t *a);

/* dram.c (replayer side) */
void dram_set_region(int i, uint64_t base, uint64_t size, uint8_t *mine);
void dram_begin_set(int set, int narrays);
uint8_t *dram_in_region(uint64_t addr, uint64_t span);
void dram_write(uint64_t addr, const uint8_t *src, size_t n);
int dram_mvout_byte(uint64_t addr, uint8_t *out);
void dram_check_constant(uint64_t instr, const uint8_t *data, size_t n);
uint64_t dram_changed_constant(void);
void dram_note_mvout(uint64_t addr, uint64_t n, uint64_t instr, int fsm);   /* one row an mvout wrote */
void dram_check_unfenced(uint64_t addr, uint64_t n);   /* one row an mvin reads: fails on a hazard */
void dram_fence(void);

/* stream.c (replayer side): records of the kernel process, kept from input set 1, compared for later
 * public sets and replayed for hidden ones */
enum { STREAM_INSTR, STREAM_LOOP_ARGS, STREAM_DATA, STREAM_RAW };   /* which part of the stream a record is */
void stream_begin_set(int set, int hidden);
int stream_next(rec_t *r, int part);   /* 0 at the end of the trace */

/* diag.c: shared by both sides */
void diag_put(const char *s);
void diag_reset(void);
void diag_context(const char *what);
uint64_t instr_number(void);

/* record.c (kernel side) */
void rec_emit(const rec_t *r);
void rec_flush(void);
void rec_set_arrays(void **bases, const size_t *bytes, int n);
void rec_payload(const void *bytes, size_t n);   /* an R_DATA header and the bytes, after a record */
int64_t mvin_row_bytes(uint32_t local, uint32_t cols);  /* 0 when the dimensions are invalid */

/* functional.c (replayer side) */
void sim_alloc(void);
void sim_reset(uint64_t garbage_seed, bool timing_on);
void sim_register_output(void *base, size_t bytes);
void sim_finish(void);                      /* flush pending work, final fence */
int64_t sim_output_unwritten(size_t *first_offset);
void sim_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
const char *sim_current_instr(void);

/* Primitive operations: recorded by intrinsics and loop FSMs (record.c),
 * executed by the replayer (functional.c); same signatures on both sides. */
void op_begin(const char *name, int fsm);
void op_loop_call(int which);   /* 1: gemmini_loop_ws, 2: gemmini_loop_conv_ws */
void op_fence(void);
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
