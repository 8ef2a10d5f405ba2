/* Harness of one gemmini-sim evaluation, linked with the candidate kernel.
 *
 * fd 3: job (text header, then the raw input arrays of every input set)
 * fd 4: raw output arrays of every set          fd 5: stats ("key value" lines)
 * fd 6: optional per-instruction timing trace
 *
 * Before any kernel code runs it installs a seccomp allowlist: the kernel may
 * compute, allocate memory and print; it may not open files, create
 * processes or threads, use sockets or signal other processes. Forbidden
 * calls and crashes are reported with the last Gemmini instruction issued.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "sim.h"

#define FD_JOB 3
#define FD_OUT 4
#define FD_STATS 5
#define FD_TRACE 6

void autocomp_entry(void **bufs);
void fsm_reset(void);

static void put(const char *s) {
  size_t n = strlen(s);
  while (n) {
    ssize_t w = write(FD_STATS, s, n);
    if (w <= 0) return;
    s += w; n -= (size_t)w;
  }
}

void harness_fail(const char *msg) {
  put("error ");
  put(msg);
  put("\n");
  _exit(3);
}

/* ---- crash reporting ------------------------------------------------------ */
static const struct { long nr; const char *name; } syscall_names[] = {
#ifdef SYS_open
  {SYS_open, "open"},
#endif
#ifdef SYS_fork
  {SYS_fork, "fork"},
#endif
#ifdef SYS_vfork
  {SYS_vfork, "vfork"},
#endif
  {SYS_openat, "openat"}, {SYS_clone, "clone"}, {SYS_execve, "execve"}, {SYS_socket, "socket"},
  {SYS_connect, "connect"}, {SYS_bind, "bind"}, {SYS_kill, "kill"}, {SYS_ptrace, "ptrace"},
  {SYS_close, "close"}, {SYS_unlinkat, "unlinkat"}, {SYS_prctl, "prctl"}, {SYS_setsid, "setsid"},
  {SYS_chdir, "chdir"}, {SYS_mkdirat, "mkdirat"}, {SYS_getcwd, "getcwd"},
};

static void crash_handler(int sig, siginfo_t *info, void *ctx) {
  (void)ctx;
  char msg[400];
  const char *what = "crashed";
  char extra[120] = "";
  switch (sig) {
  case SIGSEGV: what = "segmentation fault (invalid memory access or stack overflow)"; break;
  case SIGBUS: what = "bus error (misaligned or invalid memory access)"; break;
  case SIGFPE: what = "arithmetic exception (e.g. integer division by zero)"; break;
  case SIGILL: what = "illegal instruction"; break;
  case SIGABRT: what = "aborted (assert or abort())"; break;
  case SIGXCPU: what = "CPU time limit exceeded"; break;
  case SIGXFSZ: what = "output size limit exceeded (the kernel printed too much)"; break;
  case SIGSYS: {
    const char *name = "?";
    for (size_t i = 0; i < sizeof syscall_names / sizeof *syscall_names; i++)
      if (syscall_names[i].nr == info->si_syscall) name = syscall_names[i].name;
    what = "forbidden system call";
    snprintf(extra, sizeof extra, " %d (%s): kernels may only compute, allocate memory and print",
             info->si_syscall, name);
    break;
  }
  }
  snprintf(msg, sizeof msg, "crash %s%s; last Gemmini instruction: %s\n", what, extra,
           sim_current_instr());
  put(msg);
  _exit(4);
}

static void install_crash_handlers(void) {
  static char altstack[1 << 16];
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = crash_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGXCPU, SIGXFSZ, SIGSYS};
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaction(sigs[i], &sa, NULL);
}

/* ---- seccomp allowlist ---------------------------------------------------- */
#if defined(__x86_64__)
#define AUDIT_ARCH_SELF AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_SELF AUDIT_ARCH_AARCH64
#endif

#define LOAD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define ALLOW_NR(n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
#define ERRNO_NR(n, e) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (e))
/* kill/tgkill only towards ourselves (abort() and raise() need it) */
#define ALLOW_SELF(n, pid) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 4), \
  BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])), \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (pid), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), \
  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP)

