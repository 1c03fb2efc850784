// SPDX-License-Identifier: Apache-2.0
#include "server/central_sym.h"

#include "server/sym_cache.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/hash.h"
#include "server/dbgd_fetch.h"
#include "lib/profile.h"
#include "symbolize/buildid.h"
#include "symbolize/symbolize.h"

#define STACK_CACHE_ENTRIES (256u * 1024)
#define STACK_CACHE_STRING_BYTES (256u << 20)
#define SYMBOLIZER_STRING_BYTES (128u << 20)

/*
 * Where the symbolized strings live: the symbolizer (its interned names,
 * files and keys, its open files and result cache) and the stack cache.
 * Their strings are never freed one by one, so they grow with every new
 * build the fleet runs (about 0.5 MB of names each); once either passes
 * its budget a fresh generation takes over, and the old one is freed when
 * the last batch or query holding its strings lets go of it.
 */
struct sym_gen {
	struct symbolizer *sym;
	struct sym_cache *stacks; /* symbolized stacks by wire stack */
	uint32_t refs;		  /* c->lock: holders, +1 while current */
};

struct central_sym {
	pthread_mutex_t lock; /* the symbolizer is not thread-safe */
	struct sym_gen *cur;
	struct dbgd_fetch *fetch; /* NULL without debuginfod */
	struct buildid_store *bids;
	size_t max_sym_bytes, max_stack_bytes; /* the budgets of a generation */
	int use_debuginfod;
	/* counters of the generations retired, so totals never go back */
	struct symbolizer_stats sym_gone;
	struct sym_cache_stats stacks_gone;
	struct central_sym_stats st;
};

static struct sym_gen *gen_new(const struct central_sym *c)
{
	struct symbolizer_opts o = {
		.sz = sizeof(o),
		.max_modules = 256,
		.max_cache = 1 << 20,
		.use_debuginfod = c->use_debuginfod,
	};
	struct sym_gen *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->sym = symbolizer__new(&o);
	g->stacks = sym_cache__new(STACK_CACHE_ENTRIES, c->max_stack_bytes);
	if (!g->sym || !g->stacks) {
		symbolizer__free(g->sym);
		sym_cache__free(g->stacks);
		free(g);
		return NULL;
	}
	g->refs = 1;
	return g;
}

/* Lets go of one hold on g (c->lock held); the last frees it. */
static void gen_put(struct central_sym *c, struct sym_gen *g)
{
	if (!g || --g->refs)
		return;
	if (g != c->cur)
		c->st.generations_freed++;
	symbolizer__free(g->sym);
	sym_cache__free(g->stacks);
	free(g);
}

/* A fresh generation when the current one is past a budget (c->lock held);
 * without memory for one, the current one goes on (its stack cache then
 * refuses, and costs CPU, never data). */
static void gen_check(struct central_sym *c)
{
	struct symbolizer_stats ss;
	struct sym_cache_stats cs;
	struct sym_gen *g;

	symbolizer__stats(c->cur->sym, &ss);
	sym_cache__stats(c->cur->stacks, &cs);
	if (ss.strings_bytes <= c->max_sym_bytes && cs.string_bytes <= c->max_stack_bytes)
		return;
	g = gen_new(c);
	if (!g)
		return;
	/* every lookup is made under c->lock, so the old generation's
	 * counters are final now: its holders only read its strings */
	c->sym_gone.lookups += ss.lookups;
	c->sym_gone.cache_hits += ss.cache_hits;
	c->sym_gone.modules_degraded += ss.modules_degraded;
	c->stacks_gone.hits += cs.hits;
	c->stacks_gone.misses += cs.misses;
	c->stacks_gone.resets += cs.resets;
	c->stacks_gone.refused_full += cs.refused_full;
	c->st.generations++;
	struct sym_gen *old = c->cur;

	c->cur = g;
	gen_put(c, old);
}

struct central_sym *central_sym__new(struct buildid_store *bids, int use_debuginfod)
{
	struct central_sym *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->bids = bids;
	c->use_debuginfod = use_debuginfod;
	c->max_sym_bytes = SYMBOLIZER_STRING_BYTES;
	c->max_stack_bytes = STACK_CACHE_STRING_BYTES;
	c->cur = gen_new(c);
	pthread_mutex_init(&c->lock, NULL);
	/* Fetchers only where there is a debuginfod to ask. */
	if (use_debuginfod && getenv("DEBUGINFOD_URLS") && *getenv("DEBUGINFOD_URLS")) {
		c->fetch = dbgd_fetch__new(NULL);
		if (c->fetch && dbgd_fetch__start(c->fetch)) {
			dbgd_fetch__free(c->fetch);
			c->fetch = NULL;
		}
		if (!c->fetch) {
			central_sym__free(c);
			errno = ENOMEM;
			return NULL;
		}
	}
	if (!c->cur) {
		central_sym__free(c);
		errno = ENOMEM;
		return NULL;
	}
	return c;
}

