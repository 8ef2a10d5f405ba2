/* Gemmini's hardware loop FSMs (LoopMatmul.scala, LoopConv.scala), run inside
 * the trusted replayer from the arguments the kernel recorded, and on the
 * kernel side only to number instructions alike. Like the hardware they issue
 * every mvin/preload/compute/mvout themselves, with the placement, loop order
 * and accumulator-half switching of the RTL; the instructions are issued in
 * an order that respects the hardware's gating (a compute after the loads it
 * uses, a store after the last compute of its tile), which gives the same
 * results as the hardware's interleaving because its reservation station
 * orders instructions by the local rows they touch. Timing (issue slots,
 * throttling, concurrent loops) is the timing model's.
 *
 * What the FSMs take from the configuration, as on the hardware:
 * gemmini_loop_ws loads A, B and D with mvin, mvin2 and mvin3, i.e. with the
 * row strides and scales of config_ld states 0, 1 and 2 (its own strides only
 * locate tiles), and stores with config_st's stride, scale and activation;
 * gemmini_loop_conv_ws configures the three load states itself (scale 1) and
 * those settings stay after the loop. */
#include <string.h>
#include "sim.h"
#include "include/gemmini.h"

static int ws_slot, conv_slot;                       /* loops alternate between two slots */
static int ws_d_half, ws_c_half, ws_st_half;         /* accumulator halves of LoopMatmul's ldD / ex / stC */
static int cv_bias_half, cv_c_half, cv_st_half;      /* ... and of LoopConv's ld_bias / ex / st */

void fsm_reset(void) {
  ws_slot = conv_slot = 0;
  ws_d_half = ws_c_half = ws_st_half = cv_bias_half = cv_c_half = cv_st_half = 0;
}

static inline uint32_t acc_addr(uint32_t row, bool accumulate, bool full) {
  return ACC_ADDR_BIT | (accumulate ? ACCUMULATE_BIT : 0) | (full ? FULL_READ_BIT : 0) | row;
}
static inline uint64_t min64(uint64_t a, uint64_t b) { return a < b ? a : b; }
/* DRAM byte offsets: the loop's strides count elements (elem_t; acc_t for D and a full-width C) */
#define EB ((uint64_t)sizeof(elem_t))
#define AB ((uint64_t)sizeof(acc_t))

/* Scratchpad regions: A from `a_start` up, B ending at `b_end`; a spad id names a fixed half. */
static void regions(int slot, int a_id, int b_id, uint64_t a_rows, uint64_t b_rows, uint32_t *a_start,
                    uint32_t *b_start, const char *a_what, const char *b_what) {
  uint64_t half = (uint64_t)g_cfg.spad_rows / 2;
  uint64_t a0 = a_id ? (uint64_t)(a_id - 1) * half : slot * half, b_end = b_id ? (uint64_t)b_id * half : (slot + 1) * half;
  if (a_id < 0 || a_id > 2 || b_id < 0 || b_id > 2) sim_fail("a_spad_id and b_spad_id must be 0, 1 or 2");
  if (b_rows > b_end) sim_fail("%s needs %llu scratchpad rows, more than fit below row %llu", b_what,
                               (unsigned long long)b_rows, (unsigned long long)b_end);
  uint64_t b0 = b_end - b_rows;
  if (a0 + a_rows > (uint64_t)g_cfg.spad_rows || (a_rows && b_rows && a0 < b_end && b0 < a0 + a_rows))
    sim_fail("%s (%llu rows from row %llu) and %s (%llu rows from row %llu) overlap in the scratchpad: each loop "
             "may use half of it (%llu rows)", a_what, (unsigned long long)a_rows, (unsigned long long)a0, b_what,
             (unsigned long long)b_rows, (unsigned long long)b0, (unsigned long long)half);
  *a_start = (uint32_t)a0;
  *b_start = (uint32_t)b0;
}

