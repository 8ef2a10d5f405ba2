/* Four independent accumulators (n % 4 == 0): the adds of one iteration do not wait on each other. */
float solution(long n, const float *x) {
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  for (long i = 0; i < n; i += 4) {
    s0 += x[i];
    s1 += x[i + 1];
    s2 += x[i + 2];
    s3 += x[i + 3];
  }
  return (s0 + s1) + (s2 + s3);
}
