/* Internal interface of the gemmini-sim model (not visible to kernels:
 * kernels only see include/gemmini.h). */
#ifndef GEMMINI_SIM_H
#define GEMMINI_SIM_H
#include <stdint.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include "include/gemmini_params.h"

/* Timing parameters; names and meaning mirror hw_runners/gemmini_sim/timing.py,
 * which sends them in the job header. */
typedef struct {
  int64_t spad_rows, spad_banks, acc_rows, acc_banks;
  int64_t dma_beat_bytes, dma_max_bytes, dma_inflight_reqs, dma_inflight_cmds, dma_latency;
  int64_t ld_rs, ex_rs, st_rs;
  int64_t cpu_issue_cycles, config_cycles, min_rows, spad_read_delay, mesh_output_delay, acc_latency,
      tile_latency, mvin_scale_latency, acc_scale_latency;
  int64_t loop_ws_commands, loop_conv_commands, concurrent_loops, fsm_start_cycles, max_instructions;
  int64_t library_hwloop, library_block_cycles, library_conv_block_cycles;
  int64_t scalar_call_cycles, scalar_add_cycles, scalar_negate_cycles;
} simcfg_t;

enum { Q_LD, Q_EX, Q_ST, NQ };
enum { K_CONFIG, K_MVIN, K_MVOUT, K_PRELOAD, K_COMPUTE, K_FLUSH, NKIND };
enum { MEM_SPAD, MEM_ACC };
/* Why an instruction started later than its queue allowed. */
enum { WAIT_LD, WAIT_EX, WAIT_ST, WAIT_DMA, WAIT_PORT, NWAIT };

typedef struct { uint8_t mem, write; uint32_t start, count; } range_t;

#define MAX_RANGES 40
/* What one instruction does, as the timing model needs it. */
typedef struct {
  int queue, kind, fsm;
  int nranges;
  range_t r[MAX_RANGES];      /* local rows read or written (dependencies between queues) */
  int64_t requests, req_bytes, bytes;   /* DMA work: memory requests (one per DRAM row), bytes each, in all */
  int64_t local_rows;         /* rows written into (mvin) or read out of (mvout) local memory */
  bool zero;                  /* mvin of zeros: no DRAM access */
  int rows_a, rows_b, rows_d; /* execute work */
  int bank_a, bank_b, bank_d; /* scratchpad banks the operands come from (-1: none or accumulator) */
  bool b_garbage, d_garbage, transposed;
} tinstr_t;

typedef struct {
  int64_t cycles, cpu_busy, cpu_work, busy[NQ], cpu_stall_full[NQ], fence_wait, loop_wait;
  int64_t wait[NQ][NWAIT];
  int64_t count[NKIND], fsm_instrs, instrs;
  int64_t bytes_rd, bytes_wr, macs, bank_conflicts, bank_wait_cycles, port_wait_cycles, unfused_preloads;
  int64_t requests[2], dma_busy[2], spad_reads, spad_writes, acc_reads, acc_writes, loop_active_cycles;
  int64_t spad_rows_used, acc_rows_used;
} simstats_t;

extern simcfg_t g_cfg;
extern simstats_t g_stats;
extern elem_t *g_spad;   /* spad_rows x DIM */
extern acc_t *g_acc;     /* acc_rows x DIM */
extern bool g_timing_on;  /* the timing model runs for the first input set only */

/* A decoded local address (functional.c). */
typedef struct { bool acc, accumulate, full, garbage; uint32_t row, raw; } laddr_t;

/* Configuration state, as Gemmini's controllers hold it (set by config_ex / config_ld / config_st). */
typedef struct {
  int dataflow, act;
  uint32_t shift;            /* sys_shift: OS results are shifted right by it (rounding) */
  float acc_scale;           /* applied to operands read from the accumulator */
  uint32_t a_stride, c_stride;
  bool a_t, b_t;
} exconf_t;
typedef struct { uint64_t stride; float scale; bool shrunk; uint32_t block_stride, pixel_repeats; } ldconf_t;
typedef struct { uint64_t stride; int act; float acc_scale; } stconf_t;

/* ---- the instruction trace ----------------------------------------------
 * The kernel process only records instructions (record.c, fsm.c); the
 * trusted replayer (replay.c) executes them with the functional and timing
 * models on its own copy of the inputs. One fixed-size record per
 * instruction, written to a pipe. Configuration records carry every field;
 * the replayer keeps the configuration state, as the hardware does. */
