/* Row softmax with each exponential computed once (kept in y) and one multiply by 1/sum per element. */
#include <math.h>

void solution(int rows, int cols, const float *x, float *y) {
  for (int r = 0; r < rows; r++) {
    const float *row = x + (long)r * cols;
    float *out = y + (long)r * cols;
    float m = row[0];
    for (int c = 1; c < cols; c++) m = fmaxf(m, row[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; c++) s += (out[c] = expf(row[c] - m));
    const float inv = 1.0f / s;
    for (int c = 0; c < cols; c++) out[c] *= inv;
  }
}
