// SPDX-License-Identifier: Apache-2.0
/*
 * strata-server below HTTP: the batch decoder's limits and checks, central
 * symbolization (a real ELF uploaded to the build-id store: resolved; a
 * build-id the store lacks: unresolved and reported missing, never named),
 * and the SQLite store (atomic ingest, dedup, filters, retention).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zstd.h>

#include <cmocka.h>

#include "lib/profile.h"
#include "server/batch_decode.h"
#include "server/buildid_store.h"
#include "server/central_sym.h"
#include "lib/clock.h"
#include "server/store.h"
#include "server/store/sqlite.h"
#include "symbolize/buildid.h"
#include "test_util.h"
#include "uploader/batch_builder.h"

static uint8_t *zstd_of(const void *raw, size_t n, size_t *len)
{
	size_t cap = ZSTD_compressBound(n);
	uint8_t *z = malloc(cap);

	assert_non_null(z);
	*len = ZSTD_compress(z, cap, raw, n, 1);
	assert_false(ZSTD_isError(*len));
	return z;
}

/* The file offset of code at fn in this binary, from /proc/self/maps. */
static uint64_t self_offset(const void *fn)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long long lo, hi, off;
	char line[512];
	uint64_t a = (uint64_t)(uintptr_t)fn, ret = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %*s %llx", &lo, &hi, &off) == 3 && a >= lo && a < hi)
			ret = a - lo + off;
	fclose(f);
	assert_true(ret > 0);
	return ret;
}

/* A batch from the builder: two ranks, native frames in this test binary
 * (its real build-id) and in a made-up file. */
static uint8_t *make_batch(uint64_t start_s, size_t *len, uint8_t *self_id, int *self_len)
{
	static const uint8_t fake[20] = { 0xfa, 0xce };
	struct batch_builder_opts o = { .sz = sizeof(o), .node = "n1" };
	struct batch_builder *bb = batch_builder__new(&o);
	struct batch_meta m = { .start_ns = start_s * 1000000000ull,
				.end_ns = (start_s + 10) * 1000000000ull,
				.freq_hz = 49 };
	uint8_t *z;

	*self_len = build_id_read("/proc/self/exe", -1, self_id, BUILD_ID_MAX);
	assert_true(*self_len > 0);
	/* a frame inside make_batch itself */
	struct bb_frame f[4] = {
		{ .kind = STRATA__V1__FRAME__KIND__NATIVE,
		  .build_id = self_id,
		  .build_id_len = (size_t)*self_len,
		  .path = "/proc/self/exe",
		  .addr = self_offset((const void *)make_batch) + 4 },
		{ .kind = STRATA__V1__FRAME__KIND__NATIVE,
		  .build_id = fake,
		  .build_id_len = 20,
		  .path = "/opt/libfake.so",
		  .addr = 0x1234,
		  .is_return = 1 },
		{ .kind = STRATA__V1__FRAME__KIND__PYTHON,
		  .name = "Trainer.step",
		  .file = "train.py",
		  .line = 42 },
		{ .kind = STRATA__V1__FRAME__KIND__KERNEL,
		  .addr = 0xffffffff81000000ull,
		  .name = "schedule" },
	};
	for (int r = 0; r < 2; r++) {
		struct bb_process p = { .pid = 100 + (uint32_t)r,
					.start_time_ns = 1,
					.comm = "trainer",
					.job = "job-u",
					.container = r ? "c1" : "c0",
					.has_rank = 1,
					.rank = r,
					.local_rank = r,
					.world_size = 2 };
		int64_t i = batch_builder__process(bb, &p);

		assert_true(i >= 0);
		assert_int_equal(
			batch_builder__add(bb, (uint32_t)i, 100, "t", f, 4, 10 + (uint64_t)r), 0);
	}
	assert_int_equal(batch_builder__finish(bb, &m, &z, len), 0);
	batch_builder__free(bb);
	return z;
}

