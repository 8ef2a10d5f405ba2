/* The sum of x[0..n), one element after another. */
float solution(long n, const float *x) {
  float s = 0.0f;
  for (long i = 0; i < n; i++) s += x[i];
  return s;
}
