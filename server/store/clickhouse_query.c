// SPDX-License-Identifier: Apache-2.0
/*
 * ClickHouse queries: the filter every query shares (committed attempts
 * only), the stacks a result names (loaded in batches of ids), and rows
 * handed to the shared row reader (server/store/backend.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "server/store/clickhouse.h"

#define STACK_IDS_PER_QUERY 2000

/* ---- filters ------------------------------------------------------------------ */

void ch_and_quoted(struct ch_sql *q, const char *cond, const char *t)
{
	if (t && t[0]) {
		ch_sql__add(q, "%s", cond);
		ch_sql__quote(q, t);
	}
}

void ch_filter(struct ch_store *s, struct ch_sql *q, const struct store_filter *f,
	       const char *time_col, int per_process)
{
	if (!time_col && f->batch_by_end)
		time_col = "b_end";
	if (f->from_ns)
		ch_sql__add(q, " AND %s %s %" PRIu64, time_col ? time_col : "b_end",
			    time_col ? ">=" : ">", f->from_ns);
	if (f->to_ns)
		ch_sql__add(q, " AND %s < %" PRIu64, time_col ? time_col : "b_start", f->to_ns);
	ch_and_quoted(q, " AND node = ", f->node);
	if (per_process) {
		if (f->pid)
			ch_sql__add(q, " AND pid = %" PRIu32, f->pid);
		ch_and_quoted(q, " AND job = ", f->job);
		ch_and_quoted(q, " AND container = ", f->container);
		if (f->has_rank)
			ch_sql__add(q, " AND has_rank = 1 AND rank %s %" PRId32,
				    f->rank_negate ? "!=" : "=", f->rank);
	}
	/* An event at t lies in its batch's window, so the window bounds the
	 * commit records to read either way. */
	ch_sql__add(q, " AND ingest IN (SELECT min(ingest) FROM %s.batches WHERE 1", s->db);
	if (f->from_ns)
		ch_sql__add(q, " AND end_ns %s %" PRIu64, f->batch_by_end ? ">=" : ">", f->from_ns);
	if (f->to_ns)
		ch_sql__add(q, " AND start_ns < %" PRIu64, f->to_ns);
	ch_sql__add(q, " GROUP BY batch_id)");
}

int ch_has_process_filter(const struct store_filter *f)
{
	return f->pid || (f->job && f->job[0]) || f->has_rank || (f->container && f->container[0]);
}

/* ---- stacks for one query ------------------------------------------------------ */