/* ---- LoopMatmul ------------------------------------------------------------------------------ */
void fsm_loop_ws(const loop_ws_args_t *a) {
  const int which = 1;
  uint64_t I = a->tiles[0], J = a->tiles[1], K = a->tiles[2];
  uint64_t padI = a->pads[0], padJ = a->pads[1], padK = a->pads[2];
  uint64_t A = a->a, B = a->b, D = a->d, C = a->c;
  uint64_t sA = a->strides[0], sB = a->strides[1], sD = a->strides[2], sC = a->strides[3];
  bool resadd = a->is_resadd;
  if (!I || !J || (!K && !resadd) || I > 0xFFFF || J > 0xFFFF || K > 0xFFFF)
    sim_fail("tile counts I=%llu J=%llu K=%llu must be 1..65535", (unsigned long long)I, (unsigned long long)J,
             (unsigned long long)K);
  if (padI >= DIM || padJ >= DIM || padK >= DIM) sim_fail("pad_I/pad_J/pad_K must be < %d", DIM);
  if (a->a_t && a->b_t) sim_fail("A_transpose and B_transpose cannot both be set (Gemmini asserts it)");
  if (a->act != NO_ACTIVATION && a->act != RELU)
    sim_fail("act=%d is not modelled (LAYERNORM/SOFTMAX mvouts); use NO_ACTIVATION or RELU", a->act);
  if (sA > (1u << 30) || sB > (1u << 30) || sD > (1u << 30) || sC > (1u << 30))
    sim_fail("a loop stride is implausibly large");
  uint64_t half_acc = (uint64_t)g_cfg.acc_rows / 2;
  if (I * J * DIM > half_acc)
    sim_fail("C (%llux%llu tiles) needs %llu accumulator rows; a loop may use half of the accumulator (%llu rows)",
             (unsigned long long)I, (unsigned long long)J, (unsigned long long)(I * J * DIM),
             (unsigned long long)half_acc);
  int slot = ws_slot;
  ws_slot ^= 1;
  op_loop_call(which);
  uint32_t mb = MAX_BLOCK_LEN, mb_acc = MAX_BLOCK_LEN_ACC;

  if (resadd) {   /* C = A + B through the accumulator: A overwrites, B accumulates, then stores */
    uint32_t base = (uint32_t)(slot * half_acc);
    for (int pass = 0; pass < 2; pass++) {
      uint64_t src = pass ? B : A, stride = pass ? sB : sA;
      if (!src) continue;
      for (uint64_t i = 0; i < I; i++)
        for (uint64_t j = 0; j < J; j += min64(J, mb)) {
          uint64_t blocks = min64(min64(J, mb), J - j);
          fsm_mvin(which, pass, src + (i * stride + j) * DIM * EB, acc_addr(base + (uint32_t)((i * J + j) * DIM), pass, 0),
                   (uint32_t)(blocks * DIM - (j + blocks >= J ? padJ : 0)), (uint32_t)(DIM - (i == I - 1 ? padI : 0)));
        }
    }
    fsm_sync(Q_ST, Q_LD);
    for (uint64_t j = 0; C && j < J; j += min64(J, mb))
      for (uint64_t i = 0; i < I; i++) {
        uint64_t blocks = min64(min64(J, mb), J - j);
        fsm_mvout(which, C + (i * sC + j) * DIM * EB, acc_addr(base + (uint32_t)((i * J + j) * DIM), 0, 0),
                  (uint32_t)(blocks * DIM - (j + blocks >= J ? padJ : 0)), (uint32_t)(DIM - (i == I - 1 ? padI : 0)));
      }
    op_loop_end(which);
    return;
  }

  uint32_t a_start, b_start;
  regions(slot, a->a_spad_id, a->b_spad_id, I * K * DIM, K * J * DIM, &a_start, &b_start, "A", "B");
  uint32_t d_start = (uint32_t)(ws_d_half * half_acc), c_start = (uint32_t)(ws_c_half * half_acc);
  uint32_t st_start = (uint32_t)(ws_st_half * half_acc);
  if (C) ws_d_half ^= 1, ws_c_half ^= 1, ws_st_half ^= 1;   /* each switches after a loop that stores */
  uint64_t mbA = min64(a->a_t ? I : K, mb), mbB = min64(a->b_t ? K : J, mb);

  uint64_t mbD = min64(J, a->low_d ? mb : mb_acc);   /* ldD: j blocks, then i */
  for (uint64_t j = 0; D && j < J; j += mbD)
    for (uint64_t i = 0; i < I; i++) {
      uint64_t blocks = min64(mbD, J - j);
      fsm_mvin(which, 2, D + (i * sD + j) * DIM * (a->low_d ? EB : AB), acc_addr(d_start + (uint32_t)((i * J + j) * DIM), 0, 0),
               (uint32_t)(blocks * DIM - (j + blocks >= J ? padJ : 0)), (uint32_t)(DIM - (i == I - 1 ? padI : 0)));
    }
  for (uint64_t k = 0; k < K; k++)
    for (uint64_t j = 0; j < J; j++)
      for (uint64_t i = 0; i < I; i++) {
        /* the loads this step needs, as ldA/ldB issue them (up to 4 blocks per mvin) */
        if (A && j == 0 && !a->a_t && k % mbA == 0) {
          uint64_t blocks = min64(mbA, K - k);
          fsm_mvin(which, 0, A + (i * sA + k) * DIM * EB, a_start + (uint32_t)((i * K + k) * DIM),
                   (uint32_t)(blocks * DIM - (k + blocks >= K ? padK : 0)), (uint32_t)(DIM - (i == I - 1 ? padI : 0)));
        } else if (A && j == 0 && a->a_t && i % mbA == 0) {
          uint64_t blocks = min64(mbA, I - i);
          fsm_mvin(which, 0, A + (k * sA + i) * DIM * EB, a_start + (uint32_t)((k * I + i) * DIM),
                   (uint32_t)(blocks * DIM - (i + blocks >= I ? padI : 0)), (uint32_t)(DIM - (k == K - 1 ? padK : 0)));
        }
        if (B && i == 0 && !a->b_t && j % mbB == 0) {
          uint64_t blocks = min64(mbB, J - j);
          fsm_mvin(which, 1, B + (k * sB + j) * DIM * EB, b_start + (uint32_t)((k * J + j) * DIM),
                   (uint32_t)(blocks * DIM - (j + blocks >= J ? padJ : 0)), (uint32_t)(DIM - (k == K - 1 ? padK : 0)));
        } else if (B && i == 0 && a->b_t && j == 0 && k % mbB == 0) {
          for (uint64_t jj = 0; jj < J; jj++) {
            uint64_t blocks = min64(mbB, K - k);
            fsm_mvin(which, 1, B + (jj * sB + k) * DIM * EB, b_start + (uint32_t)((jj * K + k) * DIM),
                     (uint32_t)(blocks * DIM - (k + blocks >= K ? padK : 0)), (uint32_t)(DIM - (jj == J - 1 ? padJ : 0)));
          }
        }
        if (D && k == 0 && j == 0 && i == 0) fsm_sync(Q_EX, Q_LD);   /* ex waits for every D load */
        uint32_t a_rows = (uint32_t)(DIM - (i == I - 1 ? padI : 0)), a_cols = (uint32_t)(DIM - (k == K - 1 ? padK : 0));
        uint32_t b_cols = (uint32_t)(DIM - (j == J - 1 ? padJ : 0));
        uint64_t a_tile = a->a_t ? k * I + i : i * K + k, b_tile = a->b_t ? j * K + k : k * J + j;
        fsm_preload(which, i == 0 ? b_start + (uint32_t)(b_tile * DIM) : GARBAGE_ADDR,
                    acc_addr(c_start + (uint32_t)((i * J + j) * DIM), a->ex_accumulate || k, 0), b_cols, a_cols,
                    b_cols, a_rows);
        fsm_compute(which, i != 0, a_start + (uint32_t)(a_tile * DIM), GARBAGE_ADDR, a_cols, a_rows, DIM, DIM);
        /* stC: a block of tiles once the last compute of its last tile is issued */
        uint64_t mbC = a->full_c ? 1 : min64(J, mb);
        if (C && k == K - 1 && ((j + 1) % mbC == 0 || j == J - 1)) {
          uint64_t j0 = j - j % mbC, blocks = j - j0 + 1;
          fsm_mvout(which, C + (i * sC + j0) * DIM * (a->full_c ? AB : EB),
                    acc_addr(st_start + (uint32_t)((i * J + j0) * DIM), 0, a->full_c),
                    (uint32_t)(blocks * DIM - (j0 + blocks >= J ? padJ : 0)), a_rows);
        }
      }
  op_loop_end(which);
}