void central_sym__free(struct central_sym *c)
{
	if (!c)
		return;
	dbgd_fetch__free(c->fetch); /* first: its threads end */
	if (c->cur)
		c->cur->refs = 1; /* batches and queries are over */
	gen_put(c, c->cur);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void central_sym__set_budgets(struct central_sym *c, size_t symbolizer_bytes,
			      size_t stack_cache_bytes)
{
	pthread_mutex_lock(&c->lock);
	c->max_sym_bytes = symbolizer_bytes;
	c->max_stack_bytes = stack_cache_bytes;
	pthread_mutex_unlock(&c->lock);
}

void central_sym__release(struct central_sym *c, struct sym_gen *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&c->lock);
	gen_put(c, g);
	pthread_mutex_unlock(&c->lock);
}

void sym_batch__fini(struct sym_batch *sb)
{
	if (sb->owner)
		central_sym__release(sb->owner, sb->gen);
	free(sb->stacks);
	free(sb->frames);
	free(sb->hex);
	memset(sb, 0, sizeof(*sb));
}

uint64_t store_stack__id(const struct store_frame *frames, uint32_t n)
{
	uint64_t h = 0x5354524154410001ULL;

	for (uint32_t i = 0; i < n; i++) {
		const struct store_frame *f = &frames[i];
		uint64_t fixed[4] = { f->kind, f->flags, f->line, f->addr };
		const char *strs[4] = { f->func, f->file, f->module, f->build_id };

		h = hash_bytes(fixed, sizeof(fixed), h);
		for (int k = 0; k < 4; k++)
			/* NULL and "" hash apart: an unresolved frame never
			 * collides with one named "". */
			h = strs[k] ? hash_bytes(strs[k], strlen(strs[k]) + 1, h)
				    : hash_bytes("\xff", 1, h);
	}
	return h ? h : 1;
}

static struct store_frame *frame_push(struct sym_batch *sb)
{
	if (sb->nframes == sb->cap) {
		size_t ncap = sb->cap ? sb->cap * 2 : 1024;
		struct store_frame *nf = realloc(sb->frames, ncap * sizeof(*nf));

		if (!nf)
			return NULL;
		sb->frames = nf;
		sb->cap = ncap;
	}
	memset(&sb->frames[sb->nframes], 0, sizeof(sb->frames[0]));
	return &sb->frames[sb->nframes++];
}

static void note_missing(struct central_sym *c, struct sym_batch *sb, const char *hex)
{
	c->st.missing_build_ids++;
	sb->uncacheable = 1;
	for (size_t i = 0; i < sb->nmissing; i++)
		if (!strcmp(sb->missing[i], hex))
			return;
	if (sb->nmissing < CENTRAL_SYM_MAX_MISSING)
		snprintf(sb->missing[sb->nmissing++], BUILDID_HEX_MAX, "%s", hex);
}

/*
 * The file to symbolize a build-id with: the uploaded one, else the
 * executable debuginfod has (a debug file alone lacks the loaded segments
 * that map file offsets; the symbolizer fetches the debug file for the
 * executable itself).  debuginfod is asked in the background, for
 * uploaded files too (the fetch warms the debug file the symbolizer may
 * ask for under the lock), at most CENTRAL_SYM_DBGD_PER_BATCH new ids per
 * batch or query (*queued counts them).  Returns 0 with path filled,
 * -ENOENT (nobody has it), or -EINPROGRESS (ask again later).
 */
static int file_for(struct central_sym *c, uint32_t *queued, const char *hex, const uint8_t *id,
		    size_t idlen, char *path, size_t sz)
{
	int have = !buildid_store__path(c->bids, hex, path, sz);
	int may_queue = *queued < CENTRAL_SYM_DBGD_PER_BATCH;
	char dpath[PATH_MAX];
	enum dbgd_state st;

	if (!c->fetch)
		return have ? 0 : -ENOENT;
	st = dbgd_fetch__lookup(c->fetch, id, idlen, may_queue, dpath, sizeof(dpath));
	switch (st) {
	case DBGD_FOUND:
		if (!have)
			snprintf(path, sz, "%s", dpath);
		return 0;
	case DBGD_NONE:
		return have ? 0 : -ENOENT;
	case DBGD_QUEUED:
		(*queued)++;
		return -EINPROGRESS;
	case DBGD_NOT_ASKED:
		if (!may_queue)
			__atomic_fetch_add(&c->st.debuginfod_capped, 1, __ATOMIC_RELAXED);
		return -EINPROGRESS;
	default:
		return -EINPROGRESS;
	}
}

