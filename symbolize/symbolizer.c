// SPDX-License-Identifier: Apache-2.0
/*
 * The symbolizer object: two bounded caches in front of elf_module.
 *
 *  - Modules: open ELF/DWARF handles keyed by build-id ("b:HEX") or, when
 *    the caller has none, by path and file identity; LRU, at most max_modules
 *    (failed opens included, so a missing file costs one open per
 *    RETRY_NS, not one per sample).
 *  - Results: (module key, file offset) -> frames, 4-way set associative
 *    with round-robin replacement, at most max_cache entries.  Entries
 *    survive their module's eviction: they only point at interned strings.
 *
 * Keys are interned, so both caches compare key pointers, not strings.
 */
#include "symbolize/symbolize.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/clock.h"
#include "lib/hash.h"
#include "lib/strpool.h"
#include "symbolize/buildid.h"
#include "symbolize/debuginfod.h"
#include "symbolize/elf_module.h"

#define DEFAULT_MAX_MODULES 64
#define DEFAULT_MAX_CACHE 65536
#define RC_WAYS 4
#define RETRY_NS (10ull * 1000000000ull)
/* Longest build-id used in a key; longer ones only ever come truncated. */
#define KEY_ID_MAX 64

struct mod_entry {
	const char *key;       /* interned */
	struct elf_module *em; /* NULL: the open failed with err */
	int err;
	uint64_t path_hash; /* of the path that failed */
	uint64_t retry_ns;
	struct mod_entry *prev, *next; /* LRU, head = most recent */
	struct mod_entry *hnext;
};

struct rc_entry {
	const char *key; /* NULL: free slot */
	uint64_t off;
	struct sym_frame *frames; /* NULL when n == 0 */
	int n;
};

struct symbolizer {
	struct symbolizer_opts opts;
	struct strpool *pool;
	struct debuginfod *dbgd; /* NULL unless opts.use_debuginfod */

	struct mod_entry **mbuckets;
	size_t nmbuckets; /* power of two */
	struct mod_entry *lru_head, *lru_tail;
	size_t nmods;

	struct rc_entry *rc;
	uint8_t *rc_victim; /* per set: next way to replace */
	size_t rc_sets, rc_ways, rc_used;

	struct symbolizer_stats st;
};

/* splitmix64 finaliser: spreads pointer bits over the whole word. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static size_t pow2_floor(size_t v)
{
	size_t p = 1;

	while (p <= v / 2)
		p *= 2;
	return p;
}

struct symbolizer *symbolizer__new(const struct symbolizer_opts *opts)
{
	struct symbolizer *s;
	size_t cap;
	int err = -ENOMEM;

	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	/* Copy what the caller's (maybe older, smaller) struct holds. */
	if (opts) {
		size_t sz = opts->sz && opts->sz < sizeof(*opts) ? opts->sz : sizeof(*opts);

		memcpy(&s->opts, opts, sz);
	}
	s->opts.sz = sizeof(s->opts);
	if (!s->opts.max_modules)
		s->opts.max_modules = DEFAULT_MAX_MODULES;
	if (!s->opts.max_cache)
		s->opts.max_cache = DEFAULT_MAX_CACHE;
	if (s->opts.max_modules > (SIZE_MAX >> 4) ||
	    s->opts.max_cache > (SIZE_MAX >> 4) / sizeof(*s->rc)) {
		err = -EINVAL;
		goto err_out;
	}

	s->pool = strpool__new();
	if (!s->pool)
		goto err_out;
	if (s->opts.use_debuginfod) {
		s->dbgd = debuginfod__new();
		if (!s->dbgd)
			goto err_out;
	}
	s->nmbuckets = 16;
	while (s->nmbuckets < 2 * s->opts.max_modules)
		s->nmbuckets *= 2;
	s->mbuckets = calloc(s->nmbuckets, sizeof(*s->mbuckets));
	if (!s->mbuckets)
		goto err_out;

	/* Power of two no larger than max_cache: the bound is a bound. */
	cap = pow2_floor(s->opts.max_cache);
	s->rc_ways = cap < RC_WAYS ? cap : RC_WAYS;
	s->rc_sets = cap / s->rc_ways;
	s->rc = calloc(cap, sizeof(*s->rc));
	s->rc_victim = calloc(s->rc_sets, 1);
	if (!s->rc || !s->rc_victim)
		goto err_out;
	return s;

err_out:
	symbolizer__free(s);
	errno = -err;
	return NULL;
}

