// SPDX-License-Identifier: Apache-2.0
#include "uploader/spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct entry {
	uint64_t seq, size;
};

struct spool {
	char *dir;
	uint64_t max_bytes;
	pthread_mutex_t lock;
	struct entry *q; /* ring, oldest at head */
	size_t head, n, cap;
	uint64_t next_seq;
	struct spool_stats st;
};

static void path_of(const struct spool *s, uint64_t seq, char *buf, size_t sz)
{
	snprintf(buf, sz, "%s/%020" PRIu64 ".batch", s->dir, seq);
}

static int q_push(struct spool *s, uint64_t seq, uint64_t size)
{
	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 64;
		struct entry *nq = malloc(ncap * sizeof(*nq));

		if (!nq)
			return -ENOMEM;
		for (size_t i = 0; i < s->n; i++)
			nq[i] = s->q[(s->head + i) % s->cap];
		free(s->q);
		s->q = nq;
		s->cap = ncap;
		s->head = 0;
	}
	s->q[(s->head + s->n++) % s->cap] = (struct entry){ seq, size };
	s->st.files++;
	s->st.bytes += size;
	return 0;
}

static void q_pop(struct spool *s)
{
	s->st.files--;
	s->st.bytes -= s->q[s->head].size;
	s->head = (s->head + 1) % s->cap;
	s->n--;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Takes over what an earlier run left, oldest first; stray temp files go. */
static int scan(struct spool *s)
{
	DIR *d = opendir(s->dir);
	struct dirent *e;
	struct entry *found = NULL;
	size_t n = 0, cap = 0;
	int err = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		unsigned long long seq;
		char tail[16];
		struct stat st;

		if (strstr(e->d_name, ".tmp")) {
			unlinkat(dirfd(d), e->d_name, 0);
			continue;
		}
		if (sscanf(e->d_name, "%20llu%15s", &seq, tail) != 2 || strcmp(tail, ".batch") ||
		    fstatat(dirfd(d), e->d_name, &st, 0) || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct entry *nf = realloc(found, ncap * sizeof(*nf));

			if (!nf) {
				err = -ENOMEM;
				break;
			}
			found = nf;
			cap = ncap;
		}
		found[n++] = (struct entry){ seq, (uint64_t)st.st_size };
	}
	closedir(d);
	if (!err) {
		if (n)
			qsort(found, n, sizeof(*found), entry_cmp);
		for (size_t i = 0; i < n && !err; i++) {
			err = q_push(s, found[i].seq, found[i].size);
			if (found[i].seq >= s->next_seq)
				s->next_seq = found[i].seq + 1;
		}
		s->st.recovered = n;
	}
	free(found);
	return err;
}

/* mkdir -p: the default spool's parents may not exist yet. */
static int mkdir_p(const char *dir)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdir(buf, 0700) && errno != EEXIST ? -errno : 0;
}

struct spool *spool__open(const char *dir, uint64_t max_bytes)
{
	struct spool *s;
	int err;

	err = mkdir_p(dir);
	if (err) {
		errno = -err;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->dir = strdup(dir);
	s->max_bytes = max_bytes;
	s->next_seq = 1;
	pthread_mutex_init(&s->lock, NULL);
	err = s->dir ? scan(s) : -ENOMEM;
	if (err) {
		spool__free(s);
		errno = -err;
		return NULL;
	}
	return s;
}

void spool__free(struct spool *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->q);
	free(s->dir);
	free(s);
}

static int write_file(const char *path, const void *data, size_t len)
{
	const char *p = data;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int err = w < 0 ? -errno : -EIO;

			close(fd);
			return err;
		}
		p += w;
		len -= (size_t)w;
	}
	return close(fd) ? -errno : 0;
}

int spool__put(struct spool *s, const void *data, size_t len, uint64_t *seq_out)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	uint64_t seq;
	int err;

	if (len > s->max_bytes) {
		pthread_mutex_lock(&s->lock);
		s->st.write_failed++;
		pthread_mutex_unlock(&s->lock);
		return -EFBIG;
	}
	pthread_mutex_lock(&s->lock);
	/* Oldest first out: the newest data is the most useful. */
	while (s->n && s->st.bytes + len > s->max_bytes) {
		path_of(s, s->q[s->head].seq, path, sizeof(path));
		unlink(path);
		q_pop(s);
		s->st.dropped_full++;
	}
	seq = s->next_seq++;
	pthread_mutex_unlock(&s->lock);

	path_of(s, seq, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	err = write_file(tmp, data, len);
	if (!err && rename(tmp, path))
		err = -errno;
	pthread_mutex_lock(&s->lock);
	if (err) {
		unlink(tmp);
		s->st.write_failed++;
	} else {
		err = q_push(s, seq, len);
		if (!err)
			s->st.written++;
	}
	pthread_mutex_unlock(&s->lock);
	if (!err && seq_out)
		*seq_out = seq;
	return err;
}

int spool__oldest(struct spool *s, uint64_t *seq, uint8_t **data, size_t *len)
{
	char path[PATH_MAX];
	struct stat st;
	int fd, err = 0;

	for (;;) {
		pthread_mutex_lock(&s->lock);
		if (!s->n) {
			pthread_mutex_unlock(&s->lock);
			return -ENOENT;
		}
		*seq = s->q[s->head].seq;
		pthread_mutex_unlock(&s->lock);
		path_of(s, *seq, path, sizeof(path));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			break;
		/* Dropped meanwhile to make room: take the next one. */
		spool__remove(s, *seq);
	}
	if (fstat(fd, &st)) {
		err = -errno;
	} else {
		*len = (size_t)st.st_size;
		*data = malloc(*len ? *len : 1);
		if (!*data)
			err = -ENOMEM;
		else if (*len && pread(fd, *data, *len, 0) != (ssize_t)*len) {
			free(*data);
			err = -EIO;
		}
	}
	close(fd);
	return err;
}

int spool__remove(struct spool *s, uint64_t seq)
{
	char path[PATH_MAX];
	int err = -ENOENT;

	pthread_mutex_lock(&s->lock);
	/* Only the oldest is ever removed this way (in-order replay). */
	if (s->n && s->q[s->head].seq == seq) {
		path_of(s, seq, path, sizeof(path));
		unlink(path);
		q_pop(s);
		err = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return err;
}

size_t spool__count(struct spool *s)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = s->n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

void spool__stats(struct spool *s, struct spool_stats *st)
{
	pthread_mutex_lock(&s->lock);
	*st = s->st;
	pthread_mutex_unlock(&s->lock);
}
