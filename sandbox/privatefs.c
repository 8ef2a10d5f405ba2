/* The filesystem an untrusted program may see (part of the sandbox launcher).
 *
 * A private root: in a new mount namespace, a small tmpfs becomes the root
 * and holds only the program's working directory (read-write, at its real
 * path), the read-only paths the caller names (the toolchain: /usr, /lib...),
 * the device nodes it names (read-write: a GPU's), /dev/null and, when asked,
 * a fresh /proc. Everything else of the host (/etc, /home, /root, the host's
 * /proc, other work directories, the run's secrets) does not exist for the
 * program: opening it fails with ENOENT and __has_include cannot even probe
 * for it.
 *
 * The /proc is a procfs instance of the sandbox's own PID namespace, mounted
 * read-only with hidepid: it lists only the sandbox's own processes, so no
 * /proc/<pid>/root, cwd or mem leads into another sandbox or the host (the
 * host's /proc would). A procfs shows the PID namespace of the process that
 * mounts it, and the launcher makes that namespace after this root is built;
 * so the root is built (build_private_root), the launcher's process inside
 * the new PID namespace mounts the /proc (mount_private_proc) and only then
 * enters it (enter_private_root). The mount comes before the host root is
 * detached: inside a user namespace the kernel allows a new procfs only while
 * a fully visible one is mounted in the namespace.
 *
 * Where no mount namespace can be made (no root, no user namespaces),
 * Landlock restricts the program to the same paths instead: reads elsewhere
 * fail with EACCES (a path's existence stays observable), /proc included.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "privatefs.h"

static int mkdirs(const char *path, mode_t mode) {
  char buf[PATH_MAX];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return errno = ENAMETOOLONG, -1;
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(buf, mode) && errno != EEXIST ? -1 : 0;
}

/* Bind `src` at the same path under `root`, read-only unless `writable`. Mount flags the kernel
 * locked on the source (nosuid, nodev, noexec inside a user namespace) must be kept on remount. */
static int bind_into(const char *root, const char *src, int writable, int recursive) {
  char dst[PATH_MAX];
  struct stat st;
  if (snprintf(dst, sizeof dst, "%s%s", root, src) >= (int)sizeof dst || lstat(src, &st)) return -1;
  if (S_ISLNK(st.st_mode)) {   /* /bin -> usr/bin on merged-/usr systems: recreate the link */
    char target[PATH_MAX];
    ssize_t n = readlink(src, target, sizeof target - 1);
    if (n < 0) return -1;
    target[n] = 0;
    char *slash = strrchr(dst, '/');
    *slash = 0;
    if (mkdirs(dst, 0755)) return -1;
    *slash = '/';
    return symlink(target, dst) && errno != EEXIST ? -1 : 0;
  }
  if (S_ISDIR(st.st_mode)) {
    if (mkdirs(dst, 0755)) return -1;
  } else {
    char *slash = strrchr(dst, '/');
    *slash = 0;
    if (mkdirs(dst, 0755)) return -1;
    *slash = '/';
    int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    close(fd);
  }
  if (mount(src, dst, NULL, MS_BIND | (recursive ? MS_REC : 0), NULL)) return -1;
  if (writable) return 0;
  struct statvfs vfs;
  unsigned long locked = 0;
  if (!statvfs(src, &vfs))
    locked = (vfs.f_flag & ST_NOSUID ? MS_NOSUID : 0) | (vfs.f_flag & ST_NODEV ? MS_NODEV : 0) |
             (vfs.f_flag & ST_NOEXEC ? MS_NOEXEC : 0);
  return mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | locked, NULL);
}

static char root[PATH_MAX + 16], real[PATH_MAX];   /* the tmpfs root, the work directory's real path */