/* Per mapping of one batch: the file to symbolize with, looked up once. */
struct mapping_file {
	int state; /* 0 not looked up, 1 found (path), -1 missing, -2 being fetched */
	char *path;
};

static int native_frames(struct central_sym *c, const Strata__V1__Batch *b, struct sym_batch *sb,
			 struct mapping_file *mf, const Strata__V1__Frame *wf)
{
	const Strata__V1__Mapping *m = b->mappings[wf->mapping];
	const char *hex = sb->hex[wf->mapping];
	const char *module = b->strings[m->path_str];
	struct mapping_file *f0 = &mf[wf->mapping];
	struct sym_frame sf[SYM_MAX_INLINE];
	int n = 0;

	c->st.frames_native++;
	if (!f0->state) {
		char path[PATH_MAX];

		int r = m->build_id.len ? file_for(c, &sb->dbgd_queued, hex, m->build_id.data,
						   m->build_id.len, path, sizeof(path))
					: -ENOENT;

		f0->state = r == -EINPROGRESS ? -2 : -1;
		if (!r) {
			f0->path = strdup(path);
			f0->state = f0->path ? 1 : -1;
		}
	}
	if (f0->state > 0) {
		uint64_t q = wf->is_return && wf->address > 0 ? wf->address - 1 : wf->address;

		n = symbolizer__resolve(sb->gen->sym, f0->path, m->build_id.data, m->build_id.len,
					q, sf, SYM_MAX_INLINE);
	} else if (f0->state == -2) { /* stored unresolved, resolved at query time */
		c->st.frames_pending++;
		sb->uncacheable = 1;
	} else if (m->build_id.len) {
		note_missing(c, sb, hex);
	}
	if (n <= 0) {
		struct store_frame *f = frame_push(sb);

		if (!f)
			return -ENOMEM;
		f->kind = PROFILE_KIND_NATIVE;
		f->flags = PROFILE_FRAME_UNRESOLVED | (wf->is_return ? PROFILE_FRAME_RETURN : 0);
		f->module = module;
		f->build_id = hex;
		f->addr = wf->address;
		return 0;
	}
	c->st.frames_resolved++;
	/* Outermost (the real function) first: stacks are root first. */
	for (int i = n - 1; i >= 0; i--) {
		struct store_frame *f = frame_push(sb);

		if (!f)
			return -ENOMEM;
		f->kind = PROFILE_KIND_NATIVE;
		f->flags = sf[i].inlined ? PROFILE_FRAME_INLINED : 0;
		f->func = sf[i].func;
		f->file = sf[i].file;
		f->line = sf[i].line;
		f->module = module;
		f->build_id = hex;
		f->addr = wf->address;
	}
	return 0;
}

static int other_frame(const Strata__V1__Batch *b, struct sym_batch *sb,
		       const Strata__V1__Frame *wf)
{
	struct store_frame *f = frame_push(sb);
	const char *name = b->strings[wf->name_str];

	if (!f)
		return -ENOMEM;
	f->kind = (uint32_t)wf->kind;
	f->addr = wf->address;
	switch (wf->kind) {
	case STRATA__V1__FRAME__KIND__KERNEL:
		f->flags = PROFILE_FRAME_KERNEL | (name[0] ? 0 : PROFILE_FRAME_UNRESOLVED);
		f->func = name[0] ? name : NULL;
		f->module = b->strings[wf->module_str][0] ? b->strings[wf->module_str] : "[kernel]";
		break;
	case STRATA__V1__FRAME__KIND__PYTHON:
		f->flags = PROFILE_FRAME_PYTHON | (name[0] ? 0 : PROFILE_FRAME_UNRESOLVED);
		f->func = name[0] ? name : NULL;
		f->file = b->strings[wf->file_str][0] ? b->strings[wf->file_str] : NULL;
		f->line = wf->line;
		f->module = "[python]";
		break;
	case STRATA__V1__FRAME__KIND__LOST:
		f->func = "[stack lost]";
		f->module = "[lost]";
		break;
	default: /* UNKNOWN: a user ip in no known mapping */
		f->flags = PROFILE_FRAME_UNRESOLVED;
		f->module = "[unknown]";
		break;
	}
	return 0;
}

