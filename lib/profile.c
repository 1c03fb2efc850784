// SPDX-License-Identifier: Apache-2.0
/*
 * The profile data model: interned strings and frames, merged samples.
 *
 * Strings live in an arena owned by the profile and are interned, so two
 * equal strings are the same pointer; frames and stacks can then be
 * compared field by field with ==.  Sample stacks live in the same arena,
 * which never moves what it has handed out (unlike a realloc'd array).
 *
 * Also here: profile__write_file, the one place that maps a file name to
 * an encoder and makes the write atomic.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/hash.h"
#include "lib/profile.h"
#include "lib/strpool.h"

#define ARENA_MIN_BLOCK (64u * 1024)
#define ARENA_MAX_BLOCK (4u * 1024 * 1024)
#define ARENA_ALIGN 8u

struct arena_block {
	struct arena_block *next;
	size_t used, cap;
	/* max_align_t keeps data aligned for the uint32_t stacks */
	_Alignas(max_align_t) unsigned char data[];
};

struct profile_impl {
	struct arena_block *blocks;  /* newest first */
	size_t next_block;	     /* size of the next block to allocate */
	struct strpool *strs;	     /* every string the profile holds */
	struct profile_htab frames;  /* id = frame index */
	struct profile_htab samples; /* id = sample index */
	uint32_t frames_cap, samples_cap;
};

/* --- hashing ----------------------------------------------------------- */

uint64_t profile__hash(const void *data, size_t n, uint64_t seed)
{
	return hash_bytes(data, n, seed);
}

/* --- hash table -------------------------------------------------------- */

int64_t profile_htab__find(const struct profile_htab *h, uint64_t hash, profile_htab_eq_fn eq,
			   const void *key, const void *ctx)
{
	if (!h->cap)
		return -ENOENT;
	for (uint32_t i = hash & (h->cap - 1);; i = (i + 1) & (h->cap - 1)) {
		uint32_t id = h->ids[i];

		if (!id)
			return -ENOENT;
		if (h->hashes[i] == hash && eq(id - 1, key, ctx))
			return id - 1;
	}
}

static void htab_put(uint64_t *hashes, uint32_t *ids, uint32_t cap, uint64_t hash, uint32_t id1)
{
	uint32_t i = hash & (cap - 1);

	while (ids[i])
		i = (i + 1) & (cap - 1);
	hashes[i] = hash;
	ids[i] = id1;
}

int profile_htab__insert(struct profile_htab *h, uint64_t hash, uint32_t id)
{
	if (id == UINT32_MAX)
		return -EOVERFLOW;
	/* keep the load under 70% so probe sequences stay short */
	if ((uint64_t)(h->n + 1) * 10 > (uint64_t)h->cap * 7) {
		uint32_t ncap = h->cap ? h->cap * 2 : 64;
		uint64_t *nh;
		uint32_t *ni;

		if (h->cap >= (1u << 31))
			return -ENOMEM;
		nh = malloc((size_t)ncap * sizeof(*nh));
		ni = calloc(ncap, sizeof(*ni));
		if (!nh || !ni) {
			free(nh);
			free(ni);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < h->cap; i++)
			if (h->ids[i])
				htab_put(nh, ni, ncap, h->hashes[i], h->ids[i]);
		free(h->hashes);
		free(h->ids);
		h->hashes = nh;
		h->ids = ni;
		h->cap = ncap;
	}
	htab_put(h->hashes, h->ids, h->cap, hash, id + 1);
	h->n++;
	return 0;
}

void profile_htab__fini(struct profile_htab *h)
{
	if (!h)
		return;
	free(h->hashes);
	free(h->ids);
	memset(h, 0, sizeof(*h));
}

/* --- arena ------------------------------------------------------------- */