/* Call inside a fresh mount namespace, with the working directory as cwd. */
int build_private_root(const struct fsview *v, const char **failed) {
  *failed = "realpath";
  if (!realpath(v->dir, real)) return -1;
  *failed = "make mounts private";
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) return -1;
  snprintf(root, sizeof root, "%s/.fsroot", real);
  *failed = "tmpfs root";
  if ((mkdir(root, 0700) && errno != EEXIST) ||
      mount("autocomp-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=256k,mode=0755"))
    return -1;
  for (int i = 0; i < v->nro; i++) {
    *failed = v->ro[i];
    if (access(v->ro[i], F_OK) == 0 && bind_into(root, v->ro[i], 0, 1)) return -1;
  }
  /* read-write and not nodev (a bind keeps the device mount's flags): CUDA opens its nodes O_RDWR */
  for (int i = 0; i < v->ndev; i++) {
    *failed = v->dev[i];
    if (access(v->dev[i], F_OK) == 0 && bind_into(root, v->dev[i], 1, 0)) return -1;
  }
  *failed = "/dev/null";
  if (bind_into(root, "/dev/null", 1, 0)) return -1;
  *failed = "work directory";
  if (bind_into(root, real, 1, 0)) return -1;   /* not recursive: leaves .fsroot out */
  char at[sizeof root + 8];
  snprintf(at, sizeof at, "%s/proc", root);
  *failed = "/proc mount point";               /* now: the root turns read-only when it is entered */
  if (v->proc && mkdir(at, 0555)) return -1;
  return 0;
}

/* A read-only procfs at the root's /proc, for the caller's PID namespace (call after build_private_root
 * with v->proc, before enter_private_root). hidepid=2 ("invisible") also hides the namespace's processes
 * of other users (the launcher's own, as root); *hidepid says whether the kernel took it. */
int mount_private_proc(int *hidepid) {
  char at[sizeof root + 8];
  const unsigned long flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
  snprintf(at, sizeof at, "%s/proc", root);
  *hidepid = mount("proc", at, "proc", flags, "hidepid=2") == 0;
  if (*hidepid) return 0;
  return errno == EINVAL ? mount("proc", at, "proc", flags, NULL) : -1;
}

/* Make the built root the root of the mount namespace (of every process in it whose root was the host's),
 * detach the host's, and turn the root read-only. */
int enter_private_root(const char **failed) {
  char old[sizeof root + 16];
  snprintf(old, sizeof old, "%s/.old-root", root);
  *failed = "pivot_root";
  if (mkdir(old, 0700) || syscall(SYS_pivot_root, root, old) || chdir("/")) return -1;
  *failed = "detach the host root";
  if (umount2("/.old-root", MNT_DETACH) || rmdir("/.old-root")) return -1;
  *failed = "read-only root";
  if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL)) return -1;
  *failed = "chdir";
  return chdir(real);
}

/* ---- Landlock ---------------------------------------------------------------------------- */
static int allow(int ruleset, const char *path, __u64 access, __u64 handled) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 0 : -1;
  struct stat st;
  if (fstat(fd, &st)) return close(fd), -1;
  if (!S_ISDIR(st.st_mode))   /* rights on a file: only those that apply to files */
    access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
              (1ULL << 14) /* TRUNCATE */ | (1ULL << 15) /* IOCTL_DEV */;
  struct landlock_path_beneath_attr rule = {.allowed_access = access & handled, .parent_fd = fd};
  int r = (int)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
  close(fd);
  return r;
}

int landlock_confine(const struct fsview *v, const char **failed) {
  *failed = "Landlock is not available";
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) return -1;
  __u64 handled = (1ULL << 13) - 1;              /* ABI 1: EXECUTE .. MAKE_SYM */
  if (abi >= 2) handled |= 1ULL << 13;            /* REFER */
  if (abi >= 3) handled |= 1ULL << 14;            /* TRUNCATE */
  if (abi >= 5) handled |= 1ULL << 15;            /* IOCTL_DEV */
  struct landlock_ruleset_attr attr = {.handled_access_fs = handled};
  int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (ruleset < 0) return -1;
  const __u64 read = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  *failed = "Landlock rules";
  /* device nodes: read, write and (ABI >= 5, else unrestricted) ioctl, which CUDA drives its GPU by */
  const __u64 rw = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE, device = rw | 1ULL << 15;
  for (int i = 0; i < v->nro; i++)
    if (allow(ruleset, v->ro[i], read, handled)) return -1;
  for (int i = 0; i < v->ndev; i++)
    if (allow(ruleset, v->dev[i], device, handled)) return -1;
  if (allow(ruleset, "/dev/null", rw, handled) || allow(ruleset, v->dir, handled, handled))
    return -1;
  *failed = "Landlock restrict_self";
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_landlock_restrict_self, ruleset, 0)) return -1;
  close(ruleset);
  return 0;
}
