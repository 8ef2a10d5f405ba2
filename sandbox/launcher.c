/* Sandbox launcher for untrusted programs (compilers on candidate code, and
 * the candidates themselves). It is started with an empty environment in a
 * new session by sandbox/__init__.py and, before exec'ing the
 * program:
 *   - opens the files named by --fd onto fixed descriptor numbers,
 *   - sets hard resource limits (CPU, address space, file size, open files,
 *     processes, no core dumps),
 *   - moves into a new network namespace (as root directly, otherwise through
 *     a user namespace) so the program has no network,
 *   - with --private-fs, gives it a private root holding only its working
 *     directory, the --ro paths and the --dev device nodes (privatefs.c;
 *     Landlock where no mount namespace can be made, and a setup failure
 *     where neither works),
 *   - drops root to nobody when started as root,
 *   - with --pid-ns, runs the program in a new PID namespace (pid_namespace below), so that nothing it
 *     starts outlives it, however it detaches (setsid, double fork),
 *   - with --proc too, mounts a /proc of that PID namespace in the private root (enter_root below), so the
 *     program sees its own processes and nobody else's; where none can be mounted it has no /proc at all.
 * What could and could not be applied is written to --status.
 * Exit code 125 means the sandbox itself could not be set up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>
#include "privatefs.h"
#include "seccomp_filter.h"

static FILE *status;

static void die(const char *what) {
  fprintf(stderr, "sandbox: %s: %s\n", what, strerror(errno));
  if (status) fprintf(status, "setup-failed %s\n", what), fflush(status);
  _exit(125);
}

static void limit(int res, unsigned long long soft, unsigned long long hard) {
  struct rlimit rl = {soft, hard};
  if (setrlimit(res, &rl)) die("setrlimit");
}

static void write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY);
  if (fd < 0) return;
  ssize_t r = write(fd, text, strlen(text));
  (void)r;
  close(fd);
}

/* --seccomp: an allowlist applied before exec, so nothing in the program can
 * switch it off. It allows what a statically linked program needs to start,
 * compute, allocate and print; files can only be used through descriptors
 * opened here; no processes, threads, sockets or signals to others. The
 * program may install a stricter filter of its own (the gemmini harness
 * does, forbidding execve too). The common parts are in seccomp_filter.h. */
static void apply_seccomp(void) {
#ifdef AUDIT_ARCH_SELF
  uint32_t pid = (uint32_t)getpid();   /* exec keeps the pid */
  struct sock_filter f[] = {
    FILTER_PREAMBLE,
#if defined(__x86_64__)
    ALLOW_NR(SYS_arch_prctl), ALLOW_NR(SYS_readlink),
#endif
    ALLOW_NR(SYS_execve), ALLOW_NR(SYS_read), ALLOW_NR(SYS_write), ALLOW_NR(SYS_readv), ALLOW_NR(SYS_writev),
    ALLOW_NR(SYS_pread64), ALLOW_NR(SYS_pwrite64), ALLOW_NR(SYS_lseek), ALLOW_NR(SYS_fstat),
    ALLOW_NR(SYS_newfstatat), ALLOW_NR(SYS_readlinkat), ALLOW_NR(SYS_mmap), ALLOW_NR(SYS_munmap),
    ALLOW_NR(SYS_mremap), ALLOW_NR(SYS_brk), ALLOW_NR(SYS_madvise), ALLOW_NR(SYS_mprotect), ALLOW_NR(SYS_exit),
    ALLOW_NR(SYS_exit_group), ALLOW_NR(SYS_rt_sigreturn), ALLOW_NR(SYS_rt_sigprocmask),
    ALLOW_NR(SYS_rt_sigaction), ALLOW_NR(SYS_sigaltstack), ALLOW_NR(SYS_clock_gettime),
    ALLOW_NR(SYS_clock_nanosleep), ALLOW_NR(SYS_nanosleep), ALLOW_NR(SYS_gettimeofday), ALLOW_NR(SYS_getpid),
    ALLOW_NR(SYS_gettid), ALLOW_NR(SYS_getrandom), ALLOW_NR(SYS_futex), ALLOW_NR(SYS_sched_yield),
    ALLOW_NR(SYS_fcntl), ALLOW_NR(SYS_uname), ALLOW_NR(SYS_set_tid_address), ALLOW_NR(SYS_set_robust_list),
    ALLOW_NR(SYS_rseq), ALLOW_NR(SYS_prlimit64), ALLOW_NR(SYS_prctl), ALLOW_NR(SYS_seccomp),
    ALLOW_NR(SYS_close),
    ERRNO_NR(SYS_ioctl, ENOTTY),
    ALLOW_SIGNAL_SELF(pid),
    /* TRAP, not KILL: SIGSYS kills by default, and a program that handles it can name the call */
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof *f), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) die("seccomp");
  fprintf(status, "seccomp launcher\n");
