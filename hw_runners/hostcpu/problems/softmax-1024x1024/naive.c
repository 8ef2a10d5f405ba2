/* Row softmax, three passes per row: the maximum, the sum of exponentials, then each exponential again
 * divided by the sum. */
#include <math.h>

void solution(int rows, int cols, const float *x, float *y) {
  for (int r = 0; r < rows; r++) {
    const float *row = x + (long)r * cols;
    float m = row[0];
    for (int c = 1; c < cols; c++) m = fmaxf(m, row[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; c++) s += expf(row[c] - m);
    for (int c = 0; c < cols; c++) y[(long)r * cols + c] = expf(row[c] - m) / s;
  }
}
