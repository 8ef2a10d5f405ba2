/* i-k-j order: C's row i accumulates A[i][k] times B's row k, so the inner loop is unit-stride in B and C. */
void solution(int M, int N, int K, const float *A, const float *B, float *C) {
  for (int i = 0; i < M; i++) {
    float *c = C + i * N;
    for (int j = 0; j < N; j++) c[j] = 0.0f;
    for (int k = 0; k < K; k++) {
      const float a = A[i * K + k];
      const float *b = B + k * N;
      for (int j = 0; j < N; j++) c[j] += a * b[j];
    }
  }
}
