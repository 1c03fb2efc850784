// SPDX-License-Identifier: Apache-2.0
#include "server/batch_decode.h"
#include "server/pb_budget.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* ZSTD_getFrameHeader (exported by libzstd.so since 1.3; "static only" in name) */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "server/store/schema.h"

#define DEFAULT_MAX_WIRE (16u << 20)
#define DEFAULT_MAX_RAW (128u << 20)
#define DEFAULT_MAX_FRAMES 4096u
#define MAX_BUILD_ID 64
#define MAX_NODE_NAME 255

static enum batch_error fail(char *err, size_t errsz, enum batch_error e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return e;
}

int batch_error__http_status(enum batch_error e)
{
	switch (e) {
	case BATCH_OK:
		return 200;
	case BATCH_TOO_LARGE:
		return 413;
	case BATCH_INVALID:
		return 422;
	case BATCH_BUSY:
		return 503;
	default:
		return 400;
	}
}

/* The decompressed bytes: buf (cap bytes, charged to the shared budget). */
struct raw_buf {
	uint8_t *buf;
	size_t len, cap;
};

static enum batch_error raw_grow(struct raw_buf *r, size_t cap, struct mem_budget *shared,
				 char *err, size_t errsz)
{
	uint8_t *nb;

	if (mem_budget__take(shared, cap - r->cap))
		return fail(err, errsz, BATCH_BUSY, "server busy: decode memory at its bound");
	nb = realloc(r->buf, cap ? cap : 1);
	if (!nb) {
		mem_budget__give(shared, cap - r->cap);
		return fail(err, errsz, BATCH_TOO_LARGE, "out of memory");
	}
	r->buf = nb;
	r->cap = cap;
	return BATCH_OK;
}

/*
 * A frame that states its size (the agent's do: ZSTD_compress) is
 * decompressed in one pass into a buffer of that size, which needs no
 * decoder window.  The size is a claim: a frame with more content fails
 * (dst too small), one with less is refused too.
 */
static enum batch_error unzstd_sized(const void *in, size_t n, size_t size, struct raw_buf *r,
				     struct mem_budget *shared, char *err, size_t errsz)
{
	enum batch_error e = raw_grow(r, size, shared, err, errsz);
	size_t got;

	if (e)
		return e;
	got = ZSTD_decompress(r->buf, r->cap, in, n);
	if (ZSTD_isError(got))
		return fail(err, errsz, BATCH_NOT_ZSTD, "corrupt zstd data: %s",
			    ZSTD_getErrorName(got));
	if (got != size)
		return fail(err, errsz, BATCH_NOT_ZSTD, "zstd frame of %zu bytes claims %zu", got,
			    size);
	r->len = got;
	return BATCH_OK;
}

/*
 * A frame of unknown size: streamed, the output buffer grown as needed.
 * The decoder's window is memory too (charged while it decodes), and the
 * window and the output together stay within max.
 */
static enum batch_error unzstd_stream(const void *in, size_t n, size_t max, size_t window,
				      struct raw_buf *r, struct mem_budget *shared, char *err,
				      size_t errsz)
{
	ZSTD_inBuffer ib = { in, n, 0 };
	ZSTD_DCtx *dc;
	size_t ret = 1;
	enum batch_error e = BATCH_OK;

	window += 128u << 10; /* and a block */
	if (window >= max)
		return fail(err, errsz, BATCH_TOO_LARGE,
			    "batch decompresses to more than %zu bytes (its zstd window alone)",
			    max);
	max -= window;
	if (mem_budget__take(shared, window))
		return fail(err, errsz, BATCH_BUSY, "server busy: decode memory at its bound");
	dc = ZSTD_createDCtx();
	if (!dc) {
		mem_budget__give(shared, window);
		return fail(err, errsz, BATCH_TOO_LARGE, "out of memory");
	}
	ZSTD_DCtx_setParameter(dc, ZSTD_d_windowLogMax, 27);
	while (ret != 0) {
		if (r->len == r->cap) {
			size_t ncap = r->cap ? r->cap * 2 : 64 * 1024;

			if (r->cap >= max) {
				e = fail(err, errsz, BATCH_TOO_LARGE,
					 "batch decompresses to more than %zu bytes", max);
				break;
			}
			e = raw_grow(r, ncap < max ? ncap : max, shared, err, errsz);
			if (e)
				break;
		}
		ZSTD_outBuffer ob = { r->buf, r->cap, r->len };
		ret = ZSTD_decompressStream(dc, &ob, &ib);
		r->len = ob.pos;
		if (ZSTD_isError(ret)) {
			e = fail(err, errsz, BATCH_NOT_ZSTD, "corrupt zstd data: %s",
				 ZSTD_getErrorName(ret));
			break;
		}
		if (ret != 0 && ib.pos == ib.size && ob.pos < ob.size) {
			e = fail(err, errsz, BATCH_NOT_ZSTD, "truncated zstd frame");
			break;
		}
	}
	ZSTD_freeDCtx(dc);
	mem_budget__give(shared, window);
	return e;
}