/* Per batch: two independent hashes of every string and mapping, so a
 * stack's key costs a few words per frame, not its strings' bytes. */
struct key_hashes {
	uint64_t (*str)[2];
	uint64_t (*map)[2];
};

static int key_hashes__init(struct key_hashes *kh, const Strata__V1__Batch *b,
			    const struct sym_batch *sb)
{
	static const uint64_t seeds[2] = { 0x9ae16a3b2f90404fULL, 0xc3a5c85c97cb3127ULL };

	kh->str = calloc(b->n_strings ? b->n_strings : 1, sizeof(*kh->str));
	kh->map = calloc(b->n_mappings ? b->n_mappings : 1, sizeof(*kh->map));
	if (!kh->str || !kh->map)
		return -ENOMEM;
	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; i < b->n_strings; i++)
			kh->str[i][k] = hash_bytes(b->strings[i], strlen(b->strings[i]), seeds[k]);
		for (size_t i = 0; i < b->n_mappings; i++) {
			const char *path = b->strings[b->mappings[i]->path_str];
			uint64_t h = hash_bytes(sb->hex[i], strlen(sb->hex[i]) + 1, seeds[k]);

			kh->map[i][k] = hash_bytes(path, strlen(path), h);
		}
	}
	return 0;
}

static void key_hashes__fini(struct key_hashes *kh)
{
	free(kh->str);
	free(kh->map);
}

/* The cache key of a wire stack: everything its symbolized frames depend
 * on (file identity, offset, return flag, names), under both seeds. */
static void wire_stack_key(const struct key_hashes *kh, const Strata__V1__Stack *s, uint64_t key[2])
{
	key[0] = key[1] = s->n_frames;
	for (size_t j = 0; j < s->n_frames; j++) {
		const Strata__V1__Frame *f = s->frames[j];
		int native = f->kind == STRATA__V1__FRAME__KIND__NATIVE;

		for (int k = 0; k < 2; k++) {
			uint64_t w[8] = { key[k],
					  (uint64_t)f->kind,
					  f->address,
					  (uint64_t)f->is_return << 32 | f->line,
					  native ? kh->map[f->mapping][k] : 0,
					  kh->str[f->name_str][k],
					  kh->str[f->module_str][k],
					  kh->str[f->file_str][k] };

			key[k] = hash_bytes(w, sizeof(w), (uint64_t)k);
		}
	}
}

int central_sym__batch(struct central_sym *c, const Strata__V1__Batch *b, struct sym_batch *sb)
{
	struct key_hashes kh = { 0 };
	struct mapping_file *mf;
	size_t *first; /* per stack: its first frame in sb->frames */
	int err = 0;

	sb->nstacks = b->n_stacks;
	sb->stacks = calloc(b->n_stacks ? b->n_stacks : 1, sizeof(*sb->stacks));
	sb->hex = calloc(b->n_mappings ? b->n_mappings : 1, sizeof(*sb->hex));
	mf = calloc(b->n_mappings ? b->n_mappings : 1, sizeof(*mf));
	first = calloc(b->n_stacks ? b->n_stacks : 1, sizeof(*first));
	if (!sb->stacks || !sb->hex || !mf || !first) {
		free(mf);
		free(first);
		return -ENOMEM;
	}
	for (size_t i = 0; i < b->n_mappings; i++)
		build_id_hex(b->mappings[i]->build_id.data, b->mappings[i]->build_id.len,
			     sb->hex[i], BUILDID_HEX_MAX);
	err = key_hashes__init(&kh, b, sb);
	if (err)
		goto out;

	pthread_mutex_lock(&c->lock);
	/* the batch's strings are this generation's until sym_batch__fini */
	sb->owner = c;
	sb->gen = c->cur;
	sb->gen->refs++;
	for (size_t i = 0; i < b->n_stacks && !err; i++) {
		const struct store_stack *hit;
		uint64_t key[2];

		first[i] = sb->nframes;
		wire_stack_key(&kh, b->stacks[i], key);
		hit = sym_cache__get(sb->gen->stacks, key);
		if (hit) {
			for (uint32_t j = 0; j < hit->nframes && !err; j++) {
				struct store_frame *f = frame_push(sb);

				if (f)
					*f = hit->frames[j];
				else
					err = -ENOMEM;
			}
			sb->stacks[i].id = hit->id;
		} else {
			sb->uncacheable = 0;
			for (size_t j = 0; j < b->stacks[i]->n_frames && !err; j++) {
				const Strata__V1__Frame *wf = b->stacks[i]->frames[j];

				err = wf->kind == STRATA__V1__FRAME__KIND__NATIVE
					      ? native_frames(c, b, sb, mf, wf)
					      : other_frame(b, sb, wf);
			}
			/* no frames at all yet: no array (NULL + 0 is undefined) */
			struct store_frame *fr = sb->frames ? sb->frames + first[i] : NULL;

			sb->stacks[i].id = store_stack__id(fr, (uint32_t)(sb->nframes - first[i]));
			/* A failed put (bound reached) only costs a lookup later. */
			if (!err && !sb->uncacheable) {
				struct store_stack st = { sb->stacks[i].id,
							  (uint32_t)(sb->nframes - first[i]), fr };

				sym_cache__put(sb->gen->stacks, key, &st);
			}
		}
		sb->stacks[i].nframes = (uint32_t)(sb->nframes - first[i]);
	}
	gen_check(c); /* for the next batch: this one keeps its own */
	pthread_mutex_unlock(&c->lock);
	/* Frames are final now (no more reallocs): point the stacks at them. */
	for (size_t i = 0; i < b->n_stacks && !err; i++)
		sb->stacks[i].frames = sb->frames ? sb->frames + first[i] : NULL;
out:
	key_hashes__fini(&kh);
	free(first);
	for (size_t i = 0; i < b->n_mappings; i++)
		free(mf[i].path);
	free(mf);
	return err;
}

