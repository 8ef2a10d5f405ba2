/* Filesystem confinement of the sandbox launcher (privatefs.c). Each returns 0 on success; on failure -1
 * with errno set and *failed (where it takes one) naming the step. */
#ifndef AUTOCOMP_PRIVATEFS_H
#define AUTOCOMP_PRIVATEFS_H
struct fsview {
  const char *dir;             /* the working directory: read-write, at its real path */
  char *const *ro;             /* paths the program may read (and execute) */
  int nro;
  char *const *dev;            /* device nodes it may open read-write (a GPU's) */
  int ndev;
  int proc;                    /* leave a mount point for a private /proc (mount_private_proc) */
};
/* The private root in two steps, so that a /proc can be mounted in between by a process of another PID
 * namespace: build it (inside a fresh mount namespace, with v->dir as cwd), then enter it. */
int build_private_root(const struct fsview *v, const char **failed);
int mount_private_proc(int *hidepid);
int enter_private_root(const char **failed);
int landlock_confine(const struct fsview *v, const char **failed);
#endif
