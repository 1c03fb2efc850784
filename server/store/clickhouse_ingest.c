// SPDX-License-Identifier: Apache-2.0
/*
 * ClickHouse ingest: every schema table's rows built in memory (each with
 * its batch or process head, see clickhouse.h), then inserted one table at
 * a time; the stacks new to the day before, the commit record (batches)
 * last.  Each attempt stamps its rows with a random id (clickhouse.c says
 * why).
 *
 * Group commit: the rows of the batches that arrive while an insert runs
 * go together in the next one, one request a table for all of them.
 * ClickHouse makes a part of every insert and merges parts in the
 * background, so its cost is per request, not per row: a batch alone took
 * 12 requests, and 16 batches a second on 2 cores (ClickHouse 18.16) took
 * 0.4-0.7 s each and fell further behind every second (measured in
 * tests/integration/test_server_replicas.sh).  Groups grow with the load
 * and need no setting: alone, a batch is written at once.  A group whose
 * values the store refuses is written again batch by batch, each under a
 * new attempt id, so one batch that ClickHouse will not take fails alone
 * (commit says which failures split).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/hash.h"
#include "lib/hex.h"
#include "server/store/clickhouse.h"

struct ch_ingest {
	struct ch_store *s;
	const struct store_batch *sb;
	const Strata__V1__Batch *b;
	uint64_t id; /* this attempt */
	char batch_hex[2 * 16 + 1];
	struct ch_rows rows[STORE_NTABLES];
	struct ch_rows batch_row, stack_rows;
	size_t bytes; /* of all the rows */
	uint64_t cpu_samples;
	uint64_t *proc_samples; /* cpu samples per process index */
	/* group commit, under s->lock */
	int done, err;
	int alone; /* its group was refused: written again by itself */
};

static uint64_t day_of(uint64_t ns)
{
	return ns / (86400ULL * 1000000000ULL);
}

/* Key of a (stack, day) pair in the known set; never 0. */
static uint64_t known_key(uint64_t stack_id, uint64_t day)
{
	uint64_t pair[2] = { stack_id, day };
	uint64_t k = hash_bytes(pair, sizeof(pair), 0);

	return k ? k : 1;
}

/* Under s->lock.  Returns 1 if present, else 0 (and inserts when insert). */
static int known_lookup(struct ch_store *s, uint64_t key, int insert)
{
	struct ch_known_stacks *ks = &s->known;
	uint32_t mask = CH_KNOWN_STACKS_CAP - 1, i;

	if (!ks->keys) {
		if (!insert)
			return 0;
		ks->keys = calloc(CH_KNOWN_STACKS_CAP, sizeof(*ks->keys));
		if (!ks->keys)
			return 0; /* no memory: stacks are simply written again */
	}
	for (i = (uint32_t)key & mask; ks->keys[i]; i = (i + 1) & mask)
		if (ks->keys[i] == key)
			return 1;
	if (!insert)
		return 0;
	/* Bounded: at 3/4 full forget everything (counted); the cost is
	 * writing stacks again, never a missing one. */
	if (ks->n >= CH_KNOWN_STACKS_CAP / 4 * 3) {
		memset(ks->keys, 0, CH_KNOWN_STACKS_CAP * sizeof(*ks->keys));
		ks->n = 0;
		s->stack_cache_resets++;
		for (i = (uint32_t)key & mask; ks->keys[i]; i = (i + 1) & mask)
			;
	}
	ks->keys[i] = key;
	ks->n++;
	return 0;
}

static void node_head(struct ch_ingest *in, struct ch_rows *w)
{
	ch_rows__date(w, in->b->end_ns);
	ch_rows__u64(w, in->id);
	ch_rows__u64(w, in->b->start_ns);
	ch_rows__u64(w, in->b->end_ns);
	ch_rows__str(w, in->b->node);
}