#else
  fprintf(status, "seccomp unavailable on this architecture\n");
#endif
}

/* New namespaces for the program: as root directly, otherwise inside a user namespace that maps
 * only our own ids. Returns 1 if they were made. */
static int enter_namespaces(int flags) {
  if (geteuid() == 0 && unshare(flags) == 0) return 1;
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER | flags)) return 0;
  char map[64];
  write_file("/proc/self/setgroups", "deny");
  snprintf(map, sizeof map, "%u %u 1\n", uid, uid);
  write_file("/proc/self/uid_map", map);
  snprintf(map, sizeof map, "%u %u 1\n", gid, gid);
  write_file("/proc/self/gid_map", map);
  return 1;
}

/* --proc: the private root gets a /proc; root_pending: it is built but waits for enter_root in the new PID
 * namespace (a procfs shows the PID namespace of the process that mounts it, and confine runs before
 * pid_namespace makes that one). */
static int want_proc, root_pending;

/* Enter the private root, with --proc first mounting its /proc unless `no_proc` says why there is none (then
 * the program has no /proc at all: fail closed). */
static void enter_root(const char *no_proc) {
  const char *failed;
  int hidepid = 0;
  if (want_proc && !no_proc && mount_private_proc(&hidepid)) no_proc = strerror(errno);
  if (enter_private_root(&failed)) die(failed);
  root_pending = 0;
  if (!want_proc) return;
  if (no_proc) fprintf(status, "proc none (%s)\n", no_proc);
  else fprintf(status, hidepid ? "proc private\n" : "proc private (without hidepid: the launcher is listed)\n");
}

static void confine(int net, int fs, int force_landlock, const struct fsview *view, int pidns) {
  /* with the network goes System V IPC: shared memory, semaphores and message queues keyed by number would
   * otherwise be a channel between sandboxes running as the same user */
  int flags = (net ? CLONE_NEWNET | CLONE_NEWIPC : 0) | (fs && !force_landlock ? CLONE_NEWNS : 0);
  int mode = geteuid() == 0 ? 0 : 1;   /* for the status: directly or through a user namespace */
  int entered = flags && enter_namespaces(flags);
  if (!entered && net && (flags & CLONE_NEWNS)) {   /* the network alone, then Landlock for files */
    entered = enter_namespaces(CLONE_NEWNET | CLONE_NEWIPC) ? 2 : 0;
    flags = CLONE_NEWNET | CLONE_NEWIPC;
  }
  if (net) fprintf(status, entered ? (mode ? "net isolated-userns\n" : "net isolated\n") : "net shared (%s)\n",
                   strerror(errno));
  if (!fs) return;
  const char *failed = "";
  if (entered && (flags & CLONE_NEWNS)) {
    if (build_private_root(view, &failed)) die(failed);
    fprintf(status, "fs private\n");
    root_pending = 1;
    if (!want_proc || !pidns) enter_root("no PID namespace to show: --proc needs --pid-ns");
    return;     /* else pid_namespace enters it */
  }
  if (landlock_confine(view, &failed)) die(failed);
  fprintf(status, "fs landlock\n");
  if (want_proc) fprintf(status, "proc none (no mount namespace; Landlock denies the host's /proc)\n");
}

/* End the way the program ended: its exit status, or death by the same signal. */
static void mirror(int ws) {
  if (WIFSIGNALED(ws)) {
    int sig = WTERMSIG(ws);
    sigset_t set;
    signal(sig, SIG_DFL);
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    kill(getpid(), sig);
  }
  _exit(WIFEXITED(ws) ? WEXITSTATUS(ws) : 125);
}

