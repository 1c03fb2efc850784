// SPDX-License-Identifier: Apache-2.0
#include "server/central_sym.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/profile.h"
#include "symbolize/buildid.h"
#include "symbolize/debuginfod.h"
#include "symbolize/hash.h"
#include "symbolize/symbolize.h"

struct central_sym {
	pthread_mutex_t lock; /* the symbolizer and debuginfod are not thread-safe */
	struct symbolizer *sym;
	struct debuginfod *dbgd; /* NULL without use_debuginfod */
	struct buildid_store *bids;
	struct central_sym_stats st;
};

struct central_sym *central_sym__new(struct buildid_store *bids, int use_debuginfod)
{
	struct symbolizer_opts o = {
		.sz = sizeof(o),
		.max_modules = 256,
		.max_cache = 1 << 20,
		.use_debuginfod = use_debuginfod,
	};
	struct central_sym *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->bids = bids;
	c->sym = symbolizer__new(&o);
	if (use_debuginfod)
		c->dbgd = debuginfod__new();
	if (!c->sym) {
		central_sym__free(c);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void central_sym__free(struct central_sym *c)
{
	if (!c)
		return;
	symbolizer__free(c->sym);
	debuginfod__free(c->dbgd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void sym_batch__fini(struct sym_batch *sb)
{
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
	for (size_t i = 0; i < sb->nmissing; i++)
		if (!strcmp(sb->missing[i], hex))
			return;
	if (sb->nmissing < CENTRAL_SYM_MAX_MISSING)
		snprintf(sb->missing[sb->nmissing++], BUILDID_HEX_MAX, "%s", hex);
}

/*
 * The file to symbolize a build-id with: the uploaded one, else the debug
 * file debuginfod has.  Returns 0 with path filled, or -ENOENT.
 */
static int file_for(struct central_sym *c, const char *hex, const uint8_t *id, size_t idlen,
		    char *path, size_t sz, int ask_debuginfod)
{
	char *dpath = NULL;
	int fd;

	if (!buildid_store__path(c->bids, hex, path, sz))
		return 0;
	if (!c->dbgd || !ask_debuginfod)
		return -ENOENT;
	fd = debuginfod__find_debuginfo(c->dbgd, id, idlen, &dpath);
	if (fd < 0) {
		c->st.debuginfod_failed++;
		return -ENOENT;
	}
	close(fd);
	snprintf(path, sz, "%s", dpath);
	free(dpath);
	c->st.debuginfod_found++;
	return 0;
}

/* Per mapping of one batch: the file to symbolize with, looked up once. */
struct mapping_file {
	int state; /* 0 not looked up, 1 found (path), -1 missing */
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

		f0->state = -1;
		if (m->build_id.len && file_for(c, hex, m->build_id.data, m->build_id.len, path,
						sizeof(path), 1) == 0) {
			f0->path = strdup(path);
			f0->state = f0->path ? 1 : -1;
		}
	}
	if (f0->state > 0) {
		uint64_t q = wf->is_return && wf->address > 0 ? wf->address - 1 : wf->address;

		n = symbolizer__resolve(c->sym, f0->path, m->build_id.data, m->build_id.len, q, sf,
					SYM_MAX_INLINE);
	} else if (m->build_id.len) {
		note_missing(c, sb, hex);
	}
	if (n <= 0) {
		struct store_frame *f = frame_push(sb);

		if (!f)
			return -ENOMEM;
		f->kind = STORE_FRAME_NATIVE;
		f->flags = PROFILE_FRAME_UNRESOLVED | (wf->is_return ? STORE_FRAME_RETURN : 0);
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
		f->kind = STORE_FRAME_NATIVE;
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

int central_sym__batch(struct central_sym *c, const Strata__V1__Batch *b, struct sym_batch *sb)
{
	struct mapping_file *mf;
	size_t *first;
	int err = 0;

	sb->nstacks = b->n_stacks;
	sb->stacks = calloc(b->n_stacks ? b->n_stacks : 1, sizeof(*sb->stacks));
	sb->hex = calloc(b->n_mappings ? b->n_mappings : 1, sizeof(*sb->hex));
	first = calloc(b->n_stacks ? b->n_stacks : 1, sizeof(*first));
	mf = calloc(b->n_mappings ? b->n_mappings : 1, sizeof(*mf));
	if (!sb->stacks || !sb->hex || !first || !mf) {
		free(first);
		free(mf);
		return -ENOMEM;
	}
	for (size_t i = 0; i < b->n_mappings; i++)
		build_id_hex(b->mappings[i]->build_id.data, b->mappings[i]->build_id.len,
			     sb->hex[i], BUILDID_HEX_MAX);

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < b->n_stacks && !err; i++) {
		first[i] = sb->nframes;
		for (size_t j = 0; j < b->stacks[i]->n_frames && !err; j++) {
			const Strata__V1__Frame *wf = b->stacks[i]->frames[j];

			err = wf->kind == STRATA__V1__FRAME__KIND__NATIVE
				      ? native_frames(c, b, sb, mf, wf)
				      : other_frame(b, sb, wf);
		}
	}
	pthread_mutex_unlock(&c->lock);
	/* Frames are final now: point the stacks into the array. */
	for (size_t i = 0; i < b->n_stacks && !err; i++) {
		size_t end = i + 1 < b->n_stacks ? first[i + 1] : sb->nframes;

		sb->stacks[i].nframes = (uint32_t)(end - first[i]);
		sb->stacks[i].frames = sb->frames ? sb->frames + first[i] : NULL;
		sb->stacks[i].id = store_stack__id(sb->stacks[i].frames, sb->stacks[i].nframes);
	}
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
			      struct sym_frame *out, int max)
{
	uint8_t id[64];
	char path[PATH_MAX];
	int n = 0, len;

	if (f->kind != STORE_FRAME_NATIVE || !(f->flags & PROFILE_FRAME_UNRESOLVED) ||
	    !f->build_id || !buildid_hex_valid(f->build_id))
		return 0;
	len = unhex(f->build_id, id, sizeof(id));
	if (len <= 0)
		return 0;
	pthread_mutex_lock(&c->lock);
	/* Uploaded files only: debuginfod was asked at ingest already. */
	if (!file_for(c, f->build_id, id, (size_t)len, path, sizeof(path), 0)) {
		uint64_t q = (f->flags & STORE_FRAME_RETURN) && f->addr ? f->addr - 1 : f->addr;

		n = symbolizer__resolve(c->sym, path, id, (size_t)len, q, out, max);
		if (n > 0)
			c->st.late_resolved++;
	}
	pthread_mutex_unlock(&c->lock);
	return n > 0 ? n : 0;
}

void central_sym__stats(struct central_sym *c, struct central_sym_stats *st)
{
	struct symbolizer_stats ss;

	pthread_mutex_lock(&c->lock);
	symbolizer__stats(c->sym, &ss);
	*st = c->st;
	pthread_mutex_unlock(&c->lock);
	st->lookups = ss.lookups;
	st->cache_hits = ss.cache_hits;
}