static void test_decode_limits(void **state)
{
	uint8_t id[BUILD_ID_MAX], *z, *zz;
	int idlen;
	size_t len, zl, raw;
	struct batch_limits lim = { .max_wire = 1 << 20, .max_raw = 1 << 20 };
	Strata__V1__Batch *b;
	char err[256];
	void *zeros = calloc(1, 8 << 20);

	z = make_batch(1700000000, &len, id, &idlen);
	assert_int_equal(batch_decode(z, len, &lim, &b, &raw, err, sizeof(err)), BATCH_OK);
	assert_true(raw > len);
	batch_decode__free(b);
	assert_int_equal(batch_decode(z, len / 2, &lim, &b, NULL, err, sizeof(err)),
			 BATCH_NOT_ZSTD);
	assert_null(b);
	assert_int_equal(batch_decode("hello", 5, &lim, &b, NULL, err, sizeof(err)),
			 BATCH_NOT_ZSTD);
	lim.max_wire = len - 1;
	assert_int_equal(batch_decode(z, len, &lim, &b, NULL, err, sizeof(err)), BATCH_TOO_LARGE);
	lim.max_wire = 1 << 20;
	/* a bomb: 8 MiB of zeros in a few hundred bytes */
	zz = zstd_of(zeros, 8 << 20, &zl);
	assert_true(zl < 4096);
	assert_int_equal(batch_decode(zz, zl, &lim, &b, NULL, err, sizeof(err)), BATCH_TOO_LARGE);
	assert_non_null(strstr(err, "decompresses to more than"));
	free(zz);
	/* zeros within the bound: not a batch (a valid empty protobuf of
	 * version 0 at best) */
	zz = zstd_of(zeros, 1000, &zl);
	assert_int_not_equal(batch_decode(zz, zl, &lim, &b, NULL, err, sizeof(err)), BATCH_OK);
	free(zz);
	free(zeros);
	free(z);
}

static void test_validate(void **state)
{
	uint8_t id[BUILD_ID_MAX], *z;
	int idlen;
	size_t len;
	Strata__V1__Batch *b;
	char err[256];

	z = make_batch(1700000000, &len, id, &idlen);
	assert_int_equal(batch_decode(z, len, NULL, &b, NULL, err, sizeof(err)), BATCH_OK);
	assert_int_equal(batch_validate(b, NULL, err, sizeof(err)), BATCH_OK);
	b->version = 2;
	assert_int_equal(batch_validate(b, NULL, err, sizeof(err)), BATCH_BAD_VERSION);
	b->version = 1;
	b->cpu_samples[0]->process = 9;
	assert_int_equal(batch_validate(b, NULL, err, sizeof(err)), BATCH_INVALID);
	assert_non_null(strstr(err, "process 9 out of range"));
	b->cpu_samples[0]->process = 0;
	b->stacks[1]->frames[0]->mapping = 77;
	assert_int_equal(batch_validate(b, NULL, err, sizeof(err)), BATCH_INVALID);
	b->stacks[1]->frames[0]->mapping = 0;
	b->processes[0]->comm_str = 5000;
	assert_int_equal(batch_validate(b, NULL, err, sizeof(err)), BATCH_INVALID);
	b->processes[0]->comm_str = 0;
	b->batch_id.len = 3;
	assert_int_equal(batch_validate(b, NULL, err, sizeof(err)), BATCH_INVALID);
	batch_decode__free(b);
	free(z);
}

struct sum_ctx {
	uint64_t total;
	int named_fake; /* a frame of the fake library got a name */
	int named_make_batch;
	int resolved_self;
	int late_resolved;  /* an unresolved stored frame resolved at query time */
	int python, kernel; /* frames passed through with the agent's names */
	int unresolved_self;
};

static struct central_sym *late_sym; /* test harness state, not library state */

