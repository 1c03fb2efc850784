// SPDX-License-Identifier: Apache-2.0
#include "server/dbgd_fetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/hash.h"
#include "symbolize/debuginfod.h"

#define PROBES 16
#define MAX_ID 64

/* One remembered build-id.  Keyed by a hash of the id; the id itself is
 * kept, so a collision is told apart. */
struct dentry {
	uint64_t key;  /* 0: free */
	uint8_t state; /* DBGD_FOUND, DBGD_NONE or DBGD_PENDING */
	uint8_t len;
	uint8_t id[MAX_ID];
	uint64_t at_ns; /* answered (or asked) at */
	char *path;	/* DBGD_FOUND */
};

struct dbgd_fetch {
	struct dbgd_fetch_opts o;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct dentry *v;
	uint32_t mask;
	uint64_t *queue; /* keys of pending entries, a ring */
	uint32_t qhead, qlen;
	pthread_t *threads;
	uint32_t nthreads;
	int stop;
	struct dbgd_fetch_stats st;
};

struct dbgd_fetch *dbgd_fetch__new(const struct dbgd_fetch_opts *o)
{
	struct dbgd_fetch *f = calloc(1, sizeof(*f));
	uint32_t slots = 32; /* 2 x max_entries, a power of two */

	if (!f)
		return NULL;
	f->o = (struct dbgd_fetch_opts){ .threads = 2,
					 .max_pending = 1024,
					 .max_entries = 16384,
					 .negative_ttl_ns = 600ull * 1000000000ull };
	if (o) {
		if (o->threads)
			f->o.threads = o->threads;
		if (o->max_pending)
			f->o.max_pending = o->max_pending;
		if (o->max_entries)
			f->o.max_entries = o->max_entries;
		if (o->negative_ttl_ns)
			f->o.negative_ttl_ns = o->negative_ttl_ns;
	}
	while (slots < 2 * f->o.max_entries && slots < (1u << 28))
		slots <<= 1;
	f->mask = slots - 1;
	f->v = calloc(slots, sizeof(*f->v));
	f->queue = calloc(f->o.max_pending, sizeof(*f->queue));
	f->threads = calloc(f->o.threads, sizeof(*f->threads));
	if (!f->v || !f->queue || !f->threads) {
		free(f->v);
		free(f->queue);
		free(f->threads);
		free(f);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->wake, NULL);
	return f;
}

static uint64_t key_of(const uint8_t *id, size_t len)
{
	uint64_t h = hash_bytes(id, len, 0x64626764);

	return h ? h : 1;
}

static struct dentry *find(struct dbgd_fetch *f, uint64_t key, const uint8_t *id, size_t len)
{
	for (uint32_t i = 0; i < PROBES; i++) {
		struct dentry *e = &f->v[(key + i) & f->mask];

		if (e->key == key && e->len == len && !memcmp(e->id, id, len))
			return e;
	}
	return NULL;
}

static void forget(struct dentry *e)
{
	free(e->path);
	memset(e, 0, sizeof(*e));
}

/* A slot for a new entry: free, else the oldest answer in the probe run
 * (counted); NULL when every one is pending. */
static struct dentry *slot_for(struct dbgd_fetch *f, uint64_t key)
{
	struct dentry *old = NULL;

	for (uint32_t i = 0; i < PROBES; i++) {
		struct dentry *e = &f->v[(key + i) & f->mask];

		if (!e->key)
			return e;
		if (e->state != DBGD_PENDING && (!old || e->at_ns < old->at_ns))
			old = e;
	}
	if (old) {
		forget(old);
		f->st.forgotten++;
	}
	return old;
}

