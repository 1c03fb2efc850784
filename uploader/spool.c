// SPDX-License-Identifier: Apache-2.0
#include "uploader/spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"

struct entry {
	uint64_t seq, size;
	uint64_t carried; /* the drops this batch tells the server */
	uint8_t *mem;	  /* held in memory (the disk refused it), else a file */
	bool gone;	  /* let go: skipped, reclaimed at the head or by q_compact */
};

struct spool {
	char *dir;
	uint64_t max_bytes, mem_max;
	pthread_mutex_t lock;
	struct entry *q; /* ring, oldest at head, in seq order */
	size_t head, n, cap;
	size_t ngone; /* entries of the ring let go, not yet reclaimed */
	uint64_t next_seq;
	struct spool_stats st;
};

static void path_of(const struct spool *s, uint64_t seq, char *buf, size_t sz)
{
	snprintf(buf, sz, "%s/%020" PRIu64 ".batch", s->dir, seq);
}

/* Takes ownership of mem (NULL: the batch is a file). */
static int q_push(struct spool *s, uint64_t seq, uint64_t size, uint64_t carried, uint8_t *mem)
{
	if (s->n == s->cap) {
		/* Full: a new ring without the entries let go.  Mostly gone
		 * (memory batches dropped behind a head that cannot move, an
		 * outage), it keeps its size instead of growing for good. */
		size_t ncap = !s->cap ? 64 : s->ngone > s->n / 2 ? s->cap : s->cap * 2, k = 0;
		struct entry *nq = malloc(ncap * sizeof(*nq));

		if (!nq)
			return -ENOMEM;
		for (size_t i = 0; i < s->n; i++) {
			struct entry *e = &s->q[(s->head + i) % s->cap];

			if (!e->gone)
				nq[k++] = *e;
		}
		free(s->q);
		s->q = nq;
		s->cap = ncap;
		s->head = 0;
		s->n = k;
		s->ngone = 0;
	}
	s->q[(s->head + s->n++) % s->cap] =
		(struct entry){ .seq = seq, .size = size, .carried = carried, .mem = mem };
	s->st.files++;
	s->st.bytes += size;
	if (mem) {
		s->st.mem_files++;
		s->st.mem_bytes += size;
	}
	return 0;
}

/* Lets e's batch go (its file deleted): it stays in the ring, skipped. */
static void drop_entry(struct spool *s, struct entry *e)
{
	char path[PATH_MAX];

	if (e->gone)
		return;
	if (e->mem) {
		free(e->mem);
		e->mem = NULL;
		s->st.mem_files--;
		s->st.mem_bytes -= e->size;
	} else {
		path_of(s, e->seq, path, sizeof(path));
		unlink(path);
	}
	s->st.files--;
	s->st.bytes -= e->size;
	e->gone = true;
	s->ngone++;
}

/* e's batch is lost: it and the drops it carried are told by a later one. */
static void lose(struct spool *s, struct entry *e)
{
	s->st.to_report += 1 + e->carried;
	drop_entry(s, e);
}

static void q_pop(struct spool *s)
{
	drop_entry(s, &s->q[s->head]);
	s->ngone--;
	s->head = (s->head + 1) % s->cap;
	s->n--;
}

/* The head, past the entries dropped from the middle; NULL when empty. */
static struct entry *q_oldest(struct spool *s)
{
	while (s->n && s->q[s->head].gone)
		q_pop(s);
	return s->n ? &s->q[s->head] : NULL;
}

/* Makes room in memory for len bytes by dropping the oldest batches held
 * there; false when len does not fit even then. */
