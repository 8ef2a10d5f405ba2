/* Four 8-wide AVX2 accumulators, 32 floats per iteration (n % 32 == 0). */
#include <immintrin.h>

float solution(long n, const float *x) {
  __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
  for (long i = 0; i < n; i += 32) {
    a = _mm256_add_ps(a, _mm256_loadu_ps(x + i));
    b = _mm256_add_ps(b, _mm256_loadu_ps(x + i + 8));
    c = _mm256_add_ps(c, _mm256_loadu_ps(x + i + 16));
    d = _mm256_add_ps(d, _mm256_loadu_ps(x + i + 24));
  }
  const __m256 v = _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}