static void *arena_alloc(struct profile_impl *impl, size_t sz)
{
	struct arena_block *b = impl->blocks;
	size_t need = (sz + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	void *ret;

	if (need < sz)
		return NULL;
	if (!b || b->cap - b->used < need) {
		size_t cap = impl->next_block;

		if (cap < need)
			cap = need;
		if (cap > SIZE_MAX - sizeof(*b))
			return NULL;
		b = malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->next = impl->blocks;
		b->used = 0;
		b->cap = cap;
		impl->blocks = b;
		if (impl->next_block < ARENA_MAX_BLOCK)
			impl->next_block *= 2;
	}
	ret = b->data + b->used;
	b->used += need;
	return ret;
}

/* --- strings ----------------------------------------------------------- */

/* The interned copy of s (NULL stays NULL), or NULL with *err set. */
static const char *intern_str(struct profile_impl *impl, const char *s, int *err)
{
	const char *copy;

	*err = 0;
	if (!s)
		return NULL;
	copy = strpool__intern(impl->strs, s);
	if (!copy)
		*err = -ENOMEM;
	return copy;
}

/* --- profile ----------------------------------------------------------- */

struct profile *profile__new(uint32_t freq_hz)
{
	struct profile *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->impl = calloc(1, sizeof(*p->impl));
	if (!p->impl) {
		free(p);
		return NULL;
	}
	p->impl->strs = strpool__new();
	if (!p->impl->strs) {
		free(p->impl);
		free(p);
		return NULL;
	}
	p->impl->next_block = ARENA_MIN_BLOCK;
	p->freq_hz = freq_hz;
	return p;
}

void profile__free(struct profile *p)
{
	struct arena_block *b, *next;

	if (!p)
		return;
	if (p->impl) {
		for (b = p->impl->blocks; b; b = next) {
			next = b->next;
			free(b);
		}
		strpool__free(p->impl->strs);
		profile_htab__fini(&p->impl->frames);
		profile_htab__fini(&p->impl->samples);
		free(p->impl);
	}
	free(p->frames);
	free(p->samples);
	free(p);
}

static uint64_t frame_hash(const struct profile_frame *f)
{
	/* strings are interned: their addresses identify them */
	uint64_t k[6] = {
		(uintptr_t)f->func, (uintptr_t)f->file, f->line, (uintptr_t)f->module, f->addr,
		f->flags,
	};

	return profile__hash(k, sizeof(k), 0);
}

static int frame_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct profile *p = ctx;
	const struct profile_frame *a = key, *b = &p->frames[id];

	return a->func == b->func && a->file == b->file && a->line == b->line &&
	       a->module == b->module && a->addr == b->addr && a->flags == b->flags;
}

int64_t profile__intern_frame(struct profile *p, const struct profile_frame *f)
{
	struct profile_impl *impl;
	struct profile_frame nf;
	int64_t id;
	uint64_t h;
	int err;

	if (!p || !f)
		return -EINVAL;
	impl = p->impl;
	nf = *f;
	nf.func = intern_str(impl, f->func, &err);
	if (err)
		return err;
	nf.file = intern_str(impl, f->file, &err);
	if (err)
		return err;
	nf.module = intern_str(impl, f->module, &err);
	if (err)
		return err;

	h = frame_hash(&nf);
	id = profile_htab__find(&impl->frames, h, frame_eq, &nf, p);
	if (id >= 0)
		return id;

	if (p->nframes == impl->frames_cap) {
		uint32_t ncap = impl->frames_cap ? impl->frames_cap * 2 : 256;
		struct profile_frame *nv;

		if (impl->frames_cap >= (1u << 30))
			return -ENOMEM;
		nv = realloc(p->frames, (size_t)ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		p->frames = nv;
		impl->frames_cap = ncap;
	}
	err = profile_htab__insert(&impl->frames, h, p->nframes);
	if (err)
		return err;
	p->frames[p->nframes] = nf;
	return p->nframes++;
}

struct sample_key {
	uint32_t pid, tid;
	const char *comm; /* interned */
	const uint32_t *frames;
	uint32_t n;
};

static uint64_t sample_hash(const struct sample_key *k)
{
	uint64_t head[3] = { ((uint64_t)k->pid << 32) | k->tid, (uintptr_t)k->comm, k->n };
	uint64_t h = profile__hash(head, sizeof(head), 0);

	return profile__hash(k->frames, (size_t)k->n * sizeof(*k->frames), h);
}

static int sample_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct profile *p = ctx;
	const struct sample_key *k = key;
	const struct profile_sample *s = &p->samples[id];

	return s->pid == k->pid && s->tid == k->tid && s->comm == k->comm && s->nframes == k->n &&
	       (!k->n || !memcmp(s->frames, k->frames, (size_t)k->n * sizeof(*k->frames)));
}