static bool mem_room(struct spool *s, uint64_t len)
{
	if (len > s->mem_max)
		return false;
	for (size_t i = 0; i < s->n && s->st.mem_bytes + len > s->mem_max; i++) {
		struct entry *e = &s->q[(s->head + i) % s->cap];

		if (e->mem && !e->gone) {
			lose(s, e);
			s->st.dropped_full++;
		}
	}
	return s->st.mem_bytes + len <= s->mem_max;
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
		/* larger than the bound: not a batch of ours (never sent whole) */
		if (sscanf(e->d_name, "%20llu%15s", &seq, tail) != 2 || strcmp(tail, ".batch") ||
		    fstatat(dirfd(d), e->d_name, &st, 0) || !S_ISREG(st.st_mode) ||
		    (uint64_t)st.st_size > s->max_bytes)
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
		found[n++] = (struct entry){ .seq = seq, .size = (uint64_t)st.st_size };
	}
	closedir(d);
	if (!err) {
		if (n)
			qsort(found, n, sizeof(*found), entry_cmp);
		for (size_t i = 0; i < n && !err; i++) {
			err = q_push(s, found[i].seq, found[i].size, 0, NULL);
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

struct spool *spool__open(const char *dir, uint64_t max_bytes, int *dir_err)
{
	struct spool *s;
	int err;

	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->dir = strdup(dir);
	s->max_bytes = max_bytes;
	s->mem_max = max_bytes < SPOOL_MEM_MAX ? max_bytes : SPOOL_MEM_MAX;
	s->next_seq = 1;
	pthread_mutex_init(&s->lock, NULL);
	if (!s->dir) {
		spool__free(s);
		errno = ENOMEM;
		return NULL;
	}
	/* A disk that is full or read-only must not keep the agent from
	 * starting (a restart loop profiles nothing): memory until it heals. */
	err = mkdir_p(dir);
	if (!err)
		err = scan(s);
	if (err == -ENOMEM) {
		spool__free(s);
		errno = ENOMEM;
		return NULL;
	}
	/* Unscanned, the directory may hold an earlier run's batches: numbers
	 * from the clock (ms) do not replace them when it can be written. */
	if (err)
		s->next_seq = (uint64_t)time(NULL) * 1000;
	*dir_err = err;
	return s;
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

/* seq's file, atomically (temp file + rename); the directory is made again
 * when it is gone. */
static int write_batch(struct spool *s, uint64_t seq, const void *data, size_t len)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	int err;

	path_of(s, seq, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	err = write_file(tmp, data, len);
	if (err == -ENOENT && !mkdir_p(s->dir)) {
		pthread_mutex_lock(&s->lock);
		s->st.dir_made++;
		pthread_mutex_unlock(&s->lock);
		err = write_file(tmp, data, len);
	}
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

void spool__free(struct spool *s)
{
	uint64_t unsaved = 0;

	if (!s)
		return;
	/* what memory holds is kept for the next run if the disk takes it now */
	for (size_t i = 0; i < s->n; i++) {
		struct entry *e = &s->q[(s->head + i) % s->cap];

		if (e->mem && !e->gone && write_batch(s, e->seq, e->mem, e->size))
			unsaved++;
		free(e->mem);
	}
	if (unsaved)
		pr_warn("spool: %s: %llu batches held in memory are lost (the disk refused them)",
			s->dir, (unsigned long long)unsaved);
	pthread_mutex_destroy(&s->lock);
	free(s->q);
	free(s->dir);
	free(s);
}

int spool__put(struct spool *s, const void *data, size_t len, uint64_t carried, uint64_t *seq_out)
{
	uint8_t *mem = NULL;
	uint64_t seq;
	int err;

	pthread_mutex_lock(&s->lock);
	if (len > s->max_bytes) {
		s->st.write_failed++;
		s->st.to_report += 1 + carried;
		pthread_mutex_unlock(&s->lock);
		return -EFBIG;
	}
	/* Oldest first out: the newest data is the most useful. */
	while (s->n && s->st.bytes + len > s->max_bytes) {
		if (!s->q[s->head].gone) {
			s->st.dropped_full++;
			lose(s, &s->q[s->head]);
		}
		q_pop(s);
	}
	seq = s->next_seq++;
	pthread_mutex_unlock(&s->lock);

	err = write_batch(s, seq, data, len);
	pthread_mutex_lock(&s->lock);
	if (err) {
		s->st.disk_failed++;
		if (mem_room(s, len) && (mem = malloc(len ? len : 1))) {
			memcpy(mem, data, len);
			err = 0;
		}
	}
	if (!err) {
		err = q_push(s, seq, len, carried, mem);
		if (err)
			free(mem);
	}
	if (err) {
		s->st.write_failed++;
		s->st.to_report += 1 + carried;
	} else
		s->st.written++;
	pthread_mutex_unlock(&s->lock);
	if (!err && seq_out)
		*seq_out = seq;
	return err;
}

/* Reads seq's file; -errno when it is gone or cannot be read whole. */
static int read_batch(struct spool *s, uint64_t seq, uint8_t **data, size_t *len)
{
	char path[PATH_MAX];
	struct stat st;
	int fd, err = 0;

	path_of(s, seq, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
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

int spool__oldest(struct spool *s, uint64_t *seq, uint8_t **data, size_t *len)
{
	for (;;) {
		struct entry *e;
		int err;

		pthread_mutex_lock(&s->lock);
		e = q_oldest(s);
		if (!e) {
			pthread_mutex_unlock(&s->lock);
			return -ENOENT;
		}
		*seq = e->seq;
		if (e->mem) {
			*len = e->size;
			*data = malloc(*len ? *len : 1);
			if (*data)
				memcpy(*data, e->mem, *len);
			pthread_mutex_unlock(&s->lock);
			return *data ? 0 : -ENOMEM;
		}
		pthread_mutex_unlock(&s->lock);
		err = read_batch(s, *seq, data, len);
		if (!err || err == -ENOMEM || err == -EMFILE || err == -ENFILE)
			return err; /* the last three pass: the batch is kept */
		/* Dropped meanwhile to make room (counted then), or removed,
		 * damaged or out of reach behind our back: counted, and the
		 * next one (a batch that cannot be read must not stop the rest) */
		pthread_mutex_lock(&s->lock);
		e = q_oldest(s);
		if (e && e->seq == *seq) {
			lose(s, e);
			q_pop(s);
			s->st.lost++;
		}
		pthread_mutex_unlock(&s->lock);
	}
}

int spool__remove(struct spool *s, uint64_t seq)
{
	struct entry *e;
	int err = -ENOENT;

	pthread_mutex_lock(&s->lock);
	/* Only the oldest is ever removed this way (in-order replay). */
	e = q_oldest(s);
	if (e && e->seq == seq) {
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
	n = s->st.files;
	pthread_mutex_unlock(&s->lock);
	return n;
}

void spool__stats(struct spool *s, struct spool_stats *st)
{
	pthread_mutex_lock(&s->lock);
	*st = s->st;
	pthread_mutex_unlock(&s->lock);
}
