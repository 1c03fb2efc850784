// SPDX-License-Identifier: Apache-2.0
/*
 * The ClickHouse store's queries (the contract: server/store.h).  Rows are
 * read by the shared reader (server/store/backend.h), so each SELECT lists
 * its columns in the order the reader's comment gives.  A process instance
 * is (node, pid, pstart); its labels are the latest non-empty ones, as the
 * SQLite store's upsert keeps them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "server/store/clickhouse.h"

#define MAX_CODES 64

/* Commit records whose window overlaps the range, of the node (each
 * batch's first committed attempt). */
static void batch_filter(struct ch_store *s, struct ch_sql *q, const struct store_filter *f)
{
	if (f->from_ns)
		ch_sql__add(q, " AND end_ns > %" PRIu64, f->from_ns);
	if (f->to_ns)
		ch_sql__add(q, " AND start_ns < %" PRIu64, f->to_ns);
	ch_and_quoted(q, " AND node = ", f->node);
	ch_sql__add(q, " AND node != '" STORE_SERVER_NODE "'");
	ch_sql__add(q, " AND ingest IN (SELECT min(ingest) FROM %s.batches GROUP BY batch_id)",
		    s->db);
}

static int ch_jobs(struct store *base, const struct store_filter *f, store_job_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };

	ch_sql__add(&q,
		    "SELECT job, uniqExact(node), uniqExact(node, pid, pstart),"
		    " uniqExactIf(rank, has_rank = 1), max(world_size), min(b_start), max(b_end),"
		    " sum(cpu_samples) FROM %s.processes WHERE job != ''",
		    s->db);
	ch_filter(s, &q, f, NULL, 1);
	ch_sql__add(&q, " GROUP BY job ORDER BY max(b_end) DESC");
	return ch_query_rows(s, &q, "jobs", -1, store_emit__job, (void *)fn, ctx);
}

static int ch_nodes(struct store *base, const struct store_filter *f, store_node_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };

	ch_sql__add(
		&q,
		"SELECT node, argMax(agent_version, end_ns), min(start_ns), max(end_ns), count(),"
		" sum(cpu_samples), sum(drops) FROM %s.batches WHERE 1",
		s->db);
	batch_filter(s, &q, f);
	if (ch_has_process_filter(f)) {
		struct store_filter g = *f;

		g.from_ns = g.to_ns = 0;
		ch_sql__add(&q, " AND node IN (SELECT node FROM %s.processes WHERE 1", s->db);
		ch_filter(s, &q, &g, NULL, 1);
		ch_sql__add(&q, ")");
	}
	ch_sql__add(&q, " GROUP BY node ORDER BY node");
	return ch_query_rows(s, &q, "nodes", -1, store_emit__node, (void *)fn, ctx);
}

static int ch_processes(struct store *base, const struct store_filter *f, store_process_fn fn,
			void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };

	/* A process instance's latest non-empty labels (as SQLite's upsert). */
	ch_sql__add(&q,
		    "SELECT node, pid, pstart, argMax(comm, b_end), argMax(cmdline, b_end),"
		    " argMaxIf(container, b_end, container != ''), argMaxIf(pod, b_end, pod != ''),"
		    " argMaxIf(job, b_end, job != '') AS j, max(has_rank),"
		    " if(max(has_rank) = 1, argMaxIf(rank, b_end, has_rank = 1), -1) AS rk,"
		    " if(max(has_rank) = 1, argMaxIf(local_rank, b_end, has_rank = 1), -1),"
		    " if(max(has_rank) = 1, argMaxIf(world_size, b_end, has_rank = 1), -1),"
		    " min(b_start), max(b_end), sum(cpu_samples) FROM %s.processes WHERE 1",
		    s->db);
	ch_filter(s, &q, f, NULL, 1);
	ch_sql__add(&q, " GROUP BY node, pid, pstart ORDER BY j, rk, node, pid");
	return ch_query_rows(s, &q, "processes", -1, store_emit__process, (void *)fn, ctx);
}

