/* The filesystem an untrusted program may see (part of the sandbox launcher).
 *
 * A private root: in a new mount namespace, a small tmpfs becomes the root
 * and holds only the program's working directory (read-write, at its real
 * path), the read-only paths the caller names (the toolchain: /usr, /lib...)
 * and /dev/null. Everything else of the host (/etc, /home, /root, /proc,
 * other work directories, the run's secrets) does not exist for the program:
 * opening it fails with ENOENT and __has_include cannot even probe for it.
 *
 * Where no mount namespace can be made (no root, no user namespaces),
 * Landlock restricts the program to the same paths instead: reads elsewhere
 * fail with EACCES (a path's existence stays observable).
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

/* Call inside a fresh mount namespace, with the working directory `dir` as cwd. */
int private_root(const char *dir, char *const *ro, int nro, const char **failed) {
  char real[PATH_MAX], root[PATH_MAX + 16], old[PATH_MAX + 32];
  *failed = "realpath";
  if (!realpath(dir, real)) return -1;
  *failed = "make mounts private";
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) return -1;
  snprintf(root, sizeof root, "%s/.fsroot", real);
  *failed = "tmpfs root";
  if ((mkdir(root, 0700) && errno != EEXIST) ||
      mount("autocomp-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=256k,mode=0755"))
    return -1;
  for (int i = 0; i < nro; i++) {
    *failed = ro[i];
    if (access(ro[i], F_OK) == 0 && bind_into(root, ro[i], 0, 1)) return -1;
  }
  *failed = "/dev/null";
  if (bind_into(root, "/dev/null", 1, 0)) return -1;
  *failed = "work directory";
  if (bind_into(root, real, 1, 0)) return -1;   /* not recursive: leaves .fsroot out */
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

int landlock_confine(const char *dir, char *const *ro, int nro, const char **failed) {
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
  for (int i = 0; i < nro; i++)
    if (allow(ruleset, ro[i], read, handled)) return -1;
  if (allow(ruleset, "/dev/null", LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE, handled) ||
      allow(ruleset, dir, handled, handled))
    return -1;
  *failed = "Landlock restrict_self";
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_landlock_restrict_self, ruleset, 0)) return -1;
  close(ruleset);
  return 0;
}