/* ---- LoopConv ------------------------------------------------------------------------------------ */
void fsm_loop_conv(const loop_conv_args_t *a) {
  const int which = 2;
#ifdef ELEM_T_IS_FLOAT   /* its DRAM offsets count int8 elements; no float problem needs it yet */
  sim_fail("gemmini_loop_conv_ws is modelled for the int8 configuration only");
#endif
  if (a->batch_size < 1 || a->in_row_dim < 1 || a->in_col_dim < 1 || a->in_channels < 1 || a->out_channels < 1 ||
      a->batches < 1 || a->porows < 1 || a->pocols < 1 || a->pochs < 1 || a->krows < 1 || a->kcols < 1 ||
      a->kchs < 1 || a->stride < 1 || a->kernel_dilation < 1 || a->orows < 1 || a->ocols < 1 || a->in_stride < 1 ||
      a->weight_stride < 1 || a->out_stride < 1 || a->lpad < 0 || a->rpad < 0 || a->upad < 0 || a->dpad < 0)
    sim_fail("gemmini_loop_conv_ws: sizes, strides and tile counts must be positive and pads not negative");
  if (!a->no_pool) sim_fail("gemmini_loop_conv_ws: max-pooling is not modelled (pass no_pool)");
  if (a->downsample || a->input_dilated || a->wrot180 || a->trans_output_1203 || a->trans_weight_1203 ||
      a->trans_weight_0132 || a->trans_input_3120 || a->dw)
    sim_fail("gemmini_loop_conv_ws: downsample, input dilation, wrot180, the transposed layouts and depthwise "
             "convolutions are not modelled");
  if (a->max_pixels_per_row > 1) sim_fail("gemmini_loop_conv_ws: max_pixels_per_row > 1 (pixel repeats) is not modelled");
  if (a->act != NO_ACTIVATION && a->act != RELU) sim_fail("act=%d is not modelled; use NO_ACTIVATION or RELU", a->act);
  uint64_t batches = (uint64_t)a->batches, orows = (uint64_t)a->orows, ocols = (uint64_t)a->ocols;
  uint64_t ochs = (uint64_t)a->pochs, kchs = (uint64_t)a->kchs, krows = (uint64_t)a->krows, kcols = (uint64_t)a->kcols;
  uint64_t kdil = (uint64_t)a->kernel_dilation, stride = (uint64_t)a->stride;
  uint64_t dkr = krows + (kdil - 1) * (krows - 1), dkc = kcols + (kdil - 1) * (kcols - 1);
  uint64_t irows = orows * stride + dkr - 1, icols = ocols * stride + dkc - 1;
  if (irows < (uint64_t)(a->upad + a->dpad) || icols < (uint64_t)(a->lpad + a->rpad))
    sim_fail("gemmini_loop_conv_ws: the padding is larger than the input tile");
  int64_t irows_unpadded = (int64_t)irows - a->upad - a->dpad, icols_unpadded = (int64_t)icols - a->lpad - a->rpad;
  uint64_t in_spad_stride = batches * irows * icols, w_spad_stride = krows * kcols * kchs;
  uint64_t bias_stride = batches * orows * ocols;
  uint64_t in_banks = (kchs + DIM - 1) / DIM, out_banks = (ochs + DIM - 1) / DIM;
  uint64_t half_acc = (uint64_t)g_cfg.acc_rows / 2;
  if (out_banks * bias_stride > half_acc)
    sim_fail("gemmini_loop_conv_ws: the output tile needs %llu accumulator rows; a loop may use half (%llu)",
             (unsigned long long)(out_banks * bias_stride), (unsigned long long)half_acc);
  int slot = conv_slot;
  conv_slot ^= 1;
  uint32_t a_start, b_start;
  regions(slot, a->a_spad_id, a->b_spad_id, in_banks * in_spad_stride, out_banks * w_spad_stride, &a_start, &b_start,
          "the input tile", "the weights tile");
  uint32_t bias_start = (uint32_t)(cv_bias_half * half_acc), c_start = (uint32_t)(cv_c_half * half_acc);
  uint32_t st_start = (uint32_t)(cv_st_half * half_acc);
  if (a->output) cv_bias_half ^= 1, cv_c_half ^= 1, cv_st_half ^= 1;
  op_loop_call(which);
  uint64_t mc = min64(kchs, DIM * MAX_BLOCK_LEN), mcw = min64(ochs, DIM * MAX_BLOCK_LEN);

  if (a->bias) {   /* bias (or zeros with no_bias) broadcast into every output row: the first k-tile */
    fsm_config_ld(which, 2, &(ldconf_t){0, 1.0f, false, (uint32_t)bias_stride, 1});
    for (uint64_t b = 0; b < batches; b++)
      for (uint64_t orow = 0; orow < orows; orow++)
        for (uint64_t ocol = 0; ocol < ocols; ocol += DIM)
          for (uint64_t och = 0; och < ochs; och += DIM)
            fsm_mvin(which, 2, a->no_bias ? 0 : a->bias + och * 4,
                     acc_addr(bias_start + (uint32_t)((och / DIM) * bias_stride + b * orows * ocols + orow * ocols + ocol), 0, 0),
                     (uint32_t)min64(DIM, ochs - och), (uint32_t)min64(DIM, ocols - ocol));
  }
  if (a->weights) {
    fsm_config_ld(which, 1, &(ldconf_t){(uint64_t)a->weight_stride, 1.0f, false, (uint32_t)w_spad_stride, 1});
    for (uint64_t och = 0; och < ochs; och += mcw)
      for (uint64_t krow = 0; krow < krows; krow++)
        for (uint64_t kcol = 0; kcol < kcols; kcol++)
          for (uint64_t kch = 0; kch < kchs; kch += DIM)
            fsm_mvin(which, 1, a->weights + ((krow * a->kernel_dim + kcol) * a->in_channels + kch) * a->weight_stride + och,
                     b_start + (uint32_t)((och / DIM) * w_spad_stride + krow * kcols * kchs + kcol * kchs + kch),
                     (uint32_t)min64(mcw, ochs - och), (uint32_t)min64(DIM, kchs - kch));
  }
  if (a->input) {   /* padding rows and columns are zero mvins (DRAM address 0) */
    fsm_config_ld(which, 0, &(ldconf_t){(uint64_t)a->in_stride, 1.0f, false, (uint32_t)in_spad_stride, 1});
    for (uint64_t b = 0; b < batches; b++)
      for (int64_t irow = -a->upad; irow < irows_unpadded + a->dpad; irow++)
        for (int64_t icol = -a->lpad; icol < icols_unpadded + a->rpad;) {
          int64_t n = icol < 0 ? -icol : icol >= icols_unpadded ? icols_unpadded + a->rpad - icol : icols_unpadded - icol;
          n = n < DIM ? n : DIM;
          bool zeros = irow < 0 || irow >= irows_unpadded || icol < 0 || icol >= icols_unpadded;
          for (uint64_t ich = 0; ich < kchs; ich += mc) {
            uint64_t dram = zeros ? 0 : a->input + ((b * a->in_row_dim + (uint64_t)irow) * a->in_col_dim + (uint64_t)icol) * a->in_stride + ich;
            fsm_mvin(which, 0, dram, a_start + (uint32_t)((ich / DIM) * in_spad_stride + b * irows * icols +
                                                          (uint64_t)(irow + a->upad) * icols + (uint64_t)(icol + a->lpad)),
                     (uint32_t)min64(mc, kchs - ich), (uint32_t)n);
          }
          icol += n;
        }
  }
  fsm_sync(Q_EX, Q_LD);   /* the conv FSM computes once all loads of the loop are issued */
  for (uint64_t och = 0; och < ochs; och += DIM)
    for (uint64_t krow = 0; krow < krows; krow++)
      for (uint64_t kcol = 0; kcol < kcols; kcol++)
        for (uint64_t kch = 0; kch < kchs; kch += DIM) {
          bool new_weights = true;
          for (uint64_t b = 0; b < batches; b++)
            for (uint64_t orow = 0; orow < orows; orow++)
              for (uint64_t ocol = 0; ocol < ocols; ocol += DIM) {
                uint64_t irow = orow * stride + krow * kdil, icol = ocol * stride + kcol * kdil;
                uint32_t I = (uint32_t)min64(DIM, ocols - ocol), J = (uint32_t)min64(DIM, ochs - och);
                uint32_t K = (uint32_t)min64(DIM, kchs - kch);
                uint32_t b_addr = b_start + (uint32_t)((och / DIM) * w_spad_stride + krow * kcols * kchs + kcol * kchs + kch);
                fsm_preload(which, new_weights ? b_addr : GARBAGE_ADDR,
                            acc_addr(c_start + (uint32_t)((och / DIM) * bias_stride + b * orows * ocols + orow * ocols + ocol), 1, 0),
                            J, K, J, I);
                fsm_compute(which, !new_weights,
                            a_start + (uint32_t)((kch / DIM) * in_spad_stride + b * irows * icols + irow * icols + icol),
                            GARBAGE_ADDR, K, I, J, I);
                new_weights = false;
              }
        }
  fsm_sync(Q_ST, Q_EX);   /* ... and stores once every compute is issued */
  for (uint64_t b = 0; a->output && b < batches; b++)
    for (uint64_t orow = 0; orow < orows; orow++)
      for (uint64_t ocol = 0; ocol < ocols; ocol += DIM)
        for (uint64_t och = 0; och < ochs; och += DIM)
          fsm_mvout(which, a->output + ((b * a->out_row_dim + orow) * a->out_col_dim + ocol) * a->out_stride + och,
                    acc_addr(st_start + (uint32_t)((och / DIM) * bias_stride + b * orows * ocols + orow * ocols + ocol), 0, 0),
                    (uint32_t)min64(DIM, ochs - och), (uint32_t)min64(DIM, ocols - ocol));
  op_loop_end(which);
}
