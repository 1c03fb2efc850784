// SPDX-License-Identifier: Apache-2.0
/*
 * SQLite ingest: one transaction per batch on the writer connection.  The
 * batches row first (its UNIQUE batch_id refuses a retry), then process
 * instances (upserted), new stacks, and every schema table's rows.
 */
#include <errno.h>
#include <stdlib.h>

#include "server/store/backend.h"
#include "server/store/sqlite.h"

struct ingest {
	struct sqlite_store *s;
	sqlite3 *db;
	const struct store_batch *sb;
	const Strata__V1__Batch *b;
	int64_t batch_row;
	int64_t *proc_rows; /* per pb process */
	sqlite3_stmt *st;   /* the table being written */
};

static int stmt(struct ingest *in, const char *sql, sqlite3_stmt **st)
{
	struct sqlite_store *s = in->s;
	int i;

	for (i = 0; i < SQ_MAX_STMTS && s->stmts[i].sql; i++) {
		if (s->stmts[i].sql == sql) {
			*st = s->stmts[i].st;
			return 0;
		}
	}
	if (i == SQ_MAX_STMTS)
		return -E2BIG;
	if (sqlite3_prepare_v3(in->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
		return -EIO;
	s->stmts[i].sql = sql;
	s->stmts[i].st = *st;
	return 0;
}

static int step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -EIO;
}

static const char *S(const struct ingest *in, uint32_t i)
{
	return in->b->strings[i];
}

static int ingest_batch_row(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;
	sqlite3_int64 before;
	sqlite3_stmt *st;
	int rc;

	if (stmt(in,
		 "INSERT INTO batches(batch_id,node,agent_version,agent_run_id,seq,start_ns,"
		 "end_ns,received_ns,clock_source,clock_error_ns,freq_hz,wire_bytes,cpu_samples,"
		 "drops) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(batch_id) DO NOTHING",
		 &st))
		return -EIO;
	sqlite3_bind_blob(st, 1, b->batch_id.data, (int)b->batch_id.len, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, b->node, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, b->agent_version ? b->agent_version : "", -1, SQLITE_STATIC);
	sqlite3_bind_blob(st, 4, b->agent_run_id.data, (int)b->agent_run_id.len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, sq_i64(b->seq));
	sqlite3_bind_int64(st, 6, sq_i64(b->start_ns));
	sqlite3_bind_int64(st, 7, sq_i64(b->end_ns));
	sqlite3_bind_int64(st, 8, sq_i64(in->sb->received_ns));
	sqlite3_bind_int(st, 9, b->clock ? b->clock->source : 0);
	sqlite3_bind_int64(st, 10, b->clock ? sq_i64(b->clock->error_bound_ns) : 0);
	sqlite3_bind_int(st, 11, (int)b->freq_hz);
	sqlite3_bind_int64(st, 12, sq_i64(in->sb->wire_bytes));
	sqlite3_bind_int64(st, 13, sq_i64(store_batch__cpu_samples(b, NULL)));
	sqlite3_bind_int64(st, 14, sq_i64(store_batch__drops(b)));
	before = sqlite3_total_changes64(in->db);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return -EIO;
	if (sqlite3_total_changes64(in->db) == before)
		return 1; /* duplicate */
	in->batch_row = sqlite3_last_insert_rowid(in->db);
	return 0;
}

/* One row per process instance (node, pid, start time), its window and
 * latest non-empty labels kept up to date. */
static int ingest_processes(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;
	sqlite3_stmt *st;

	if (stmt(in,
		 "INSERT INTO processes(node,pid,start_time_ns,ppid,comm,cmdline,cgroup,container,"
		 "pod,job,has_rank,rank,local_rank,world_size,first_ns,last_ns,exit_ns)"
		 " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
		 " ON CONFLICT(node,pid,start_time_ns) DO UPDATE SET"
		 " last_ns=max(last_ns,excluded.last_ns), first_ns=min(first_ns,excluded.first_ns),"
		 " comm=excluded.comm, exit_ns=max(exit_ns,excluded.exit_ns),"
		 " job=CASE WHEN excluded.job<>'' THEN excluded.job ELSE job END,"
		 " container=CASE WHEN excluded.container<>'' THEN excluded.container ELSE "
		 "container END,"
		 " pod=CASE WHEN excluded.pod<>'' THEN excluded.pod ELSE pod END,"
		 " has_rank=max(has_rank,excluded.has_rank),"
		 " rank=CASE WHEN excluded.has_rank THEN excluded.rank ELSE rank END,"
		 " local_rank=CASE WHEN excluded.has_rank THEN excluded.local_rank ELSE local_rank "
		 "END,"
		 " world_size=CASE WHEN excluded.has_rank THEN excluded.world_size ELSE world_size "
		 "END"
		 " RETURNING id",
		 &st))
		return -EIO;
	for (size_t i = 0; i < b->n_processes; i++) {
		const Strata__V1__Process *p = b->processes[i];
		int rc;

		sqlite3_bind_text(st, 1, b->node, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, p->pid);
		sqlite3_bind_int64(st, 3, sq_i64(p->start_time_ns));
		sqlite3_bind_int64(st, 4, p->ppid);
		sqlite3_bind_text(st, 5, S(in, p->comm_str), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 6, S(in, p->cmdline_str), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 7, S(in, p->cgroup_str), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 8, S(in, p->container_str), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 9, S(in, p->pod_str), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 10, store_process__job(b, p), -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 11, p->rank != NULL);
		sqlite3_bind_int(st, 12, p->rank ? p->rank->rank : -1);
		sqlite3_bind_int(st, 13, p->rank ? p->rank->local_rank : -1);
		sqlite3_bind_int(st, 14, p->rank ? p->rank->world_size : -1);
		sqlite3_bind_int64(st, 15, sq_i64(b->start_ns));
		sqlite3_bind_int64(st, 16, sq_i64(b->end_ns));
		sqlite3_bind_int64(st, 17, sq_i64(p->exit_ns));
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			in->proc_rows[i] = sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		if (rc != SQLITE_ROW)
			return -EIO;
	}
	return 0;
}

static int ingest_stacks(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;
	sqlite3_stmt *ins, *fr;

	if (stmt(in, "INSERT INTO stacks(id,nframes) VALUES(?,?) ON CONFLICT DO NOTHING", &ins) ||
	    stmt(in,
		 "INSERT INTO stack_frames(stack_id,depth,kind,flags,func,file,line,module,"
		 "build_id,addr) VALUES(?,?,?,?,?,?,?,?,?,?)",
		 &fr))
		return -EIO;
	for (size_t i = 0; i < b->n_stacks; i++) {
		const struct store_stack *s = &in->sb->stacks[i];

		sqlite3_int64 before = sqlite3_total_changes64(in->db);

		sqlite3_bind_int64(ins, 1, sq_i64(s->id));
		sqlite3_bind_int(ins, 2, (int)s->nframes);
		if (step_done(ins))
			return -EIO;
		if (sqlite3_total_changes64(in->db) == before)
			continue; /* known stack: its frames are stored */
		for (uint32_t j = 0; j < s->nframes; j++) {
			const struct store_frame *f = &s->frames[j];

			sqlite3_bind_int64(fr, 1, sq_i64(s->id));
			sqlite3_bind_int(fr, 2, (int)j);
			sqlite3_bind_int(fr, 3, (int)f->kind);
			sqlite3_bind_int(fr, 4, (int)f->flags);
			sqlite3_bind_text(fr, 5, f->func, -1, SQLITE_STATIC);
			sqlite3_bind_text(fr, 6, f->file, -1, SQLITE_STATIC);
			sqlite3_bind_int(fr, 7, (int)f->line);
			sqlite3_bind_text(fr, 8, f->module, -1, SQLITE_STATIC);
			sqlite3_bind_text(fr, 9, f->build_id, -1, SQLITE_STATIC);
			sqlite3_bind_int64(fr, 10, sq_i64(f->addr));
			if (step_done(fr))
				return -EIO;
		}
	}
	return 0;
}

/* One record's row: ?1 batch, ?2 process row (per-process tables), then
 * the table's columns in schema order. */
static int ingest_record(void *ctx, const struct store_rec *r)
{
	struct ingest *in = ctx;
	sqlite3_stmt *st = in->st;
	int k = 1;

	sqlite3_bind_int64(st, k++, in->batch_row);
	if (r->t->per_process)
		sqlite3_bind_int64(st, k++, in->proc_rows[r->process]);
	for (size_t c = 0; c < r->t->ncols; c++) {
		struct store_value v;

		if (!store_column__name(&r->t->cols[c], STORE_SQLITE))
			continue;
		store_rec__value(r, c, in->sb->stacks, NULL, &v);
		switch (v.type) {
		case STORE_V_TEXT:
			sqlite3_bind_text(st, k++, v.s, -1, SQLITE_STATIC);
			break;
		case STORE_V_F64:
			sqlite3_bind_double(st, k++, v.f);
			break;
		case STORE_V_I64:
			sqlite3_bind_int64(st, k++, v.i);
			break;
		default:
			sqlite3_bind_int64(st, k++, sq_i64(v.u));
			break;
		}
	}
	return step_done(st);
}

static int ingest_tables(struct ingest *in)
{
	for (size_t t = 0; t < STORE_NTABLES; t++) {
		if (STORE_TABLES[t].sqlite_apart)
			continue;
		if (stmt(in, in->s->insert_sql[t], &in->st) ||
		    store_table__each(&STORE_TABLES[t], in->b, ingest_record, in))
			return -EIO;
	}
	return 0;
}

int sqlite_store__ingest(struct store *base, const struct store_batch *sb)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct ingest in = { .s = s, .db = s->writer.db, .sb = sb, .b = sb->pb };
	int err;

	in.proc_rows = calloc(sb->pb->n_processes ? sb->pb->n_processes : 1, sizeof(int64_t));
	if (!in.proc_rows)
		return -ENOMEM;
	pthread_mutex_lock(&s->writer.lock);
	if (sqlite3_exec(in.db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
		err = -EIO;
		goto out;
	}
	err = ingest_batch_row(&in);
	if (!err)
		err = ingest_processes(&in);
	if (!err)
		err = ingest_stacks(&in);
	if (!err)
		err = ingest_tables(&in);
	if (err) /* a duplicate (1) wrote nothing either */
		sqlite3_exec(in.db, "ROLLBACK", NULL, NULL, NULL);
	else if (sqlite3_exec(in.db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		sqlite3_exec(in.db, "ROLLBACK", NULL, NULL, NULL);
		err = -EIO;
	}
out:
	pthread_mutex_unlock(&s->writer.lock);
	free(in.proc_rows);
	store_counts__ingest(&s->counts, err);
	return err;
}