static int sum_row(void *ctx, const struct store_sample *s)
{
	struct sum_ctx *c = ctx;

	c->total += s->value;
	for (uint32_t i = 0; i < s->stack->nframes; i++) {
		const struct store_frame *f = &s->stack->frames[i];

		if (f->module && !strcmp(f->module, "/opt/libfake.so") && f->func)
			c->named_fake = 1;
		if (f->kind == STORE_FRAME_PYTHON && f->func && !strcmp(f->func, "Trainer.step") &&
		    f->file && !strcmp(f->file, "train.py") && f->line == 42 &&
		    (f->flags & PROFILE_FRAME_PYTHON))
			c->python = 1;
		if (f->kind == STORE_FRAME_KERNEL && f->func && !strcmp(f->func, "schedule") &&
		    (f->flags & PROFILE_FRAME_KERNEL))
			c->kernel = 1;
		if (f->module && !strcmp(f->module, "/proc/self/exe")) {
			struct sym_frame late[SYM_MAX_INLINE];
			struct sym_gen *gen;
			uint32_t queued = 0;

			if (late_sym && central_sym__resolve_late(late_sym, f, late, SYM_MAX_INLINE,
								  &queued, &gen) > 0) {
				c->late_resolved = !strcmp(late[0].func, "make_batch");
				central_sym__release(late_sym, gen);
			}
			if (f->func)
				c->resolved_self = 1;
			if (f->func && !strcmp(f->func, "make_batch"))
				c->named_make_batch = 1;
			else
				c->unresolved_self = 1;
		}
	}
	return 0;
}

static uint64_t profile_total(struct store *st, const struct store_filter *f, struct sum_ctx *c)
{
	memset(c, 0, sizeof(*c));
	assert_int_equal(st->ops->profile(st, f, STORE_PROFILE_CPU, sum_row, c), 0);
	return c->total;
}

static int ingest(struct store *st, struct central_sym *cs, uint64_t start_s,
		  struct sym_batch *sb_out, uint8_t *id, int *idlen)
{
	size_t len;
	uint8_t *z = make_batch(start_s, &len, id, idlen);
	Strata__V1__Batch *b;
	struct sym_batch sb = { 0 };
	char err[256];
	int ret;

	assert_int_equal(batch_decode(z, len, NULL, &b, NULL, err, sizeof(err)), BATCH_OK);
	assert_int_equal(central_sym__batch(cs, b, &sb), 0);
	struct store_batch stb = {
		.pb = b, .stacks = sb.stacks, .received_ns = 1, .wire_bytes = len
	};
	ret = st->ops->ingest(st, &stb);
	if (sb_out) {
		*sb_out = sb;
		sb_out->stacks = NULL; /* caller only reads missing[] */
		sb_out->frames = NULL;
		sb_out->hex = NULL;
	}
	/* a second time: the same batch id is refused as a duplicate */
	assert_int_equal(st->ops->ingest(st, &stb), 1);
	sym_batch__fini(&sb);
	batch_decode__free(b);
	free(z);
	return ret;
}