static void install_seccomp(void) {
#ifdef AUDIT_ARCH_SELF
  uint32_t pid = (uint32_t)getpid();
  struct sock_filter f[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_SELF, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    LOAD_NR,
#if defined(__x86_64__)
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1), /* x32 ABI */
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
#endif
    ALLOW_NR(SYS_read), ALLOW_NR(SYS_write), ALLOW_NR(SYS_readv), ALLOW_NR(SYS_writev),
    ALLOW_NR(SYS_pread64), ALLOW_NR(SYS_pwrite64), ALLOW_NR(SYS_lseek), ALLOW_NR(SYS_fstat),
    ALLOW_NR(SYS_newfstatat), ALLOW_NR(SYS_mmap), ALLOW_NR(SYS_munmap), ALLOW_NR(SYS_mremap),
    ALLOW_NR(SYS_brk), ALLOW_NR(SYS_madvise), ALLOW_NR(SYS_mprotect), ALLOW_NR(SYS_exit),
    ALLOW_NR(SYS_exit_group), ALLOW_NR(SYS_rt_sigreturn), ALLOW_NR(SYS_rt_sigprocmask),
    ALLOW_NR(SYS_rt_sigaction), ALLOW_NR(SYS_sigaltstack), ALLOW_NR(SYS_clock_gettime),
    ALLOW_NR(SYS_clock_nanosleep), ALLOW_NR(SYS_nanosleep), ALLOW_NR(SYS_gettimeofday),
    ALLOW_NR(SYS_getpid), ALLOW_NR(SYS_gettid), ALLOW_NR(SYS_getrandom), ALLOW_NR(SYS_futex),
    ALLOW_NR(SYS_sched_yield), ALLOW_NR(SYS_fcntl), ALLOW_NR(SYS_uname),
    ERRNO_NR(SYS_ioctl, ENOTTY),
    ALLOW_SELF(SYS_kill, pid),
    LOAD_NR,
    ALLOW_SELF(SYS_tgkill, pid),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof *f), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
    harness_fail("cannot install the seccomp sandbox");
  put("seccomp on\n");
#else
  put("seccomp off (unsupported architecture)\n");
#endif
}

/* ---- job input ------------------------------------------------------------ */
static char rbuf[1 << 16];
static size_t rpos, rlen;

static size_t read_some(void *dst, size_t n) {
  if (rpos < rlen) {
    size_t k = rlen - rpos < n ? rlen - rpos : n;
    memcpy(dst, rbuf + rpos, k);
    rpos += k;
    return k;
  }
  ssize_t r = read(FD_JOB, dst, n);
  return r > 0 ? (size_t)r : 0;
}

static void read_exact(void *dst, size_t n) {
  char *p = dst;
  while (n) {
    size_t k = read_some(p, n);
    if (!k) harness_fail("job file ended early");
    p += k; n -= k;
  }
}

static int read_line(char *line, size_t cap) {
  size_t i = 0;
  for (;;) {
    if (rpos == rlen) {
      ssize_t r = read(FD_JOB, rbuf, sizeof rbuf);
      if (r <= 0) return 0;
      rpos = 0; rlen = (size_t)r;
    }
    char c = rbuf[rpos++];
    if (c == '\n' || i + 1 == cap) { line[i] = 0; return 1; }
    line[i++] = c;
  }
}

static void write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) harness_fail("cannot write results");
    c += w; n -= (size_t)w;
  }
}

#define MAX_ARGS 8
static const struct { const char *name; int64_t *field; } cfg_fields[] = {
  {"spad_rows", &g_cfg.spad_rows}, {"spad_banks", &g_cfg.spad_banks}, {"acc_rows", &g_cfg.acc_rows},
  {"dma_beat_bytes", &g_cfg.dma_beat_bytes}, {"dma_latency", &g_cfg.dma_latency},
  {"dma_inflight_bytes", &g_cfg.dma_inflight_bytes}, {"ld_rs", &g_cfg.ld_rs}, {"ex_rs", &g_cfg.ex_rs},
  {"st_rs", &g_cfg.st_rs}, {"cpu_issue_cycles", &g_cfg.cpu_issue_cycles},
  {"config_cycles", &g_cfg.config_cycles}, {"unfused_preload_cycles", &g_cfg.unfused_preload_cycles},
  {"min_compute_cycles", &g_cfg.min_compute_cycles}, {"array_latency", &g_cfg.array_latency},
  {"fsm_issue_cycles", &g_cfg.fsm_issue_cycles}, {"loop_issue_instrs", &g_cfg.loop_issue_instrs},
  {"max_instructions", &g_cfg.max_instructions},
};

