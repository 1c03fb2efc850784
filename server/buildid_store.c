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

#include "lib/clock.h"
#include "lib/sparse_elf.h"
#include "server/buildid_index.h"
#include "symbolize/buildid.h"

#define DEFAULT_MAX_FILES (1u << 18)
#define SYNC_EVERY_NS (3600ull * 1000000000ull) /* last use written to mtime */

struct buildid_store {
	char *dir;
	uint64_t max_bytes;
	uint32_t max_files;
	pthread_mutex_t lock;
	struct buildid_index *idx;
	struct buildid_store_stats st; /* bytes: files; incoming: uploads' reservations */
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
	/* DIR/ab/cd...: an id of one byte would name the directory */
	if (!buildid_hex_valid(hex) || strlen(hex) < 4)
		return -EINVAL;
	if (snprintf(buf, sz, "%s/%.2s/%s", s->dir, hex, hex + 2) >= (int)sz)
		return -ENAMETOOLONG;
	return 0;
}

/* What a stored file counts against the bound: its size, or less for a
 * sparse upload's file with holes (st_blocks; a file system that reports
 * none: its size). */
static uint64_t disk_bytes(const struct stat *st)
{
	uint64_t blocks = (uint64_t)st->st_blocks * 512;

	return blocks && blocks < (uint64_t)st->st_size ? blocks : (uint64_t)st->st_size;
}

/*
 * The file's own build-id must be hex, exactly: the same length and
 * digits (a file with a 1-byte note is no file for every id that starts
 * with that byte).  Notes longer than BUILD_ID_MAX are read truncated, as
 * the agents read and report them.
 */
static int verify(int fd, const char *hex)
{
	uint8_t id[BUILD_ID_MAX];
	char got[2 * BUILD_ID_MAX + 1];
	int n = build_id_read(NULL, fd, id, sizeof(id));

	if (n <= 0)
		return -ENOEXEC;
	build_id_hex(id, (size_t)n, got, sizeof(got));
	return strcmp(got, hex) ? -ENOEXEC : 0;
}

static int verify_path(const char *path, const char *hex)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), err;
	struct stat st;

	if (fd < 0)
		return -errno;
	err = fstat(fd, &st) ? -errno : !S_ISREG(st.st_mode) ? -ENOEXEC : verify(fd, hex);
	close(fd);
	return err;
}

/* Drops e's file; the caller holds the lock. */
static void drop_locked(struct buildid_store *s, struct bid_entry *e)
{
	char path[PATH_MAX];

	if (!file_path(s, e->hex, path, sizeof(path)))
		unlink(path);
	s->st.bytes -= e->size;
	s->st.files--;
	buildid_index__del(s->idx, e);
}

/*
 * Makes room for need more bytes and one more file by removing the least
 * recently used files (a little beyond, so that the next uploads do not
 * each evict).  0, or -ENOSPC when what is left (uploads in flight) does
 * not allow it.  The caller holds the lock.
 */
static int evict_locked(struct buildid_store *s, uint64_t need, uint32_t nfiles)
{
	uint64_t slack_b = s->max_bytes / 32, slack_f = s->max_files / 32;
	struct bid_entry **v;
	size_t n;

	if (s->st.bytes + need <= s->max_bytes && s->st.files + nfiles <= s->max_files)
		return 0;
	v = buildid_index__by_age(s->idx, &n);
	for (size_t i = 0; i < n; i++) {
		if (s->st.bytes + need + slack_b <= s->max_bytes &&
		    s->st.files + nfiles + slack_f <= s->max_files)
			break;
		drop_locked(s, v[i]);
		s->st.evicted++;
	}
	free(v);
	return s->st.bytes + need <= s->max_bytes && s->st.files + nfiles <= s->max_files ? 0
											  : -ENOSPC;
}

/* Indexes what an existing store holds (size, last use from the mtime),
 * so the bounds and the LRU order survive restarts. */
static void index_dir(struct buildid_store *s)
{
	DIR *top = opendir(s->dir);
	struct dirent *d;

	if (!top)
		return;
	while ((d = readdir(top))) {
		char sub[PATH_MAX], hex[BUILDID_HEX_MAX];
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
			uint64_t bytes;

			if (e->d_name[0] == '.' || fstatat(dirfd(dd), e->d_name, &st, 0) ||
			    !S_ISREG(st.st_mode))
				continue;
			if (strstr(e->d_name, ".tmp.")) { /* an older server's upload, cut short */
				unlinkat(dirfd(dd), e->d_name, 0);
				continue;
			}
			if (strlen(e->d_name) > BUILDID_HEX_MAX - 3)
				continue;
			memcpy(hex, d->d_name, 2);
			memcpy(hex + 2, e->d_name, strlen(e->d_name) + 1);
			bytes = disk_bytes(&st);
			if (!buildid_hex_valid(hex) || buildid_index__get(s->idx, hex) ||
			    !buildid_index__add(s->idx, hex, bytes,
						(uint64_t)st.st_mtim.tv_sec * 1000000000ull +
							(uint64_t)st.st_mtim.tv_nsec))
				continue;
			s->st.files++;
			s->st.bytes += bytes;
		}
		closedir(dd);
	}
	closedir(top);
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

