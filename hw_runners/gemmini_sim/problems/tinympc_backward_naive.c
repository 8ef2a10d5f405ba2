// TinyMPC's backward pass on the fp32 4x4 array, one matrix-vector product at a time, for i = N-2 .. 0:
//   t = Bdyn^T p[i+1] + r[i]                        (r[i] as the accumulator's start; t to DRAM, then a fence)
//   d[i] = Quu_inv^T t
//   p[i] = q[i] + AmBKt p[i+1] - Kinf^T r[i]        (q[i] as the start; Kinf loaded negated)
// Transposed operands are read with config_ex's A_transpose. Nothing overlaps.
static float t[4][1];

static void product(const float *a, uint64_t a_stride_bytes, float scale, bool transposed, const float *v,
                    uint32_t acc_row) {
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, transposed, false);
  gemmini_extended3_config_ld(a_stride_bytes, scale, false, 0);
  gemmini_extended_mvin(a, 0, DIM, DIM);
  gemmini_extended_mvin2(v, DIM, 1, DIM);
  gemmini_extended_preload(DIM, ACC_ADDR_BIT | ACCUMULATE_BIT | acc_row, 1, DIM, 1, DIM);
  gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
}

void solution(float Bdyn[12][4], float Quu_inv[4][4], float Kinf[4][12], float AmBKt[12][12],
              float p[NHORIZON][12][1], float d[NHORIZON - 1][4][1], float r[NHORIZON][4][1],
              float q[NHORIZON][12][1]) {
  gemmini_extended3_config_ld(sizeof(float), 1.0f, false, 1);   // vectors: one float per row
  gemmini_extended3_config_ld(sizeof(float), 1.0f, false, 2);   // the accumulator's starting values
  gemmini_extended_config_st(sizeof(float), NO_ACTIVATION, 1.0f);
  for (int i = NHORIZON - 2; i >= 0; i--) {
    gemmini_extended_mvin3(r[i], ACC_ADDR_BIT, 1, DIM);
    for (int k = 0; k < 12; k += DIM) product(&Bdyn[k][0], 4 * sizeof(float), 1.0f, true, &p[i + 1][k][0], 0);
    gemmini_extended_mvout(t, ACC_ADDR_BIT, 1, DIM);
    gemmini_fence();   // t is read back next
    gemmini_extended_mvin3(NULL, ACC_ADDR_BIT, 1, DIM);   // zeros
    product(&Quu_inv[0][0], 4 * sizeof(float), 1.0f, true, &t[0][0], 0);
    gemmini_extended_mvout(d[i], ACC_ADDR_BIT, 1, DIM);
    for (int row = 0; row < 12; row += DIM) {
      gemmini_extended_mvin3(&q[i][row][0], ACC_ADDR_BIT | DIM, 1, DIM);
      for (int k = 0; k < 12; k += DIM)
        product(&AmBKt[row][k], 12 * sizeof(float), 1.0f, false, &p[i + 1][k][0], DIM);
      product(&Kinf[0][row], 12 * sizeof(float), -1.0f, true, &r[i][0][0], DIM);
      gemmini_extended_mvout(&p[i][row][0], ACC_ADDR_BIT | DIM, 1, DIM);
    }
    gemmini_fence();   // p[i] is read in the next step
  }
}
