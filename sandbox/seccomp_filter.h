/* Building blocks of the sandbox's seccomp allowlists, shared by the
 * launcher's filter (launcher.c, applied before exec) and the gemmini
 * harness's stricter one (hw_runners/gemmini_sim/csrc/harness.c, installed by
 * the program itself before any kernel code runs). Each file keeps its own
 * list of allowed calls; what every filter must start and end with is here.
 *
 * A filter is built as
 *   #ifdef AUDIT_ARCH_SELF
 *   struct sock_filter f[] = {FILTER_PREAMBLE, ALLOW_NR(...), ...,
 *                             ALLOW_SIGNAL_SELF(pid), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP)};
 *   #endif
 * where no AUDIT_ARCH_SELF means an architecture these filters do not know
 * (the caller reports that seccomp is unavailable).
 */
#ifndef AUTOCOMP_SECCOMP_FILTER_H
#define AUTOCOMP_SECCOMP_FILTER_H
#include <stddef.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define AUDIT_ARCH_SELF AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_SELF AUDIT_ARCH_AARCH64
#endif

/* Load the system call number into the accumulator: every ALLOW_NR/ERRNO_NR compares against it. */
#define LOAD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))

/* The first statements of every filter: a call made through another architecture's ABI (where the
 * numbers name other calls) kills the process; then the call number is loaded. */
#define FILTER_CHECK_ARCH \
  BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)), \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_SELF, 1, 0), \
  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS), \
  LOAD_NR
#if defined(__x86_64__)
/* x32 ABI: the same audit arch as x86-64, its call numbers offset by 0x40000000; killed too */
#define FILTER_PREAMBLE FILTER_CHECK_ARCH, \
  BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1), \
  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)
#else
#define FILTER_PREAMBLE FILTER_CHECK_ARCH
#endif

/* Call n is allowed. */
#define ALLOW_NR(n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
/* Call n fails with errno e instead of running. */
#define ERRNO_NR(n, e) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), \
  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (e))
/* Call n is allowed only with pid as its first argument, else TRAP. The argument is loaded only on
 * the path that returns, so the call number stays in the accumulator for the next comparison;
 * ALLOW_SIGNAL_SELF reloads it all the same rather than rely on that. */
#define ALLOW_SELF(n, pid) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 4), \
  BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])), \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (pid), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), \
  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP)
/* kill/tgkill only towards ourselves (abort() and raise() need it); pid is getpid() of the filtered
 * process (exec keeps the pid, so the launcher can name it before exec'ing the program). */
#define ALLOW_SIGNAL_SELF(pid) ALLOW_SELF(SYS_kill, pid), LOAD_NR, ALLOW_SELF(SYS_tgkill, pid)

#endif