/*
 * Decompresses one zstd frame (nothing after it) into at most max bytes of
 * memory, charged to shared: *out (free it, then give *held back).
 */
static enum batch_error unzstd(const void *in, size_t n, size_t max, struct mem_budget *shared,
			       uint8_t **out, size_t *len, size_t *held, char *err, size_t errsz)
{
	static const uint8_t magic[4] = { 0x28, 0xb5, 0x2f, 0xfd }; /* ZSTD_MAGICNUMBER, LE */
	struct raw_buf r = { 0 };
	ZSTD_frameHeader zfh;
	size_t fsize;
	enum batch_error e;

	if (n < 4 || memcmp(in, magic, 4))
		return fail(err, errsz, BATCH_NOT_ZSTD, "body is not a zstd frame");
	if (ZSTD_getFrameHeader(&zfh, in, n))
		return fail(err, errsz, BATCH_NOT_ZSTD, "truncated or corrupt zstd frame header");
	fsize = ZSTD_findFrameCompressedSize(in, n);
	if (ZSTD_isError(fsize))
		return fail(err, errsz, BATCH_NOT_ZSTD, "truncated zstd frame: %s",
			    ZSTD_getErrorName(fsize));
	if (fsize != n)
		return fail(err, errsz, BATCH_NOT_ZSTD, "%zu bytes after the zstd frame",
			    n - fsize);
	if (zfh.frameContentSize != ZSTD_CONTENTSIZE_UNKNOWN && zfh.frameContentSize > max)
		return fail(err, errsz, BATCH_TOO_LARGE,
			    "batch decompresses to more than %zu bytes", max);
	if (zfh.frameContentSize != ZSTD_CONTENTSIZE_UNKNOWN)
		e = unzstd_sized(in, n, (size_t)zfh.frameContentSize, &r, shared, err, errsz);
	else
		e = unzstd_stream(in, n, max, zfh.windowSize < max ? zfh.windowSize : max, &r,
				  shared, err, errsz);
	if (e) {
		free(r.buf);
		mem_budget__give(shared, r.cap);
		return e;
	}
	*out = r.buf;
	*len = r.len;
	*held = r.cap;
	return BATCH_OK;
}

/* ---- validation --------------------------------------------------------- */

struct vctx {
	const Strata__V1__Batch *b;
	const struct batch_limits *lim;
	char *err;
	size_t errsz;
};

#define CHECK(cond, ...)                                                           \
	do {                                                                       \
		if (!(cond))                                                       \
			return fail(v->err, v->errsz, BATCH_INVALID, __VA_ARGS__); \
	} while (0)
/* Index field of record what[i] into a list of n (named list). */
#define INDEX(field, n, list, what, i) \
	CHECK((field) < (n), "%s[%zu]: %s %u out of range", what, i, list, (unsigned)(field))
#define STR(field, what, i) INDEX(field, v->b->n_strings, "string", what, i)
#define MAPPING(field, what, i) INDEX(field, v->b->n_mappings, "mapping", what, i)

/* What the schema does not describe: a process's pid, labels and maps. */
static enum batch_error check_processes(const struct vctx *v)
{
	const Strata__V1__Batch *b = v->b;

	for (size_t i = 0; i < b->n_processes; i++) {
		const Strata__V1__Process *p = b->processes[i];

		CHECK(p->pid != 0, "processes[%zu]: pid 0", i);
		for (size_t j = 0; j < p->n_labels; j++) {
			STR(p->labels[j]->key_str, "processes.labels", i);
			STR(p->labels[j]->value_str, "processes.labels", i);
		}
		for (size_t j = 0; j < p->n_maps; j++) {
			MAPPING(p->maps[j]->mapping, "processes.maps", i);
			CHECK(p->maps[j]->start < p->maps[j]->end,
			      "processes[%zu].maps[%zu]: empty range", i, j);
		}
	}
	return BATCH_OK;
}

static enum batch_error check_stacks(const struct vctx *v)
{
	const Strata__V1__Batch *b = v->b;
	uint32_t max =
		v->lim && v->lim->max_stack_frames ? v->lim->max_stack_frames : DEFAULT_MAX_FRAMES;

