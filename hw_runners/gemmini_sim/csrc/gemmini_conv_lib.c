/* Gemmini's software library for convolutions on gemmini-sim: tiled_conv and
 * tiled_conv_auto with the signatures of Gemmini's gemmini.h (our own
 * implementation of the same tiling): choose tiles of batches, output rows,
 * output columns, output channels, kernel rows, kernel columns and input
 * channels that fit half of the scratchpad and of the accumulator, then run
 * each tile as gemmini_loop_conv_ws would: on the loop FSM (library_hwloop 1,
 * mainline gemmini-rocc-tests) or, by default, issued instruction by
 * instruction from the CPU with library_conv_block_cycles of scalar work per
 * compute (the library the Autocomp paper measured; timing.py says why). Weights are laid out
 * [kernel_row][kernel_col][in_channel][out_channel], activations NHWC. */
#include <stdint.h>
#include "sim.h"
#include "include/gemmini.h"

enum { BATCHES, POROWS, POCOLS, POCHS, KROWS, KCOLS, KCHS, NARGS };

static int ceil_div(int a, int b) { return (a + b - 1) / b; }
static int min_int(int a, int b) { return a < b ? a : b; }

/* Scratchpad rows (input + weights) and accumulator rows (output) a tile needs. */
static void tile_rows(const int *t, int stride, int kernel_dilation, int *spad, int *acc) {
  int dkr = t[KROWS] + (kernel_dilation - 1) * (t[KROWS] - 1), dkc = t[KCOLS] + (kernel_dilation - 1) * (t[KCOLS] - 1);
  int irows = t[POROWS] * stride + dkr - 1, icols = t[POCOLS] * stride + dkc - 1;
  *spad = ceil_div(t[KCHS], DIM) * t[BATCHES] * irows * icols + ceil_div(t[POCHS], DIM) * t[KCOLS] * t[KROWS] * t[KCHS];
  *acc = ceil_div(t[POCHS], DIM) * t[BATCHES] * t[POROWS] * t[POCOLS];
}

static bool tile_fits(const int *t, int stride, int kernel_dilation) {
  int spad, acc;
  tile_rows(t, stride, kernel_dilation, &spad, &acc);
  return spad <= BANK_NUM * BANK_ROWS / 2 && acc <= ACC_ROWS / 2;
}

void tiled_conv(int batch_size, int in_row_dim, int in_col_dim, int in_channels, int out_channels, int out_row_dim,
                int out_col_dim, int stride, int input_dilation, int kernel_dilation, int padding, int kernel_dim,
                int in_stride, int weight_stride, int out_stride, bool wrot180, bool trans_output_1203,
                bool trans_input_3120, bool trans_weight_1203, bool trans_weight_0132, int batches, int porows,
                int pocols, int pochs, int krows, int kcols, int kchs, const elem_t *input, const elem_t *weights,
                const acc_t *bias, elem_t *output, int act, acc_scale_t scale, int pool_size, int pool_stride,
                int pool_padding, enum tiled_matmul_type_t type) {
  if (type != WS) sim_fail("tiled_conv: only the WS dataflow is supported (CPU and OS are not)");
  if (pool_stride != 0) sim_fail("tiled_conv: max-pooling is not modelled (pass pool_stride 0)");
  if (input_dilation != 1 || wrot180 || trans_output_1203 || trans_input_3120 || trans_weight_1203 || trans_weight_0132)
    sim_fail("tiled_conv: input dilation, wrot180 and the transposed layouts are not modelled");
  (void)pool_size, (void)pool_padding;
  bool no_bias = bias == NULL;
  if (no_bias) bias = (const acc_t *)1;   /* as Gemmini's library: a non-NULL dummy; the FSM loads zeros */
  gemmini_extended_config_st(out_stride * sizeof(elem_t), act, scale);
  gemmini_extended3_config_ex(WEIGHT_STATIONARY, 0, 0, 0, input_dilation, stride, false, false, false);
  int n_kch = ceil_div(in_channels, kchs), n_poch = ceil_div(out_channels, pochs);
  int n_krow = ceil_div(kernel_dim, krows), n_kcol = ceil_div(kernel_dim, kcols);
  bool hw = g_cfg.library_hwloop;
  bool b_reuse = hw && n_kch * n_poch * n_krow * n_kcol <= 2;
  bool a_reuse = hw && n_kch * n_krow * n_kcol * ceil_div(batch_size, batches) * ceil_div(out_row_dim, porows) *
                 ceil_div(out_col_dim, pocols) <= 2;
  library_loops_on_cpu(!hw, (uint32_t)g_cfg.library_conv_block_cycles);
  for (int b = 0; b < batch_size; b += batches)
    for (int porow = 0; porow < out_row_dim; porow += porows)
      for (int pocol = 0; pocol < out_col_dim; pocol += pocols)
        for (int poch = 0; poch < out_channels; poch += pochs)
          for (int krow = 0; krow < kernel_dim; krow += krows)
            for (int kcol = 0; kcol < kernel_dim; kcol += kcols)
              for (int kch = 0; kch < in_channels; kch += kchs) {
                int b_ = min_int(batches, batch_size - b), porows_ = min_int(porows, out_row_dim - porow);
                int pocols_ = min_int(pocols, out_col_dim - pocol), pochs_ = min_int(pochs, out_channels - poch);
                int krows_ = min_int(krows, kernel_dim - krow), kcols_ = min_int(kcols, kernel_dim - kcol);
                int kchs_ = min_int(kchs, in_channels - kch);
                int dkr = krows_ + (kernel_dilation - 1) * (krows_ - 1), dkc = kcols_ + (kernel_dilation - 1) * (kcols_ - 1);
                int irow = porow * stride + krow * kernel_dilation - padding;
                int icol = pocol * stride + kcol * kernel_dilation - padding;
                int irows_ = porows_ * stride + dkr - 1, icols_ = pocols_ * stride + dkc - 1;
                int lpad = icol < 0 ? -icol : 0, rpad = icol + icols_ > in_col_dim ? icol + icols_ - in_col_dim : 0;
                int upad = irow < 0 ? -irow : 0, dpad = irow + irows_ > in_row_dim ? irow + irows_ - in_row_dim : 0;
                bool last_k = krow + krows >= kernel_dim && kcol + kcols >= kernel_dim && kch + kchs >= in_channels;
                elem_t *out = last_k ? output + ((b * out_row_dim + porow) * out_col_dim + pocol) * out_stride + poch : NULL;
                const acc_t *bias_ = krow == 0 && kcol == 0 && kch == 0 ? bias + poch : NULL;
                const elem_t *in = input + ((b * in_row_dim + irow + upad) * in_col_dim + icol + lpad) * in_stride + kch;
                const elem_t *w = weights + ((krow * kernel_dim + kcol) * in_channels + kch) * weight_stride + poch;
                int b_id = b_reuse ? (kch + poch + krow + kcol == 0 ? 1 : 2) : 0;
                int a_id = a_reuse ? (kch + krow + kcol + b + porow + pocol == 0 ? 1 : 2) : 0;
                if (b_reuse && pocol + porow + b > 0) w = NULL;
                if (a_reuse && poch > 0) in = NULL;
                gemmini_loop_conv_ws(batch_size, in_row_dim, in_col_dim, in_channels, out_channels, out_row_dim,
                                     out_col_dim, out_row_dim, out_col_dim, stride, padding, kernel_dim,
                                     kernel_dilation, 1, 1, 0, b_, porows_, pocols_, pochs_, krows_, kcols_, kchs_,
                                     lpad, rpad, upad, dpad, 0, 0, 0, 0, porows_, pocols_, w, out, bias_, in, no_bias,
                                     true, false, false, false, act, false, false, false, false, 1, in_stride,
                                     weight_stride, out_stride, false, a_id, b_id);
              }
  library_loops_on_cpu(false, 0);
  gemmini_fence();
}

