/* The replayer's view of DRAM. Addresses are the kernel process's: those in a
 * problem array map onto the replayer's own copy; memory outside the arrays
 * that an mvout wrote is kept in a sparse map of 64-byte blocks; anything
 * else an mvin reads comes from the kernel's copy, shipped in the trace, and
 * must not change with the input values (checked by instruction number,
 * which is sound because the instruction stream is the same for every set). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "sim.h"

typedef struct { uint64_t base, size; uint8_t *mine; } region_t;
static region_t regions[MAX_ARGS];
static int nregions;

uint8_t *dram_in_region(uint64_t addr, uint64_t span) {
  for (int i = 0; i < nregions; i++) {
    region_t *g = &regions[i];
    if (addr >= g->base && span <= g->size && addr - g->base <= g->size - span) return g->mine + (addr - g->base);
  }
  return NULL;
}

/* Sparse map of 64-byte blocks of "foreign" DRAM written by mvout. */
typedef struct { uint64_t key; uint64_t valid; uint8_t data[64]; } block_t;
static block_t *blocks;
static size_t nblocks, cap_blocks;
#define MAX_FOREIGN_BLOCKS (1u << 22)   /* 256 MiB */

static block_t *block_at(uint64_t key, int create) {
  if (create && (nblocks + 1) * 2 > cap_blocks) {
    size_t ncap = cap_blocks ? cap_blocks * 2 : 1024;
    if (ncap > 2 * MAX_FOREIGN_BLOCKS) sim_fail("mvout wrote more than 256 MiB outside the problem arrays");
    block_t *old = blocks;
    size_t oldcap = cap_blocks;
    blocks = calloc(ncap, sizeof *blocks);
    if (!blocks) harness_fail("out of memory for DRAM written by mvout");
    cap_blocks = ncap;
    nblocks = 0;
    for (size_t i = 0; i < oldcap; i++)
      if (old[i].valid) { *block_at(old[i].key, 1) = old[i]; }
    free(old);
  }
  if (!cap_blocks) return NULL;
  for (size_t h = (key * 0x9E3779B97F4A7C15ull) & (cap_blocks - 1);; h = (h + 1) & (cap_blocks - 1)) {
    if (blocks[h].valid && blocks[h].key == key) return &blocks[h];
    if (!blocks[h].valid) {
      if (!create) return NULL;
      blocks[h].key = key;
      nblocks++;
      return &blocks[h];
    }
  }
}

void dram_write(uint64_t addr, const uint8_t *src, size_t n) {
  for (size_t i = 0; i < n; i++) {
    block_t *b = block_at((addr + i) >> 6, 1);
    b->data[(addr + i) & 63] = src[i];
    b->valid |= 1ull << ((addr + i) & 63);
  }
}

/* Data the kernel loaded from its own memory must not depend on the inputs: the hash of what each such
 * mvin read in input set 1 is kept (by instruction number; the instruction stream is the same for every
 * set) and later sets must read the same bytes. A mismatch is reported at the end of the set, after the
 * more fundamental check that the instruction streams agree. */
typedef struct { uint64_t instr, hash; } constant_t;
static constant_t *constants;
static size_t nconstants, cap_constants;
static int current_set;
static uint64_t changed_constant;   /* first instruction whose kernel-memory data changed, 0 if none */

uint64_t dram_hash(uint64_t h, const void *p, size_t n) {
  const uint8_t *c = p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

void dram_check_constant(uint64_t instr, const uint8_t *data, size_t n) {
  uint64_t h = dram_hash(1469598103934665603ull, data, n);
  if (current_set == 0) {
    if (nconstants == cap_constants) {
      cap_constants = cap_constants ? cap_constants * 2 : 256;
      constants = realloc(constants, cap_constants * sizeof *constants);
      if (!constants) harness_fail("out of memory for kernel constants");
    }
    constants[nconstants++] = (constant_t){instr, h};
    return;
  }
  size_t lo = 0, hi = nconstants;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (constants[mid].instr < instr) lo = mid + 1; else hi = mid;
  }
  if ((lo == nconstants || constants[lo].instr != instr || constants[lo].hash != h) && !changed_constant)
    changed_constant = instr;
}

int dram_mvout_byte(uint64_t addr, uint8_t *out) {
  block_t *b = block_at(addr >> 6, 0);
  if (!b || !(b->valid >> (addr & 63) & 1)) return 0;
  *out = b->data[addr & 63];
  return 1;
}


void dram_set_region(int i, uint64_t base, uint64_t size, uint8_t *mine) {
  regions[i] = (region_t){base, size, mine};
}

void dram_begin_set(int set, int narrays) {
  nregions = narrays;
  current_set = set;
  changed_constant = 0;
  free(blocks);
  blocks = NULL;
  nblocks = cap_blocks = 0;
}

uint64_t dram_changed_constant(void) { return changed_constant; }