int profile__add_sample(struct profile *p, uint32_t pid, uint32_t tid, const char *comm,
			const uint32_t *frames, uint32_t n, uint64_t count)
{
	struct profile_impl *impl;
	struct profile_sample *s;
	struct sample_key k;
	uint32_t *copy = NULL;
	int64_t id;
	uint64_t h;
	int err;

	if (!p || (n && !frames))
		return -EINVAL;
	if (n > PROFILE_MAX_FRAMES)
		return -E2BIG;
	for (uint32_t i = 0; i < n; i++)
		if (frames[i] >= p->nframes)
			return -EINVAL;
	if (!count)
		return 0;
	impl = p->impl;

	k.pid = pid;
	k.tid = tid;
	k.comm = intern_str(impl, comm && comm[0] ? comm : "[unknown]", &err);
	if (err)
		return err;
	k.frames = frames;
	k.n = n;
	h = sample_hash(&k);
	id = profile_htab__find(&impl->samples, h, sample_eq, &k, p);
	if (id >= 0) {
		s = &p->samples[id];
		if (s->count > UINT64_MAX - count)
			return -EOVERFLOW;
		s->count += count;
		return 0;
	}

	if (p->nsamples == impl->samples_cap) {
		uint32_t ncap = impl->samples_cap ? impl->samples_cap * 2 : 256;
		struct profile_sample *nv;

		if (impl->samples_cap >= (1u << 30))
			return -ENOMEM;
		nv = realloc(p->samples, (size_t)ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		p->samples = nv;
		impl->samples_cap = ncap;
	}
	if (n) {
		copy = arena_alloc(impl, (size_t)n * sizeof(*copy));
		if (!copy)
			return -ENOMEM;
		memcpy(copy, frames, (size_t)n * sizeof(*copy));
	}
	err = profile_htab__insert(&impl->samples, h, p->nsamples);
	if (err)
		return err;
	s = &p->samples[p->nsamples++];
	s->pid = pid;
	s->tid = tid;
	s->comm = k.comm;
	s->nframes = n;
	s->frames = copy;
	s->count = count;
	return 0;
}

uint64_t profile__total(const struct profile *p)
{
	uint64_t sum = 0;

	if (!p)
		return 0;
	for (uint32_t i = 0; i < p->nsamples; i++) {
		if (p->samples[i].count > UINT64_MAX - sum)
			return UINT64_MAX; /* saturate rather than wrap */
		sum += p->samples[i].count;
	}
	return sum;
}

static const char *module_base(const char *module)
{
	const char *slash;

	if (!module || !module[0])
		return "[unknown]";
	slash = strrchr(module, '/');
	/* "/path/dir/" has no basename to show: keep the whole path */
	return slash && slash[1] ? slash + 1 : module;
}

/* Python frames show where they are: "qualname (file.py:line)". */
static int python_named(const struct profile_frame *f)
{
	return (f->flags & PROFILE_FRAME_PYTHON) && f->file;
}

/* Bytes profile__frame_name needs for f beyond its own strings, or 0 when
 * the frame is shown by its interned name. */
static size_t composed_len(const struct profile_frame *f)
{
	if (profile_frame__unresolved(f))
		/* "+0x" + up to 16 hex digits + NUL */
		return strlen(module_base(f->module)) + 20;
	if (python_named(f))
		/* " (" + ":" + 10 digits + ")" + NUL */
		return strlen(f->func) + strlen(module_base(f->file)) + 16;
	return 0;
}

const char *profile__frame_name(const struct profile_frame *f, char *buf, size_t sz)
{
	if (!buf || !sz)
		return buf;
	if (!profile_frame__unresolved(f) && python_named(f))
		snprintf(buf, sz, "%s (%s:%" PRIu32 ")", f->func, module_base(f->file), f->line);
	else if (!profile_frame__unresolved(f))
		snprintf(buf, sz, "%s", f->func);
	else
		snprintf(buf, sz, "%s+0x%" PRIx64, module_base(f->module), f->addr);
	return buf;
}

const char **profile__display_names(const struct profile *p)
{
	size_t extra = 0, off, nptr = p->nframes ? p->nframes : 1;
	const char **names;
	char *pool;

	for (uint32_t i = 0; i < p->nframes; i++)
		extra += composed_len(&p->frames[i]);
	if (extra > SIZE_MAX / 2 || nptr > (SIZE_MAX / 2 - extra) / sizeof(*names)) {
		errno = ENOMEM;
		return NULL;
	}
	names = malloc(nptr * sizeof(*names) + extra);
	if (!names)
		return NULL;
	pool = (char *)(names + nptr);
	off = 0;
	for (uint32_t i = 0; i < p->nframes; i++) {
		const struct profile_frame *f = &p->frames[i];
		size_t len = composed_len(f);

		if (!len) {
			names[i] = f->func;
			continue;
		}
		names[i] = profile__frame_name(f, pool + off, len);
		off += len;
	}
	return names;
}

/* --- writing a file ---------------------------------------------------- */

typedef int (*encoder_fn)(const struct profile *p, FILE *out, const char *title);

static int enc_folded(const struct profile *p, FILE *out, const char *title)
{
	return profile__write_folded(p, out);
}

static int enc_pprof(const struct profile *p, FILE *out, const char *title)
{
	return profile__write_pprof(p, out);
}

static int enc_json(const struct profile *p, FILE *out, const char *title)
{
	return profile__write_json(p, out);
}

static int has_suffix(const char *s, const char *sfx)
{
	size_t n = strlen(s), m = strlen(sfx);

	/* the suffix alone (".svg") is not a file name worth writing */
	return n > m && !strcmp(s + n - m, sfx) && s[n - m - 1] != '/';
}

static encoder_fn encoder_for(const char *path)
{
	if (has_suffix(path, ".folded"))
		return enc_folded;
	if (has_suffix(path, ".pb.gz"))
		return enc_pprof;
	if (has_suffix(path, ".svg"))
		return profile__write_svg;
	if (has_suffix(path, ".json"))
		return enc_json;
	return NULL;
}

/*
 * Creates a fresh file next to path.  Not mkstemp(): that makes the file
 * 0600, while the result should get the usual umask-derived mode.
 */
static int open_temp(const char *path, char *tmp, size_t sz)
{
	uint64_t seed = mono_ns();

	for (int attempt = 0; attempt < 100; attempt++) {
		int fd, n;

		n = snprintf(tmp, sz, "%s.tmp.%ld.%lx", path, (long)getpid(),
			     (unsigned long)(seed + attempt));
		if (n < 0 || (size_t)n >= sz)
			return -ENAMETOOLONG;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd >= 0 || errno != EEXIST)
			return fd >= 0 ? fd : -errno;
	}
	return -EEXIST;
}