static void write_stats(double host_ms) {
  char b[4096];
  const simstats_t *s = &g_stats;
  static const char *qn[NQ] = {"ld", "ex", "st"};
  static const char *wn[NWAIT] = {"ld", "ex", "st", "dma"};
  static const char *kn[NKIND] = {"config", "mvin", "mvout", "preload", "compute"};
  int n = snprintf(b, sizeof b,
                   "cycles %lld\ncpu_busy %lld\nfence_wait %lld\nfsm_instrs %lld\ninstrs %lld\n"
                   "bytes_rd %lld\nbytes_wr %lld\nmacs %lld\nbank_conflicts %lld\n"
                   "unfused_preloads %lld\nspad_rows_used %lld\nacc_rows_used %lld\nhost_ms %.3f\n",
                   (long long)s->cycles, (long long)s->cpu_busy, (long long)s->fence_wait,
                   (long long)s->fsm_instrs, (long long)s->instrs, (long long)s->bytes_rd,
                   (long long)s->bytes_wr, (long long)s->macs, (long long)s->bank_conflicts,
                   (long long)s->unfused_preloads, (long long)s->spad_rows_used,
                   (long long)s->acc_rows_used, host_ms);
  for (int q = 0; q < NQ; q++) {
    n += snprintf(b + n, sizeof b - n, "busy_%s %lld\ncpu_stall_%s %lld\n", qn[q],
                  (long long)s->busy[q], qn[q], (long long)s->cpu_stall_full[q]);
    for (int w = 0; w < NWAIT; w++)
      n += snprintf(b + n, sizeof b - n, "wait_%s_%s %lld\n", qn[q], wn[w], (long long)s->wait[q][w]);
  }
  for (int k = 0; k < NKIND; k++) n += snprintf(b + n, sizeof b - n, "count_%s %lld\n", kn[k], (long long)s->count[k]);
  put(b);
}

int main(void) {
  install_crash_handlers();
  char line[256], key[64], mode[8];
  long long v;
  size_t arg_bytes[MAX_ARGS];
  int arg_in[MAX_ARGS], nargs = 0, out_arg = -1, sets = 1, trace = 0;
  long long macs_required = 0;
  if (!read_line(line, sizeof line) || strcmp(line, "gemmini-sim-job 1")) harness_fail("bad job header");
  while (read_line(line, sizeof line) && strcmp(line, "end")) {
    if (sscanf(line, "cfg %63s %lld", key, &v) == 2) {
      size_t i;
      for (i = 0; i < sizeof cfg_fields / sizeof *cfg_fields; i++)
        if (!strcmp(cfg_fields[i].name, key)) { *cfg_fields[i].field = v; break; }
      if (i == sizeof cfg_fields / sizeof *cfg_fields) harness_fail("unknown timing parameter in job");
    } else if (sscanf(line, "arg %7s %lld", mode, &v) == 2 && nargs < MAX_ARGS) {
      arg_in[nargs] = !strcmp(mode, "in");
      arg_bytes[nargs++] = (size_t)v;
    } else if (sscanf(line, "out_arg %lld", &v) == 1) out_arg = (int)v;
    else if (sscanf(line, "sets %lld", &v) == 1) sets = (int)v;
    else if (sscanf(line, "macs %lld", &v) == 1) macs_required = v;
    else if (sscanf(line, "trace %lld", &v) == 1) trace = (int)v;
    else harness_fail("unknown line in job header");
  }
  if (out_arg < 0 || out_arg >= nargs || arg_in[out_arg]) harness_fail("job names no output argument");
  void *bufs[MAX_ARGS];
  for (int i = 0; i < nargs; i++)
    if (!(bufs[i] = aligned_alloc(64, (arg_bytes[i] + 63) / 64 * 64))) harness_fail("out of memory for inputs");
  sim_alloc();
  if (trace) timing_trace_to(FD_TRACE);
  install_seccomp();

  for (int set = 0; set < sets; set++) {
    for (int i = 0; i < nargs; i++) {
      if (arg_in[i]) read_exact(bufs[i], arg_bytes[i]);
      else memset(bufs[i], 0xA5 ^ set, arg_bytes[i]);
    }
    sim_reset(0x5eed + set, set == 0);
    fsm_reset();
    sim_register_output(bufs[out_arg], arg_bytes[out_arg]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    autocomp_entry(bufs);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sim_finish();
    size_t first = 0;
    int64_t bad;
    char msg[300];
    if (g_stats.macs < macs_required) {
      snprintf(msg, sizeof msg, "the kernel issued %lld multiply-accumulates on the systolic array, fewer "
               "than the %lld the problem needs: results must be computed by Gemmini, not by the CPU",
               (long long)g_stats.macs, macs_required);
      harness_fail(msg);
    }
    if ((bad = sim_output_unwritten(&first))) {
      snprintf(msg, sizeof msg, "%lld of %zu output bytes were never written by mvout (first at byte "
               "offset %zu)", (long long)bad, arg_bytes[out_arg], first);
      harness_fail(msg);
    }
    if ((bad = sim_output_cpu_modified(&first))) {
      snprintf(msg, sizeof msg, "%lld output bytes differ from what mvout wrote (first at byte offset "
               "%zu): results must leave the accelerator through mvout, not CPU stores",
               (long long)bad, first);
      harness_fail(msg);
    }
    write_all(FD_OUT, bufs[out_arg], arg_bytes[out_arg]);
    if (set == 0)
      write_stats((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
  }
  put("ok 1\n");
  return 0;
}
