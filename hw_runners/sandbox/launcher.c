/* Sandbox launcher for untrusted programs (compilers on candidate code, and
 * the candidates themselves). It is started with an empty environment in a
 * new session by hw_runners/sandbox/__init__.py and, before exec'ing the
 * program:
 *   - opens the files named by --fd onto fixed descriptor numbers,
 *   - sets hard resource limits (CPU, address space, file size, open files,
 *     processes, no core dumps),
 *   - moves into a new network namespace (as root directly, otherwise through
 *     a user namespace) so the program has no network,
 *   - drops root to nobody when started as root.
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
#include <signal.h>
#include <unistd.h>

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

static void isolate_network(void) {
  if (unshare(CLONE_NEWNET) == 0) { fprintf(status, "net isolated\n"); return; }
  int first = errno;
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) {
    char map[64];
    write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "%u %u 1\n", uid, uid);
    write_file("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "%u %u 1\n", gid, gid);
    write_file("/proc/self/gid_map", map);
    fprintf(status, "net isolated-userns\n");
    return;
  }
  fprintf(status, "net shared (%s; %s)\n", strerror(first), strerror(errno));
}

int main(int argc, char **argv) {
  pid_t parent = getppid();
  unsigned long long cpu = 0, mem = 0, fsize = 0, nofile = 64, nproc = 0;
  int net = 0, drop = 0, i;
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
    int num;
    char mode;
    char path[4096];
    if (sscanf(argv[j + 1], "%d:%c:%4095s", &num, &mode, path) != 3) { errno = EINVAL; die("--fd N:r|w:PATH"); }
    int fd = open(path, mode == 'w' ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY, 0644);
    if (fd < 0 || dup2(fd, num) < 0) die(path);
    if (fd != num) close(fd);
  }

  if (net) isolate_network();
  if (drop && geteuid() == 0) {
    if (setgroups(0, NULL) || setgid(65534) || setuid(65534)) die("drop root");
    fprintf(status, "user nobody\n");
  }
  /* Die with the evaluator that started us (set after the uid change, which clears it). */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) die("parent-death signal");
  limit(RLIMIT_CORE, 0, 0);
  if (cpu) limit(RLIMIT_CPU, cpu, cpu + 1); /* SIGXCPU first, SIGKILL a second later */
  if (mem) limit(RLIMIT_AS, mem, mem);
  if (fsize) limit(RLIMIT_FSIZE, fsize, fsize);
  limit(RLIMIT_NOFILE, nofile, nofile);
  if (nproc) limit(RLIMIT_NPROC, nproc, nproc);
  fprintf(status, "exec\n");
  fclose(status);
  execvp(prog[0], prog);
  fprintf(stderr, "sandbox: exec %s: %s\n", prog[0], strerror(errno));
  return 125;
}
