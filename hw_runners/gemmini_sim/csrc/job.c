/* The job: a text header (timing parameters, argument sizes, number of public
 * and hidden input sets) then the raw input arrays of every set. The
 * replayer reads it from the job file written by hw_runners/gemmini_sim/
 * target.py; the kernel process never sees that file: the replayer forwards
 * the header and then one public input set at a time through a pipe. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "sim.h"

static char rbuf[1 << 16];
static size_t rpos, rlen;

/* One line of the header, also appended (with its newline) to the job's copy of the header text. */
static int read_line(int fd, char *line, size_t cap, job_t *job) {
  size_t i = 0;
  for (;;) {
    if (rpos == rlen) {
      ssize_t r = read(fd, rbuf, sizeof rbuf);
      if (r <= 0) return 0;
      rpos = 0; rlen = (size_t)r;
    }
    char c = rbuf[rpos++];
    if (job->text_len + 1 >= sizeof job->text) harness_fail("job header too long");
    job->text[job->text_len++] = c;
    if (c == '\n' || i + 1 == cap) { line[i] = 0; return 1; }
    line[i++] = c;
  }
}

void job_read(int fd, void *dst, size_t n) {
  char *p = dst;
  while (n) {
    size_t k;
    if (rpos < rlen) {
      k = rlen - rpos < n ? rlen - rpos : n;
      memcpy(p, rbuf + rpos, k);
      rpos += k;
    } else {
      ssize_t r = read(fd, p, n);
      if (r <= 0) harness_fail("job file ended early");
      k = (size_t)r;
    }
    p += k; n -= k;
  }
}

#define FIELD(name) {#name, &g_cfg.name}
static const struct { const char *name; int64_t *field; } cfg_fields[] = {
  FIELD(spad_rows), FIELD(spad_banks), FIELD(acc_rows), FIELD(acc_banks), FIELD(dma_beat_bytes), FIELD(dma_max_bytes),
  FIELD(dma_inflight_reqs), FIELD(dma_inflight_cmds), FIELD(dma_latency), FIELD(ld_rs), FIELD(ex_rs), FIELD(st_rs),
  FIELD(cpu_issue_cycles), FIELD(config_cycles), FIELD(min_rows), FIELD(spad_read_delay), FIELD(mesh_output_delay),
  FIELD(acc_latency), FIELD(tile_latency), FIELD(mvin_scale_latency), FIELD(acc_scale_latency),
  FIELD(loop_ws_commands), FIELD(loop_conv_commands), FIELD(concurrent_loops), FIELD(fsm_start_cycles),
  FIELD(max_instructions), FIELD(library_hwloop), FIELD(library_block_cycles), FIELD(library_conv_block_cycles),
  FIELD(scalar_call_cycles), FIELD(scalar_add_cycles), FIELD(scalar_negate_cycles),
};

void job_read_header(int fd, job_t *job) {
  char line[256], key[64], mode[8];
  long long v;
  memset(job, 0, sizeof *job);
  job->out_arg = -1;
  job->sets = 1;
  if (!read_line(fd, line, sizeof line, job) || strcmp(line, "gemmini-sim-job 1")) harness_fail("bad job header");
  while (read_line(fd, line, sizeof line, job) && strcmp(line, "end")) {
    if (sscanf(line, "cfg %63s %lld", key, &v) == 2) {
      size_t i;
      for (i = 0; i < sizeof cfg_fields / sizeof *cfg_fields; i++)
        if (!strcmp(cfg_fields[i].name, key)) { *cfg_fields[i].field = v; break; }
      if (i == sizeof cfg_fields / sizeof *cfg_fields) harness_fail("unknown timing parameter in job");
      if (v < 0 || (v == 0 && strcmp(key, "tile_latency") && strcmp(key, "mesh_output_delay") && strncmp(key, "library_", 8) &&
                           strncmp(key, "scalar_", 7))) harness_fail("timing parameters must be positive");
    } else if (sscanf(line, "arg %7s %lld", mode, &v) == 2 && job->nargs < MAX_ARGS && v > 0) {
      job->is_input[job->nargs] = !strcmp(mode, "in");
      job->bytes[job->nargs++] = (size_t)v;
    } else if (sscanf(line, "out_arg %lld", &v) == 1) job->out_arg = (int)v;
    else if (sscanf(line, "sets %lld", &v) == 1 && v > 0 && v < 100) job->sets = (int)v;
    else if (sscanf(line, "hidden %lld", &v) == 1 && v >= 0 && v < 100) job->hidden = (int)v;
    else if (sscanf(line, "macs %lld", &v) == 1) job->macs_required = v;
    else if (sscanf(line, "trace %lld", &v) == 1) job->trace = (int)v;
    else harness_fail("unknown line in job header");
  }
  if (job->out_arg < 0 || job->out_arg >= job->nargs || job->is_input[job->out_arg])
    harness_fail("job names no output argument");
}