struct buildid_store *buildid_store__open(const char *dir, uint64_t max_bytes, uint32_t max_files)
{
	struct buildid_store *s;

	if (mkdir(dir, 0755) && errno != EEXIST)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->dir = strdup(dir);
	s->idx = buildid_index__new();
	if (!s->dir || !s->idx) {
		buildid_index__free(s->idx);
		free(s->dir);
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->max_bytes = max_bytes;
	s->max_files = max_files ? max_files : DEFAULT_MAX_FILES;
	pthread_mutex_init(&s->lock, NULL);
	clean_incoming(dir);
	index_dir(s);
	evict_locked(s, 0, 0); /* the bounds may be lower than last time */
	return s;
}

void buildid_store__free(struct buildid_store *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	buildid_index__free(s->idx);
	free(s->dir);
	free(s);
}

/*
 * e's file checked once: a file whose note is not its id (stored by an
 * older server that matched prefixes, or damaged since) is dropped, so
 * the id is missing again and the next upload replaces it.  0 or -ENOENT.
 * The caller holds the lock.
 */
static int checked_locked(struct buildid_store *s, struct bid_entry *e, const char *path)
{
	if (e->verified)
		return 0;
	if (verify_path(path, e->hex)) {
		drop_locked(s, e);
		s->st.replaced++;
		return -ENOENT;
	}
	e->verified = 1;
	return 0;
}

int buildid_store__path(struct buildid_store *s, const char *hex, char *buf, size_t sz)
{
	struct bid_entry *e;
	uint64_t now = realtime_ns();
	int err = file_path(s, hex, buf, sz);

	if (err)
		return err;
	pthread_mutex_lock(&s->lock);
	e = buildid_index__get(s->idx, hex);
	err = e ? checked_locked(s, e, buf) : -ENOENT;
	if (!err) {
		e->used_ns = now;
		/* The LRU order outlives restarts: the last use, in the mtime,
		 * now and then (not a write per lookup). */
		if (now - e->synced_ns > SYNC_EVERY_NS) {
			struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
						  { .tv_sec = (time_t)(now / 1000000000ull),
						    .tv_nsec = (long)(now % 1000000000ull) } };

			utimensat(AT_FDCWD, buf, ts, 0);
			e->synced_ns = now;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return err;
}

/* n bytes at off of fd, whole: 0 or -errno. */
static int pwrite_all(int fd, const void *data, size_t n, uint64_t off)
{
	const char *p = data;

	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		off += (uint64_t)w;
		n -= (size_t)w;
	}
	return 0;
}

struct buildid_upload {
	struct buildid_store *s;
	char hex[BUILDID_HEX_MAX], path[PATH_MAX], tmp[PATH_MAX];
	int fd;
	uint64_t written, reserved;	  /* file bytes; reserved >= written */
	struct sparse_elf_reader *sparse; /* a sparse ELF body, else the file whole */
};

/*
 * Takes n bytes for an upload in progress: uploads together take at most
 * half the store's bound, and evict nothing for it (a stored file makes
 * room for its real size when it is committed): uploads that declare
 * 512 MiB and send nothing would otherwise empty the store of every
 * job's files.  -ENOSPC (counted) when over.
 */
static int reserve(struct buildid_store *s, uint64_t n)
{
	int err;

	pthread_mutex_lock(&s->lock);
	err = n > s->max_bytes / 2 - s->st.incoming ? -ENOSPC : 0;
	if (err)
		s->st.refused_full++;
	else
		s->st.incoming += n;
	pthread_mutex_unlock(&s->lock);
	return err;
}

int buildid_store__begin(struct buildid_store *s, const char *hex, uint64_t expect,
			 struct buildid_upload **out)
{
	struct buildid_upload *u;
	struct bid_entry *e;
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
	pthread_mutex_lock(&s->lock);
	e = buildid_index__get(s->idx, hex);
	/* the first good upload wins; a file that fails its check is replaced */
	err = e && !checked_locked(s, e, u->path) ? -EEXIST : 0;
	if (!err)
		s->st.uploads++;
	pthread_mutex_unlock(&s->lock);
	if (err)
		goto fail;
	if (snprintf(in, sizeof(in), "%s/.incoming", s->dir) >= (int)sizeof(in) ||
	    snprintf(u->tmp, sizeof(u->tmp), "%s/%s.XXXXXX", in, hex) >= (int)sizeof(u->tmp)) {
		err = -ENAMETOOLONG;
		goto fail;
	}
	/* Taken as the bytes arrive (buildid_upload__write), not as
	 * declared: idle uploads declaring 512 MiB each would hold the
	 * in-progress share from their headers alone.  One that could never
	 * fit is refused now, unread. */
	if (expect > s->max_bytes / 2) {
		pthread_mutex_lock(&s->lock);
		s->st.refused_full++;
		pthread_mutex_unlock(&s->lock);
		err = -ENOSPC;
		goto fail;
	}
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

/* n more bytes of the file, within the bound: 0 or -ENOSPC. */
static int take(struct buildid_upload *u, uint64_t n)
{
	if (u->written + n > u->reserved) {
		int err = reserve(u->s, u->written + n - u->reserved);

		if (err)
			return err;
		u->reserved = u->written + n;
	}
	u->written += n;
	return 0;
}

/* A sparse body's bytes at their place in the file (holes stay holes:
 * only what was sent takes disk and the bound). */
static int write_at(void *ctx, uint64_t off, const void *data, size_t n)
{
	struct buildid_upload *u = ctx;
	int err = take(u, n);

	return err ? err : pwrite_all(u->fd, data, n, off);
}

int buildid_upload__sparse(struct buildid_upload *u)
{
	u->sparse = malloc(sizeof(*u->sparse));
	if (!u->sparse)
		return -ENOMEM;
	sparse_elf_reader__init(u->sparse);
	return 0;
}

int buildid_upload__write(struct buildid_upload *u, const void *data, size_t n)
{
	uint64_t at;
	int err;

	if (u->sparse) {
		err = sparse_elf_reader__feed(u->sparse, data, n, write_at, u);
		return err == -EINVAL ? -EBADMSG : err;
	}
	at = u->written; /* the file whole: each piece after the last */
	err = take(u, n);
	return err ? err : pwrite_all(u->fd, data, n, at);
}

/* Ends u: gives back its reservation, counts a refusal, frees it. */
static void upload_end(struct buildid_upload *u, int refused)
{
	struct buildid_store *s = u->s;

	if (u->fd >= 0) {
		close(u->fd);
		unlink(u->tmp); /* gone already when it was stored */
	}
	pthread_mutex_lock(&s->lock);
	s->st.incoming -= u->reserved;
	if (refused)
		s->st.rejected++;
	pthread_mutex_unlock(&s->lock);
	if (u->sparse)
		sparse_elf_reader__fini(u->sparse);
	free(u->sparse);
	free(u);
}

void buildid_upload__abort(struct buildid_upload *u)
{
	if (u)
		upload_end(u, u->fd >= 0);
}

int buildid_store__commit(struct buildid_upload *u)
{
	struct buildid_store *s = u->s;
	char sub[PATH_MAX];
	struct bid_entry *e;
	struct stat st;
	uint64_t size;
	int err = 0;

	if (u->sparse) { /* whole, then as long as the file it stands for, and
			  * no hole where the symbolizer will read */
		if (sparse_elf_reader__end(u->sparse, &size))
			err = -EBADMSG;
		else if (ftruncate(u->fd, (off_t)size))
			err = -errno;
		else
			err = sparse_elf_check(u->fd, size, u->sparse->r, u->sparse->n);
		if (err)
			goto fail;
		/* what it takes on disk (a file system without holes: all of
		 * it), as a restart will count it */
		if (!fstat(u->fd, &st) && disk_bytes(&st) > u->written)
			u->written = disk_bytes(&st);
	}
	err = verify(u->fd, u->hex);
	if (err)
		goto fail;
	/* DIR/ab/cdef...: the directory is the path up to the last '/' */
	snprintf(sub, sizeof(sub), "%.*s", (int)(strrchr(u->path, '/') - u->path), u->path);
	if (mkdir(sub, 0755) && errno != EEXIST) {
		err = -errno;
		goto fail;
	}
	pthread_mutex_lock(&s->lock);
	if (buildid_index__get(s->idx, u->hex)) {
		err = -EEXIST; /* another upload of the id got here first */
	} else if (evict_locked(s, u->written, 1)) {
		err = -ENOSPC; /* larger than the store */
		s->st.refused_full++;
	} else if (rename(u->tmp, u->path)) {
		err = -errno;
	} else {
		e = buildid_index__add(s->idx, u->hex, u->written, realtime_ns());
		if (e) {
			e->verified = 1;
			s->st.files++;
			s->st.bytes += u->written; /* the file's */
		} else {
			unlink(u->path);
			err = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (err == -EEXIST) {
		upload_end(u, 0);
		return 0;
	}
	if (err)
		goto fail;
	upload_end(u, 0);
	return 0;
fail:
	upload_end(u, 1);
	return err;
}

int buildid_store__put(struct buildid_store *s, const char *hex, const void *data, size_t n)
{
	struct buildid_upload *u;
	int err;

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
