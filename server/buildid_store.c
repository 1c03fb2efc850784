// SPDX-License-Identifier: Apache-2.0
#include "server/buildid_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/buildid.h"

struct buildid_store {
	char *dir;
	uint64_t max_bytes;
	pthread_mutex_t lock;
	struct buildid_store_stats st;
};

int buildid_hex_valid(const char *hex)
{
	size_t n = strlen(hex);

	if (n < 2 || n > BUILDID_HEX_MAX - 1 || n % 2)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
			return 0;
	return 1;
}

static int file_path(const struct buildid_store *s, const char *hex, char *buf, size_t sz)
{
	if (!buildid_hex_valid(hex))
		return -EINVAL;
	if (snprintf(buf, sz, "%s/%.2s/%s", s->dir, hex, hex + 2) >= (int)sz)
		return -ENAMETOOLONG;
	return 0;
}

/* Sums what an existing store holds, so the bound survives restarts. */
static void index_dir(struct buildid_store *s)
{
	DIR *top = opendir(s->dir);
	struct dirent *d;

	if (!top)
		return;
	while ((d = readdir(top))) {
		char sub[PATH_MAX];
		DIR *dd;
		struct dirent *e;

		if (strlen(d->d_name) != 2 ||
		    snprintf(sub, sizeof(sub), "%s/%s", s->dir, d->d_name) >= (int)sizeof(sub))
			continue;
		dd = opendir(sub);
		if (!dd)
			continue;
		while ((e = readdir(dd))) {
			struct stat st;

			if (e->d_name[0] != '.' && !fstatat(dirfd(dd), e->d_name, &st, 0) &&
			    S_ISREG(st.st_mode)) {
				s->st.files++;
				s->st.bytes += (uint64_t)st.st_size;
			}
		}
		closedir(dd);
	}
	closedir(top);
}

struct buildid_store *buildid_store__open(const char *dir, uint64_t max_bytes)
{
	struct buildid_store *s;

	if (mkdir(dir, 0755) && errno != EEXIST)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->dir = strdup(dir);
	if (!s->dir) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->max_bytes = max_bytes;
	pthread_mutex_init(&s->lock, NULL);
	index_dir(s);
	return s;
}

void buildid_store__free(struct buildid_store *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->dir);
	free(s);
}

int buildid_store__path(struct buildid_store *s, const char *hex, char *buf, size_t sz)
{
	int err = file_path(s, hex, buf, sz);

	if (err)
		return err;
	return access(buf, R_OK) ? -ENOENT : 0;
}

static int write_all(int fd, const void *data, size_t n)
{
	const char *p = data;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The written file's own build-id must be hex. */
static int verify(int fd, const char *hex)
{
	uint8_t id[BUILD_ID_MAX];
	char got[2 * BUILD_ID_MAX + 1];
	int n = build_id_read(NULL, fd, id, sizeof(id));

	if (n <= 0)
		return -ENOEXEC;
	build_id_hex(id, (size_t)n, got, sizeof(got));
	/* Ids longer than BUILD_ID_MAX are read truncated: compare the prefix. */
	return strncmp(got, hex, strlen(got)) ? -ENOEXEC : 0;
}

int buildid_store__put(struct buildid_store *s, const char *hex, const void *data, size_t n)
{
	char path[PATH_MAX], tmp[PATH_MAX + 16], sub[PATH_MAX];
	int fd, err;

	err = file_path(s, hex, path, sizeof(path));
	if (err)
		return err;
	if (!access(path, R_OK))
		return 0;
	pthread_mutex_lock(&s->lock);
	s->st.uploads++;
	if (s->st.bytes + n > s->max_bytes) {
		s->st.refused_full++;
		pthread_mutex_unlock(&s->lock);
		return -ENOSPC;
	}
	s->st.bytes += n; /* reserved; given back on failure */
	pthread_mutex_unlock(&s->lock);

	snprintf(sub, sizeof(sub), "%s/%.2s", s->dir, hex);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%lx", path, getpid(), (unsigned long)pthread_self());
	if (mkdir(sub, 0755) && errno != EEXIST) {
		err = -errno;
		goto out;
	}
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	err = write_all(fd, data, n);
	if (!err)
		err = verify(fd, hex);
	close(fd);
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
out:
	pthread_mutex_lock(&s->lock);
	if (err) {
		s->st.bytes -= n;
		s->st.rejected++;
	} else {
		s->st.files++;
	}
	pthread_mutex_unlock(&s->lock);
	return err;
}

void buildid_store__stats(struct buildid_store *s, struct buildid_store_stats *st)
{
	pthread_mutex_lock(&s->lock);
	*st = s->st;
	pthread_mutex_unlock(&s->lock);
}
