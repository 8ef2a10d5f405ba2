/* Filesystem confinement of the sandbox launcher (privatefs.c). Both return 0 on success; on
 * failure -1 with errno set and *failed naming the step. */
#ifndef AUTOCOMP_PRIVATEFS_H
#define AUTOCOMP_PRIVATEFS_H
int private_root(const char *dir, char *const *ro, int nro, const char **failed);
int landlock_confine(const char *dir, char *const *ro, int nro, const char **failed);
#endif
