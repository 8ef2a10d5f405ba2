/* The replayer's instruction stream (trusted side).
 *
 * Records arrive from the kernel process through a pipe (fd 7). The first
 * public input set's records are kept; every later public set must send the
 * same records byte for byte (instructions, addresses, loop arguments: what a
 * kernel issues must not depend on the input values), except the bytes an
 * mvin ships from the kernel's own memory, which dram.c checks separately.
 * Hidden input sets, which the kernel process never receives, replay the kept
 * records: that is sound precisely because the stream may not depend on the
 * inputs, and it is what makes answers the CPU prepared useless. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sim.h"

#define FD_TRACE_IN 7

static rec_t tbuf[4096];
static size_t tpos, tlen;

static int pipe_record(rec_t *r) {
  if (tpos == tlen) {
    size_t got = 0;
    char *p = (char *)tbuf;
    while (got < sizeof(rec_t)) {   /* at least one whole record, then whatever else is there */
      ssize_t n = read(FD_TRACE_IN, p + got, sizeof tbuf - got);
      if (n <= 0) {
        if (got == 0) return 0;
        harness_fail("the trace ends in the middle of a record");
      }
      got += (size_t)n;
    }
    while (got % sizeof(rec_t)) {
      ssize_t n = read(FD_TRACE_IN, p + got, sizeof(rec_t) - got % sizeof(rec_t));
      if (n <= 0) harness_fail("the trace ends in the middle of a record");
      got += (size_t)n;
    }
    tpos = 0;
    tlen = got / sizeof(rec_t);
  }
  *r = tbuf[tpos++];
  return 1;
}

static uint8_t *kept;
static size_t kept_len, kept_cap, kept_pos;
static enum { FIRST, COMPARE, KEPT } mode;
static int stream_set;
static const char *op_names[] = {"?", "config", "mvin", "mvout", "preload", "compute", "fence", "loop call",
                                 "?", "?", "end of the call", "mvin data"};

void stream_begin_set(int set, int hidden) {
  mode = hidden ? KEPT : set == 0 ? FIRST : COMPARE;
  stream_set = set;
  kept_pos = 0;
}

static void diverged(const rec_t *now, int part) {
  char msg[600];
  const char *why = "different instructions or operands";
  const rec_t *was = kept_pos + sizeof *now <= kept_len ? (const rec_t *)(kept + kept_pos) : NULL;
  if (part == STREAM_LOOP_ARGS) why = "different loop arguments";
  else if (!was || was->op == R_END) why = "more instructions";
  else if (now->op == R_END) why = "fewer instructions";
  else if (was->op != now->op) why = "a different instruction";
  else if (was->dram != now->dram && !dram_in_region(now->dram, 1))
    why = "a DRAM address outside the problem's arrays (memory the kernel allocates must be at the same "
          "address in every call: allocate it statically, or free it before returning)";
  int op = now->op < (int)(sizeof op_names / sizeof *op_names) ? now->op : 0;
  snprintf(msg, sizeof msg, "the kernel issued %s for input set %d than for input set 1 (around instruction #%llu, "
           "%s): what it issues must not depend on the input values", why, stream_set + 1,
           (unsigned long long)instr_number() + 1, part == STREAM_LOOP_ARGS ? "loop arguments" : op_names[op]);
  harness_fail(msg);
}

int stream_next(rec_t *r, int part) {
  if (mode == KEPT) {
    if (kept_pos + sizeof *r > kept_len) return 0;
    memcpy(r, kept + kept_pos, sizeof *r);
    kept_pos += sizeof *r;
    return 1;
  }
  if (!pipe_record(r)) return 0;
  if (part == STREAM_RAW) return 1;
  if (mode == FIRST) {
    if (kept_len + sizeof *r > kept_cap) {
      kept_cap = kept_cap ? kept_cap * 2 : 1 << 16;
      kept = realloc(kept, kept_cap);
      if (!kept) harness_fail("out of memory for the instruction stream");
    }
    memcpy(kept + kept_len, r, sizeof *r);
    kept_len += sizeof *r;
    return 1;
  }
  if (part != STREAM_DATA && (kept_pos + sizeof *r > kept_len || memcmp(kept + kept_pos, r, sizeof *r)))
    diverged(r, part);
  kept_pos += sizeof *r;
  return 1;
}