/* The head of a per-process row: the batch's, then the process's. */
static void process_head(struct ch_ingest *in, struct ch_rows *w, uint32_t process)
{
	const Strata__V1__Process *p = in->b->processes[process];

	node_head(in, w);
	ch_rows__u64(w, p->pid);
	ch_rows__u64(w, p->start_time_ns);
	ch_rows__str(w, store_process__job(in->b, p));
	ch_rows__str(w, in->b->strings[p->container_str]);
	ch_rows__u64(w, p->rank != NULL);
	ch_rows__i64(w, p->rank ? p->rank->rank : -1);
}

/* One record's row: its head, then the table's columns. */
static int rows_record(void *ctx, const struct store_rec *r)
{
	struct ch_ingest *in = ctx;
	struct ch_rows *w = &in->rows[r->t - STORE_TABLES];

	if (r->t->per_process)
		process_head(in, w, r->process);
	else
		node_head(in, w);
	for (size_t c = 0; c < r->t->ncols; c++) {
		struct store_value v;

		if (!store_column__name(&r->t->cols[c], STORE_CLICKHOUSE))
			continue;
		store_rec__value(r, c, in->sb->stacks, in->proc_samples, &v);
		switch (v.type) {
		case STORE_V_TEXT:
			ch_rows__str(w, v.s);
			break;
		case STORE_V_F64:
			ch_rows__f64(w, v.f);
			break;
		case STORE_V_I64:
			ch_rows__i64(w, v.i);
			break;
		default:
			ch_rows__u64(w, v.u);
			break;
		}
	}
	ch_rows__end(w);
	return 0;
}

static void rows_batch(struct ch_ingest *in, const char *batch_hex)
{
	const Strata__V1__Batch *b = in->b;
	struct ch_rows *w = &in->batch_row;
	char run[2 * 16 + 1];

	build_id_hex(b->agent_run_id.data, b->agent_run_id.len > 16 ? 16 : b->agent_run_id.len, run,
		     sizeof(run));
	ch_rows__date(w, b->end_ns);
	ch_rows__u64(w, in->id);
	ch_rows__str(w, batch_hex);
	ch_rows__str(w, b->node);
	ch_rows__str(w, b->agent_version);
	ch_rows__str(w, run);
	ch_rows__u64(w, b->seq);
	ch_rows__u64(w, b->start_ns);
	ch_rows__u64(w, b->end_ns);
	ch_rows__u64(w, in->sb->received_ns);
	ch_rows__u64(w, b->clock ? (uint64_t)b->clock->source : 0);
	ch_rows__u64(w, b->clock ? b->clock->error_bound_ns : 0);
	ch_rows__u64(w, b->freq_hz);
	ch_rows__u64(w, in->sb->wire_bytes);
	ch_rows__u64(w, in->cpu_samples);
	ch_rows__u64(w, store_batch__drops(b));
	ch_rows__end(w);
}

/* The stacks this batch uses that are not known to be stored for its day. */
static void rows_stacks(struct ch_ingest *in)
{
	const Strata__V1__Batch *b = in->b;
	uint64_t day = day_of(b->end_ns);

	for (size_t i = 0; i < b->n_stacks; i++) {
		const struct store_stack *st = &in->sb->stacks[i];
		int known;

		pthread_mutex_lock(&in->s->lock);
		known = known_lookup(in->s, known_key(st->id, day), 0);
		pthread_mutex_unlock(&in->s->lock);
		if (known)
			continue;
		for (uint32_t j = 0; j < st->nframes; j++) {
			const struct store_frame *f = &st->frames[j];
			struct ch_rows *w = &in->stack_rows;

			ch_rows__date(w, b->end_ns);
			ch_rows__u64(w, st->id);
			ch_rows__u64(w, j);
			ch_rows__u64(w, f->kind);
			ch_rows__u64(w, f->flags);
			ch_rows__str(w, f->func); /* NULL (unresolved) is stored as "" */
			ch_rows__str(w, f->file);
			ch_rows__u64(w, f->line);
			ch_rows__str(w, f->module);
			ch_rows__str(w, f->build_id);
			ch_rows__u64(w, f->addr);
			ch_rows__end(w);
		}
	}
}

