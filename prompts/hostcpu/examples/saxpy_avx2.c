/* y = a * x + y over n floats with AVX2 FMAs, 16 per iteration in two independent registers, and a scalar
 * tail for n not a multiple of 16. (An example of the style, not one of the problems.) */
#include <immintrin.h>

void saxpy(long n, float a, const float *x, float *y) {
  const __m256 va = _mm256_set1_ps(a);
  long i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    _mm256_storeu_ps(y + i + 8, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8)));
  }
  for (; i < n; i++) y[i] = a * x[i] + y[i];
}
