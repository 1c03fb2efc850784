// SPDX-License-Identifier: Apache-2.0
#include "lib/safe_open.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The regular file behind an O_PATH fd, opened for reading; -errno. */
static int reopen(int pfd, struct stat *out)
{
	struct stat a, b;
	char self[64];
	int fd;

	if (fstat(pfd, &a))
		return -errno;
	if (S_ISLNK(a.st_mode))
		return -ELOOP;
	if (!S_ISREG(a.st_mode))
		return -EINVAL;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	/* the same inode (the magic link cannot change, but say so) */
	if (fstat(fd, &b) || b.st_dev != a.st_dev || b.st_ino != a.st_ino) {
		close(fd);
		return -ESTALE;
	}
	if (out)
		*out = b;
	return fd;
}

int safe_open(int dirfd, const char *path, unsigned flags, struct stat *st)
{
	int o = O_PATH | O_CLOEXEC | (flags & SAFE_OPEN_NOFOLLOW ? O_NOFOLLOW : 0);
	int pfd = openat(dirfd, path, o), fd;

	if (pfd < 0)
		return -errno;
	fd = reopen(pfd, st);
	close(pfd);
	return fd;
}

int safe_open_in_root(int pid, const char *path, unsigned flags, struct stat *st)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC | (flags & SAFE_OPEN_NOFOLLOW ? O_NOFOLLOW : 0),
		/* symlinks resolve as inside the root; /proc magic links of
		 * the target (its own fds) are refused */
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	char root[64];
	int rfd, pfd, fd;

	snprintf(root, sizeof(root), "/proc/%d/root", pid);
	rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return -errno;
	pfd = (int)syscall(SYS_openat2, rfd, path, &how, sizeof(how));
	fd = pfd < 0 ? -errno : reopen(pfd, st);
	if (pfd >= 0)
		close(pfd);
	close(rfd);
	return fd;
}
