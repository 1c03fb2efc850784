// SPDX-License-Identifier: Apache-2.0
/*
 * pprof output: a gzip-compressed perftools.profiles.Profile message, the
 * format `go tool pprof` and most profile viewers read.
 *
 * Mapping of the model onto pprof:
 *  - one Mapping per distinct module (its filename); addresses are what
 *    the model holds (file offsets for user code, kernel addresses), so a
 *    mapping spans [lowest, highest] address seen with file_offset equal
 *    to memory_start: address -> file offset stays the identity;
 *  - one Location per physical frame together with the frames inlined
 *    into it: pprof keeps an inline chain as ONE location with several
 *    Lines, innermost first; an unresolved frame is a Location with an
 *    address and no Line, which pprof shows as the address;
 *  - one Function per (name, file);
 *  - one Sample per model sample, labelled pid/tid (numbers) and comm.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "lib/profile.h"
#include "profile.pb-c.h"

struct pp_map {
	const char *module; /* interned in the profile */
	uint64_t lo, hi;
	int all_resolved, all_files, all_lines, any_inline;
};

struct pp_loc {
	const uint32_t *frames; /* root-first group: physical frame first */
	uint32_t n;
	uint32_t first_line, nlines; /* into pp.lines */
	uint64_t mapping_id, address;
};

struct pp_fn_key {
	const char *name, *file; /* interned: compared by address */
};

struct pp {
	const struct profile *p;

	struct profile_htab str_h;
	const char **strs;
	uint32_t nstrs, strs_cap;

	struct profile_htab fn_h;
	Perftools__Profiles__Function *fns;
	struct pp_fn_key *fn_keys; /* parallel to fns, same capacity */
	uint32_t nfns, fns_cap;

	struct profile_htab map_h;
	struct pp_map *maps;
	uint32_t nmaps, maps_cap;

	struct profile_htab loc_h;
	struct pp_loc *locs;
	uint32_t nlocs, locs_cap;

	Perftools__Profiles__Line *lines;
	uint32_t nlines, lines_cap;
};

/* Makes room for one more element of a geometrically grown array. */
static int grow(void **arr, uint32_t *cap, uint32_t n, size_t elem)
{
	uint32_t ncap;
	void *na;

	if (n < *cap)
		return 0;
	if (*cap >= (1u << 30))
		return -ENOMEM;
	ncap = *cap ? *cap * 2 : 64;
	na = realloc(*arr, (size_t)ncap * elem);
	if (!na)
		return -ENOMEM;
	*arr = na;
	*cap = ncap;
	return 0;
}

static int str_eq(uint32_t id, const void *key, const void *ctx)
{
	return strcmp(((const struct pp *)ctx)->strs[id], key) == 0;
}

/* The string_table index of s (which must outlive the encoding). */
static int64_t pp_str(struct pp *pp, const char *s)
{
	uint64_t h;
	int64_t id;
	int err;

	if (!s)
		s = "";
	h = profile__hash(s, strlen(s), 0);
	id = profile_htab__find(&pp->str_h, h, str_eq, s, pp);
	if (id >= 0)
		return id;
	err = grow((void **)&pp->strs, &pp->strs_cap, pp->nstrs, sizeof(*pp->strs));
	if (!err)
		err = profile_htab__insert(&pp->str_h, h, pp->nstrs);
	if (err)
		return err;
	pp->strs[pp->nstrs] = s;
	return pp->nstrs++;
}

static int fn_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct pp_fn_key *k = key, *f = &((const struct pp *)ctx)->fn_keys[id];

	return f->name == k->name && f->file == k->file;
}

/* Function id (1-based) for frame f. */
static int64_t pp_function(struct pp *pp, const struct profile_frame *f)
{
	struct pp_fn_key k = { f->func, f->file };
	uintptr_t kk[2] = { (uintptr_t)k.name, (uintptr_t)k.file };
	Perftools__Profiles__Function init = PERFTOOLS__PROFILES__FUNCTION__INIT;
	Perftools__Profiles__Function *fn;
	uint64_t h = profile__hash(kk, sizeof(kk), 1);
	int64_t id, name, file;
	int err;

	id = profile_htab__find(&pp->fn_h, h, fn_eq, &k, pp);
	if (id >= 0)
		return id + 1;
	name = pp_str(pp, f->func);
	file = pp_str(pp, f->file);
	if (name < 0 || file < 0)
		return -ENOMEM;
	if (pp->nfns == pp->fns_cap) {
		uint32_t cap = pp->fns_cap;

		err = grow((void **)&pp->fn_keys, &cap, pp->nfns, sizeof(*pp->fn_keys));
		if (err)
			return err;
		err = grow((void **)&pp->fns, &pp->fns_cap, pp->nfns, sizeof(*pp->fns));
		if (err)
			return err;
	}
	err = profile_htab__insert(&pp->fn_h, h, pp->nfns);
	if (err)
		return err;
	pp->fn_keys[pp->nfns] = k;
	fn = &pp->fns[pp->nfns];
	*fn = init;
	fn->id = pp->nfns + 1;
	fn->name = name;
	/* the model keeps only the demangled name */
	fn->system_name = name;
	fn->filename = file;
	return ++pp->nfns;
}