static void test_store_and_symbolize(void **state)
{
	char dir[] = "/tmp/strata-store-XXXXXX", db[600], bdir[600], cmd[700], err[256];
	struct store *st;
	struct buildid_store *bids;
	struct central_sym *cs;
	struct sym_batch sb;
	struct sum_ctx c;
	struct store_filter f = { 0 };
	uint8_t id[BUILD_ID_MAX];
	char hex[2 * BUILD_ID_MAX + 1];
	int idlen;
	uint64_t deleted = 0;

	assert_non_null(mkdtemp(dir));
	snprintf(db, sizeof(db), "sqlite:%s/db", dir);
	snprintf(bdir, sizeof(bdir), "%s/buildids", dir);
	st = store__open(db, err, sizeof(err));
	assert_non_null(st);
	bids = buildid_store__open(bdir, 1 << 30, 0);
	cs = central_sym__new(bids, 0);
	assert_non_null(bids);
	assert_non_null(cs);
	assert_null(store__open("mysql://x", err, sizeof(err)));
	/* an in-memory database would be one per connection: readers see none */
	assert_null(store__open("sqlite::memory:", err, sizeof(err)));
	assert_non_null(strstr(err, "file path"));
	assert_null(store__open("sqlite:", err, sizeof(err)));

	/* no files uploaded yet: every native frame unresolved, both build-ids
	 * reported missing */
	assert_int_equal(ingest(st, cs, 1700000000, &sb, id, &idlen), 0);
	assert_int_equal(sb.nmissing, 2);
	assert_int_equal(profile_total(st, &f, &c), 21);
	assert_false(c.named_fake);
	assert_false(c.resolved_self);
	assert_true(c.unresolved_self);
	assert_true(c.python);
	assert_true(c.kernel);

	/* upload this binary: a wrong id is refused, the right one stored */
	size_t n;
	void *elf = read_all("/proc/self/exe", &n);
	build_id_hex(id, (size_t)idlen, hex, sizeof(hex));
	assert_int_equal(
		buildid_store__put(bids, "00112233445566778899aabbccddeeff00112233", elf, n),
		-ENOEXEC);
	assert_int_equal(buildid_store__put(bids, hex, elf, n), 0);
	assert_int_equal(buildid_store__put(bids, "ZZ", elf, n), -EINVAL);
	free(elf);

	/* a later window: this binary's frame resolves to make_batch; the
	 * fake library's stays unnamed */
	assert_int_equal(ingest(st, cs, 1700000010, &sb, id, &idlen), 0);
	assert_int_equal(sb.nmissing, 1); /* only the fake library */
	f.from_ns = 1700000010ull * 1000000000ull;
	assert_int_equal(profile_total(st, &f, &c), 21);
	assert_true(c.named_make_batch);
	assert_false(c.unresolved_self);
	assert_false(c.named_fake);
	/* the first window's frame was stored unresolved: it can be resolved
	 * late, now that the file is here */
	f.from_ns = 0;
	f.to_ns = 1700000005ull * 1000000000ull;
	late_sym = cs;
	assert_int_equal(profile_total(st, &f, &c), 21);
	assert_true(c.unresolved_self);
	assert_true(c.late_resolved);
	late_sym = NULL;
	f.to_ns = 0;
	assert_int_equal(profile_total(st, &f, &c), 42);

	/* filters */
	f.has_rank = 1;
	f.rank = 1;
	assert_int_equal(profile_total(st, &f, &c), 22);
	f.rank_negate = 1;
	assert_int_equal(profile_total(st, &f, &c), 20);
	memset(&f, 0, sizeof(f));
	f.container = "c0";
	assert_int_equal(profile_total(st, &f, &c), 20);
	f.container = NULL;
	f.from_ns = 1700000010ull * 1000000000ull;
	assert_int_equal(profile_total(st, &f, &c), 21);
	f.from_ns = 0;
	f.job = "nope";
	assert_int_equal(profile_total(st, &f, &c), 0);
	f.job = NULL;

	/* retention: the first window goes, the second stays */
	assert_int_equal(st->ops->retain(st, 1700000015ull * 1000000000ull, &deleted), 0);
	assert_int_equal(deleted, 1);
	assert_int_equal(profile_total(st, &f, &c), 21);
	struct store_stats ss;
	assert_int_equal(st->ops->stats(st, &ss), 0);
	assert_int_equal(ss.batches, 2);
	assert_int_equal(ss.duplicates, 2);
	assert_int_equal(ss.retention_deleted, 1);
	struct store_sizes sz;
	assert_int_equal(st->ops->sizes(st, &sz), 0);
	assert_true(sz.cpu_rows > 0 && sz.stacks > 0 && sz.bytes_on_disk > 0);

	central_sym__free(cs);
	buildid_store__free(bids);
	store__close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* sqlite:PATH?sync=full|normal: the file is PATH; another option is
 * refused with the reason; a '?' in a directory's name is part of PATH. */
/* Symbolizes the batch starting at start_s, sb held (not finished). */
static void symbolize_held(struct central_sym *cs, uint64_t start_s, struct sym_batch *sb,
			   Strata__V1__Batch **b, uint8_t **z)
{
	uint8_t id[BUILD_ID_MAX];
	char err[256];
	size_t len;
	int idlen;

	*z = make_batch(start_s, &len, id, &idlen);
	assert_int_equal(batch_decode(*z, len, NULL, b, NULL, err, sizeof(err)), BATCH_OK);
	memset(sb, 0, sizeof(*sb));
	assert_int_equal(central_sym__batch(cs, *b, sb), 0);
}

/* The first frame of sb named func, or NULL. */
static const char *named(const struct sym_batch *sb, const char *func)
{
	for (size_t i = 0; i < sb->nframes; i++)
		if (sb->frames[i].func && !strcmp(sb->frames[i].func, func))
			return sb->frames[i].func;
	return NULL;
}

/* Late resolution (the query threads' way) in a loop, reading the names
 * after the lock is released, until the central symbolizer is released. */
struct late_loop {
	struct central_sym *cs;
	const char *hex;
	int iters, named;
};

static void *late_loop(void *p)
{
	struct late_loop *a = p;
	struct store_frame f = { .kind = PROFILE_KIND_NATIVE,
				 .flags = PROFILE_FRAME_UNRESOLVED,
				 .build_id = a->hex,
				 .addr = self_offset((const void *)make_batch) + 4 };

	for (int i = 0; i < a->iters; i++) {
		struct sym_frame out[SYM_MAX_INLINE];
		struct sym_gen *g;
		uint32_t queued = 0;

		if (central_sym__resolve_late(a->cs, &f, out, SYM_MAX_INLINE, &queued, &g) > 0 &&
		    !strcmp(out[0].func, "make_batch"))
			a->named++;
		central_sym__release(a->cs, g);
	}
	return NULL;
}

/*
 * The symbolizer's names and the stack cache's strings are never freed one
 * by one; past their budgets a fresh generation takes over and the old
 * one is freed once the last batch holding its strings is done.  With a
 * 1-byte budget every batch starts one: a batch symbolized before keeps
 * its names (ASan: no use after free), totals never go back, and each
 * generation is freed exactly when its last holder lets go.  Before, the
 * stack cache refused for good past 256 MiB and the symbolizer's names
 * grew without bound over the server's uptime.
 */
static void test_symbol_generations(void **state)
{
	char dir[] = "/tmp/strata-gen-XXXXXX", bdir[600], cmd[700], hex[2 * BUILD_ID_MAX + 1];
	struct sym_batch sb1, sb2, sb3;
	Strata__V1__Batch *b1, *b2, *b3;
	uint8_t *z1, *z2, *z3, id[BUILD_ID_MAX];
	struct central_sym_stats st;
	struct buildid_store *bids;
	struct central_sym *cs;
	const char *name1;
	uint64_t lookups;
	size_t n, len;
	int idlen;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(bdir, sizeof(bdir), "%s/buildids", dir);
	bids = buildid_store__open(bdir, 1 << 30, 0);
	assert_non_null(bids);
	cs = central_sym__new(bids, 0);
	assert_non_null(cs);
	free(make_batch(1700000000, &len, id, &idlen));
	void *elf = read_all("/proc/self/exe", &n);
	build_id_hex(id, (size_t)idlen, hex, sizeof(hex));
	assert_int_equal(buildid_store__put(bids, hex, elf, n), 0);
	free(elf);

	/* default budgets: one generation */
	symbolize_held(cs, 1700000000, &sb1, &b1, &z1);
	central_sym__stats(cs, &st);
	assert_int_equal(st.generations, 0);
	assert_non_null(named(&sb1, "make_batch"));
	sym_batch__fini(&sb1);
	batch_decode__free(b1);
	free(z1);

	central_sym__set_budgets(cs, 1, 1);
	symbolize_held(cs, 1700000010, &sb1, &b1, &z1); /* ends generation 1 */
	name1 = named(&sb1, "make_batch");
	assert_non_null(name1);
	central_sym__stats(cs, &st);
	assert_int_equal(st.generations, 1);
	assert_int_equal(st.generations_freed, 0); /* sb1 holds it */
	lookups = st.lookups;
	symbolize_held(cs, 1700000020, &sb2, &b2, &z2); /* ends generation 2 */
	symbolize_held(cs, 1700000030, &sb3, &b3, &z3); /* ends generation 3 */
	assert_non_null(named(&sb2, "make_batch"));
	assert_string_equal(name1, "make_batch"); /* sb1's strings are still there */
	central_sym__stats(cs, &st);
	assert_int_equal(st.generations, 3);
	assert_int_equal(st.generations_freed, 0);
	assert_true(st.lookups > lookups); /* the retired ones' counters kept */
	assert_true(st.frames_resolved >= 3);
	sym_batch__fini(&sb2); /* out of order: generation 2 first */
	central_sym__stats(cs, &st);
	assert_int_equal(st.generations_freed, 1);
	sym_batch__fini(&sb1);
	sym_batch__fini(&sb3);
	central_sym__stats(cs, &st);
	assert_int_equal(st.generations_freed, 3);
	batch_decode__free(b1);
	batch_decode__free(b2);
	batch_decode__free(b3);
	free(z1);
	free(z2);
	free(z3);

	/* a query thread resolving late while batches start generation after
	 * generation: each reads names the other's rotation may retire */
	struct late_loop ll = { .cs = cs, .hex = hex, .iters = 100 };
	pthread_t th;

	assert_int_equal(pthread_create(&th, NULL, late_loop, &ll), 0);
	for (int i = 0; i < 10; i++) {
		symbolize_held(cs, 1700000100 + 10 * (uint64_t)i, &sb1, &b1, &z1);
		assert_non_null(named(&sb1, "make_batch"));
		sym_batch__fini(&sb1);
		batch_decode__free(b1);
		free(z1);
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(ll.named, ll.iters);
	central_sym__stats(cs, &st);
	assert_int_equal(st.generations_freed, st.generations); /* every retired one */
	central_sym__free(cs);
	buildid_store__free(bids);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_sqlite_spec(void **state)
{
	char dir[] = "/tmp/strata-spec-XXXXXX", spec[600], path[600], cmd[700], err[256] = "";
	const char *opts[] = { "", "?sync=normal", "?sync=full" };
	struct store *st;

	(void)state;
	assert_non_null(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		snprintf(spec, sizeof(spec), "sqlite:%s/db%zu%s", dir, i, opts[i]);
		snprintf(path, sizeof(path), "%s/db%zu", dir, i);
		st = store__open(spec, err, sizeof(err));
		assert_non_null(st);
		store__close(st);
		assert_int_equal(access(path, F_OK), 0);
		assert_int_equal(store_sqlite__path_len(spec + 7), strlen(path));
	}
	snprintf(spec, sizeof(spec), "sqlite:%s/dbx?sync=off", dir);
	assert_null(store__open(spec, err, sizeof(err)));
	assert_non_null(strstr(err, "?sync=off"));
	snprintf(path, sizeof(path), "%s/a?b", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(spec, sizeof(spec), "sqlite:%s/a?b/db", dir);
	st = store__open(spec, err, sizeof(err));
	assert_non_null(st);
	store__close(st);
	snprintf(path, sizeof(path), "%s/a?b/db", dir);
	assert_int_equal(access(path, F_OK), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_filter_match(void **state)
{
	struct store_filter f = { .node = "n1", .has_rank = 1, .rank = 2 };

	assert_true(store_filter__match_process(&f, "n1", 5, "j", "", 1, 2));
	assert_false(store_filter__match_process(&f, "n2", 5, "j", "", 1, 2));
	assert_false(store_filter__match_process(&f, "n1", 5, "j", "", 0, 0));
	f.rank_negate = 1;
	assert_false(store_filter__match_process(&f, "n1", 5, "j", "", 1, 2));
	assert_true(store_filter__match_process(&f, "n1", 5, "j", "", 1, 3));
}

static void test_stack_id(void **state)
{
	struct store_frame a = { .kind = 1, .func = NULL, .module = "m", .addr = 1 };
	struct store_frame b = a;

	b.func = "";
	/* unresolved (NULL) and named "" never share an id */
	assert_int_not_equal(store_stack__id(&a, 1), store_stack__id(&b, 1));
	assert_int_not_equal(store_stack__id(&a, 0), 0);
}

static int count_rows(void *ctx, sqlite3_stmt *st)
{
	(void)st;
	++*(uint64_t *)ctx;
	return 0;
}

/*
 * A read past its thread's deadline is interrupted (-ETIMEDOUT) and the
 * reader connection serves the next read: no query holds a query thread
 * longer than STORE_QUERY_MAX_NS (200 ms here; the read is a count to
 * 10^12, which SQLite takes hours over).  A thread without a deadline (the
 * diagnosis engine's) reads unbounded.  A read whose client has gone stops
 * at the next check (asked at most every STORE_GONE_CHECK_NS).
 */
static bool gone_after_calls(void *ctx)
{
	int *calls = ctx;

	return ++*calls >= 3;
}

#define COUNT_FOREVER                                                                              \
	"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000000000) " \
	"SELECT max(i) FROM n"

static void test_read_deadline(void **state)
{
	char dir[] = "/tmp/strata-deadline-XXXXXX", spec[128], cmd[160], err[256] = "";
	struct sqlite_store *s;
	struct sq_conn *c;
	sqlite3_stmt *st;
	uint64_t n = 0, t0, next = 0;
	int calls = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(spec, sizeof(spec), "sqlite:%s/db", dir);
	s = (struct sqlite_store *)store__open(spec, err, sizeof(err));
	assert_non_null(s);
	assert_false(store__read_over(&next)); /* no bound set on this thread */
	store__set_read_deadline(mono_ns() + 200000000ull);
	c = sq_reader(s);
	assert_int_equal(sqlite3_prepare_v2(c->db, COUNT_FOREVER, -1, &st, NULL), SQLITE_OK);
	t0 = mono_ns();
	assert_int_equal(sq_run(st, count_rows, &n), -ETIMEDOUT);
	assert_true(mono_ns() - t0 < 20000000000ull);
	pthread_mutex_unlock(&c->lock);
	store__set_read_deadline(0);
	/* the client leaves: asked every 20 ms, gone at the third question */
	store__set_read_client(gone_after_calls, &calls);
	c = sq_reader(s);
	assert_int_equal(sqlite3_prepare_v2(c->db, COUNT_FOREVER, -1, &st, NULL), SQLITE_OK);
	t0 = mono_ns();
	assert_int_equal(sq_run(st, count_rows, &n), -ETIMEDOUT);
	assert_int_equal(calls, 3);
	assert_true(mono_ns() - t0 >= 2 * STORE_GONE_CHECK_NS);
	assert_true(mono_ns() - t0 < 20000000000ull);
	pthread_mutex_unlock(&c->lock);
	store__set_read_client(NULL, NULL);
	c = sq_reader(s); /* no deadline: the next read runs */
	assert_int_equal(sqlite3_prepare_v2(c->db, "SELECT 1", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sq_run(st, count_rows, &n), 0);
	assert_int_equal(n, 1);
	pthread_mutex_unlock(&c->lock);
	store__close(&s->base);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_limits),
		cmocka_unit_test(test_validate),
		cmocka_unit_test(test_store_and_symbolize),
		cmocka_unit_test(test_symbol_generations),
		cmocka_unit_test(test_sqlite_spec),
		cmocka_unit_test(test_read_deadline),
		cmocka_unit_test(test_filter_match),
		cmocka_unit_test(test_stack_id),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