static int ch_profile(struct store *base, const struct store_filter *f,
		      enum store_profile_kind kind, store_sample_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };

	/* materialize(): ClickHouse 18.16's Distributed reads stumble on
	 * constant columns (docs/clickhouse.md). */
	ch_sql__add(&q,
		    f->merge_threads
			    ? "SELECT materialize(''), materialize(toUInt32(0)),"
			      " materialize(toUInt32(0)), comm, materialize(toUInt8(0)),"
			      " materialize(toInt32(0)), stack_id, sum(%s) FROM %s.%s WHERE 1"
			    : "SELECT node, pid, tid, comm, has_rank, rank, stack_id, sum(%s)"
			      " FROM %s.%s WHERE 1",
		    kind == STORE_PROFILE_OFFCPU ? "ns" : "count", s->db,
		    kind == STORE_PROFILE_OFFCPU ? "offcpu_samples" : "cpu_samples");
	ch_filter(s, &q, f, NULL, 1);
	ch_sql__add(&q, f->merge_threads
				? " GROUP BY comm, stack_id"
				: " GROUP BY node, pid, tid, comm, has_rank, rank, stack_id");
	return ch_query_rows(s, &q, "profile", 6, store_emit__sample, (void *)fn, ctx);
}

static int ch_leaks(struct store *base, const struct store_filter *f, store_leak_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct store_filter g = *f;
	uint64_t at = f->to_ns ? f->to_ns : INT64_MAX;
	struct ch_sql q = { 0 };

	/*
	 * One allocation is (process instance, ptr, alloc_ns): its own record
	 * plus, when freed in a later window, a free_only record.  Outstanding
	 * at `at`: made before it and no record frees it before it.
	 */
	g.to_ns = 0;
	ch_sql__add(
		&q,
		"SELECT node, pid, any(hr), any(rk), sid, sum(sz), count(), min(alloc_ns), lv FROM"
		" (SELECT node, pid, pstart, ptr, alloc_ns, level AS lv,"
		" anyIf(has_rank, free_only = 0) AS hr, anyIf(rank, free_only = 0) AS rk,"
		" anyIf(stack_id, free_only = 0) AS sid, anyIf(size, free_only = 0) AS sz,"
		" countIf(free_only = 0) AS allocs,"
		" countIf(freed = 1 AND free_ns < %" PRIu64 ") AS frees"
		" FROM %s.cuda_allocs WHERE alloc_ns < %" PRIu64,
		at, s->db, at);
	ch_filter(s, &q, &g, "alloc_ns", 1);
	ch_sql__add(
		&q,
		" GROUP BY node, pid, pstart, ptr, alloc_ns, level HAVING allocs > 0 AND frees = 0)"
		" GROUP BY node, pid, lv, sid ORDER BY sum(sz) DESC");
	return ch_query_rows(s, &q, "leaks", 4, store_emit__leak, (void *)fn, ctx);
}

/* Error codes by (node, pid, pstart, fn), for the tally rows. */
struct tally_ctx {
	store_tally_fn fn;
	void *ctx;
	struct ch_result errors;
};

static int emit_tally(const struct store_row *r, void *fn, void *ctx)
{
	const struct tally_ctx *tc = ctx;
	const struct ch_result *e = &tc->errors;
	struct store_api_code codes[MAX_CODES];
	struct store_tally t;

	store_row__tally(r, &t);
	t.codes = codes;
	/* At most MAX_CODES, the most frequent first (the errors' order). */
	for (size_t k = 0; k < e->rows && t.ncodes < MAX_CODES; k++) {
		int same = 1;

		for (size_t col = 0; col < 3 && same; col++)
			same = !strcmp(ch_result__str(e, k, col), r->ops->str(r, (int)col));
		if (!same || strcmp(ch_result__str(e, k, 3), t.fn))
			continue;
		codes[t.ncodes++] = (struct store_api_code){
			.code = (int32_t)ch_result__i64(e, k, 4, NULL),
			.name = ch_result__str(e, k, 5),
			.count = ch_result__u64(e, k, 6, NULL),
		};
	}
	return tc->fn(tc->ctx, &t);
}

