/* Hardware loop FSMs, run inside the trusted replayer from the arguments the
 * kernel recorded. Like Gemmini's LoopMatmul/LoopConv unrollers they issue the
 * primitive instructions themselves, with no CPU cost per instruction, one
 * stream per queue (so loads run ahead of execution as far as the reservation
 * stations and row dependencies allow), and they alternate between the two
 * halves of the scratchpad/accumulator across calls, which is what
 * double-buffers consecutive calls. DRAM addresses are the kernel's; the
 * replayer's fsm_* hooks translate them. */
#include <string.h>
#include "sim.h"
#include "include/gemmini.h"

static int spad_half, acc_half;
static bool acc_holds_partial; /* last loop_ws left un-stored results in its acc half */

void fsm_reset(void) {
  spad_half = acc_half = 0;
  acc_holds_partial = false;
}

static inline uint32_t acc_addr(uint32_t row, bool accumulate) {
  return ACC_ADDR_BIT | (accumulate ? ACCUMULATE_BIT : 0) | row;
}

void fsm_loop_ws(const loop_ws_args_t *args) {
  const int which = 1;
  size_t tI = args->tiles[0], tJ = args->tiles[1], tK = args->tiles[2];
  size_t padI = args->pads[0], padJ = args->pads[1], padK = args->pads[2];
  uint64_t A = args->a, B = args->b, D = args->d, C = args->c;
  size_t A_stride = args->strides[0], B_stride = args->strides[1], D_stride = args->strides[2];
  size_t C_stride = args->strides[3];
  bool A_transpose = args->a_t, B_transpose = args->b_t, full_C = args->full_c, low_D = args->low_d;
  bool ex_accumulate = args->ex_accumulate;
  int act = args->act;
  if (!tI || !tJ || !tK || tI > 4096 || tJ > 4096 || tK > 4096)
    sim_fail("tile counts I=%zu J=%zu K=%zu must be 1..4096", tI, tJ, tK);
  if (padI >= DIM || padJ >= DIM || padK >= DIM) sim_fail("pad_I/pad_J/pad_K must be < %d", DIM);
  if (A_transpose || B_transpose || low_D)
    sim_fail("A_transpose, B_transpose and low_D are not supported by the simulated loop FSM");
  if (!A || !B) sim_fail("A and B must not be NULL");
  if (act != NO_ACTIVATION && act != RELU) sim_fail("act=%d (use NO_ACTIVATION or RELU)", act);
  int64_t half_rows = g_cfg.spad_rows / 2, a_rows = (int64_t)tI * tK * DIM, b_rows = (int64_t)tK * tJ * DIM;
  if (a_rows + b_rows > half_rows)
    sim_fail("A (%zux%zu tiles) and B (%zux%zu tiles) need %lld scratchpad rows; the loop may use "
             "half of the scratchpad (%lld rows)", tI, tK, tK, tJ, (long long)(a_rows + b_rows),
             (long long)half_rows);
  int64_t acc_half_rows = g_cfg.acc_rows / 2;
  if ((int64_t)(tI * tJ * DIM) > acc_half_rows)
    sim_fail("C (%zux%zu tiles) needs %zu accumulator rows; the loop may use half of the "
             "accumulator (%lld rows)", tI, tJ, tI * tJ * DIM, (long long)acc_half_rows);
  if (ex_accumulate && !acc_holds_partial)
    sim_fail("ex_accumulate needs the previous gemmini_loop_ws call to leave its result in the "
             "accumulator (C == NULL)");
  if (!ex_accumulate && acc_holds_partial) acc_half ^= 1; /* the partial result is abandoned */

  op_loop_call(which);
  /* A from the start of this half, B up to its end: different banks. */
  uint32_t a_base = (uint32_t)(spad_half * half_rows);
  uint32_t b_base = (uint32_t)(spad_half * half_rows + half_rows - b_rows);
  uint32_t c_base = (uint32_t)(acc_half * acc_half_rows);
  exconf_t ex = {WEIGHT_STATIONARY, act, 1, false, false};
  size_t esize = full_C ? 4 : 1;

  if (D && !ex_accumulate)
    for (size_t i = 0; i < tI; i++)
      for (size_t j = 0; j < tJ; j++) {
        uint32_t rows = i == tI - 1 ? DIM - padI : DIM, cols = j == tJ - 1 ? DIM - padJ : DIM;
        fsm_mvin(which, D + (i * DIM * D_stride + j * DIM) * sizeof(acc_t),
                 acc_addr(c_base + (i * tJ + j) * DIM, false), cols, rows, D_stride * sizeof(acc_t), DIM);
      }
  for (size_t i = 0; i < tI; i++) {
    uint32_t rows = i == tI - 1 ? DIM - padI : DIM;
    for (size_t j = 0; j < tJ; j++) {
      uint32_t cols = j == tJ - 1 ? DIM - padJ : DIM;
      uint32_t c_row = c_base + (i * tJ + j) * DIM;
      for (size_t k = 0; k < tK; k++) {
        uint32_t klen = k == tK - 1 ? DIM - padK : DIM;
        uint32_t a_row = a_base + (i * tK + k) * DIM, b_row = b_base + (k * tJ + j) * DIM;
        if (j == 0) fsm_mvin(which, A + i * DIM * A_stride + k * DIM, a_row, klen, rows, A_stride, DIM);
        if (i == 0) fsm_mvin(which, B + k * DIM * B_stride + j * DIM, b_row, cols, klen, B_stride, DIM);
        bool accumulate = k > 0 || D || ex_accumulate;
        fsm_preload(which, &ex, b_row, acc_addr(c_row, accumulate), cols, klen, cols, rows);
        fsm_compute(which, &ex, a_row, klen, rows);
      }
      if (C)
        fsm_mvout(which, C + (i * DIM * C_stride + j * DIM) * esize,
                  acc_addr(c_row, false) | (full_C ? FULL_READ_BIT : 0), cols, rows, C_stride * esize, act);
    }
  }
  spad_half ^= 1;
  acc_holds_partial = C == 0;
  if (C) acc_half ^= 1;
}

