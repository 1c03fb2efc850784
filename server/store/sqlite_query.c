// SPDX-License-Identifier: Apache-2.0
/*
 * SQLite queries: SQL built with bound parameters (never a value spliced
 * into the text), run on a reader connection, rows handed to the shared
 * row reader (server/store/backend.h) with their stacks loaded once each.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"
#include "lib/vec.h"
#include "server/store/sqlite.h"

/* ---- query building ------------------------------------------------------------ */

void sq_add(struct sq_query *q, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(q->sql + q->len, sizeof(q->sql) - q->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(q->sql) - q->len)
		q->overflow = 1;
	else
		q->len += (size_t)n;
}

void sq_int(struct sq_query *q, int64_t v)
{
	if (q->nbind >= SQ_MAX_BINDS) {
		q->overflow = 1;
		return;
	}
	q->binds[q->nbind].is_text = 0;
	q->binds[q->nbind++].i = v;
}

void sq_text(struct sq_query *q, const char *t)
{
	if (q->nbind >= SQ_MAX_BINDS) {
		q->overflow = 1;
		return;
	}
	q->binds[q->nbind].is_text = 1;
	q->binds[q->nbind++].t = t;
}

/*
 * " AND ..." conditions for the filter over batches b and processes p;
 * time_col, when set, is the event time column, else the batch window.
 */
void sq_and_text(struct sq_query *q, const char *cond, const char *t)
{
	if (t && t[0]) {
		sq_add(q, "%s", cond);
		sq_text(q, t);
	}
}

/* " AND from_col OP from AND to_col < to", each bound when set. */
static void range(struct sq_query *q, const struct store_filter *f, const char *from_col,
		  const char *op, const char *to_col)
{
	if (f->from_ns) {
		sq_add(q, " AND %s %s ?", from_col, op);
		sq_int(q, sq_i64(f->from_ns));
	}
	if (f->to_ns) {
		sq_add(q, " AND %s < ?", to_col);
		sq_int(q, sq_i64(f->to_ns));
	}
}

void sq_window(struct sq_query *q, const struct store_filter *f, const char *end_col,
	       const char *start_col)
{
	range(q, f, end_col, ">", start_col);
}

void sq_filter(struct sq_query *q, const struct store_filter *f, const char *time_col)
{
	if (!time_col && f->batch_by_end)
		time_col = "b.end_ns";
	if (time_col) /* events in the range */
		range(q, f, time_col, ">=", time_col);
	else /* batches overlapping it */
		sq_window(q, f, "b.end_ns", "b.start_ns");
	sq_and_text(q, " AND p.node = ?", f->node);
	if (f->pid) {
		sq_add(q, " AND p.pid = ?");
		sq_int(q, f->pid);
	}
	sq_and_text(q, " AND p.job = ?", f->job);
	sq_and_text(q, " AND p.container = ?", f->container);
	if (f->has_rank) {
		sq_add(q, " AND p.has_rank AND p.rank %s ?", f->rank_negate ? "<>" : "=");
		sq_int(q, f->rank);
	}
}

void sq_proc_filter(struct sq_query *q, const struct store_filter *f)
{
	struct store_filter g = *f;

	g.from_ns = g.to_ns = 0;
	sq_filter(q, &g, NULL);
	sq_window(q, f, "p.last_ns", "p.first_ns");
}

static int q_prepare(struct sq_query *q, sqlite3 *db, sqlite3_stmt **st)
{
	if (q->overflow || sqlite3_prepare_v2(db, q->sql, (int)q->len, st, NULL) != SQLITE_OK)
		return -EIO;
	for (int i = 0; i < q->nbind; i++) {
		if (q->binds[i].is_text)
			sqlite3_bind_text(*st, i + 1, q->binds[i].t, -1, SQLITE_STATIC);
		else
			sqlite3_bind_int64(*st, i + 1, q->binds[i].i);
	}
	return 0;
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	const char *t = (const char *)sqlite3_column_text(st, i);

	return t ? t : "";
}

uint64_t sq_col_u64(sqlite3_stmt *st, int i)
{
	return (uint64_t)sqlite3_column_int64(st, i);
}

/* Runs a prepared query, calling row(ctx, st) per row; row != 0 stops. */
/* A failed step's errno: a read past its deadline is -ETIMEDOUT. */
static int step_err(int rc)
{
	return rc == SQLITE_INTERRUPT ? -ETIMEDOUT : -EIO;
}

int sq_run(sqlite3_stmt *st, int (*row)(void *ctx, sqlite3_stmt *st), void *ctx)
{
	int rc, ret = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ret = row(ctx, st);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = step_err(rc);
	sqlite3_finalize(st);
	return ret;
}

/* ---- stack cache for one query ----------------------------------------------------------- */

/* Frames of the stacks a query meets, loaded once each. */
struct sq_cached_stack {
	struct store_stack st;
	struct store_frame *frames;
	char *strings; /* one block for all the frames' strings */
};

struct sq_stack_cache {
	sqlite3_stmt *load;
	struct profile_htab ids;
	struct vec v; /* struct sq_cached_stack, indexed by id in ids */
};

static struct sq_cached_stack *cached(const struct sq_stack_cache *c, int64_t i)
{
	return &((struct sq_cached_stack *)c->v.v)[i];
}

static int stack_cache__init(struct sq_stack_cache *c, sqlite3 *db)
{
	memset(c, 0, sizeof(*c));
	return sqlite3_prepare_v2(db,
				  "SELECT kind,flags,func,file,line,module,build_id,addr FROM "
				  "stack_frames WHERE stack_id=? ORDER BY depth",
				  -1, &c->load, NULL) == SQLITE_OK
		       ? 0
		       : -EIO;
}