static int ch_tally(struct store *base, const struct store_filter *f, store_tally_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct tally_ctx tc = { .fn = fn, .ctx = ctx };
	struct ch_sql q = { 0 };
	struct ch_client *c;
	int err;

	ch_sql__add(&q,
		    "SELECT node, pid, pstart, fn, code, name, sum(count) FROM %s.cuda_api_errors"
		    " WHERE 1",
		    s->db);
	ch_filter(s, &q, f, NULL, 1);
	ch_sql__add(&q, " GROUP BY node, pid, pstart, fn, code, name"
			" ORDER BY node, pid, pstart, fn, sum(count) DESC");
	c = ch_store__client(s);
	err = c ? ch_store__query(c, &q, &tc.errors, "tally errors") : -ENOMEM;
	ch_store__put(s, c);
	ch_sql__free(&q);
	if (err)
		return err;
	ch_sql__add(&q,
		    "SELECT node, pid, pstart, any(has_rank), any(rank), fn, sum(calls),"
		    " sum(total_ns), min(min_ns), max(max_ns) FROM %s.cuda_api_tally WHERE 1",
		    s->db);
	ch_filter(s, &q, f, NULL, 1);
	ch_sql__add(&q, " GROUP BY node, pid, pstart, fn ORDER BY sum(total_ns) DESC");
	err = ch_query_rows(s, &q, "tally", -1, emit_tally, NULL, &tc);
	ch_result__free(&tc.errors);
	return err;
}

#define EV_COLS(tid) "node, pid, " tid " AS t_id, job, has_rank, rank, "
/* the GPU call's kind, detail and return code; the stack id */
#define EV_TAIL(kind, detail, ret)                                     \
	" materialize(" kind ") AS ck, materialize(" detail ") AS de," \
	" materialize(toInt64(" ret ")) AS rt, stack_id AS sid"

