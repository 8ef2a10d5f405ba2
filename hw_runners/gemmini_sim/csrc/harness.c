/* Kernel-side harness of one gemmini-sim evaluation, linked with the
 * candidate kernel (untrusted).
 *
 * fd 3: job (text header, then the raw input arrays of every input set)
 * fd 5: diagnostics ("crash ..." / "error ..." lines)
 * fd 6: the instruction trace, a pipe to the trusted replayer
 *
 * For every input set it records the addresses of the problem's arrays and
 * calls solution(); the intrinsics record instructions. Before any kernel
 * code runs it installs a seccomp allowlist (on top of the launcher's): the
 * kernel may compute, allocate memory and print; it may not open files,
 * create processes or threads, use sockets or signal other processes.
 * Forbidden calls and crashes are reported with the last instruction issued.
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
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "seccomp_filter.h"   /* from the sandbox package (sandbox.HEADER_DIR) */
#include "sim.h"

#define FD_JOB 3
#define FD_STATS 5

void autocomp_entry(void **bufs);
void intrinsics_reset(void);

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
  {SYS_chdir, "chdir"}, {SYS_mkdirat, "mkdirat"}, {SYS_getcwd, "getcwd"}, {SYS_pipe2, "pipe2"},
#ifdef SYS_clone3
  {SYS_clone3, "clone3"},
#endif
#ifdef SYS_unlink
  {SYS_unlink, "unlink"},
#endif
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
  diag_put(msg);
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

/* ---- seccomp allowlist (common parts: sandbox/seccomp_filter.h) ------------ */
static void install_seccomp(void) {
#ifdef AUDIT_ARCH_SELF
  uint32_t pid = (uint32_t)getpid();
  struct sock_filter f[] = {
    FILTER_PREAMBLE,
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
    ALLOW_SIGNAL_SELF(pid),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof *f), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
    harness_fail("cannot install the seccomp sandbox");
  diag_put("seccomp on\n");
#else
  diag_put("seccomp off (unsupported architecture)\n");
#endif
}

int main(void) {
  install_crash_handlers();
  signal(SIGPIPE, SIG_IGN);   /* a replayer that stopped reading gives EPIPE, reported as such */
  job_t job;
  job_read_header(FD_JOB, &job);
  void *bufs[MAX_ARGS];
  for (int i = 0; i < job.nargs; i++)
    if (!(bufs[i] = aligned_alloc(64, (job.bytes[i] + 63) / 64 * 64))) harness_fail("out of memory for inputs");
  install_seccomp();
  for (int set = 0; set < job.sets; set++) {
    for (int i = 0; i < job.nargs; i++) {
      if (job.is_input[i]) job_read(FD_JOB, bufs[i], job.bytes[i]);
      else memset(bufs[i], 0xA5 ^ set, job.bytes[i]);
    }
    intrinsics_reset();
    fsm_reset();
    rec_set_arrays(bufs, job.bytes, job.nargs);
    rec_emit(&(rec_t){.op = R_SET, .id = (uint8_t)set});
    for (int i = 0; i < job.nargs; i++)
      rec_emit(&(rec_t){.op = R_BUF, .id = (uint8_t)i, .dram = (uintptr_t)bufs[i], .stride = job.bytes[i]});
    autocomp_entry(bufs);
    rec_emit(&(rec_t){.op = R_END});
    rec_flush();
  }
  diag_put("ok 1\n");
  return 0;
}