/* --pid-ns: a new PID namespace (directly where we may, else inside a user namespace). Its pid 1 is a small
 * reaper forked from here, the program its pid 2: when the program ends the reaper reports how and exits, and
 * the kernel then kills every process left in the namespace, so nothing the program started survives it,
 * whether it called setsid or forked twice. The program is not pid 1 itself because the kernel spares pid 1
 * from signals it has no handler for (SIGXCPU, SIGXFSZ), which would change how limits end it. This process
 * (outside) is invisible from inside; the reaper keeps our uid, and the kernel ignores signals to a namespace's
 * pid 1 from inside that it has no handler for, so the program cannot kill either to escape (nor open the
 * reaper's /proc entries, which need the capabilities it kept; hidepid hides it too when the program dropped
 * root); the reaper dies with this process (a parent-death signal), taking the namespace with it. With --proc
 * the reaper enters the private root and mounts its /proc before it starts the program. Returns in the
 * program's process only. */
static void pid_namespace(pid_t evaluator) {
  int entered = unshare(CLONE_NEWPID) == 0;
  /* a PID namespace through a user namespace of its own would leave us no right to enter the private root */
  if (!entered && root_pending) enter_root("the PID namespace needs a user namespace, in which none can be mounted");
  entered = entered || enter_namespaces(CLONE_NEWPID);
  if (!entered) {
    fprintf(status, "pid shared (%s)\n", strerror(errno));
    return;
  }
  fprintf(status, "pid isolated\n");
  int report[2];
  if (pipe2(report, O_CLOEXEC)) die("pipe");
  fflush(status);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != evaluator) die("parent-death signal");
  pid_t reaper = fork();
  if (reaper < 0) die("fork");
  if (reaper > 0) {                      /* outside: wait for the namespace to end, then end like the program */
    int ws, prog_ws;
    close(report[1]);
    while (waitpid(reaper, &ws, 0) < 0)
      if (errno != EINTR) _exit(125);
    mirror(read(report[0], &prog_ws, sizeof prog_ws) == sizeof prog_ws ? prog_ws : ws);
  }
  close(report[0]);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL)) _exit(125);
  if (root_pending) {                    /* pid 1 of the new namespace: its /proc is the program's */
    enter_root(NULL);
    fflush(status);
  }
  pid_t prog = fork();
  if (prog < 0) _exit(125);
  if (prog == 0) {
    close(report[1]);
    return;
  }
  for (;;) {                             /* pid 1: reap every orphan until the program itself ends */
    int ws;
    pid_t done = wait(&ws);
    if (done == prog) {
      ssize_t r = write(report[1], &ws, sizeof ws);
      (void)r;
      _exit(0);
    }
    if (done < 0 && errno != EINTR) _exit(125);
  }
}

