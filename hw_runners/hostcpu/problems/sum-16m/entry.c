/* Trusted glue: the problem's signature, the kernel, and the call on the harness's buffers. */
float solution(long n, const float *x);
#include "kernel.c"
void autocomp_entry(float **in, float *out) { out[0] = solution(16777216L, in[0]); }