static void mod_entry_free(struct mod_entry *e)
{
	if (!e)
		return;
	elf_module__free(e->em);
	free(e);
}

void symbolizer__free(struct symbolizer *s)
{
	if (!s)
		return;
	while (s->lru_head) {
		struct mod_entry *e = s->lru_head;

		s->lru_head = e->next;
		mod_entry_free(e);
	}
	if (s->rc) {
		for (size_t i = 0; i < s->rc_sets * s->rc_ways; i++)
			free(s->rc[i].frames);
	}
	free(s->rc);
	free(s->rc_victim);
	free(s->mbuckets);
	debuginfod__free(s->dbgd);
	strpool__free(s->pool);
	free(s);
}

/* --- result cache ---------------------------------------------------- */

static struct rc_entry *rc_set(struct symbolizer *s, const char *key, uint64_t off)
{
	uint64_t h = mix64((uint64_t)(uintptr_t)key ^ mix64(off));

	return &s->rc[(h & (s->rc_sets - 1)) * s->rc_ways];
}

static const struct rc_entry *rc_find(struct symbolizer *s, const char *key, uint64_t off)
{
	struct rc_entry *set = rc_set(s, key, off);

	for (size_t w = 0; w < s->rc_ways; w++)
		if (set[w].key == key && set[w].off == off)
			return &set[w];
	return NULL;
}

/* Best effort: a result that cannot be cached is still returned. */
static void rc_insert(struct symbolizer *s, const char *key, uint64_t off,
		      const struct sym_frame *frames, int n)
{
	struct rc_entry *set = rc_set(s, key, off), *e = NULL;
	struct sym_frame *copy = NULL;
	size_t setno = (size_t)(set - s->rc) / s->rc_ways;

	if (n > 0) {
		copy = malloc((size_t)n * sizeof(*copy));
		if (!copy)
			return;
		memcpy(copy, frames, (size_t)n * sizeof(*copy));
	}
	for (size_t w = 0; w < s->rc_ways && !e; w++)
		if (!set[w].key)
			e = &set[w];
	if (!e) {
		e = &set[s->rc_victim[setno]];
		s->rc_victim[setno] = (uint8_t)((s->rc_victim[setno] + 1) % s->rc_ways);
		free(e->frames);
		s->st.cache_evicted++;
	} else {
		s->rc_used++;
	}
	*e = (struct rc_entry){ .key = key, .off = off, .frames = copy, .n = n };
}

/* --- modules --------------------------------------------------------- */

static struct mod_entry **mod_slot(struct symbolizer *s, const char *key)
{
	uint64_t h = mix64((uint64_t)(uintptr_t)key);
	struct mod_entry **pp = &s->mbuckets[h & (s->nmbuckets - 1)];

	while (*pp && (*pp)->key != key)
		pp = &(*pp)->hnext;
	return pp;
}