static int unhex(const char *hex, uint8_t *out, size_t max)
{
	size_t n = strlen(hex) / 2;

	if (n > max || n == 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		out[i] = (uint8_t)v;
	}
	return (int)n;
}

int central_sym__resolve_late(struct central_sym *c, const struct store_frame *f,
			      struct sym_frame *out, int max, uint32_t *queued,
			      struct sym_gen **gen)
{
	uint8_t id[64];
	char path[PATH_MAX];
	uint64_t q;
	int n = 0, len;

	*gen = NULL;
	if (f->kind != PROFILE_KIND_NATIVE || !(f->flags & PROFILE_FRAME_UNRESOLVED) ||
	    !f->build_id || !buildid_hex_valid(f->build_id))
		return 0;
	len = unhex(f->build_id, id, sizeof(id));
	if (len <= 0)
		return 0;
	/* the file (uploaded, or from debuginfod by now): no lock held */
	if (file_for(c, queued, f->build_id, id, (size_t)len, path, sizeof(path)))
		return 0;
	q = (f->flags & PROFILE_FRAME_RETURN) && f->addr ? f->addr - 1 : f->addr;
	pthread_mutex_lock(&c->lock);
	n = symbolizer__resolve(c->cur->sym, path, id, (size_t)len, q, out, max);
	if (n > 0) {
		c->st.late_resolved++;
		*gen = c->cur; /* out's strings: held until central_sym__release */
		c->cur->refs++;
	}
	gen_check(c);
	pthread_mutex_unlock(&c->lock);
	return n > 0 ? n : 0;
}

void central_sym__stats(struct central_sym *c, struct central_sym_stats *st)
{
	struct symbolizer_stats ss;

	pthread_mutex_lock(&c->lock);
	symbolizer__stats(c->cur->sym, &ss);
	*st = c->st;
	sym_cache__stats(c->cur->stacks, &st->stacks);
	st->stacks.hits += c->stacks_gone.hits;
	st->stacks.misses += c->stacks_gone.misses;
	st->stacks.resets += c->stacks_gone.resets;
	st->stacks.refused_full += c->stacks_gone.refused_full;
	st->symbolizer_string_bytes = ss.strings_bytes;
	ss.lookups += c->sym_gone.lookups;
	ss.cache_hits += c->sym_gone.cache_hits;
	ss.modules_degraded += c->sym_gone.modules_degraded;
	pthread_mutex_unlock(&c->lock);
	if (c->fetch) {
		struct dbgd_fetch_stats fs;

		dbgd_fetch__stats(c->fetch, &fs);
		st->debuginfod_found = fs.found;
		st->debuginfod_failed = fs.not_found;
		st->debuginfod_negative_hits = fs.negative_hits;
		st->debuginfod_not_asked = fs.not_asked;
		st->debuginfod_pending = fs.pending;
	}
	st->lookups = ss.lookups;
	st->cache_hits = ss.cache_hits;
	st->modules_degraded = ss.modules_degraded;
}