static void stack_cache__fini(struct sq_stack_cache *c)
{
	for (uint32_t i = 0; i < c->v.n; i++) {
		free(cached(c, i)->frames);
		free(cached(c, i)->strings);
	}
	free(c->v.v);
	profile_htab__fini(&c->ids);
	sqlite3_finalize(c->load);
}

static int id_eq(uint32_t idx, const void *key, const void *ctx)
{
	const struct sq_stack_cache *c = ctx;

	return cached(c, idx)->st.id == *(const uint64_t *)key;
}

static const char *dup_col(sqlite3_stmt *st, int i, char **pos)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	size_t n;
	char *d;

	if (!t)
		return NULL;
	n = strlen((const char *)t) + 1;
	d = *pos;
	memcpy(d, t, n);
	*pos += n;
	return d;
}

/* The stack id's frames, loaded once; NULL with *err set. */
static const struct store_stack *stack_cache__get(struct sq_stack_cache *c, uint64_t id, int *err)
{
	uint64_t h = hash_bytes(&id, sizeof(id), 0);
	int64_t found = profile_htab__find(&c->ids, h, id_eq, &id, c);
	struct sq_cached_stack cs = { .st.id = id };
	size_t nf = 0, cap = 0, bytes = 0;
	int rc;

	*err = -ENOMEM;
	if (found >= 0)
		return &cached(c, found)->st;
	/* Two passes over the rows: sizes, then copies (rows are few). */
	sqlite3_bind_int64(c->load, 1, sq_i64(id));
	while ((rc = sqlite3_step(c->load)) == SQLITE_ROW) {
		nf++;
		for (int k = 2; k <= 6; k++)
			bytes += (size_t)sqlite3_column_bytes(c->load, k) + 1;
	}
	sqlite3_reset(c->load);
	if (rc != SQLITE_DONE) {
		*err = step_err(rc);
		return NULL;
	}
	cs.frames = calloc(nf ? nf : 1, sizeof(*cs.frames));
	cs.strings = malloc(bytes ? bytes : 1);
	if (!cs.frames || !cs.strings)
		goto nomem;
	char *pos = cs.strings;
	while ((rc = sqlite3_step(c->load)) == SQLITE_ROW && cap < nf) {
		struct store_frame *f = &cs.frames[cap++];

		f->kind = (uint32_t)sqlite3_column_int(c->load, 0);
		f->flags = (uint32_t)sqlite3_column_int(c->load, 1);
		f->func = dup_col(c->load, 2, &pos);
		f->file = dup_col(c->load, 3, &pos);
		f->line = (uint32_t)sqlite3_column_int(c->load, 4);
		f->module = dup_col(c->load, 5, &pos);
		f->build_id = dup_col(c->load, 6, &pos);
		f->addr = sq_col_u64(c->load, 7);
	}
	sqlite3_reset(c->load);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) { /* never a truncated stack */
		*err = step_err(rc);
		free(cs.frames);
		free(cs.strings);
		return NULL;
	}
	cs.st.frames = cs.frames;
	cs.st.nframes = (uint32_t)cap;
	found = vec_add_indexed(&c->v, &c->ids, h, &cs, sizeof(cs));
	if (found < 0)
		goto nomem;
	return &cached(c, found)->st;
nomem:
	free(cs.frames);
	free(cs.strings);
	return NULL;
}

/* ---- rows ---------------------------------------------------------------------------- */

static uint64_t row_u64(const struct store_row *r, int col)
{
	return sq_col_u64((sqlite3_stmt *)r->res, col);
}

static int64_t row_i64(const struct store_row *r, int col)
{
	return sqlite3_column_int64((sqlite3_stmt *)r->res, col);
}

static const char *row_str(const struct store_row *r, int col)
{
	return col_text((sqlite3_stmt *)r->res, col);
}

static int row_null(const struct store_row *r, int col)
{
	return sqlite3_column_type((sqlite3_stmt *)r->res, col) == SQLITE_NULL;
}

/* An unknown id is an empty stack; NULL on a failed read or without
 * memory. */
static int row_stack(const struct store_row *r, uint64_t id, const struct store_stack **out)
{
	int err;

	*out = stack_cache__get(r->stacks, id, &err);
	return *out ? 0 : err;
}

static const struct store_row_ops sqlite_row_ops = { row_u64, row_i64, row_str, row_null,
						     row_stack };

struct emit_ctx {
	struct store_row row;
	store_emit_fn emit;
	void *fn, *ctx;
};

static int emit_row(void *ctx, sqlite3_stmt *st)
{
	struct emit_ctx *e = ctx;

	e->row.res = st;
	return e->emit(&e->row, e->fn, e->ctx);
}

int sq_query_rows(struct sqlite_store *s, struct sq_query *q, store_emit_fn emit, void *fn,
		  void *ctx, int with_stacks)
{
	struct sq_conn *c = sq_reader(s);
	struct sq_stack_cache sc;
	struct emit_ctx e = { .row = { .ops = &sqlite_row_ops, .stacks = with_stacks ? &sc : NULL },
			      .emit = emit,
			      .fn = fn,
			      .ctx = ctx };
	sqlite3_stmt *st;
	int err = with_stacks ? stack_cache__init(&sc, c->db) : 0;

	if (!err)
		err = q_prepare(q, c->db, &st);
	if (!err)
		err = sq_run(st, emit_row, &e);
	if (with_stacks)
		stack_cache__fini(&sc);
	pthread_mutex_unlock(&c->lock);
	return err;
}