void fsm_loop_conv(const loop_conv_args_t *args) {
  const int which = 2;
  int batch = args->batch, in_dim = args->in_dim, cin = args->cin, cout = args->cout;
  int out_dim = args->out_dim, kd = args->kd, act = args->act;
  uint64_t input = args->input, weights = args->weights, bias = args->bias, output = args->output;
  if (batch < 1 || kd < 1 || out_dim < 1 || batch > 1 << 16 || out_dim > 1 << 16 || cin > 1 << 16 || cout > 1 << 16)
    sim_fail("batch, kernel_dim, out_dim and channel counts must be positive and plausible");
  if (in_dim != out_dim + kd - 1)
    sim_fail("in_dim=%d must equal out_dim + kernel_dim - 1 = %d (input already padded, stride 1)",
             in_dim, out_dim + kd - 1);
  if (cin % DIM || cout % DIM) sim_fail("in_channels and out_channels must be multiples of %d", DIM);
  if (kd + DIM - 1 > 2 * DIM) sim_fail("kernel_dim=%d is too large for the simulated LoopConv", kd);
  if (!input || !weights || !output) sim_fail("input, weights and output must not be NULL");
  if (act != NO_ACTIVATION && act != RELU) sim_fail("act=%d (use NO_ACTIVATION or RELU)", act);

  int nct = cin / DIM, nkt = cout / DIM, seg = DIM + kd - 1;
  int64_t half = g_cfg.spad_rows / 2;
  int64_t per_kt = (int64_t)kd * kd * cin; /* weight rows for one 16-channel output tile */
  int kc = (int)(half / per_kt);
  if (kc < 1) sim_fail("weights of one output-channel tile (%lld rows) exceed half the scratchpad",
                       (long long)per_kt);
  if (kc > nkt) kc = nkt;
  while (nkt % kc) kc--;
  int slot_rows = kd * nct * seg;
  int nslots = (int)(half / slot_rows);
  if (nslots < 1) sim_fail("one input slot (%d rows) exceeds half the scratchpad", slot_rows);
  if (kc * DIM * 2 > g_cfg.acc_rows) sim_fail("output tiles exceed the accumulator");

  op_loop_call(which);
  exconf_t ex = {WEIGHT_STATIONARY, act, 1, false, false};
  int iter = 0;
  for (int kb = 0; kb < nkt / kc; kb++) {
    for (int r = 0; r < kd; r++)
      for (int s = 0; s < kd; s++)
        for (int ct = 0; ct < nct; ct++)
          for (int k0 = 0; k0 < kc; k0 += 4) {
            int ntile = kc - k0 < 4 ? kc - k0 : 4;
            fsm_mvin(which, weights + ((uint64_t)(r * kd + s) * cin + ct * DIM) * cout + (kb * kc + k0) * DIM,
                     (uint32_t)((((r * kd + s) * nct + ct) * kc + k0) * DIM), ntile * DIM, DIM, cout, DIM);
          }
    for (int n = 0; n < batch; n++)
      for (int p = 0; p < out_dim; p++)
        for (int q0 = 0; q0 < out_dim; q0 += DIM, iter++) {
          uint32_t rows = out_dim - q0 < DIM ? out_dim - q0 : DIM;
          uint32_t slot = (uint32_t)(half + (iter % nslots) * slot_rows);
          uint32_t acc0 = (uint32_t)((iter % 2) * (g_cfg.acc_rows / 2));
          uint32_t in_rows = rows + kd - 1;
          for (int r = 0; r < kd; r++)
            for (int c0 = 0; c0 < nct; c0 += 4) {
              int ntile = nct - c0 < 4 ? nct - c0 : 4;
              uint64_t src = input + (((uint64_t)n * in_dim + p + r) * in_dim + q0) * cin + c0 * DIM;
              uint32_t dst = slot + (r * nct + c0) * seg;
              for (uint32_t done = 0; done < in_rows; done += DIM) {
                uint32_t part = in_rows - done < DIM ? in_rows - done : DIM;
                fsm_mvin(which, src + (uint64_t)done * cin, dst + done, ntile * DIM, part, cin, seg);
              }
            }
          for (int kt = 0; kt < kc && bias; kt++) {
            fsm_mvin(which, bias + (uint64_t)(kb * kc + kt) * DIM * sizeof(acc_t), acc_addr(acc0 + kt * DIM, false),
                     DIM, rows, 0, DIM);
          }
          for (int r = 0; r < kd; r++)
            for (int s = 0; s < kd; s++)
              for (int ct = 0; ct < nct; ct++)
                for (int kt = 0; kt < kc; kt++) {
                  bool accumulate = bias || r || s || ct;
                  uint32_t w = (uint32_t)((((r * kd + s) * nct + ct) * kc + kt) * DIM);
                  fsm_preload(which, &ex, w, acc_addr(acc0 + kt * DIM, accumulate), DIM, DIM, DIM, rows);
                  fsm_compute(which, &ex, slot + (r * nct + ct) * seg + s, DIM, rows);
                }
          for (int kt = 0; kt < kc; kt++) {
            fsm_mvout(which, output + (((uint64_t)n * out_dim + p) * out_dim + q0) * cout + (kb * kc + kt) * DIM,
                      acc_addr(acc0 + kt * DIM, false), DIM, rows, cout, act);
          }
        }
  }
}
