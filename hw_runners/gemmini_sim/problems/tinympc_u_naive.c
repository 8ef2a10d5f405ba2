// u_i = -(Kinf^T x_i) - d_i on the fp32 4x4 array. -d_i is loaded into the accumulator first (mvin3 with
// scale -1); each 4-row block of Kinf (loaded negated, used transposed) times the matching 4 entries of x_i
// accumulates onto it. One block at a time, nothing overlapped.
void solution(float Kinf[12][4], float x_i[12][1], float d_i[4][1], float u_i[4][1]) {
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, true, false);   // A is read transposed
  gemmini_extended3_config_ld(4 * sizeof(float), -1.0f, false, 0);   // Kinf rows: 4 floats, negated
  gemmini_extended3_config_ld(sizeof(float), 1.0f, false, 1);        // x_i: one float per row
  gemmini_extended3_config_ld(sizeof(float), -1.0f, false, 2);       // d_i, negated
  gemmini_extended_config_st(sizeof(float), NO_ACTIVATION, 1.0f);
  gemmini_extended_mvin3(d_i, ACC_ADDR_BIT, 1, DIM);
  for (int k = 0; k < 12; k += DIM) {
    gemmini_extended_mvin(&Kinf[k][0], 0, DIM, DIM);
    gemmini_extended_mvin2(&x_i[k][0], DIM, 1, DIM);
    gemmini_extended_preload(DIM, ACC_ADDR_BIT | ACCUMULATE_BIT, 1, DIM, 1, DIM);
    gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
  }
  gemmini_extended_mvout(u_i, ACC_ADDR_BIT, 1, DIM);
  gemmini_fence();
}