static int map_eq(uint32_t id, const void *key, const void *ctx)
{
	return ((const struct pp *)ctx)->maps[id].module == key;
}

/* Mapping index (0-based) of module, or -errno. */
static int64_t pp_mapping(struct pp *pp, const char *module)
{
	uintptr_t k = (uintptr_t)module;
	uint64_t h = profile__hash(&k, sizeof(k), 2);
	struct pp_map *m;
	int64_t id;
	int err;

	id = profile_htab__find(&pp->map_h, h, map_eq, module, pp);
	if (id >= 0)
		return id;
	err = grow((void **)&pp->maps, &pp->maps_cap, pp->nmaps, sizeof(*pp->maps));
	if (!err)
		err = profile_htab__insert(&pp->map_h, h, pp->nmaps);
	if (err)
		return err;
	m = &pp->maps[pp->nmaps];
	m->module = module;
	m->lo = UINT64_MAX;
	m->hi = 0;
	m->all_resolved = m->all_files = m->all_lines = 1;
	m->any_inline = 0;
	return pp->nmaps++;
}

struct pp_group {
	const uint32_t *frames;
	uint32_t n;
};

static int loc_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct pp_group *g = key;
	const struct pp_loc *l = &((const struct pp *)ctx)->locs[id];

	return l->n == g->n && !memcmp(l->frames, g->frames, (size_t)g->n * sizeof(*g->frames));
}

/*
 * Length of the location group starting at frames[i]: a resolved frame
 * takes along the resolved frames inlined into it (which follow it, leaf-
 * ward, flagged INLINED).
 */
static uint32_t group_len(const struct profile *p, const uint32_t *frames, uint32_t i, uint32_t n)
{
	uint32_t j = i + 1;

	if (profile_frame__unresolved(&p->frames[frames[i]]))
		return 1;
	while (j < n) {
		const struct profile_frame *f = &p->frames[frames[j]];

		if (!(f->flags & PROFILE_FRAME_INLINED) || profile_frame__unresolved(f))
			break;
		j++;
	}
	return j - i;
}

/* Location id (1-based) for the group, or -errno. */
static int64_t pp_location(struct pp *pp, const uint32_t *frames, uint32_t n)
{
	const struct profile *p = pp->p;
	const struct profile_frame *head = &p->frames[frames[0]];
	struct pp_group g = { frames, n };
	uint64_t h = profile__hash(frames, (size_t)n * sizeof(*frames), 3);
	struct pp_loc *loc;
	struct pp_map *m = NULL;
	int64_t id;
	int err;

	id = profile_htab__find(&pp->loc_h, h, loc_eq, &g, pp);
	if (id >= 0)
		return id + 1;
	err = grow((void **)&pp->locs, &pp->locs_cap, pp->nlocs, sizeof(*pp->locs));
	if (err)
		return err;
	loc = &pp->locs[pp->nlocs];
	loc->frames = frames;
	loc->n = n;
	loc->first_line = pp->nlines;
	loc->nlines = 0;
	loc->mapping_id = 0;
	/* inlined frames share the physical frame's address */
	loc->address = head->addr;

	if (head->module) {
		id = pp_mapping(pp, head->module);
		if (id < 0)
			return id;
		m = &pp->maps[id];
		loc->mapping_id = id + 1;
		if (head->addr < m->lo)
			m->lo = head->addr;
		if (head->addr > m->hi)
			m->hi = head->addr;
		if (profile_frame__unresolved(head))
			m->all_resolved = 0;
		if (n > 1)
			m->any_inline = 1;
	}
	if (!profile_frame__unresolved(head)) {
		/* innermost (leafmost) first, the physical function last */
		for (uint32_t k = n; k-- > 0;) {
			const struct profile_frame *f = &p->frames[frames[k]];
			Perftools__Profiles__Line init = PERFTOOLS__PROFILES__LINE__INIT;
			int64_t fid = pp_function(pp, f);

			if (fid < 0)
				return fid;
			err = grow((void **)&pp->lines, &pp->lines_cap, pp->nlines,
				   sizeof(*pp->lines));
			if (err)
				return err;
			init.function_id = fid;
			init.line = f->line;
			pp->lines[pp->nlines++] = init;
			if (m && !f->file)
				m->all_files = 0;
			if (m && !f->line)
				m->all_lines = 0;
		}
		loc->nlines = n;
	}
	/* insert last: a failure above must not leave a half-built entry */
	err = profile_htab__insert(&pp->loc_h, h, pp->nlocs);
	if (err)
		return err;
	return ++pp->nlocs;
}