int main(int argc, char **argv) {
  pid_t parent = getppid();
  unsigned long long cpu = 0, mem = 0, fsize = 0, nofile = 64, nproc = 0;
  int net = 0, drop = 0, filter = 0, fs = 0, force_landlock = 0, pidns = 0, nro = 0, ndev = 0, i;
  /* as many --ro and --dev paths as there are arguments (a GPU host's view names dozens) */
  char **ro = calloc((size_t)argc, sizeof *ro), **dev = calloc((size_t)argc, sizeof *dev);
  if (!ro || !dev) { fprintf(stderr, "sandbox: out of memory\n"); return 125; }
  const char *status_path = NULL, *dir = NULL;
  for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
    if (!strcmp(argv[i], "--status") && i + 1 < argc) status_path = argv[++i];
    else if (!strcmp(argv[i], "--chdir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--cpu") && i + 1 < argc) cpu = strtoull(argv[++i], 0, 10);
    else if (!strcmp(argv[i], "--mem") && i + 1 < argc) mem = strtoull(argv[++i], 0, 10);
    else if (!strcmp(argv[i], "--fsize") && i + 1 < argc) fsize = strtoull(argv[++i], 0, 10);
    else if (!strcmp(argv[i], "--nofile") && i + 1 < argc) nofile = strtoull(argv[++i], 0, 10);
    else if (!strcmp(argv[i], "--nproc") && i + 1 < argc) nproc = strtoull(argv[++i], 0, 10);
    else if (!strcmp(argv[i], "--isolate-net")) net = 1;
    else if (!strcmp(argv[i], "--drop-root")) drop = 1;
    else if (!strcmp(argv[i], "--seccomp")) filter = 1;
    else if (!strcmp(argv[i], "--private-fs")) fs = 1;
    else if (!strcmp(argv[i], "--fs-landlock")) force_landlock = 1;
    else if (!strcmp(argv[i], "--pid-ns")) pidns = 1;
    else if (!strcmp(argv[i], "--proc")) want_proc = 1;
    else if (!strcmp(argv[i], "--ro") && i + 1 < argc) ro[nro++] = argv[++i];
    else if (!strcmp(argv[i], "--dev") && i + 1 < argc) dev[ndev++] = argv[++i];
    else if (!strcmp(argv[i], "--fd") && i + 1 < argc) i++; /* handled below, after chdir */
    else { fprintf(stderr, "sandbox: unknown option %s\n", argv[i]); return 125; }
  }
  if (i + 1 >= argc) { fprintf(stderr, "sandbox: no program given\n"); return 125; }
  char **prog = argv + i + 1;
  /* keep the status file far above the descriptor numbers --fd may claim */
  int sfd = open(status_path ? status_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int high = sfd < 0 ? -1 : fcntl(sfd, F_DUPFD_CLOEXEC, 200);
  if (high < 0 || !(status = fdopen(high, "w"))) die("open status file");
  close(sfd);
  if (dir && chdir(dir)) die("chdir");

  /* Open the requested files onto their descriptor numbers. */
  int in = open("/dev/null", O_RDONLY);
  if (in < 0 || dup2(in, 0) < 0) die("stdin");
  if (in > 0) close(in);
  for (int j = 1; j < i; j++) {
    if (strcmp(argv[j], "--fd")) continue;
    /* N:r:PATH, N:w:PATH (the path may contain anything, colons and spaces included) or N:dup:M */
    char *spec = argv[j + 1], *end;
    long num = strtol(spec, &end, 10);
    if (end == spec || *end != ':' || num < 0 || num > 100) { errno = EINVAL; die("--fd N:r|w:PATH or N:dup:M"); }
    const char *rest = end + 1;
    int fd;
    if (!strncmp(rest, "dup:", 4)) fd = dup((int)strtol(rest + 4, NULL, 10));
    else if ((rest[0] == 'r' || rest[0] == 'w') && rest[1] == ':')
      fd = open(rest + 2, rest[0] == 'w' ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY, 0644);
    else { errno = EINVAL; die("--fd N:r|w:PATH or N:dup:M"); }
    if (fd < 0 || dup2(fd, (int)num) < 0) die(spec);
    if (fd != num) close(fd);
  }

  if (fs && !dir) { fprintf(stderr, "sandbox: --private-fs needs --chdir\n"); return 125; }
  if (!fs && (want_proc || nro || ndev)) {
    fprintf(stderr, "sandbox: --proc, --ro and --dev need --private-fs\n");
    return 125;
  }
  struct fsview view = {.dir = dir, .ro = ro, .nro = nro, .dev = dev, .ndev = ndev, .proc = want_proc};
  confine(net, fs, force_landlock, &view, pidns);
  limit(RLIMIT_CORE, 0, 0);   /* before any fork: mirror() may re-raise a crash's signal on this process */
  if (pidns) {
    pid_namespace(parent);
    parent = getppid();      /* the reaper, from now on */
  }
  if (drop && geteuid() == 0) {
    if (setgroups(0, NULL) || setgid(65534) || setuid(65534)) die("drop root");
    fprintf(status, "user nobody\n");
  }
  /* Die with the evaluator (or the reaper) that started us (set after the uid change, which clears it). */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) die("parent-death signal");
  if (cpu) limit(RLIMIT_CPU, cpu, cpu + 1); /* SIGXCPU first, SIGKILL a second later */
  if (mem) limit(RLIMIT_AS, mem, mem);
  if (fsize) limit(RLIMIT_FSIZE, fsize, fsize);
  limit(RLIMIT_NOFILE, nofile, nofile);
  if (nproc) limit(RLIMIT_NPROC, nproc, nproc);
  fprintf(status, "exec\n");
  fflush(status);
  if (filter) apply_seccomp();   /* last: after it, only the program's own start-up calls are possible */
  fclose(status);
  execvp(prog[0], prog);
  fprintf(stderr, "sandbox: exec %s: %s\n", prog[0], strerror(errno));
  return 125;
}
