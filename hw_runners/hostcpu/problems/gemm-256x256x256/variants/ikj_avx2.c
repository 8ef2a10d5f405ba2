/* i-k-j order, the inner loop as 8-wide AVX2 FMAs (N is a multiple of 8). */
#include <immintrin.h>

void solution(int M, int N, int K, const float *A, const float *B, float *C) {
  for (int i = 0; i < M; i++) {
    float *c = C + i * N;
    for (int j = 0; j < N; j += 8) _mm256_storeu_ps(c + j, _mm256_setzero_ps());
    for (int k = 0; k < K; k++) {
      const __m256 a = _mm256_set1_ps(A[i * K + k]);
      const float *b = B + k * N;
      for (int j = 0; j < N; j += 8)
        _mm256_storeu_ps(c + j, _mm256_fmadd_ps(a, _mm256_loadu_ps(b + j), _mm256_loadu_ps(c + j)));
    }
  }
}