enum { R_CONFIG = 1, R_MVIN, R_MVOUT, R_PRELOAD, R_COMPUTE, R_FENCE, R_LOOP, R_SET, R_BUF, R_END, R_DATA,
       R_FLUSH, R_COUNTER, R_CPU, R_CPUOP, R_LAST = R_CPUOP };
#define MAX_CPU_WORK (1u << 20)   /* cycles one R_CPU record may charge (d[0]) */
#define RF_ACCUMULATED 1   /* compute_accumulated */
#define RF_A_T 2           /* config_ex: A transposed */
#define RF_B_T 4           /* config_ex: B transposed */
#define RF_OS 8            /* config_ex: output-stationary dataflow */
#define RF_SET_ONLY_STRIDES 16   /* config_ex: change only A_stride and C_stride */
#define RF_DATA 32         /* mvin from kernel memory: R_DATA records with the bytes follow */
#define RF_SHRUNK 64       /* config_ld: accumulator mvins read int8 data */
#define Q_NORM 3           /* config record id of gemmini_config_norm */
#define MAX_MVIN_BYTES (DIM * DIM * MAX_BLOCK_LEN * 4)   /* also bounds one mvout (rows x row bytes) */

typedef struct __attribute__((packed)) {
  uint8_t op, fsm, flags, id;   /* id: queue (config), load state (mvin), set index (set), buffer index (buf) */
  uint32_t d[4];                /* dims: cols, rows, ...; config: act, load state, pooling fields */
  uint32_t x0, x1, x2;          /* local addresses; config: strides, shift */
  float scale;
  uint64_t dram;                /* DRAM address (buf: base) */
  uint64_t stride;              /* DRAM row stride in bytes (buf: size; counter: config register) */
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
/* Arguments of a hardware-loop call, recorded by the kernel process and expanded into instructions by
 * the loop FSM inside the replayer, so the kernel cannot claim FSM timing for instructions it issues. */
typedef struct {
  uint64_t tiles[3], pads[3], a, b, d, c, strides[4];
  uint8_t a_t, b_t, full_c, low_d, ex_accumulate, is_resadd, pad[2];
  int32_t act, a_spad_id, b_spad_id, pad2;
} loop_ws_args_t;
typedef struct {   /* gemmini_loop_conv_ws's arguments in their order, the four addresses last */
  int32_t batch_size, in_row_dim, in_col_dim, in_channels, out_channels, out_row_dim, out_col_dim,
      pool_out_row_dim, pool_out_col_dim, stride, padding, kernel_dim, kernel_dilation, pool_size, pool_stride,
      pool_padding, batches, porows, pocols, pochs, krows, kcols, kchs, lpad, rpad, upad, dpad, plpad, prpad,
      pupad, pdpad, orows, ocols;
  int32_t no_bias, no_pool, downsample, wrot180, input_dilated, act, trans_output_1203, trans_weight_1203,
      trans_weight_0132, trans_input_3120, max_pixels_per_row, in_stride, weight_stride, out_stride, dw, a_spad_id,
      b_spad_id, pad;
  uint64_t weights, output, bias, input;
} loop_conv_args_t;

/* A harness helper the CPU runs on DRAM (cpuops.c): recorded with its arguments, executed and priced by
 * the replayer, so neither its results nor its cycles come from the kernel process. */
enum { CPUOP_ADD, CPUOP_NEGATE };
typedef struct { uint64_t a, b, out; int32_t rows, cols; } cpuop_args_t;
void replay_cpuop(int op, const cpuop_args_t *a);
void sim_note_written(const void *dst, size_t n);   /* CPU stores into the output count as written */

/* What the loop FSMs (fsm.c) issue. In the replayer these execute (with the configuration state, as on
 * the hardware); in the kernel process they only number instructions. `which`: 1 gemmini_loop_ws,
 * 2 gemmini_loop_conv_ws. */
void fsm_config_ld(int which, int id, const ldconf_t *ld);
void fsm_mvin(int which, int id, uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows);
void fsm_mvout(int which, uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows);
void fsm_preload(int which, uint32_t b, uint32_t c, uint32_t bc, uint32_t br, uint32_t cc, uint32_t cr);
void fsm_compute(int which, bool accumulated, uint32_t a, uint32_t d, uint32_t ac, uint32_t ar, uint32_t dc, uint32_t dr);
void fsm_sync(int queue, int after_queue);   /* timing: `queue` issues nothing before `after_queue` has issued all */
void fsm_reset(void);
void fsm_loop_ws(const loop_ws_args_t *a);
void fsm_loop_conv(const loop_conv_args_t *a);
/* kernel side: while on, gemmini_loop_conv_ws's instructions are issued by the CPU (the CPU-issued
 * library), with `block_cycles` of scalar work before every compute */
void library_loops_on_cpu(bool on, uint32_t block_cycles);
void op_loop_end(int which);

/* moves.c (replayer side) */
void replay_mvin(uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows, const ldconf_t *ld, int fsm,
                 const uint8_t *shipped, size_t nshipped);
void replay_mvout(uint64_t dram, uint32_t local, uint32_t cols, uint32_t rows, const stconf_t *st, int fsm);

/* replay.c, counters.c (replayer side) */
extern exconf_t g_ex;
extern ldconf_t g_ld[3];
extern stconf_t g_st;
void answer_counter(int what, uint64_t config_reg);
void counters_begin_set(int set, int hidden);

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
int diag_format(char *buf, size_t cap, const char *fmt, va_list ap);   /* "<instruction>: <message>" */

/* record.c (kernel side) */
void rec_emit(const rec_t *r);
void rec_flush(void);
void rec_set_arrays(void **bases, const size_t *bytes, int n);
void rec_payload(const void *bytes, size_t n);   /* an R_DATA header and the bytes, after a record */
void rec_cpu_work(uint32_t cycles);   /* the CPU runs scalar code for `cycles` before its next instruction */
void intrinsics_reset(void);

/* functional.c, execute.c (replayer side) */
void sim_alloc(void);
void sim_reset(uint64_t garbage_seed, bool timing_on);
void sim_register_output(void *base, size_t bytes);
void sim_finish(void);                      /* flush pending work, final fence */
int64_t sim_output_unwritten(size_t *first_offset);
void sim_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void sim_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sim_write_warnings(char *buf, size_t cap);
const char *sim_current_instr(void);
laddr_t decode(uint32_t a);
uint32_t laddr_rows(laddr_t l);
uint32_t row_at(laddr_t l, int64_t i);
void check_address(laddr_t l, int64_t span, bool writes, bool reads_full_ok, const char *what);
void check_dims(const char *what, uint32_t v, uint32_t max);
void add_rows(tinstr_t *t, laddr_t l, uint32_t start, uint32_t count, bool write);
int spad_bank(uint32_t row);
int acc_bank(uint32_t row);
int8_t sat8(int64_t v);
elem_t acc_to_elem(acc_t v, float scale, int act);
void issue(tinstr_t *t);
void execute_reset(void);
void execute_finish(void);

/* Primitive operations, executed by the replayer for CPU-issued and loop-FSM instructions alike. DRAM
 * is a pointer into the replayer's memory (NULL: zeros), `stride` its row stride in bytes. */
void op_begin(const char *name, int fsm);
void op_loop_call(int which);   /* 1: gemmini_loop_ws, 2: gemmini_loop_conv_ws */
void op_fence(void);
void op_flush(void);
void op_config(int queue, int fsm);
void op_config_ex(void);
void op_mvin(const uint8_t *dram, uint64_t stride, uint32_t local, uint32_t cols, uint32_t rows, const ldconf_t *ld,
             int fsm);
void op_mvout(uint8_t *dram, uint64_t stride, uint32_t local, uint32_t cols, uint32_t rows, const stconf_t *st,
              int fsm);
void op_preload(const exconf_t *ex, uint32_t b, uint32_t c, uint32_t bc, uint32_t br, uint32_t cc, uint32_t cr,
                int fsm);
void op_compute(const exconf_t *ex, bool accumulated, uint32_t a, uint32_t d, uint32_t ac, uint32_t ar, uint32_t dc,
                uint32_t dr, int fsm);

/* timing.c */
void timing_reset(void);
void timing_issue(tinstr_t *ti);
void timing_issue_cpu_only(tinstr_t *ti);   /* an instruction that occupies no queue (flush) */
void timing_fence(void);
void timing_cpu_work(int64_t cycles);      /* scalar code on the CPU between two instructions */
void timing_loop_begin(int which);   /* the CPU hands a loop to an FSM */
void timing_loop_end(void);          /* the FSM has issued its last instruction */
void timing_fsm_sync(int queue, int after_queue);
int64_t timing_cpu_now(void);
void timing_finish(void);
void timing_trace_to(int fd);
#endif
