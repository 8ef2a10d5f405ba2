/* Row softmax, 8 lanes at a time (cols % 8 == 0). exp(x) = 2^n * exp(r) with n = round(x / ln 2) and
 * r = x - n ln 2 (ln 2 split in two constants for accuracy), exp(r) by the degree-5 polynomial of Cephes'
 * expf (relative error about 1e-7 on |r| <= ln 2 / 2), 2^n built in the exponent bits. */
#include <immintrin.h>

static inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));            /* below it 2^n leaves the normal floats */
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

static inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_shuffle_ps(s, s, 1)));
}

void solution(int rows, int cols, const float *x, float *y) {
  for (int r = 0; r < rows; r++) {
    const float *row = x + (long)r * cols;
    float *out = y + (long)r * cols;
    __m256 m = _mm256_loadu_ps(row);
    for (int c = 8; c < cols; c += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(row + c));
    const __m256 mx = _mm256_set1_ps(hmax(m));
    __m256 s = _mm256_setzero_ps();
    for (int c = 0; c < cols; c += 8) {
      const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(row + c), mx));
      _mm256_storeu_ps(out + c, e);
      s = _mm256_add_ps(s, e);
    }
    const __m256 inv = _mm256_set1_ps(1.0f / hsum(s));
    for (int c = 0; c < cols; c += 8) _mm256_storeu_ps(out + c, _mm256_mul_ps(_mm256_loadu_ps(out + c), inv));
  }
}