	for (size_t i = 0; i < b->n_mappings; i++) {
		CHECK(b->mappings[i]->build_id.len <= MAX_BUILD_ID,
		      "mappings[%zu]: build-id of %zu bytes", i, b->mappings[i]->build_id.len);
		STR(b->mappings[i]->path_str, "mappings", i);
	}
	CHECK(b->n_stacks == 0 || b->stacks[0]->n_frames == 0, "stacks[0] must be the empty stack");
	for (size_t i = 0; i < b->n_stacks; i++) {
		const Strata__V1__Stack *s = b->stacks[i];

		CHECK(s->n_frames <= max, "stacks[%zu]: %zu frames (at most %u)", i, s->n_frames,
		      max);
		for (size_t j = 0; j < s->n_frames; j++) {
			const Strata__V1__Frame *f = s->frames[j];

			switch (f->kind) {
			case STRATA__V1__FRAME__KIND__NATIVE:
				MAPPING(f->mapping, "stacks.frames", i);
				break;
			case STRATA__V1__FRAME__KIND__KERNEL:
			case STRATA__V1__FRAME__KIND__PYTHON:
			case STRATA__V1__FRAME__KIND__LOST:
			case STRATA__V1__FRAME__KIND__UNKNOWN:
				break;
			default:
				CHECK(0, "stacks[%zu].frames[%zu]: unknown kind %d", i, j, f->kind);
			}
			STR(f->name_str, "stacks.frames", i);
			STR(f->module_str, "stacks.frames", i);
			STR(f->file_str, "stacks.frames", i);
		}
	}
	return BATCH_OK;
}

/* ---- the records' indexes, from the store schema ------------------------- */

/* A table's index fields, in field order, for one batch. */
struct refs {
	const struct vctx *v;
	const char *what; /* "cpu_samples", "cuda_api_tally.errors" */
	char whatbuf[64];
	size_t n;
	struct {
		const ProtobufCFieldDescriptor *f;
		enum store_ref ref;
		int of_parent;
	} r[STORE_MAX_COLS];
};

/* The table's index fields of the parent's or its own message, in field
 * order. */
static void add_refs(struct refs *rs, const struct store_table *t, int of_parent)
{
	const ProtobufCMessageDescriptor *d = of_parent ? STORE_TABLES[t->parent].msg : t->msg;

	for (unsigned i = 0; i < d->n_fields; i++) {
		for (size_t c = 0; c < t->ncols; c++) {
			const struct store_column *col = &t->cols[c];

			if (col->ref == STORE_REF_NONE ||
			    !(col->flags & STORE_OF_PARENT) != !of_parent ||
			    strcmp(col->field, d->fields[i].name))
				continue;
			rs->r[rs->n].f = &d->fields[i];
			rs->r[rs->n].ref = col->ref;
			rs->r[rs->n++].of_parent = of_parent;
		}
	}
}

static void refs_init(struct refs *rs, const struct vctx *v, const struct store_table *t)
{
	rs->v = v;
	rs->n = 0;
	rs->what = t->field;
	if (t->parent >= 0) {
		snprintf(rs->whatbuf, sizeof(rs->whatbuf), "%s.%s", STORE_TABLES[t->parent].field,
			 t->field);
		rs->what = rs->whatbuf;
		add_refs(rs, t, 1);
	}
	add_refs(rs, t, 0);
}

static int check_record(void *ctx, const struct store_rec *rec)
{
	const struct refs *rs = ctx;
	const struct vctx *v = rs->v;
	const char *what = rs->what;
	size_t i = rec->i;

	for (size_t k = 0; k < rs->n; k++) {
		uint32_t x =
			store_rec__u32(rs->r[k].of_parent ? rec->parent : rec->msg, rs->r[k].f);

		switch (rs->r[k].ref) {
		case STORE_REF_STRING:
			STR(x, what, i);
			break;
		case STORE_REF_PROCESS:
			INDEX(x, v->b->n_processes, "process", what, i);
			break;
		case STORE_REF_STACK:
			INDEX(x, v->b->n_stacks, "stack", what, i);
			break;
		default:
			break;
		}
	}
	return BATCH_OK;
}

/* Every string, process and stack index of every record the schema
 * describes (server/store/schema.h), stored or not. */
static enum batch_error check_records(const struct vctx *v)
{
	for (int t = 0; t < STORE_NTABLES; t++) {
		struct refs rs;
		int e;

		refs_init(&rs, v, &STORE_TABLES[t]);
		if (rs.n && (e = store_table__each(&STORE_TABLES[t], v->b, check_record, &rs)))
			return (enum batch_error)e;
	}
	return BATCH_OK;
}

/* Value checks beyond indexes. */
static enum batch_error check_values(const struct vctx *v)
{
	const Strata__V1__Batch *b = v->b;