static int ch_events(struct store *base, const struct store_filter *f, uint32_t kinds,
		     uint32_t limit, int *truncated, store_event_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct store_events ev;
	struct ch_sql q = { 0 };
	const char *sep = "";
	int err;

	store_events__init(&ev, kinds, limit, truncated, fn, ctx);
	if (!(kinds & ~STORE_EVENT_STACKS))
		return 0;
	/* columns: see store_emit__event (call_kind, detail, ret, stack last) */
	ch_sql__add(&q, "SELECT * FROM (");
	if (kinds & STORE_EVENT_COLLECTIVE) {
		/* The communicator's rank/size from its latest init record. */
		ch_sql__add(
			&q,
			"SELECT materialize(toUInt32(%u)) AS k," EV_COLS(
				"tid") " op AS name, entry_ns AS start,"
				       " toUInt64(if(exit_ns > entry_ns, exit_ns - entry_ns, "
				       "0)) AS dur,"
				       " bytes AS b, materialize(toUInt64(1)) AS cnt, comm_hash AS "
				       "ch, seq "
				       "AS sq,"
				       " if(known = 1, crank, -1) AS cr, if(known = 1, cn, -1) "
				       "AS cnr,"
				       " dtype AS dt, materialize(toUInt8(0)) AS tk, "
				       "materialize(toUInt8(0)) AS dir," EV_TAIL(
					       "'collective'", "''",
					       "toInt64(0)") " FROM %s.nccl_collectives ANY LEFT "
							     "JOIN"
							     " (SELECT node, pid, pstart, "
							     "comm_hash, "
							     "argMax(comm_rank, init_ns) AS crank,"
							     " argMax(nranks, init_ns) AS cn, "
							     "toUInt8(1) AS known "
							     "FROM %s.nccl_comms"
							     " WHERE 1",
			STORE_EVENT_COLLECTIVE, s->db, s->db);
		ch_filter(s, &q, &(struct store_filter){ .node = f->node }, NULL, 0);
		ch_sql__add(&q, " GROUP BY node, pid, pstart, comm_hash)"
				" USING (node, pid, pstart, comm_hash) WHERE 1");
		ch_filter(s, &q, f, "entry_ns", 1);
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_TRANSFER) {
		ch_sql__add(
			&q,
			"%sSELECT materialize(toUInt32(%u)) AS k," EV_COLS(
				"tid") " api AS name, start_ns AS start, ns AS dur, bytes AS b, "
				       "count AS cnt,"
				       " materialize(toUInt64(0)) AS ch, materialize(toUInt64(0)) "
				       "AS sq, materialize(toInt32(-1)) AS cr,"
				       " materialize(toInt32(-1)) AS cnr, materialize('') AS dt, "
				       "kind AS tk, direction AS "
				       "dir," EV_TAIL("''", "''",
						      "toInt64(0)") " FROM %s.cuda_transfers WHERE "
								    "start_ns > 0",
			sep, STORE_EVENT_TRANSFER, s->db);
		ch_filter(s, &q, f, "start_ns", 1);
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_LAUNCH) {
		ch_sql__add(
			&q,
			"%sSELECT materialize(toUInt32(%u)) AS k," EV_COLS(
				"materialize(toUInt32(0))") " kernel AS name, b_start AS start, "
							    "ns_in_call "
							    "AS dur, materialize(toUInt64(0)) AS b,"
							    " count AS cnt, "
							    "materialize(toUInt64(0)) AS ch, "
							    "toUInt64(0) "
							    "AS sq, materialize(toInt32(-1)) AS cr,"
							    " materialize(toInt32(-1)) AS cnr, "
							    "materialize('') AS dt, "
							    "materialize(toUInt8(0)) AS "
							    "tk, materialize(toUInt8(0)) AS "
							    "dir," EV_TAIL("'launch'", "''",
									   "toInt64(0)") " FROM "
											 "%s.cuda_"
											 "launches "
											 "WHERE 1",
			sep, STORE_EVENT_LAUNCH, s->db);
		ch_filter(s, &q, f, "b_start", 1);
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_CPU_SAMPLE) {
		ch_sql__add(
			&q,
			"%sSELECT materialize(toUInt32(%u)) AS k," EV_COLS(
				"tid") " materialize('cpu') AS name, time_ns AS start, "
				       "materialize(toUInt64(0)) AS dur,"
				       " materialize(toUInt64(0)) AS b, materialize(toUInt64(1)) "
				       "AS cnt, materialize(toUInt64(0)) AS ch,"
				       " materialize(toUInt64(0)) AS sq, materialize(toInt32(-1)) "
				       "AS cr, materialize(toInt32(-1)) AS cnr,"
				       " materialize('') AS dt, materialize(toUInt8(0)) AS tk, "
				       "materialize(toUInt8(0)) AS dir," EV_TAIL(
					       "'cpu'", "''",
					       "toInt64(0)") " FROM %s.capture_samples WHERE 1",
			sep, STORE_EVENT_CPU_SAMPLE, s->db);
		ch_filter(s, &q, f, "time_ns", 1);
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_GPU_CALL) {
		ch_sql__add(
			&q,
			"%sSELECT materialize(toUInt32(%u)) AS k," EV_COLS(
				"tid") " api AS name, start_ns AS start,"
				       " toUInt64(if(end_ns > start_ns, end_ns - start_ns, 0)) AS "
				       "dur,"
				       " bytes AS b, materialize(toUInt64(1)) AS cnt, "
				       "materialize(toUInt64(0)) AS ch,"
				       " materialize(toUInt64(0)) AS sq, materialize(toInt32(-1)) "
				       "AS cr, materialize(toInt32(-1)) AS cnr,"
				       " materialize('') AS dt, materialize(toUInt8(0)) AS tk, "
				       "materialize(toUInt8(0)) AS dir," EV_TAIL(
					       "kind", "kernel",
					       "ret") " FROM %s.gpu_calls WHERE 1",
			sep, STORE_EVENT_GPU_CALL, s->db);
		ch_filter(s, &q, f, "start_ns", 1);
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_INFLIGHT) {
		ch_sql__add(
			&q,
			"%sSELECT materialize(toUInt32(%u)) AS k," EV_COLS(
				"tid") " api AS name, entry_ns AS start,"
				       " toUInt64(if(b_end > entry_ns, b_end - entry_ns, 0)) AS "
				       "dur,"
				       " bytes AS b, materialize(toUInt64(1)) AS cnt,"
				       " comm_hash AS ch, seq AS sq, toInt32(comm_rank) AS cr,"
				       " toInt32(nranks) AS cnr, materialize('') AS dt,"
				       " materialize(toUInt8(0)) AS tk, materialize(toUInt8(0)) AS"
				       " dir," EV_TAIL("'inflight'", "''",
						       "0") " FROM %s.inflight_calls WHERE 1",
			sep, STORE_EVENT_INFLIGHT, s->db);
		ch_filter(s, &q, f, "b_end", 1);
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_THREAD) {
		ch_sql__add(&q,
			    "%sSELECT materialize(toUInt32(%u)) AS k," EV_COLS(
				    "tid") " state AS name, b_end AS start,"
					   " materialize(toUInt64(0)) AS dur, "
					   "materialize(toUInt64(0))"
					   " AS b, materialize(toUInt64(1)) AS cnt,"
					   " materialize(toUInt64(0)) AS ch, "
					   "materialize(toUInt64(0)) AS"
					   " sq, materialize(toInt32(-1)) AS cr,"
					   " materialize(toInt32(-1)) AS cnr, materialize('') AS "
					   "dt,"
					   " materialize(toUInt8(0)) AS tk, "
					   "materialize(toUInt8(0)) AS"
					   " dir," EV_TAIL("'thread'", "wchan",
							   "if(in_syscall = 1, toInt64(syscall), "
							   "-1)") " FROM"
								  " %s.thread_states WHERE 1",
			    sep, STORE_EVENT_THREAD, s->db);
		ch_filter(s, &q, f, "b_end", 1);
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_EXIT) {
		/* every batch's row of the process carries it once it exited */
		ch_sql__add(
			&q,
			"%sSELECT materialize(toUInt32(%u)) AS k," EV_COLS(
				"toUInt32(pid)") " materialize('exit') AS name, exit_ns AS start,"
						 " materialize(toUInt64(0)) AS dur,"
						 " materialize(toUInt64(0)) AS b,"
						 " materialize(toUInt64(1)) AS cnt,"
						 " materialize(toUInt64(0)) AS ch,"
						 " materialize(toUInt64(0)) AS sq,"
						 " materialize(toInt32(-1)) AS cr,"
						 " materialize(toInt32(-1)) AS cnr,"
						 " materialize('') AS dt,"
						 " materialize(toUInt8(0)) AS tk,"
						 " materialize(toUInt8(0)) AS dir,"
						 " materialize('exit') AS ck, materialize('') AS "
						 "de,"
						 " materialize(toInt64(0)) AS rt,"
						 " materialize(toUInt64(0)) AS sid"
						 " FROM %s.processes WHERE exit_ns > 0",
			sep, STORE_EVENT_EXIT, s->db);
		ch_filter(s, &q, f, "exit_ns", 1);
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_LAST_COLLECTIVE) {
		/* each (process, communicator)'s row of its largest seq (l_*:
		 * an alias may not shadow the column argMax reads) */
		ch_sql__add(
			&q,
			"%sSELECT materialize(toUInt32(%u)) AS k," EV_COLS(
				"l_tid") " l_op AS name, l_entry AS start,"
					 " toUInt64(if(l_exit > l_entry, l_exit - l_entry, 0)) AS "
					 "dur,"
					 " l_bytes AS b, materialize(toUInt64(1)) AS cnt, "
					 "comm_hash AS ch,"
					 " l_seq AS sq, if(known = 1, crank, -1) AS cr,"
					 " if(known = 1, cn, -1) AS cnr, l_dtype AS dt,"
					 " materialize(toUInt8(0)) AS tk, materialize(toUInt8(0)) "
					 "AS dir,"
					 " materialize('collective') AS ck, materialize('') AS de,"
					 " materialize(toInt64(0)) AS rt, l_stack AS sid FROM"
					 " (SELECT node, pid, pstart, job, has_rank, rank, "
					 "comm_hash,"
					 " max(seq) AS l_seq, argMax(tid, seq) AS l_tid,"
					 " argMax(op, seq) AS l_op, argMax(entry_ns, seq) AS "
					 "l_entry,"
					 " argMax(exit_ns, seq) AS l_exit, argMax(bytes, seq) AS "
					 "l_bytes,"
					 " argMax(dtype, seq) AS l_dtype, argMax(stack_id, seq) AS "
					 "l_stack"
					 " FROM %s.nccl_collectives WHERE 1",
			sep, STORE_EVENT_LAST_COLLECTIVE, s->db);
		ch_filter(s, &q, f, "entry_ns", 1);
		ch_sql__add(&q,
			    " GROUP BY node, pid, pstart, job, has_rank, rank, comm_hash)"
			    " ANY LEFT JOIN (SELECT node, pid, pstart, comm_hash,"
			    " argMax(comm_rank, init_ns) AS crank, argMax(nranks, init_ns) AS cn,"
			    " toUInt8(1) AS known FROM %s.nccl_comms WHERE 1",
			    s->db);
		ch_filter(s, &q, &(struct store_filter){ .node = f->node }, NULL, 0);
		ch_sql__add(&q, " GROUP BY node, pid, pstart, comm_hash) USING (node, pid, pstart,"
				" comm_hash)");
	}
	ch_sql__add(&q, ") ORDER BY start LIMIT %u", ev.limit + 1);
	err = ch_query_rows(s, &q, "events", ev.stacks ? 22 : -1, store_emit__event, NULL, &ev);
	return err == 1 ? 0 : err;
}

