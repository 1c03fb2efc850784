/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Opening a file whose path someone else controls: a profiled process
 * names the files it maps (and can replace them), so every open of such a
 * path goes through here.  The path is first opened O_PATH (no driver
 * open, no FIFO wait: a FIFO or device in its place cannot block or
 * disturb the agent), checked to be a regular file, then reopened read-only
 * through /proc/self/fd (O_NONBLOCK|O_NOCTTY|O_CLOEXEC).  Inside a
 * process's root (/proc/PID/root) the path is resolved with openat2
 * RESOLVE_IN_ROOT, so ".." and absolute symlinks stay inside that root.
 */
#ifndef STRATA_LIB_SAFE_OPEN_H
#define STRATA_LIB_SAFE_OPEN_H

#include <sys/stat.h>

enum safe_open_flags {
	SAFE_OPEN_NOFOLLOW = 1, /* the last component must not be a symlink */
};

/*
 * Opens path (relative to dirfd, or AT_FDCWD) read-only; st (may be NULL)
 * gets the file's stat.  Returns the fd, or -errno: -EINVAL when it is not
 * a regular file, -ELOOP for a symlink with SAFE_OPEN_NOFOLLOW.
 */
int safe_open(int dirfd, const char *path, unsigned flags, struct stat *st);

/*
 * Opens path as process pid sees it (its root: containers, chroots),
 * resolved inside that root.  Returns the fd or -errno (-ENOSYS: a kernel
 * without openat2, before 5.6: not opened).
 */
int safe_open_in_root(int pid, const char *path, unsigned flags, struct stat *st);

#endif /* STRATA_LIB_SAFE_OPEN_H */