static void pp_fini(struct pp *pp)
{
	profile_htab__fini(&pp->str_h);
	profile_htab__fini(&pp->fn_h);
	profile_htab__fini(&pp->map_h);
	profile_htab__fini(&pp->loc_h);
	free(pp->strs);
	free(pp->fns);
	free(pp->fn_keys);
	free(pp->maps);
	free(pp->locs);
	free(pp->lines);
}

static int64_t clamp_i64(uint64_t v)
{
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int64_t mul_sat(uint64_t a, uint64_t b)
{
	if (a && b > INT64_MAX / a)
		return INT64_MAX;
	return (int64_t)(a * b);
}

static int gzip_write(const uint8_t *data, size_t len, FILE *out)
{
	unsigned char chunk[64 * 1024];
	z_stream zs = { 0 };
	int flush, zerr, err = 0;

	/* 15 + 16: a gzip header and trailer instead of zlib's */
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
	    Z_OK)
		return -ENOMEM;
	do {
		/* avail_in is 32-bit: feed large buffers in slices */
		size_t slice = len > (1u << 30) ? (1u << 30) : len;

		zs.next_in = (Bytef *)data;
		zs.avail_in = (uInt)slice;
		data += slice;
		len -= slice;
		flush = len ? Z_NO_FLUSH : Z_FINISH;
		do {
			size_t have;

			zs.next_out = chunk;
			zs.avail_out = sizeof(chunk);
			zerr = deflate(&zs, flush);
			if (zerr == Z_STREAM_ERROR) {
				err = -EIO;
				goto err_out;
			}
			have = sizeof(chunk) - zs.avail_out;
			if (have && fwrite(chunk, 1, have, out) != have) {
				err = -EIO;
				goto err_out;
			}
		} while (zs.avail_out == 0);
	} while (flush != Z_FINISH);
	if (zerr != Z_STREAM_END)
		err = -EIO;
err_out:
	deflateEnd(&zs);
	return err;
}

/* Sample values other than the CPU profile's (samples, cpu): n values per
 * sample, n types with units, no period (heap profiles). */
struct pp_values {
	uint32_t n;
	const char *const *types, *const *units;
	const int64_t *v; /* nsamples * n */
	const char *default_type;
};

static int write_pprof(const struct profile *p, FILE *out, const struct pp_values *pv);

int profile__write_pprof(const struct profile *p, FILE *out)
{
	return write_pprof(p, out, NULL);
}

int profile__write_pprof_values(const struct profile *p, FILE *out, uint32_t n,
				const char *const *types, const char *const *units,
				const int64_t *values, const char *default_type)
{
	struct pp_values pv = { n, types, units, values, default_type };

	if (!n || n > PROFILE_PPROF_MAX_VALUES || !types || !units || (!values && p->nsamples))
		return -EINVAL;
	return write_pprof(p, out, &pv);
}