enum dbgd_state dbgd_fetch__lookup(struct dbgd_fetch *f, const uint8_t *id, size_t len,
				   int may_queue, char *path, size_t sz)
{
	uint64_t key = key_of(id, len), now = mono_ns();
	enum dbgd_state ret = DBGD_NOT_ASKED;
	struct dentry *e;

	if (!len || len > MAX_ID)
		return DBGD_NONE;
	pthread_mutex_lock(&f->lock);
	e = find(f, key, id, len);
	/* an answer that no longer holds: asked again */
	if (e && ((e->state == DBGD_NONE && now - e->at_ns >= f->o.negative_ttl_ns) ||
		  (e->state == DBGD_FOUND && access(e->path, R_OK)))) {
		forget(e);
		e = NULL;
	}
	if (e) {
		ret = (enum dbgd_state)e->state;
		if (ret == DBGD_FOUND)
			snprintf(path, sz, "%s", e->path);
		else if (ret == DBGD_NONE)
			f->st.negative_hits++;
	} else if (may_queue) {
		e = f->st.pending < f->o.max_pending ? slot_for(f, key) : NULL;
		if (e) {
			e->key = key;
			e->len = (uint8_t)len;
			memcpy(e->id, id, len);
			e->state = DBGD_PENDING;
			e->at_ns = now;
			f->queue[(f->qhead + f->qlen++) % f->o.max_pending] = key;
			f->st.pending++;
			f->st.queued++;
			pthread_cond_signal(&f->wake);
			ret = DBGD_QUEUED;
		} else {
			f->st.not_asked++;
		}
	}
	pthread_mutex_unlock(&f->lock);
	return ret;
}

/* The oldest pending id (copied out); 0 when stopping. */
static int take(struct dbgd_fetch *f, uint8_t *id, size_t *len)
{
	pthread_mutex_lock(&f->lock);
	for (;;) {
		while (!f->stop && !f->qlen)
			pthread_cond_wait(&f->wake, &f->lock);
		if (f->stop) {
			pthread_mutex_unlock(&f->lock);
			return 0;
		}
		uint64_t key = f->queue[f->qhead];

		f->qhead = (f->qhead + 1) % f->o.max_pending;
		f->qlen--;
		for (uint32_t i = 0; i < PROBES; i++) {
			struct dentry *e = &f->v[(key + i) & f->mask];

			if (e->key == key && e->state == DBGD_PENDING) {
				*len = e->len;
				memcpy(id, e->id, e->len);
				pthread_mutex_unlock(&f->lock);
				return 1;
			}
		}
	}
}

static void *fetcher(void *arg)
{
	struct dbgd_fetch *f = arg;
	struct debuginfod *d = debuginfod__new(); /* one client per thread */
	uint8_t id[MAX_ID];
	size_t len;

	while (d && take(f, id, &len)) {
		char *path = NULL, *dpath = NULL;
		/* The network, with no lock held: the executable (what the
		 * server symbolizes offsets against), then the debug file, so
		 * that the symbolizer (which asks for it under its lock, also
		 * for uploaded files) finds it, or its absence, in the
		 * client's cache. */
		int fd = debuginfod__find_executable(d, id, len, &path);
		int dfd = debuginfod__find_debuginfo(d, id, len, &dpath);
		struct dentry *e;

		if (fd >= 0)
			close(fd);
		if (dfd >= 0)
			close(dfd);
		free(dpath);
		pthread_mutex_lock(&f->lock);
		f->st.pending--;
		if (fd >= 0)
			f->st.found++;
		else
			f->st.not_found++;
		e = find(f, key_of(id, len), id, len);
		if (e && e->state == DBGD_PENDING) {
			e->state = fd >= 0 ? DBGD_FOUND : DBGD_NONE;
			e->path = fd >= 0 ? path : NULL;
			e->at_ns = mono_ns();
			path = NULL;
		}
		pthread_mutex_unlock(&f->lock);
		free(path);
	}
	debuginfod__free(d);
	return NULL;
}

int dbgd_fetch__start(struct dbgd_fetch *f)
{
	for (uint32_t i = 0; i < f->o.threads; i++) {
		int err = pthread_create(&f->threads[i], NULL, fetcher, f);

		if (err)
			return -err;
		f->nthreads++;
	}
	return 0;
}

void dbgd_fetch__free(struct dbgd_fetch *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	f->stop = 1;
	pthread_cond_broadcast(&f->wake);
	pthread_mutex_unlock(&f->lock);
	for (uint32_t i = 0; i < f->nthreads; i++)
		pthread_join(f->threads[i], NULL);
	for (uint32_t i = 0; i <= f->mask; i++)
		free(f->v[i].path);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->wake);
	free(f->v);
	free(f->queue);
	free(f->threads);
	free(f);
}

void dbgd_fetch__stats(struct dbgd_fetch *f, struct dbgd_fetch_stats *st)
{
	pthread_mutex_lock(&f->lock);
	*st = f->st;
	pthread_mutex_unlock(&f->lock);
}
