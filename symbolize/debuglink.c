// SPDX-License-Identifier: Apache-2.0
/*
 * .gnu_debuglink search.  libdwfl's dwfl_standard_find_debuginfo does the
 * same but also queries debuginfod on its own whenever DEBUGINFOD_URLS is
 * set, which would defeat symbolizer_opts.use_debuginfod; hence this
 * small re-implementation of the path search alone.
 */
#include "symbolize/debuglink.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "lib/safe_open.h"
#include "symbolize/buildid.h"

#define DEBUGLINK_COPY_MAX (64 << 20) /* a debug file beside a target's, copied */

/* The debuglink CRC is zlib's CRC-32 over the whole file. */
static int file_crc32(int fd, uint32_t *out)
{
	unsigned char buf[64 * 1024];
	uLong crc = crc32(0L, Z_NULL, 0);
	off_t off = 0;

	for (;;) {
		ssize_t r = pread(fd, buf, sizeof(buf), off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		crc = crc32(crc, buf, (uInt)r);
		off += r;
	}
	*out = (uint32_t)crc;
	return 0;
}

/*
 * Replaces *fd by a private in-memory copy of its file (pread, at most
 * DEBUGLINK_COPY_MAX bytes).  0, or -errno with *fd unchanged.
 */
static int copy_bounded(int *fd, const struct stat *st)
{
	char buf[65536];
	off_t off = 0;
	int mfd;

	if (st->st_size <= 0 || st->st_size > DEBUGLINK_COPY_MAX)
		return -EFBIG;
	mfd = memfd_create("strata-debuglink", MFD_CLOEXEC);
	if (mfd < 0)
		return -errno;
	while (off < st->st_size) {
		ssize_t r = pread(*fd, buf, sizeof(buf), off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || write(mfd, buf, (size_t)r) != r) {
			close(mfd);
			return -EIO; /* truncated meanwhile, or no memory */
		}
		off += r;
	}
	close(*fd);
	*fd = mfd;
	return 0;
}

static int try_candidate(const char *cand, int beside, const struct stat *self, uint32_t crc,
			 const uint8_t *bid, size_t bid_len)
{
	uint8_t id[BUILD_ID_MAX];
	struct stat st;
	int fd, n;

	/* beside a target's file: its name and what is there are the
	 * target's to choose */
	fd = safe_open(AT_FDCWD, cand, 0, &st);
	if (fd < 0)
		return fd;
	if (self && st.st_dev == self->st_dev && st.st_ino == self->st_ino)
		goto reject;
	/* libdwfl maps what we return: beside the file (the target's to
	 * write), a copy it cannot truncate under us (SIGBUS), checked below
	 * rather than the original; the system's debug tree is root's */
	if (beside && copy_bounded(&fd, &st))
		goto reject;
	if (bid_len) {
		n = build_id_read(NULL, fd, id, sizeof(id));
		if (n <= 0 || (size_t)n != (bid_len < BUILD_ID_MAX ? bid_len : BUILD_ID_MAX) ||
		    memcmp(id, bid, (size_t)n))
			goto reject;
		return fd;
	}
	uint32_t got;

	if (crc == 0 || file_crc32(fd, &got) || got != crc)
		goto reject;
	return fd;
reject:
	close(fd);
	return -ENOENT;
}

static int search_dir(const char *dir, const char *link, const struct stat *self, uint32_t crc,
		      const uint8_t *bid, size_t bid_len, char **path)
{
	static const char *const fmts[] = {
		"%s/%s",
		"%s/.debug/%s",
		"/usr/lib/debug%s/%s",
	};
	char cand[PATH_MAX];

	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		/* The global debug tree mirrors absolute paths only. */
		if (i == 2 && dir[0] != '/')
			continue;
		int n = snprintf(cand, sizeof(cand), fmts[i], dir, link);

		if (n < 0 || (size_t)n >= sizeof(cand))
			continue;
		int fd = try_candidate(cand, i < 2, self, crc, bid, bid_len);

		if (fd < 0)
			continue;
		*path = strdup(cand);
		if (!*path) {
			close(fd);
			return -ENOMEM;
		}
		return fd;
	}
	return -ENOENT;
}

/*
 * Whether dir is a process's fd directory ("/proc/self/fd", "/proc/PID/fd"):
 * the agent names the files it symbolizes "/proc/self/fd/N", and a debug
 * link "7" beside such a name is its own fd 7, not a file beside the binary.
 */
static int is_fd_dir(const char *dir)
{
	const char *p;

	if (strncmp(dir, "/proc/", 6))
		return 0;
	p = dir + 6;
	if (!strncmp(p, "self", 4) || !strncmp(p, "thread-self", 11))
		p += p[0] == 's' ? 4 : 11;
	else
		while (*p >= '0' && *p <= '9')
			p++;
	return !strcmp(p, "/fd") || !strncmp(p, "/task/", 6);
}

int debuglink_find(const char *file_name, const char *debuglink, uint32_t crc, const uint8_t *bid,
		   size_t bid_len, char **path)
{
	char *dir = NULL, *real = NULL, *slash;
	struct stat self, *selfp = NULL;
	int fd = -ENOENT;

	if (!file_name || !debuglink || !*debuglink || !path)
		return -EINVAL;
	*path = NULL;
	if (strchr(debuglink, '/'))
		return -ENOENT; /* a plain file name, by definition */
	if (!stat(file_name, &self))
		selfp = &self;
	dir = strdup(file_name);
	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	if (!is_fd_dir(slash ? dir : ".")) {
		fd = search_dir(slash ? dir : ".", debuglink, selfp, crc, bid, bid_len, path);
		if (fd != -ENOENT)
			goto out;
	}
	/* Debug files follow the real location of a symlinked binary. */
	real = realpath(file_name, NULL);
	if (real && strcmp(real, file_name)) {
		slash = strrchr(real, '/');
		if (slash) {
			*slash = '\0';
			fd = search_dir(real, debuglink, selfp, crc, bid, bid_len, path);
		}
	}
out:
	free(real);
	free(dir);
	return fd;
}
