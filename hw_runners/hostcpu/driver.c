/* hostcpu's trusted driver, linked with entry.c (the problem's glue, which includes the candidate's kernel.c).
 * It only runs the kernel when told: it maps the shared memory the harness passes as descriptor 3 (inputs
 * then the output, each padded to whole pages, counts of floats on the command line), and for every 'g' read
 * from descriptor 4 calls the kernel once and writes 'd' to descriptor 5. It decides nothing: the harness
 * writes the inputs, checks the output and keeps the clock. Whatever the kernel does to this process (it
 * shares it) can only change what the harness sees, never what it concludes from it. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_INPUTS 8

void autocomp_entry(float **in, float *out);

static size_t padded(size_t floats) { return (floats * sizeof(float) + 4095) & ~(size_t)4095; }

int main(int argc, char **argv) {
  int n = argc - 2;                       /* argv: each input's count of floats, then the output's */
  if (n < 1 || n > MAX_INPUTS) return 2;
  size_t off[MAX_INPUTS + 1], total = 0;
  for (int i = 0; i <= n; i++) {
    off[i] = total;
    total += padded(strtoull(argv[i + 1], NULL, 10));
  }
  char *base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, 3, 0);
  if (base == MAP_FAILED) return 3;
  float *in[MAX_INPUTS];
  for (int i = 0; i < n; i++) in[i] = (float *)(base + off[i]);
  float *out = (float *)(base + off[n]);
  char c;
  while (read(4, &c, 1) == 1 && c == 'g') {
    autocomp_entry(in, out);
    if (write(5, "d", 1) != 1) return 4;
  }
  return 0;
}