void tiled_conv_auto(int batch_size, int in_row_dim, int in_col_dim, int in_channels, int out_channels,
                     int out_row_dim, int out_col_dim, int stride, int input_dilation, int kernel_dilation,
                     int padding, int kernel_dim, bool wrot180, bool trans_output_1203, bool trans_input_3120,
                     bool trans_weight_1203, bool trans_weight_0132, const elem_t *input, const elem_t *weights,
                     const acc_t *bias, elem_t *output, int act, acc_scale_t scale, int pool_size, int pool_stride,
                     int pool_padding, enum tiled_matmul_type_t type) {
  const int full[NARGS] = {batch_size, out_row_dim, out_col_dim, out_channels, kernel_dim, kernel_dim, in_channels};
  int t[NARGS];
  for (int i = 0; i < NARGS; i++) t[i] = full[i];
  /* shrink the largest dimension until the tile fits (channels in steps of DIM) */
  while (!tile_fits(t, stride, kernel_dilation)) {
    int pick = -1;
    for (int i = 0; i < NARGS; i++) {
      if (i == POCOLS && t[POCOLS] <= DIM && t[POROWS] > 1) continue;
      if (t[i] > 1 && (pick < 0 || t[i] > t[pick])) pick = i;
    }
    if (pick < 0) sim_fail("tiled_conv_auto: even the smallest tile does not fit the scratchpad");
    if (pick == POCHS || pick == KCHS)
      t[pick] = t[pick] % DIM ? t[pick] / DIM * DIM : t[pick] - DIM;
    else
      t[pick]--;
    if (t[pick] < 1) t[pick] = 1;
  }
  /* then widen the output columns, then every dimension by one while it fits */
  while (t[POCOLS] < full[POCOLS]) {
    t[POCOLS]++;
    if (!tile_fits(t, stride, kernel_dilation)) { t[POCOLS]--; break; }
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (int i = 0; i < NARGS; i++) {
      if (t[i] >= full[i]) continue;
      t[i]++;
      if (tile_fits(t, stride, kernel_dilation)) grew = true;
      else t[i]--;
    }
  }
  tiled_conv(batch_size, in_row_dim, in_col_dim, in_channels, out_channels, out_row_dim, out_col_dim, stride,
             input_dilation, kernel_dilation, padding, kernel_dim, in_channels, out_channels, out_channels, wrot180,
             trans_output_1203, trans_input_3120, trans_weight_1203, trans_weight_0132, t[BATCHES], t[POROWS],
             t[POCOLS], t[POCHS], t[KROWS], t[KCOLS], t[KCHS], input, weights, bias, output, act, scale, pool_size,
             pool_stride, pool_padding, type);
}