static int write_pprof(const struct profile *p, FILE *out, const struct pp_values *pv)
{
	Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType vt[PROFILE_PPROF_MAX_VALUES + 1];
	Perftools__Profiles__ValueType *vtp[PROFILE_PPROF_MAX_VALUES];
	uint32_t nv = pv ? pv->n : 2;
	Perftools__Profiles__Sample *samples = NULL, **samplep = NULL;
	Perftools__Profiles__Label *labels = NULL, **labelp = NULL;
	Perftools__Profiles__Mapping *maps = NULL, **mapp = NULL;
	Perftools__Profiles__Location *locs = NULL, **locp = NULL;
	Perftools__Profiles__Line **linep = NULL;
	Perftools__Profiles__Function **fnp = NULL;
	int64_t k_pid, k_tid, k_comm, comment[1];
	uint64_t period, *locids = NULL;
	int64_t *values = NULL;
	size_t nlocids = 0, used = 0, packed_sz;
	struct pp pp = { .p = p };
	char drops[256];
	uint8_t *packed = NULL;
	int64_t id;
	int err = 0;

	if (!p || !out)
		return -EINVAL;
	period = p->freq_hz ? 1000000000ull / p->freq_hz : 0;

	/* the format requires string_table[0] == "" */
	if (pp_str(&pp, "") != 0)
		goto enomem;
	snprintf(drops, sizeof(drops),
		 "dropped: map_full=%" PRIu64 " stack_lost=%" PRIu64 " proc_unknown=%" PRIu64
		 " other=%" PRIu64,
		 p->drops.map_full, p->drops.stack_lost, p->drops.proc_unknown, p->drops.other);
	{
		int64_t s[] = { pp_str(&pp, "samples"), pp_str(&pp, "count"), pp_str(&pp, "cpu"),
				pp_str(&pp, "nanoseconds"), pp_str(&pp, drops) };

		for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
			if (s[i] < 0)
				goto enomem;
		for (uint32_t i = 0; i <= PROFILE_PPROF_MAX_VALUES; i++) {
			Perftools__Profiles__ValueType init = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;

			vt[i] = init;
			if (i < PROFILE_PPROF_MAX_VALUES)
				vtp[i] = &vt[i];
		}
		vt[0].type = s[0];
		vt[0].unit = s[1];
		vt[1].type = vt[2].type = s[2];
		vt[1].unit = vt[2].unit = s[3];
		comment[0] = s[4];
		prof.default_sample_type = s[2];
	}
	for (uint32_t i = 0; pv && i < pv->n; i++) {
		vt[i].type = pp_str(&pp, pv->types[i]);
		vt[i].unit = pp_str(&pp, pv->units[i]);
		if (vt[i].type < 0 || vt[i].unit < 0)
			goto enomem;
	}
	if (pv && pv->default_type) {
		prof.default_sample_type = pp_str(&pp, pv->default_type);
		if (prof.default_sample_type < 0)
			goto enomem;
	}
	k_pid = pp_str(&pp, "pid");
	k_tid = pp_str(&pp, "tid");
	k_comm = pp_str(&pp, "comm");
	if (k_pid < 0 || k_tid < 0 || k_comm < 0)
		goto enomem;

	for (uint32_t i = 0; i < p->nsamples; i++) {
		if (p->samples[i].nframes > SIZE_MAX / sizeof(*locids) - nlocids)
			goto enomem;
		nlocids += p->samples[i].nframes;
	}
	/* nsamples is 32-bit: 3 * nsamples cannot overflow a 64-bit size_t */
	samples = calloc(p->nsamples + 1, sizeof(*samples));
	samplep = calloc(p->nsamples + 1, sizeof(*samplep));
	labels = calloc(3 * (size_t)p->nsamples + 1, sizeof(*labels));
	labelp = calloc(3 * (size_t)p->nsamples + 1, sizeof(*labelp));
	values = calloc(nv * (size_t)p->nsamples + 1, sizeof(*values));
	locids = calloc(nlocids + 1, sizeof(*locids));
	if (!samples || !samplep || !labels || !labelp || !values || !locids)
		goto enomem;

	for (uint32_t i = 0; i < p->nsamples; i++) {
		const struct profile_sample *s = &p->samples[i];
		Perftools__Profiles__Sample si = PERFTOOLS__PROFILES__SAMPLE__INIT;
		Perftools__Profiles__Label li = PERFTOOLS__PROFILES__LABEL__INIT;
		Perftools__Profiles__Label *l = &labels[3 * (size_t)i];
		uint64_t *ids = locids + used;
		size_t nids = 0;

		for (uint32_t j = 0; j < s->nframes;) {
			uint32_t n = group_len(p, s->frames, j, s->nframes);

			id = pp_location(&pp, s->frames + j, n);
			if (id < 0) {
				err = (int)id;
				goto err_out;
			}
			ids[nids++] = id;
			j += n;
		}
		/* pprof wants the leaf first; the model keeps the root first */
		for (size_t a = 0, b = nids; a + 1 < b; a++, b--) {
			uint64_t t = ids[a];

			ids[a] = ids[b - 1];
			ids[b - 1] = t;
		}
		used += nids;

		if (pv) {
			for (uint32_t k = 0; k < nv; k++)
				values[nv * (size_t)i + k] = pv->v[nv * (size_t)i + k];
		} else {
			values[2 * (size_t)i] = clamp_i64(s->count);
			values[2 * (size_t)i + 1] = mul_sat(s->count, period);
		}
		for (int k = 0; k < 3; k++) {
			l[k] = li;
			labelp[3 * (size_t)i + k] = &l[k];
		}
		l[0].key = k_pid;
		l[0].num = s->pid;
		l[1].key = k_tid;
		l[1].num = s->tid;
		l[2].key = k_comm;
		l[2].str = pp_str(&pp, s->comm);
		if (l[2].str < 0)
			goto enomem;

		si.n_location_id = nids;
		si.location_id = ids;
		si.n_value = nv;
		si.value = &values[nv * (size_t)i];
		si.n_label = 3;
		si.label = &labelp[3 * (size_t)i];
		samples[i] = si;
		samplep[i] = &samples[i];
	}

	/* the arrays are final now: build the pointer views protobuf-c wants */
	maps = calloc(pp.nmaps + 1, sizeof(*maps));
	mapp = calloc(pp.nmaps + 1, sizeof(*mapp));
	locs = calloc(pp.nlocs + 1, sizeof(*locs));
	locp = calloc(pp.nlocs + 1, sizeof(*locp));
	linep = calloc(pp.nlines + 1, sizeof(*linep));
	fnp = calloc(pp.nfns + 1, sizeof(*fnp));
	if (!maps || !mapp || !locs || !locp || !linep || !fnp)
		goto enomem;
	for (uint32_t i = 0; i < pp.nmaps; i++) {
		Perftools__Profiles__Mapping mi = PERFTOOLS__PROFILES__MAPPING__INIT;
		const struct pp_map *m = &pp.maps[i];

		mi.id = i + 1;
		mi.memory_start = m->lo;
		mi.memory_limit = m->hi == UINT64_MAX ? m->hi : m->hi + 1;
		mi.file_offset = m->lo;
		mi.filename = pp_str(&pp, m->module);
		if (mi.filename < 0)
			goto enomem;
		/* claims hold for every location of the mapping; a claim of
		 * functions also stops pprof from re-symbolizing it */
		mi.has_functions = m->all_resolved;
		mi.has_filenames = m->all_resolved && m->all_files;
		mi.has_line_numbers = m->all_resolved && m->all_lines;
		mi.has_inline_frames = m->any_inline;
		maps[i] = mi;
		mapp[i] = &maps[i];
	}
	for (uint32_t i = 0; i < pp.nlines; i++)
		linep[i] = &pp.lines[i];
	for (uint32_t i = 0; i < pp.nlocs; i++) {
		Perftools__Profiles__Location li = PERFTOOLS__PROFILES__LOCATION__INIT;
		const struct pp_loc *l = &pp.locs[i];

		li.id = i + 1;
		li.mapping_id = l->mapping_id;
		li.address = l->address;
		li.n_line = l->nlines;
		li.line = l->nlines ? &linep[l->first_line] : NULL;
		locs[i] = li;
		locp[i] = &locs[i];
	}
	for (uint32_t i = 0; i < pp.nfns; i++)
		fnp[i] = &pp.fns[i];

	prof.n_sample_type = nv;
	prof.sample_type = vtp;
	prof.n_sample = p->nsamples;
	prof.sample = samplep;
	prof.n_mapping = pp.nmaps;
	prof.mapping = mapp;
	prof.n_location = pp.nlocs;
	prof.location = locp;
	prof.n_function = pp.nfns;
	prof.function = fnp;
	/* protobuf-c only reads these; the cast drops a const it lacks */
	prof.n_string_table = pp.nstrs;
	prof.string_table = (char **)pp.strs;
	prof.time_nanos = clamp_i64(p->start_ns);
	if (p->end_ns > p->start_ns)
		prof.duration_nanos = clamp_i64(p->end_ns - p->start_ns);
	if (!pv) { /* a heap profile has no sampling period */
		prof.period_type = &vt[2];
		prof.period = clamp_i64(period);
	}
	prof.n_comment = 1;
	prof.comment = comment;

	packed_sz = perftools__profiles__profile__get_packed_size(&prof);
	packed = malloc(packed_sz ? packed_sz : 1);
	if (!packed)
		goto enomem;
	if (perftools__profiles__profile__pack(&prof, packed) != packed_sz) {
		err = -EIO;
		goto err_out;
	}
	err = gzip_write(packed, packed_sz, out);
	if (!err && (fflush(out) || ferror(out)))
		err = -EIO;
	goto err_out;
enomem:
	err = -ENOMEM;
err_out:
	free(packed);
	free(samples);
	free(samplep);
	free(labels);
	free(labelp);
	free(values);
	free(locids);
	free(maps);
	free(mapp);
	free(locs);
	free(locp);
	free(linep);
	free(fnp);
	pp_fini(&pp);
	return err;
}
