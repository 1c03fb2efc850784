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

		if (strlen(d->d_name) != 2 || d->d_name[0] == '.' || /* not "..": the parent */
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

static void clean_incoming(const char *dir);

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
	clean_incoming(dir);
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

struct buildid_upload {
	struct buildid_store *s;
	char hex[BUILDID_HEX_MAX], path[PATH_MAX], tmp[PATH_MAX];
	int fd;
	uint64_t written, reserved; /* reserved >= written */
};

/* Takes n bytes of the store's bound; -ENOSPC (counted) when full. */
static int reserve(struct buildid_store *s, uint64_t n)
{
	int err = 0;

	pthread_mutex_lock(&s->lock);
	if (n > s->max_bytes || s->st.bytes > s->max_bytes - n) {
		s->st.refused_full++;
		err = -ENOSPC;
	} else {
		s->st.bytes += n;
	}
	pthread_mutex_unlock(&s->lock);
	return err;
}

/* Removes what a crash left in DIR/.incoming: nothing there is in use
 * before the store is open. */
static void clean_incoming(const char *dir)
{
	char in[PATH_MAX];
	DIR *d;
	struct dirent *e;

	if (snprintf(in, sizeof(in), "%s/.incoming", dir) >= (int)sizeof(in))
		return;
	d = opendir(in);
	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

int buildid_store__begin(struct buildid_store *s, const char *hex, uint64_t expect,
			 struct buildid_upload **out)
{
	struct buildid_upload *u;
	char in[PATH_MAX];
	int err;

	*out = NULL;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->s = s;
	u->fd = -1;
	err = file_path(s, hex, u->path, sizeof(u->path));
	if (err)
		goto fail;
	snprintf(u->hex, sizeof(u->hex), "%s", hex);
	if (!access(u->path, F_OK)) {
		err = -EEXIST;
		goto fail;
	}
	if (snprintf(in, sizeof(in), "%s/.incoming", s->dir) >= (int)sizeof(in) ||
	    snprintf(u->tmp, sizeof(u->tmp), "%s/%s.XXXXXX", in, hex) >= (int)sizeof(u->tmp)) {
		err = -ENAMETOOLONG;
		goto fail;
	}
	pthread_mutex_lock(&s->lock);
	s->st.uploads++;
	pthread_mutex_unlock(&s->lock);
	err = reserve(s, expect);
	if (err)
		goto fail;
	u->reserved = expect;
	if (mkdir(in, 0700) && errno != EEXIST) {
		err = -errno;
		goto fail;
	}
	u->fd = mkostemp(u->tmp, O_CLOEXEC);
	if (u->fd < 0) {
		err = -errno;
		goto fail;
	}
	*out = u;
	return 0;
fail:
	buildid_upload__abort(u);
	return err;
}

int buildid_upload__write(struct buildid_upload *u, const void *data, size_t n)
{
	if (u->written + n > u->reserved) {
		int err = reserve(u->s, u->written + n - u->reserved);

		if (err)
			return err;
		u->reserved = u->written + n;
	}
	u->written += n;
	return write_all(u->fd, data, n);
}

/* Ends u: gives back what it reserved beyond keep bytes, counts it, frees it. */
static void upload_end(struct buildid_upload *u, uint64_t keep, int stored)
{
	struct buildid_store *s = u->s;

	if (u->fd >= 0)
		close(u->fd);
	if (u->fd >= 0 && !stored)
		unlink(u->tmp);
	pthread_mutex_lock(&s->lock);
	s->st.bytes -= u->reserved - keep;
	if (stored)
		s->st.files++;
	else
		s->st.rejected++;
	pthread_mutex_unlock(&s->lock);
	free(u);
}

void buildid_upload__abort(struct buildid_upload *u)
{
	if (u)
		upload_end(u, 0, 0);
}

int buildid_store__commit(struct buildid_upload *u)
{
	char sub[PATH_MAX];
	int err;

	err = verify(u->fd, u->hex);
	if (err)
		goto fail;
	/* DIR/ab/cdef...: the directory is the path up to the last '/' */
	snprintf(sub, sizeof(sub), "%.*s", (int)(strrchr(u->path, '/') - u->path), u->path);
	if (mkdir(sub, 0755) && errno != EEXIST) {
		err = -errno;
		goto fail;
	}
	/* Two uploads of one id at once: the first to get here wins. */
	pthread_mutex_lock(&u->s->lock);
	err = !access(u->path, F_OK) ? -EEXIST : rename(u->tmp, u->path) ? -errno : 0;
	pthread_mutex_unlock(&u->s->lock);
	if (err == -EEXIST) {
		upload_end(u, 0, 0);
		return 0;
	}
	if (err)
		goto fail;
	upload_end(u, u->written, 1);
	return 0;
fail:
	upload_end(u, 0, 0);
	return err;
}

int buildid_store__put(struct buildid_store *s, const char *hex, const void *data, size_t n)
{
	struct buildid_upload *u;
	char path[PATH_MAX];
	int err;

	err = file_path(s, hex, path, sizeof(path));
	if (err)
		return err;
	err = buildid_store__begin(s, hex, n, &u);
	if (err)
		return err == -EEXIST ? 0 : err;
	err = buildid_upload__write(u, data, n);
	if (err) {
		buildid_upload__abort(u);
		return err;
	}
	return buildid_store__commit(u);
}

void buildid_store__stats(struct buildid_store *s, struct buildid_store_stats *st)
{
	pthread_mutex_lock(&s->lock);
	*st = s->st;
	pthread_mutex_unlock(&s->lock);
}
