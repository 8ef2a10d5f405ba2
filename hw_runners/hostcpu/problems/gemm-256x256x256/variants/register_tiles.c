/* Register tiling: each 4 x 16 tile of C lives in eight AVX2 accumulators while k runs over a panel of 128
 * (the panel of B, 128 x 16 floats = 8 KiB, stays in L1 across the four rows). M % 4 == 0, N % 16 == 0,
 * K % 128 == 0. */
#include <immintrin.h>

#define KP 128

void solution(int M, int N, int K, const float *A, const float *B, float *C) {
  for (int i = 0; i < M * N; i += 8) _mm256_storeu_ps(C + i, _mm256_setzero_ps());
  for (int k0 = 0; k0 < K; k0 += KP)
    for (int j = 0; j < N; j += 16)
      for (int i = 0; i < M; i += 4) {
        __m256 c[4][2];
        for (int r = 0; r < 4; r++) {
          c[r][0] = _mm256_loadu_ps(C + (i + r) * N + j);
          c[r][1] = _mm256_loadu_ps(C + (i + r) * N + j + 8);
        }
        for (int k = k0; k < k0 + KP; k++) {
          const __m256 b0 = _mm256_loadu_ps(B + k * N + j), b1 = _mm256_loadu_ps(B + k * N + j + 8);
          for (int r = 0; r < 4; r++) {
            const __m256 a = _mm256_broadcast_ss(A + (i + r) * K + k);
            c[r][0] = _mm256_fmadd_ps(a, b0, c[r][0]);
            c[r][1] = _mm256_fmadd_ps(a, b1, c[r][1]);
          }
        }
        for (int r = 0; r < 4; r++) {
          _mm256_storeu_ps(C + (i + r) * N + j, c[r][0]);
          _mm256_storeu_ps(C + (i + r) * N + j + 8, c[r][1]);
        }
      }
}