int profile__write_file(const struct profile *p, const char *path, const char *title)
{
	encoder_fn enc;
	char *tmp = NULL;
	FILE *out = NULL;
	size_t sz;
	int fd = -1, err;

	if (!p || !path)
		return -EINVAL;
	enc = encoder_for(path);
	if (!enc)
		return -EINVAL;
	sz = strlen(path) + 64;
	tmp = malloc(sz);
	if (!tmp)
		return -ENOMEM;
	fd = open_temp(path, tmp, sz);
	if (fd < 0) {
		err = fd;
		tmp[0] = '\0'; /* nothing to unlink */
		goto err_out;
	}
	out = fdopen(fd, "w");
	if (!out) {
		err = -errno;
		goto err_out;
	}
	fd = -1; /* owned by out now */
	err = enc(p, out, title);
	if (err)
		goto err_out;
	/* flush to disk before the rename makes the file visible, so a crash
	 * cannot leave a complete-looking name over partial contents */
	if (fflush(out) || fsync(fileno(out))) {
		err = errno ? -errno : -EIO;
		goto err_out;
	}
	err = fclose(out) ? (errno ? -errno : -EIO) : 0;
	out = NULL;
	if (err)
		goto err_out;
	if (rename(tmp, path)) {
		err = -errno;
		goto err_out;
	}
	free(tmp);
	return 0;
err_out:
	if (out)
		fclose(out);
	if (fd >= 0)
		close(fd);
	if (tmp[0])
		unlink(tmp);
	free(tmp);
	return err;
}