static void stacks_mark_known(struct ch_ingest *in)
{
	uint64_t day = day_of(in->b->end_ns);

	pthread_mutex_lock(&in->s->lock);
	for (size_t i = 0; i < in->b->n_stacks; i++)
		known_lookup(in->s, known_key(in->sb->stacks[i].id, day), 1);
	pthread_mutex_unlock(&in->s->lock);
}

/* Claims batch_id for this ingest: 0, or -EAGAIN while another ingest of
 * the same batch runs here (or too many run). */
static int inflight_claim(struct ch_store *s, const uint8_t id[16])
{
	int err = 0;

	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->ninflight && !err; i++)
		if (!memcmp(s->inflight[i], id, 16))
			err = -EAGAIN;
	if (!err && s->ninflight == CH_INFLIGHT_MAX)
		err = -EAGAIN;
	if (!err)
		memcpy(s->inflight[s->ninflight++], id, 16);
	else
		s->busy++;
	pthread_mutex_unlock(&s->lock);
	return err;
}

static void inflight_release(struct ch_store *s, const uint8_t id[16])
{
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->ninflight; i++) {
		if (!memcmp(s->inflight[i], id, 16)) {
			memmove(s->inflight[i], s->inflight[--s->ninflight], 16);
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

static uint64_t new_ingest_id(void)
{
	uint64_t id = 0;

	while (!id) {
		if (getrandom(&id, sizeof(id), 0) != sizeof(id)) {
			uint64_t seed[2] = { realtime_ns(), (uint64_t)getpid() };

			id = hash_bytes(seed, sizeof(seed), 0);
		}
	}
	return id;
}

/* 1 when a committed attempt of this batch exists, 0 when none, -errno. */
static int committed(struct ch_store *s, struct ch_client *c, const char *batch_hex)
{
	struct ch_sql q = { 0 };
	struct ch_result r;
	int err;

	ch_sql__add(&q, "SELECT count() FROM %s.batches WHERE batch_id = ", s->db);
	ch_sql__quote(&q, batch_hex);
	err = ch_store__query(c, &q, &r, "duplicate check");
	ch_sql__free(&q);
	if (!err)
		err = ch_result__u64(&r, 0, 0, NULL) > 0;
	ch_result__free(&r);
	return err;
}

static int insert_rows(struct ch_store *s, struct ch_client *c, const char *table, const char *cols,
		       const struct ch_rows *w)
{
	char tc[2048];
	int n = snprintf(tc, sizeof(tc), "%s.%s (%s)", s->db, table, cols), err;

	if (n < 0 || (size_t)n >= sizeof(tc))
		return -E2BIG;
	err = ch_client__insert(c, tc, w);
	if (err)
		ch_store__log(c, table, err);
	return err;
}

static int insert_table(struct ch_store *s, struct ch_client *c, const struct store_table *t,
			const struct ch_rows *w)
{
	char cols[1024];
	size_t head = (size_t)snprintf(cols, sizeof(cols), "%s, ",
				       t->per_process ? CH_PROC_COLS : CH_NODE_COLS);

	if (store_table__columns(t, STORE_CLICKHOUSE, 0, cols + head, sizeof(cols) - head) >=
	    sizeof(cols) - head)
		return -E2BIG;
	return insert_rows(s, c, t->name, cols, w);
}

/* The rows of table k: a schema table, then the stacks, then the commit record. */
enum { ROWS_STACKS = STORE_NTABLES, ROWS_BATCH, NROWS };

static struct ch_rows *rows_of(struct ch_ingest *in, size_t k)
{
	return k == ROWS_STACKS ? &in->stack_rows : k == ROWS_BATCH ? &in->batch_row : &in->rows[k];
}

/* Every row of the batch, stamped with a new attempt id. */
static void build_rows(struct ch_ingest *in)
{
	in->id = new_ingest_id();
	in->bytes = 0;
	for (size_t k = 0; k < NROWS; k++)
		ch_rows__reset(rows_of(in, k));
	for (size_t t = 0; t < STORE_NTABLES; t++)
		store_table__each(&STORE_TABLES[t], in->b, rows_record, in);
	rows_stacks(in);
	rows_batch(in, in->batch_hex);
	for (size_t k = 0; k < NROWS; k++)
		in->bytes += rows_of(in, k)->len;
}

/* Inserts table k's rows of the n ingests of g as one request (w: room to join them in). */
static int insert_k(struct ch_store *s, struct ch_client *c, struct ch_ingest *const *g, size_t n,
		    size_t k, struct ch_rows *w)
{
	const struct ch_rows *rows = rows_of(g[0], k);

	if (n > 1) {
		ch_rows__reset(w);
		for (size_t i = 0; i < n; i++)
			ch_rows__join(w, rows_of(g[i], k));
		rows = w;
	}
	if (k == ROWS_STACKS)
		return insert_rows(s, c, "stack_frames",
				   "day, stack_id, depth, kind, flags, func, file, line, module, "
				   "build_id, addr",
				   rows);
	if (k == ROWS_BATCH)
		return insert_rows(s, c, "batches",
				   "day, ingest, batch_id, node, agent_version, agent_run_id,"
				   " seq, start_ns, end_ns, received_ns, clock_source,"
				   " clock_error_ns, freq_hz, wire_bytes, cpu_samples, drops",
				   rows);
	return insert_table(s, c, &STORE_TABLES[k], rows);
}

/* Whether ClickHouse refused an insert for what its rows hold (a value it
 * cannot parse or store), not for its own state (too many parts, memory,
 * timeouts) or the network: only the first is one batch's fault. */
static bool refused_data(int code)
{
	switch (code) {
	case 6:	  /* CANNOT_PARSE_TEXT */
	case 26:  /* CANNOT_PARSE_QUOTED_STRING */
	case 27:  /* CANNOT_PARSE_INPUT_ASSERTION_FAILED */
	case 32:  /* ATTEMPT_TO_READ_AFTER_EOF */
	case 33:  /* CANNOT_READ_ALL_DATA */
	case 38:  /* CANNOT_PARSE_DATE */
	case 41:  /* CANNOT_PARSE_DATETIME */
	case 53:  /* TYPE_MISMATCH */
	case 69:  /* ARGUMENT_OUT_OF_BOUND */
	case 70:  /* CANNOT_CONVERT_TYPE */
	case 72:  /* CANNOT_PARSE_NUMBER */
	case 117: /* INCORRECT_DATA */
	case 131: /* TOO_LARGE_STRING_SIZE */
	case 321: /* VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE */
		return true;
	default:
		return false;
	}
}

/* Writes the rows of the n ingests of g: the stacks first, the commit
 * records last (once a batch is visible, everything it refers to is
 * stored).  0 or the first error; *data: ClickHouse refused the rows'
 * values (refused_data). */
static int write_group(struct ch_store *s, struct ch_ingest *const *g, size_t n, bool *data)
{
	struct ch_client *c = ch_store__client(s);
	struct ch_rows w;
	int err = c ? 0 : -ENOMEM;

	ch_rows__init(&w);
	if (!err)
		err = insert_k(s, c, g, n, ROWS_STACKS, &w);
	for (size_t t = 0; t < STORE_NTABLES && !err; t++)
		err = insert_k(s, c, g, n, t, &w);
	if (!err)
		err = insert_k(s, c, g, n, ROWS_BATCH, &w);
	*data = err == -EIO && refused_data(ch_client__error_code(c));
	ch_rows__free(&w);
	ch_store__put(s, c);
	return err;
}

/* Whether any of in's rows are incomplete (no memory, a date out of range):
 * the insert would refuse them. */
static bool rows_failed(struct ch_ingest *in)
{
	for (size_t k = 0; k < NROWS; k++)
		if (rows_of(in, k)->oom)
			return true;
	return false;
}

/* Queues in's rows and returns once they are written (0) or refused:
 * whichever waiting ingest finds no insert running writes all that wait
 * (up to CH_GROUP_BYTES) as one group, the others sleep.  A group whose
 * values ClickHouse refused is written again batch by batch, so that the
 * batch at fault fails alone; any other failure (the store's state, the
 * network) goes back to every batch of the group, whose agents retry. */
static int commit(struct ch_store *s, struct ch_ingest *in)
{
	struct ch_client *c;
	bool data;
	int err;

	pthread_mutex_lock(&s->lock);
	/* at most CH_INFLIGHT_MAX ingests run (inflight_claim) */
	s->commit_q[s->ncommit++] = in;
	while (!in->done) {
		struct ch_ingest *g[CH_INFLIGHT_MAX];
		size_t n = 0, bytes = 0;

		if (s->committing) {
			pthread_cond_wait(&s->commit_cond, &s->lock);
			continue;
		}
		while (n < s->ncommit && (!n || bytes + s->commit_q[n]->bytes <= CH_GROUP_BYTES)) {
			bytes += s->commit_q[n]->bytes;
			g[n] = s->commit_q[n];
			n++;
		}
		s->ncommit -= (unsigned)n;
		memmove(s->commit_q, s->commit_q + n, s->ncommit * sizeof(*g));
		s->committing = 1;
		pthread_mutex_unlock(&s->lock);
		err = write_group(s, g, n, &data);
		pthread_mutex_lock(&s->lock);
		s->committing = 0;
		if (n > 1) {
			s->commit_groups++;
			s->commit_grouped += n;
			s->commit_splits += err && data;
		}
		for (size_t i = 0; i < n; i++) {
			g[i]->err = err;
			g[i]->alone = err && data && n > 1;
			g[i]->done = 1;
		}
		pthread_cond_broadcast(&s->commit_cond);
	}
	err = in->err;
	pthread_mutex_unlock(&s->lock);
	if (!err || !in->alone)
		return err;
	/* Its group's rows that went in before the refusal carry the old
	 * attempt id and stay invisible, unless the refused insert was a
	 * part of the commit records and this batch's went in before it:
	 * then it is stored (whole: the commit records go last). */
	c = ch_store__client(s);
	err = c ? committed(s, c, in->batch_hex) : -ENOMEM;
	ch_store__put(s, c);
	if (err) /* 1: stored */
		return err == 1 ? 0 : err;
	build_rows(in);
	return write_group(s, &in, 1, &data);
}

int ch_store__ingest(struct store *base, const struct store_batch *sb)
{
	struct ch_store *s = (struct ch_store *)base;
	const Strata__V1__Batch *b = sb->pb;
	struct ch_ingest in = { .s = s, .sb = sb, .b = b };
	uint8_t key[16] = { 0 };
	struct ch_client *c = NULL;
	int err;

	/* batch_id is 16 random bytes; anything else is keyed by what it has. */
	memcpy(key, b->batch_id.data, b->batch_id.len < 16 ? b->batch_id.len : 16);
	build_id_hex(key, 16, in.batch_hex, sizeof(in.batch_hex));
	err = inflight_claim(s, key);
	if (err)
		return err;
	in.proc_samples = calloc(b->n_processes ? b->n_processes : 1, sizeof(uint64_t));
	for (size_t k = 0; k < NROWS; k++)
		ch_rows__init(rows_of(&in, k));
	c = in.proc_samples ? ch_store__client(s) : NULL;
	if (!c) {
		err = -ENOMEM;
		goto out;
	}
	err = committed(s, c, in.batch_hex);
	ch_store__put(s, c);
	if (err) /* 1: the agent retried a stored batch; nothing is written */
		goto out;
	in.cpu_samples = store_batch__cpu_samples(b, in.proc_samples);
	build_rows(&in);
	/* rows the insert would refuse: this batch's fault, not its group's */
	err = rows_failed(&in) ? -ENOMEM : commit(s, &in);
	if (!err)
		stacks_mark_known(&in);
out:
	for (size_t k = 0; k < NROWS; k++)
		ch_rows__free(rows_of(&in, k));
	free(in.proc_samples);
	inflight_release(s, key);
	store_counts__ingest(&s->counts, err);
	return err;
}