static void lru_unlink(struct symbolizer *s, struct mod_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		s->lru_head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		s->lru_tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push_front(struct symbolizer *s, struct mod_entry *e)
{
	e->prev = NULL;
	e->next = s->lru_head;
	if (s->lru_head)
		s->lru_head->prev = e;
	s->lru_head = e;
	if (!s->lru_tail)
		s->lru_tail = e;
}

static void mod_remove(struct symbolizer *s, struct mod_entry *e)
{
	struct mod_entry **pp = mod_slot(s, e->key);

	if (*pp == e)
		*pp = e->hnext;
	lru_unlink(s, e);
	s->nmods--;
	mod_entry_free(e);
}

static int mod_get(struct symbolizer *s, const char *key, const char *path, const uint8_t *bid,
		   size_t bid_len, struct elf_module **out)
{
	struct mod_entry **pp = mod_slot(s, key), *e = *pp;
	uint64_t path_hash = hash_bytes(path, strlen(path), 0), now;
	int err;

	if (e) {
		lru_unlink(s, e);
		lru_push_front(s, e);
		if (e->em) {
			*out = e->em;
			return 0;
		}
		now = mono_ns();
		if (now < e->retry_ns && e->path_hash == path_hash)
			return e->err;
		/* Retry: drop the memo and open afresh below. */
		mod_remove(s, e);
		pp = mod_slot(s, key);
	}
	if (s->nmods >= s->opts.max_modules && s->lru_tail) {
		mod_remove(s, s->lru_tail);
		s->st.module_evicted++;
		pp = mod_slot(s, key);
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->key = key;
	err = elf_module__open(path, bid, bid_len, s->dbgd, s->opts.hostile_files, &e->em);
	if (err) {
		if (err == -ENOMEM) {
			free(e);
			return err;
		}
		s->st.module_open_failed++;
		e->err = err;
		e->path_hash = path_hash;
		e->retry_ns = mono_ns() + RETRY_NS;
	}
	e->hnext = NULL;
	*pp = e;
	lru_push_front(s, e);
	s->nmods++;
	*out = e->em;
	return err;
}

/* --- lookups --------------------------------------------------------- */

/* Copies n frames into out[max], keeping the real function last. */
static int copy_frames(struct sym_frame *out, int max, const struct sym_frame *f, int n)
{
	if (n <= max) {
		if (n > 0)
			memcpy(out, f, (size_t)n * sizeof(*f));
		return n;
	}
	memcpy(out, f, (size_t)(max - 1) * sizeof(*f));
	out[max - 1] = f[n - 1];
	return max;
}

/*
 * Cache key of a file: its build-id, or else its path plus identity
 * (device, inode, size, mtime).  The identity makes a path that now
 * names another file - a replaced binary, a reused "/proc/self/fd/N" -
 * a different key, so no stale result is ever served for it.
 */
static int make_key(struct symbolizer *s, const char *path, const uint8_t *bid, size_t bid_len,
		    const char **key)
{
	char buf[PATH_MAX + 128];
	struct stat st;
	int n;

	if (bid && bid_len) {
		char hex[2 * KEY_ID_MAX + 1];

		build_id_hex(bid, bid_len < KEY_ID_MAX ? bid_len : KEY_ID_MAX, hex, sizeof(hex));
		n = snprintf(buf, sizeof(buf), "b:%s", hex);
	} else {
		if (stat(path, &st))
			return -errno;
		n = snprintf(buf, sizeof(buf), "p:%llx:%llx:%llx:%lld.%09ld:%s",
			     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
			     (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec,
			     (long)st.st_mtim.tv_nsec, path);
	}
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -ENAMETOOLONG;
	*key = strpool__intern_len(s->pool, buf, (size_t)n);
	return *key ? 0 : -ENOMEM;
}

int symbolizer__resolve(struct symbolizer *s, const char *path, const uint8_t *build_id,
			size_t build_id_len, uint64_t file_offset, struct sym_frame *out, int max)
{
	struct sym_frame frames[SYM_MAX_INLINE];
	const struct rc_entry *hit;
	struct elf_module *em = NULL;
	const char *key;
	int n;

	if (!s || !path || !*path || !out || max <= 0)
		return -EINVAL;
	s->st.lookups++;
	if (strlen(path) >= PATH_MAX) {
		s->st.unresolved++;
		return -ENAMETOOLONG;
	}
	n = make_key(s, path, build_id, build_id_len, &key);
	if (n) {
		s->st.unresolved++;
		return n;
	}

	hit = rc_find(s, key, file_offset);
	if (hit) {
		s->st.cache_hits++;
		if (hit->n == 0)
			s->st.unresolved++;
		return copy_frames(out, max, hit->frames, hit->n);
	}
	n = mod_get(s, key, path, build_id, build_id_len, &em);
	if (n == 0) {
		n = elf_module__resolve(em, file_offset, s->pool, frames, SYM_MAX_INLINE);
		s->st.modules_degraded += (uint64_t)elf_module__newly_degraded(em);
	}
	if (n <= 0) {
		s->st.unresolved++;
		/* Only answers are cached; errors are remembered per module. */
		if (n == 0)
			rc_insert(s, key, file_offset, frames, 0);
		return n;
	}
	rc_insert(s, key, file_offset, frames, n);
	return copy_frames(out, max, frames, n);
}

void symbolizer__stats(const struct symbolizer *s, struct symbolizer_stats *st)
{
	struct debuginfod_stats ds;

	if (!st)
		return;
	if (!s) {
		*st = (struct symbolizer_stats){ 0 };
		return;
	}
	*st = s->st;
	st->modules_open = s->nmods;
	st->cache_entries = s->rc_used;
	st->strings_bytes = strpool__bytes(s->pool);
	debuginfod__stats(s->dbgd, &ds);
	st->debuginfod_queries = ds.queries;
	st->debuginfod_found = ds.found;
	st->debuginfod_failed = ds.failed;
	st->debuginfod_skipped = ds.skipped;
}