struct stack_set {
	struct store_stack *v; /* sorted by id after load */
	struct store_frame *frames;
	size_t n, nframes;
	struct ch_result *results; /* own the frames' strings */
	size_t nresults;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static const char *or_null(const char *s)
{
	return s[0] ? s : NULL;
}

/* Loads the frames of ids[0..n) (sorted, unique) into set. */
static int stack_set__load(struct ch_store *s, struct ch_client *c, struct stack_set *set,
			   const uint64_t *ids, size_t n)
{
	size_t total = 0;
	int err = 0;

	memset(set, 0, sizeof(*set));
	set->v = calloc(n ? n : 1, sizeof(*set->v));
	set->results = calloc(n / STACK_IDS_PER_QUERY + 1, sizeof(*set->results));
	if (!set->v || !set->results)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		set->v[i].id = ids[i];
	set->n = n;
	for (size_t at = 0; at < n && !err; at += STACK_IDS_PER_QUERY) {
		struct ch_sql q = { 0 };
		size_t end = at + STACK_IDS_PER_QUERY < n ? at + STACK_IDS_PER_QUERY : n;

		ch_sql__add(
			&q,
			"SELECT stack_id, depth, kind, flags, func, file, line, module, build_id,"
			" addr FROM %s.stack_frames WHERE stack_id IN (",
			s->db);
		for (size_t i = at; i < end; i++)
			ch_sql__add(&q, "%s%" PRIu64, i > at ? "," : "", ids[i]);
		/* A stack is stored once per day it was used in: one copy each. */
		ch_sql__add(&q, ") ORDER BY stack_id, depth LIMIT 1 BY stack_id, depth");
		err = ch_store__query(c, &q, &set->results[set->nresults++], "stack frames");
		ch_sql__free(&q);
		if (!err)
			total += set->results[set->nresults - 1].rows;
	}
	if (err)
		return err;
	set->frames = calloc(total ? total : 1, sizeof(*set->frames));
	if (!set->frames)
		return -ENOMEM;
	/* Rows come sorted by (stack_id, depth), as are the ids. */
	size_t k = 0;
	for (size_t ri = 0; ri < set->nresults; ri++) {
		const struct ch_result *r = &set->results[ri];

		for (size_t row = 0; row < r->rows; row++) {
			uint64_t id = ch_result__u64(r, row, 0, NULL);
			struct store_frame *f = &set->frames[set->nframes];

			while (k < n && set->v[k].id < id)
				k++;
			if (k == n || set->v[k].id != id)
				return -EPROTO;
			if (!set->v[k].nframes)
				set->v[k].frames = f;
			set->v[k].nframes++;
			f->kind = (uint32_t)ch_result__u64(r, row, 2, NULL);
			f->flags = (uint32_t)ch_result__u64(r, row, 3, NULL);
			f->func = or_null(ch_result__str(r, row, 4));
			f->file = or_null(ch_result__str(r, row, 5));
			f->line = (uint32_t)ch_result__u64(r, row, 6, NULL);
			f->module = ch_result__str(r, row, 7);
			f->build_id = or_null(ch_result__str(r, row, 8));
			f->addr = ch_result__u64(r, row, 9, NULL);
			set->nframes++;
		}
	}
	return 0;
}

static const struct store_stack *stack_set__get(const struct stack_set *set, uint64_t id)
{
	size_t lo = 0, hi = set->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (set->v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < set->n && set->v[lo].id == id ? &set->v[lo] : NULL;
}

static void stack_set__free(struct stack_set *set)
{
	for (size_t i = 0; i < set->nresults; i++)
		ch_result__free(&set->results[i]);
	free(set->results);
	free(set->frames);
	free(set->v);
	memset(set, 0, sizeof(*set));
}

/* The stacks that column col of r names. */
static int stacks_of(struct ch_store *s, struct ch_client *c, const struct ch_result *r, size_t col,
		     struct stack_set *set)
{
	uint64_t *ids = malloc((r->rows ? r->rows : 1) * sizeof(*ids));
	size_t n = 0;
	int err;

	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < r->rows; i++)
		ids[i] = ch_result__u64(r, i, col, NULL);
	qsort(ids, r->rows, sizeof(*ids), cmp_u64);
	for (size_t i = 0; i < r->rows; i++)
		if (!n || ids[n - 1] != ids[i])
			ids[n++] = ids[i];
	err = stack_set__load(s, c, set, ids, n);
	free(ids);
	return err;
}

/* ---- rows ------------------------------------------------------------------------ */

static uint64_t row_u64(const struct store_row *r, int col)
{
	return ch_result__u64(r->res, r->i, (size_t)col, NULL);
}

static int64_t row_i64(const struct store_row *r, int col)
{
	return ch_result__i64(r->res, r->i, (size_t)col, NULL);
}

static const char *row_str(const struct store_row *r, int col)
{
	return ch_result__str(r->res, r->i, (size_t)col);
}

static int row_null(const struct store_row *r, int col)
{
	return 0; /* the queries never return NULL */
}

/* An id the result named but no frames stored: NULL. */
static int row_stack(const struct store_row *r, uint64_t id, const struct store_stack **out)
{
	*out = stack_set__get(r->stacks, id);
	return 0;
}

static const struct store_row_ops ch_row_ops = { row_u64, row_i64, row_str, row_null, row_stack };

int ch_query_rows(struct ch_store *s, struct ch_sql *q, const char *what, int stack_col,
		  store_emit_fn emit, void *fn, void *ctx)
{
	struct ch_client *c = ch_store__client(s);
	struct stack_set set = { 0 };
	struct ch_result r = { 0 };
	struct store_row row = { .ops = &ch_row_ops, .res = &r, .stacks = &set };
	int err = -ENOMEM;

	if (c)
		err = ch_store__query(c, q, &r, what);
	if (!err && stack_col >= 0)
		err = stacks_of(s, c, &r, (size_t)stack_col, &set);
	for (row.i = 0; !err && row.i < r.rows; row.i++)
		err = emit(&row, fn, ctx);
	stack_set__free(&set);
	ch_result__free(&r);
	ch_sql__free(q);
	ch_store__put(s, c);
	return err;
}
