// TinyMPC's forward pass on the fp32 4x4 array, one matrix-vector product at a time:
//   u[i] = -Kinf x[i] - d[i]           (Kinf loaded negated, -d[i] as the accumulator's start)
//   x[i+1] = Adyn x[i] + Bdyn u[i]     (u[i] comes back from DRAM after a fence)
// Every block is loaded again for every use and nothing overlaps.
static void matvec_block(const float *a, uint64_t a_stride_bytes, float scale, const float *v, uint32_t acc_row,
                         bool accumulate) {
  gemmini_extended3_config_ld(a_stride_bytes, scale, false, 0);
  gemmini_extended_mvin(a, 0, DIM, DIM);
  gemmini_extended_mvin2(v, DIM, 1, DIM);
  gemmini_extended_preload(DIM, ACC_ADDR_BIT | (accumulate ? ACCUMULATE_BIT : 0) | acc_row, 1, DIM, 1, DIM);
  gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
}

void solution(float Adyn[12][12], float Bdyn[12][4], float Kinf[4][12], float x[NHORIZON + 1][12][1],
              float d[NHORIZON][4][1], float u[NHORIZON][4][1]) {
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended3_config_ld(sizeof(float), 1.0f, false, 1);        // vectors: one float per row
  gemmini_extended3_config_ld(sizeof(float), -1.0f, false, 2);       // d[i], negated
  gemmini_extended_config_st(sizeof(float), NO_ACTIVATION, 1.0f);
  for (int i = 0; i < NHORIZON; i++) {
    gemmini_extended_mvin3(d[i], ACC_ADDR_BIT, 1, DIM);
    for (int k = 0; k < 12; k += DIM) matvec_block(&Kinf[0][k], 12 * sizeof(float), -1.0f, &x[i][k][0], 0, true);
    gemmini_extended_mvout(u[i], ACC_ADDR_BIT, 1, DIM);
    gemmini_fence();   // u[i] is read back below
    for (int r = 0; r < 12; r += DIM) {
      for (int k = 0; k < 12; k += DIM)
        matvec_block(&Adyn[r][k], 12 * sizeof(float), 1.0f, &x[i][k][0], DIM, k > 0);
      matvec_block(&Bdyn[r][0], 4 * sizeof(float), 1.0f, &u[i][0][0], DIM, true);
      gemmini_extended_mvout(&x[i + 1][r][0], ACC_ADDR_BIT | DIM, 1, DIM);
    }
    gemmini_fence();   // x[i+1] is read in the next step
  }
}