/* ---- diagnosis inputs ------------------------------------------------------------ */

static int ch_thread_times(struct store *base, const struct store_filter *f,
			   store_thread_time_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };
	/* By window end: b_end in [from, to) (see struct store_thread_time). */
	struct store_filter g = *f;

	g.batch_by_end = 1;
	ch_sql__add(&q, "SELECT * FROM (");
	for (size_t k = 0; k < STORE_NTHREAD_PARTS; k++) {
		const struct store_thread_part *part = &STORE_THREAD_PARTS[k];
		struct store_part_sql ps;

		store_thread_part__sql(part, &ps);
		ch_sql__add(&q,
			    "%sSELECT node, pid, tid, job, has_rank, rank, "
			    "materialize(toUInt32(%u)) AS kind,"
			    " materialize(toUInt32(%s)) AS ix, sum(%s) AS v FROM %s.%s WHERE 1%s",
			    k ? " UNION ALL " : "", part->kind, ps.ix, part->value, s->db,
			    part->table, ps.cond);
		ch_filter(s, &q, &g, NULL, 1);
		ch_sql__add(&q, " GROUP BY node, pid, pstart, tid, job, has_rank, rank, ix");
	}
	ch_sql__add(&q, ")");
	return ch_query_rows(s, &q, "thread times", -1, store_emit__thread_time, (void *)fn, ctx);
}