	for (size_t i = 0; i < b->n_probe_duty; i++)
		CHECK(b->probe_duty[i]->ratio >= 0 && b->probe_duty[i]->ratio <= 1,
		      "probe_duty[%zu]: ratio outside [0, 1]", i);
	for (size_t i = 0; i < b->n_nccl_collectives; i++)
		CHECK(b->nccl_collectives[i]->exit_ns >= b->nccl_collectives[i]->entry_ns,
		      "nccl_collectives[%zu]: exit before entry", i);
	return BATCH_OK;
}

enum batch_error batch_validate(const Strata__V1__Batch *b, const struct batch_limits *lim,
				char *err, size_t errsz)
{
	const struct vctx ctx = { b, lim, err, errsz }, *v = &ctx;
	enum batch_error e;

	if (b->version != STRATA__V1__WIRE_VERSION__WIRE_VERSION_CURRENT)
		return fail(err, errsz, BATCH_BAD_VERSION,
			    "unsupported wire version %u (this server speaks %d)", b->version,
			    STRATA__V1__WIRE_VERSION__WIRE_VERSION_CURRENT);
	CHECK(b->batch_id.len == BATCH_ID_LEN, "batch_id must be %d bytes, not %zu", BATCH_ID_LEN,
	      b->batch_id.len);
	CHECK(b->node && b->node[0] && strlen(b->node) <= MAX_NODE_NAME, "node must be 1..%d bytes",
	      MAX_NODE_NAME);
	CHECK(b->end_ns >= b->start_ns && b->start_ns > 0, "bad time window [%llu, %llu)",
	      (unsigned long long)b->start_ns, (unsigned long long)b->end_ns);
	CHECK(b->n_strings == 0 || (b->strings[0] && !b->strings[0][0]), "strings[0] must be \"\"");
	if ((e = check_processes(v)) || (e = check_stacks(v)) || (e = check_records(v)) ||
	    (e = check_values(v)))
		return e;
	return BATCH_OK;
}

enum batch_error batch_decode(const void *wire, size_t n, const struct batch_limits *lim,
			      Strata__V1__Batch **out, size_t *raw_len, char *err, size_t errsz)
{
	size_t max_wire = lim && lim->max_wire ? lim->max_wire : DEFAULT_MAX_WIRE;
	size_t max_raw = lim && lim->max_raw ? lim->max_raw : DEFAULT_MAX_RAW;
	struct mem_budget *shared = lim ? lim->budget : NULL;
	ProtobufCAllocator freer = pb_budget__freer();
	struct pb_budget pb;
	Strata__V1__Batch *b;
	uint8_t *raw = NULL;
	size_t len = 0, held = 0;
	enum batch_error e;

	*out = NULL;
	if (n > max_wire)
		return fail(err, errsz, BATCH_TOO_LARGE, "batch of %zu bytes (at most %zu)", n,
			    max_wire);
	e = unzstd(wire, n, max_raw, shared, &raw, &len, &held, err, errsz);
	if (e)
		return e;
	if (raw_len)
		*raw_len = len;
	/* max_raw bounds the whole decode: what is left of it after the
	 * decompressed bytes is what the unpacked structures may take */
	pb_budget__init(&pb, max_raw - held, shared);
	b = strata__v1__batch__unpack(&pb.a, len, raw);
	free(raw);
	mem_budget__give(shared, held);
	if (!b && pb.shared_refused)
		return fail(err, errsz, BATCH_BUSY, "server busy: decode memory at its bound");
	if (!b && pb.max_refused)
		return fail(err, errsz, BATCH_TOO_LARGE,
			    "batch decodes to more than %zu bytes of memory", max_raw);
	if (!b)
		return fail(err, errsz, BATCH_BAD_PROTO,
			    "not a strata batch (protobuf decode failed)");
	e = batch_validate(b, lim, err, errsz);
	/* What only strata-server writes (its derived records) never comes
	 * from outside. */
	if (!e && (b->n_collective_stats || b->n_hangs || b->n_captures ||
		   !strcmp(b->node, STORE_SERVER_NODE)))
		e = fail(err, errsz, BATCH_INVALID, "%s",
			 strcmp(b->node, STORE_SERVER_NODE)
				 ? "collective_stats, hangs and captures are strata-server's own"
				 : "node name " STORE_SERVER_NODE " is reserved");
	if (e) {
		strata__v1__batch__free_unpacked(b, &freer);
		return e;
	}
	*out = b;
	return BATCH_OK;
}

void batch_decode__free(Strata__V1__Batch *b)
{
	ProtobufCAllocator freer = pb_budget__freer();

	if (b) /* every allocation of b gives its bytes back to the budget */
		strata__v1__batch__free_unpacked(b, &freer);
}
