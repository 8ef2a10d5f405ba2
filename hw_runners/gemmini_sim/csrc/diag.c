/* Diagnostics shared by the kernel process and the replayer: instruction
 * numbering (both sides number instructions identically, loop-FSM
 * instructions included, so a crash in one and an error in the other name the
 * same instruction), error reporting on the stats descriptor, and the
 * instruction budget. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "sim.h"

#define FD_STATS 5

simcfg_t g_cfg;
static uint64_t instr_index;
static const char *instr_name = "startup";
static int instr_fsm;

void diag_put(const char *s) {
  size_t n = strlen(s);
  while (n) {
    ssize_t w = write(FD_STATS, s, n);
    if (w <= 0) return;
    s += w; n -= (size_t)w;
  }
}

void harness_fail(const char *msg) {
  diag_put("error ");
  diag_put(msg);
  diag_put("\n");
  _exit(3);
}

void op_begin(const char *name, int fsm) {
  instr_name = name;
  instr_fsm = fsm;
  if (++instr_index > (uint64_t)g_cfg.max_instructions)
    sim_fail("more than %lld Gemmini instructions issued; the kernel loops forever or is far too slow",
             (long long)g_cfg.max_instructions);
}

void diag_reset(void) {
  instr_index = 0;
  instr_name = "startup";
  instr_fsm = 0;
}

void diag_context(const char *what) {   /* a point in the kernel that is not an instruction */
  instr_name = what;
  instr_fsm = 0;
}

uint64_t instr_number(void) { return instr_index; }

const char *sim_current_instr(void) {
  static char text[160];
  snprintf(text, sizeof text, "%s #%llu%s", instr_name, (unsigned long long)instr_index,
           instr_fsm == 1 ? " (issued by gemmini_loop_ws)" : instr_fsm == 2 ? " (issued by gemmini_loop_conv_ws)" : "");
  return text;
}

/* "<instruction>: <message>" into buf; returns where the message starts. */
int diag_format(char *buf, size_t cap, const char *fmt, va_list ap) {
  int n = snprintf(buf, cap, "%s: ", sim_current_instr());
  vsnprintf(buf + n, cap - (size_t)n, fmt, ap);
  return n;
}

void sim_fail(const char *fmt, ...) {
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  diag_format(msg, sizeof msg, fmt, ap);
  va_end(ap);
  harness_fail(msg);
}
