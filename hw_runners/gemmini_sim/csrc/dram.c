/* The replayer's view of DRAM. Addresses are the kernel process's: those in a
 * problem array map onto the replayer's own copy; memory outside the arrays
 * that an mvout wrote is kept in a sparse map of 64-byte blocks; anything
 * else an mvin reads comes from the kernel's copy, shipped in the trace, and
 * must not change with the input values (checked by instruction number,
 * which is sound because the instruction stream is the same for every set).
 *
 * It also finds DRAM hazards. Gemmini orders instructions only by the
 * scratchpad/accumulator rows they use, never by DRAM address, and an mvout
 * counts as done once its rows are read out of the accumulator, before its
 * writes reach memory (ReservationStation.scala, Scratchpad.scala). An mvin
 * that reads bytes an earlier mvout writes may therefore read the old data
 * unless a fence() lies between them; the replayer reports it as an error. */
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

/* ---- sparse maps of 64-byte blocks ---------------------------------------------------------
 * Open addressing; every entry type starts with its key (block number + 1, 0 = empty slot). */
typedef struct { uint8_t *slots; size_t n, cap, size; const char *what; } blockmap_t;
#define MAX_BLOCKS (1u << 22)   /* 256 MiB of DRAM written by mvout */

static void *bm_slot(blockmap_t *m, size_t i) { return m->slots + i * m->size; }

static void *bm_get(blockmap_t *m, uint64_t block, int create) {
  uint64_t key = block + 1;
  if (create && (m->n + 1) * 2 > m->cap) {
    blockmap_t old = *m;
    m->cap = m->cap ? m->cap * 2 : 1024;
    if (m->cap > 2 * MAX_BLOCKS) sim_fail("mvout wrote more than 256 MiB of DRAM (%s)", m->what);
    m->slots = calloc(m->cap, m->size);
    if (!m->slots) harness_fail("out of memory for DRAM written by mvout");
    m->n = 0;
    for (size_t i = 0; i < old.cap; i++) {
      uint64_t k;
      memcpy(&k, old.slots + i * old.size, sizeof k);
      if (k) memcpy(bm_get(m, k - 1, 1), old.slots + i * old.size, old.size);
    }
    free(old.slots);
  }
  if (!m->cap) return NULL;
  for (size_t h = (key * 0x9E3779B97F4A7C15ull) & (m->cap - 1);; h = (h + 1) & (m->cap - 1)) {
    uint64_t *k = bm_slot(m, h);
    if (*k == key) return k;
    if (!*k) {
      if (!create) return NULL;
      *k = key;
      m->n++;
      return k;
    }
  }
}

static void bm_clear(blockmap_t *m) {
  free(m->slots);
  m->slots = NULL;
  m->n = m->cap = 0;
}

/* ---- DRAM outside the problem arrays that mvout wrote ------------------------------------------ */
typedef struct { uint64_t key, valid; uint8_t data[64]; } foreign_t;
static blockmap_t foreign = {.size = sizeof(foreign_t), .what = "outside the problem arrays"};

void dram_write(uint64_t addr, const uint8_t *src, size_t n) {
  for (size_t i = 0; i < n; i++) {
    foreign_t *b = bm_get(&foreign, (addr + i) >> 6, 1);
    b->data[(addr + i) & 63] = src[i];
    b->valid |= 1ull << ((addr + i) & 63);
  }
}

int dram_mvout_byte(uint64_t addr, uint8_t *out) {
  foreign_t *b = bm_get(&foreign, addr >> 6, 0);
  if (!b || !(b->valid >> (addr & 63) & 1)) return 0;
  *out = b->data[addr & 63];
  return 1;
}

/* ---- hazards: bytes written by mvouts since the last fence ------------------------------------- */
typedef struct { uint64_t key, bytes, writer; uint32_t epoch, fsm; } unfenced_t;
static blockmap_t unfenced = {.size = sizeof(unfenced_t), .what = "since the last fence"};
static uint32_t epoch = 1;
static uint64_t rows_since_fence;
static int hazards_on;

static uint64_t byte_mask(uint64_t from, uint64_t to) {   /* bytes [from, to) of a block, 0 <= from < to <= 64 */
  return (to - from == 64 ? ~0ull : ((1ull << (to - from)) - 1)) << from;
}

void dram_note_mvout(uint64_t addr, uint64_t n, uint64_t instr, int fsm) {
  if (!hazards_on || !n) return;
  rows_since_fence++;
  for (uint64_t block = addr >> 6; block <= (addr + n - 1) >> 6; block++) {
    unfenced_t *u = bm_get(&unfenced, block, 1);
    if (u->epoch != epoch) u->epoch = epoch, u->bytes = 0;
    uint64_t lo = block << 6 > addr ? 0 : addr & 63, hi = (block + 1) << 6 <= addr + n ? 64 : (addr + n) & 63;
    u->bytes |= byte_mask(lo, hi);
    u->writer = instr;
    u->fsm = (uint32_t)fsm;
  }
}

void dram_check_unfenced(uint64_t addr, uint64_t n) {
  if (!hazards_on || !rows_since_fence || !n) return;
  for (uint64_t block = addr >> 6; block <= (addr + n - 1) >> 6; block++) {
    unfenced_t *u = bm_get(&unfenced, block, 0);
    if (!u || u->epoch != epoch) continue;
    uint64_t lo = block << 6 > addr ? 0 : addr & 63, hi = (block + 1) << 6 <= addr + n ? 64 : (addr + n) & 63;
    uint64_t both = u->bytes & byte_mask(lo, hi);
    if (!both) continue;
    sim_fail("reads DRAM at 0x%llx, which mvout #%llu%s wrote with no fence() in between. Gemmini orders "
             "instructions only by scratchpad/accumulator rows, never by DRAM address, so on the hardware this "
             "load may see the old data: put a fence() after the mvout",
             (unsigned long long)((block << 6) + (uint64_t)__builtin_ctzll(both)), (unsigned long long)u->writer,
             u->fsm == 1 ? " (issued by gemmini_loop_ws)" : u->fsm == 2 ? " (issued by gemmini_loop_conv_ws)" : "");
  }
}

void dram_fence(void) {
  epoch++;
  rows_since_fence = 0;
}

/* ---- data the kernel loaded from its own memory must not depend on the inputs --------------------
 * The hash of what each such mvin read in input set 1 is kept (by instruction number; the instruction
 * stream is the same for every set) and later sets must read the same bytes. A mismatch is reported at
 * the end of the set, after the more fundamental check that the instruction streams agree. */
typedef struct { uint64_t instr, hash; } constant_t;
static constant_t *constants;
static size_t nconstants, cap_constants;
static int current_set;
static uint64_t changed_constant;   /* first instruction whose kernel-memory data changed, 0 if none */

static uint64_t dram_hash(uint64_t h, const void *p, size_t n) {
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

void dram_set_region(int i, uint64_t base, uint64_t size, uint8_t *mine) {
  regions[i] = (region_t){base, size, mine};
}

/* A new input set: its own arrays and no mvout results yet. Hazards depend only on addresses, which
 * are the same in every set, so they are tracked in the first set only. */
void dram_begin_set(int set, int narrays) {
  nregions = narrays;
  current_set = set;
  changed_constant = 0;
  bm_clear(&foreign);
  bm_clear(&unfenced);
  rows_since_fence = 0;
  hazards_on = set == 0;
}

uint64_t dram_changed_constant(void) { return changed_constant; }