static int ch_cpu_times(struct store *base, const struct store_filter *f, store_cpu_time_fn fn,
			void *ctx)
{
	static const struct {
		uint32_t kind;
		const char *cols, *table, *group;
		int per_process;
	} parts[] = {
		{ STORE_CPU_TARGET,
		  "cpu, pid, materialize(toUInt32(0)), any(comm), job, has_rank, rank",
		  "target_cpus", "node, pid, pstart, job, has_rank, rank, cpu", 1 },
		{ STORE_CPU_FOREIGN,
		  "cpu, fpid, materialize(toUInt32(0)), comm, materialize(''),"
		  " materialize(toUInt8(0)), materialize(toInt32(-1))",
		  "foreign_runs", "node, cpu, fpid, comm", 0 },
		{ STORE_CPU_SOFTIRQ,
		  "cpu, materialize(toUInt32(0)), vector, materialize(''), materialize(''),"
		  " materialize(toUInt8(0)), materialize(toInt32(-1))",
		  "softirq_vectors", "node, cpu, vector", 0 },
	};
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };
	struct store_filter g = *f; /* by window end, as ch_thread_times */

	g.batch_by_end = 1;
	ch_sql__add(&q, "SELECT * FROM (");
	for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
		ch_sql__add(
			&q,
			"%sSELECT node, materialize(toUInt32(%u)), %s, sum(ns) FROM %s.%s WHERE 1",
			k ? " UNION ALL " : "", parts[k].kind, parts[k].cols, s->db,
			parts[k].table);
		ch_filter(s, &q, &g, NULL, parts[k].per_process);
		ch_sql__add(&q, " GROUP BY %s", parts[k].group);
	}
	ch_sql__add(&q, ")");
	return ch_query_rows(s, &q, "cpu times", -1, store_emit__cpu_time, (void *)fn, ctx);
}

static int ch_node_clocks(struct store *base, const struct store_filter *f, store_node_clock_fn fn,
			  void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };

	ch_sql__add(&q,
		    "SELECT node, max(clock_error_ns), max(freq_hz), uniqExact(batch_id)"
		    " FROM %s.batches WHERE 1",
		    s->db);
	batch_filter(s, &q, f);
	ch_sql__add(&q, " GROUP BY node ORDER BY node");
	return ch_query_rows(s, &q, "node clocks", -1, store_emit__node_clock, (void *)fn, ctx);
}

