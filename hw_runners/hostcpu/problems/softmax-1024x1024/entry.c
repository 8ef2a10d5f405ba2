/* Trusted glue: the problem's signature, the kernel, and the call on the harness's buffers. */
void solution(int rows, int cols, const float *x, float *y);
#include "kernel.c"
void autocomp_entry(float **in, float *out) { solution(1024, 1024, in[0], out); }