static int ch_collective_stats(struct store *base, const struct store_filter *f,
			       store_collstat_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct store_filter g = { .from_ns = f->from_ns, .to_ns = f->to_ns };
	struct ch_sql q = { 0 };

	ch_sql__add(&q,
		    "SELECT job, comm_hash, op, size_class, nranks, count(), sum(occurrences),"
		    " sum(observed_ns), sum(stall_ns), sum(slack_ns), sum(bytes),"
		    " max(observed_max_ns), min(b_start), max(b_end) FROM %s.collective_stats"
		    " WHERE 1",
		    s->db);
	ch_filter(s, &q, &g, NULL, 0);
	ch_and_quoted(&q, " AND job = ", f->job);
	ch_sql__add(&q, " GROUP BY job, comm_hash, op, size_class, nranks"
			" ORDER BY sum(stall_ns) DESC, job, comm_hash, op, size_class");
	return ch_query_rows(s, &q, "collective stats", -1, store_emit__collstat, (void *)fn, ctx);
}

static int ch_hangs(struct store *base, const struct store_filter *f, store_hang_fn fn, void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct store_filter g = { 0 }; /* committed attempts; time below */
	struct ch_sql q = { 0 };

	ch_sql__add(&q,
		    "SELECT job, kind, comm_hash, seq, op, bytes, nranks, since_ns, decided_ns,"
		    " until_ns, waiting, missing, mismatched, report FROM %s.hangs WHERE 1",
		    s->db);
	ch_filter(s, &q, &g, NULL, 0);
	if (f->to_ns)
		ch_sql__add(&q, " AND decided_ns < %" PRIu64, f->to_ns);
	if (f->from_ns)
		ch_sql__add(&q, " AND (until_ns = 0 OR until_ns > %" PRIu64 ")", f->from_ns);
	ch_and_quoted(&q, " AND job = ", f->job);
	ch_sql__add(&q, " ORDER BY decided_ns, until_ns");
	return ch_query_rows(s, &q, "hangs", -1, store_emit__hang, (void *)fn, ctx);
}

static int ch_captures(struct store *base, const struct store_filter *f, store_capture_fn fn,
		       void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct store_filter g = { .from_ns = f->from_ns, .to_ns = f->to_ns };
	struct ch_sql q = { 0 };

	ch_sql__add(&q,
		    "SELECT id, job, trigger, reason, created_ns, start_ns, end_ns, freq_hz,"
		    " offcpu, gpu_calls, targets, state FROM %s.captures WHERE 1",
		    s->db);
	ch_filter(s, &q, &g, NULL, 0);
	ch_and_quoted(&q, " AND job = ", f->job);
	ch_sql__add(&q, " ORDER BY created_ns, state = 'cancelled'");
	return ch_query_rows(s, &q, "captures", -1, store_emit__capture, (void *)fn, ctx);
}

static int ch_capture_runs(struct store *base, const char *capture, store_capture_run_fn fn,
			   void *ctx)
{
	struct ch_store *s = (struct ch_store *)base;
	struct ch_sql q = { 0 };

	ch_sql__add(&q,
		    "SELECT node, start_ns, argMax(end_ns, b_end), argMax(end_reason, b_end),"
		    " argMax(freq_hz, b_end), argMax(processes, b_end), argMax(samples, b_end),"
		    " argMax(gpu_calls, b_end), argMax(dropped, b_end), max(b_end)"
		    " FROM %s.capture_runs WHERE 1",
		    s->db);
	ch_filter(s, &q, &(struct store_filter){ 0 }, NULL, 0);
	ch_and_quoted(&q, " AND capture = ", capture);
	ch_sql__add(&q, " GROUP BY node, start_ns ORDER BY node, start_ns");
	return ch_query_rows(s, &q, "capture runs", -1, store_emit__capture_run, (void *)fn, ctx);
}

const struct store_ops clickhouse_store_ops = {
	.name = "clickhouse",
	.ingest = ch_store__ingest,
	.jobs = ch_jobs,
	.nodes = ch_nodes,
	.processes = ch_processes,
	.profile = ch_profile,
	.leaks = ch_leaks,
	.tally = ch_tally,
	.events = ch_events,
	.retain = ch_retain,
	.stats = ch_stats,
	.sizes = ch_sizes,
	.close = ch_close,
	.thread_times = ch_thread_times,
	.cpu_times = ch_cpu_times,
	.node_clocks = ch_node_clocks,
	.collective_stats = ch_collective_stats,
	.hangs = ch_hangs,
	.captures = ch_captures,
	.capture_runs = ch_capture_runs,
	.replicas = ch_replicas,
};
