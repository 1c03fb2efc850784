// SPDX-License-Identifier: Apache-2.0
/*
 * The SQLite store's queries (the contract: server/store.h).  Rows are
 * read by the shared reader (server/store/backend.h), so each SELECT lists
 * its columns in the order the reader's comment gives.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/store/sqlite.h"

/* ---- queries ------------------------------------------------------------------------------ */

/* Batches b whose window overlaps the range, of the node. */
static void batch_filter(struct sq_query *q, const struct store_filter *f)
{
	sq_window(q, f, "b.end_ns", "b.start_ns");
	sq_and_text(q, " AND b.node = ?", f->node);
	sq_add(q, " AND b.node <> '" STORE_SERVER_NODE "'");
}

static int sq_jobs(struct store *base, const struct store_filter *f, store_job_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct sq_query q = { .len = 0 };

	sq_add(&q, "SELECT p.job, COUNT(DISTINCT p.node), COUNT(*),"
		   " COUNT(DISTINCT CASE WHEN p.has_rank THEN p.rank END), MAX(p.world_size),"
		   " MIN(p.first_ns), MAX(p.last_ns),"
		   " (SELECT COALESCE(SUM(t.count),0) FROM cpu_samples t JOIN processes p2"
		   "  ON p2.id = t.process WHERE p2.job = p.job)"
		   " FROM processes p WHERE p.job <> ''");
	sq_proc_filter(&q, f);
	sq_add(&q, " GROUP BY p.job ORDER BY MAX(p.last_ns) DESC");
	return sq_query_rows(s, &q, store_emit__job, (void *)fn, ctx, 0);
}

static int sq_nodes(struct store *base, const struct store_filter *f, store_node_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct sq_query q = { .len = 0 };

	sq_add(&q, "SELECT b.node, MAX(b.agent_version), MIN(b.start_ns), MAX(b.end_ns), COUNT(*),"
		   " SUM(b.cpu_samples), SUM(b.drops) FROM batches b WHERE 1");
	batch_filter(&q, f);
	if (f->pid || (f->job && f->job[0]) || f->has_rank || (f->container && f->container[0])) {
		struct store_filter g = *f;

		g.from_ns = g.to_ns = 0;
		sq_add(&q, " AND b.node IN (SELECT p.node FROM processes p WHERE 1");
		sq_filter(&q, &g, NULL);
		sq_add(&q, ")");
	}
	sq_add(&q, " GROUP BY b.node ORDER BY b.node");
	return sq_query_rows(s, &q, store_emit__node, (void *)fn, ctx, 0);
}

static int sq_processes(struct store *base, const struct store_filter *f, store_process_fn fn,
			void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct sq_query q = { .len = 0 };

	sq_add(&q, "SELECT p.node, p.pid, p.start_time_ns, p.comm, p.cmdline, p.container, p.pod,"
		   " p.job, p.has_rank, p.rank, p.local_rank, p.world_size, p.first_ns, p.last_ns,"
		   " (SELECT COALESCE(SUM(count),0) FROM cpu_samples WHERE process = p.id)"
		   " FROM processes p WHERE 1");
	sq_proc_filter(&q, f);
	sq_add(&q, " ORDER BY p.job, p.rank, p.node, p.pid");
	return sq_query_rows(s, &q, store_emit__process, (void *)fn, ctx, 0);
}

static int sq_profile(struct store *base, const struct store_filter *f,
		      enum store_profile_kind kind, store_sample_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct sq_query q = { .len = 0 };

	const char *comm = kind == STORE_PROFILE_OFFCPU ? "p.comm" : "t.comm";

	if (f->merge_threads)
		sq_add(&q, "SELECT '', 0, 0, %s, 0, 0, t.stack_id, SUM(t.%s)", comm,
		       kind == STORE_PROFILE_OFFCPU ? "ns" : "count");
	else
		sq_add(&q,
		       "SELECT p.node, p.pid, t.tid, %s, p.has_rank, p.rank, t.stack_id, SUM(t.%s)",
		       comm, kind == STORE_PROFILE_OFFCPU ? "ns" : "count");
	if (kind == STORE_PROFILE_OFFCPU)
		sq_add(&q, FROM_PROC_BATCH("offcpu_samples"));
	else
		sq_add(&q, FROM_PROC_BATCH("cpu_samples"));
	sq_filter(&q, f, NULL);
	if (f->merge_threads)
		sq_add(&q, " GROUP BY %s, t.stack_id", comm);
	else
		sq_add(&q, " GROUP BY p.node, p.pid, t.tid, %s, t.stack_id", comm);
	return sq_query_rows(s, &q, store_emit__sample, (void *)fn, ctx, 1);
}

static int sq_leaks(struct store *base, const struct store_filter *f, store_leak_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct sq_query q = { .len = 0 };
	struct store_filter g = *f;
	uint64_t at = f->to_ns ? f->to_ns : INT64_MAX;

	/* Outstanding at `at`: made before it (in range) and not freed before
	 * it, whether the free came in the same record or a later one. */
	g.to_ns = 0;
	sq_add(&q,
	       "SELECT p.node, p.pid, p.has_rank, p.rank, t.stack_id, SUM(t.size), COUNT(*),"
	       " MIN(t.alloc_ns), t.level" FROM_PROC_BATCH("cuda_allocs") " AND NOT t.free_only"
									  " AND t.alloc_ns < ?");
	sq_int(&q, sq_i64(at));
	sq_add(&q, " AND NOT (t.freed AND t.free_ns < ?)");
	sq_int(&q, sq_i64(at));
	sq_add(&q, " AND NOT EXISTS (SELECT 1 FROM cuda_allocs x WHERE x.process = t.process"
		   " AND x.ptr = t.ptr AND x.alloc_ns = t.alloc_ns AND x.level = t.level"
		   " AND x.freed AND x.free_ns < ?)");
	sq_int(&q, sq_i64(at));
	sq_filter(&q, &g, "t.alloc_ns");
	sq_add(&q, " GROUP BY p.node, p.pid, t.level, t.stack_id ORDER BY SUM(t.size) DESC");
	return sq_query_rows(s, &q, store_emit__leak, (void *)fn, ctx, 1);
}

#define MAX_CODES 64

static int emit_tally(const struct store_row *r, void *fn, void *ctx)
{
	struct store_api_code codes[MAX_CODES];
	struct store_tally t;
	/* Codes come as "code\x1fname\x1fcount\x1e..." from group_concat. */
	const char *e = r->ops->str(r, 10);
	char buf[4096];

	store_row__tally(r, &t);
	t.codes = codes;
	if (e[0]) {
		snprintf(buf, sizeof(buf), "%s", e);
		for (char *save = NULL, *rec = strtok_r(buf, "\x1e", &save);
		     rec && t.ncodes < MAX_CODES; rec = strtok_r(NULL, "\x1e", &save)) {
			char *s2 = NULL, *code = strtok_r(rec, "\x1f", &s2);
			char *name = strtok_r(NULL, "\x1f", &s2),
			     *cnt = strtok_r(NULL, "\x1f", &s2);

			if (!code || !name || !cnt)
				continue;
			codes[t.ncodes++] =
				(struct store_api_code){ (int32_t)strtol(code, NULL, 10), name,
							 strtoull(cnt, NULL, 10) };
		}
	}
	return ((store_tally_fn)fn)(ctx, &t);
}

static int sq_tally(struct store *base, const struct store_filter *f, store_tally_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct sq_query q = { .len = 0 };

	sq_add(&q, "WITH tl AS (SELECT p.id AS proc, p.node, p.pid, p.has_rank, p.rank, t.fn,"
		   " SUM(t.calls) calls, SUM(t.total_ns) total, MIN(t.min_ns) mn, MAX(t.max_ns) "
		   "mx" FROM_PROC_BATCH("cuda_api_tally"));
	sq_filter(&q, f, NULL);
	sq_add(&q, " GROUP BY p.id, t.fn), er AS (SELECT p.id AS proc, t.fn, t.code, t.name,"
		   " SUM(t.count) n" FROM_PROC_BATCH("cuda_api_errors"));
	sq_filter(&q, f, NULL);
	sq_add(&q,
	       " GROUP BY p.id, t.fn, t.code, t.name)"
	       " SELECT tl.node, tl.pid, tl.proc, tl.has_rank, tl.rank, tl.fn, tl.calls, tl.total,"
	       " tl.mn,"
	       " tl.mx, (SELECT group_concat(er.code || char(31) || er.name || char(31) || er.n,"
	       " char(30)) FROM er WHERE er.proc = tl.proc AND er.fn = tl.fn)"
	       " FROM tl ORDER BY tl.total DESC");
	return sq_query_rows(s, &q, emit_tally, (void *)fn, ctx, 0);
}

#define EV_COLS " p.node, p.pid, %s, p.job, p.has_rank, p.rank, "
/* a collective's rank and communicator size, from its latest init record */
#define COMM_RANK_COLS                                                      \
	" (SELECT rank FROM nccl_comms c WHERE c.process = t.process AND"   \
	"  c.comm_hash = t.comm_hash ORDER BY c.init_ns DESC LIMIT 1),"     \
	" (SELECT nranks FROM nccl_comms c WHERE c.process = t.process AND" \
	"  c.comm_hash = t.comm_hash ORDER BY c.init_ns DESC LIMIT 1)"

static int sq_events(struct store *base, const struct store_filter *f, uint32_t kinds,
		     uint32_t limit, int *truncated, store_event_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct store_events ev;
	struct sq_query q = { .len = 0 };
	const char *sep = "";
	int err;

	store_events__init(&ev, kinds, limit, truncated, fn, ctx);
	/* columns: see store_emit__event (call_kind, detail, ret, stack last) */
	if (kinds & STORE_EVENT_COLLECTIVE) {
		sq_add(&q,
		       "SELECT %u," EV_COLS "t.op, t.entry_ns, t.exit_ns - t.entry_ns, t.bytes, 1,"
		       " t.comm_hash, t.seq," COMM_RANK_COLS ","
		       " t.dtype, 0, 0, 'collective', '', 0, t.stack_id" FROM_PROC_BATCH(
			       "nccl_collectives"),
		       STORE_EVENT_COLLECTIVE, "t.tid");
		sq_filter(&q, f, "t.entry_ns");
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_TRANSFER) {
		sq_add(&q,
		       "%sSELECT %u," EV_COLS "t.api, t.start_ns, t.ns, t.bytes, t.count, 0, 0,"
		       " NULL, NULL, '', t.kind, t.direction, '', '', 0, "
		       "t.stack_id" FROM_PROC_BATCH("cuda_transfers") " AND t.start_ns > 0",
		       sep, STORE_EVENT_TRANSFER, "t.tid");
		sq_filter(&q, f, "t.start_ns");
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_LAUNCH) {
		sq_add(&q,
		       "%sSELECT %u," EV_COLS "t.kernel, b.start_ns, t.ns_in_call, 0, t.count, 0,"
		       " 0, NULL, NULL, '', 0, 0, 'launch', '', 0, t.stack_id" FROM_PROC_BATCH(
			       "cuda_launches"),
		       sep, STORE_EVENT_LAUNCH, "0");
		sq_filter(&q, f, "b.start_ns");
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_CPU_SAMPLE) {
		sq_add(&q,
		       "%sSELECT %u," EV_COLS "'cpu', t.time_ns, 0, 0, 1, 0, 0, NULL, NULL, '',"
		       " 0, 0, 'cpu', '', 0, t.stack_id" FROM_PROC_BATCH("capture_samples"),
		       sep, STORE_EVENT_CPU_SAMPLE, "t.tid");
		sq_filter(&q, f, "t.time_ns");
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_GPU_CALL) {
		sq_add(&q,
		       "%sSELECT %u," EV_COLS "t.api, t.start_ns,"
		       " CASE WHEN t.end_ns > t.start_ns THEN t.end_ns - t.start_ns ELSE 0 END,"
		       " t.bytes, 1, 0, 0, NULL, NULL, '', 0, 0, t.kind, t.kernel, t.ret,"
		       " t.stack_id" FROM_PROC_BATCH("gpu_calls"),
		       sep, STORE_EVENT_GPU_CALL, "t.tid");
		sq_filter(&q, f, "t.start_ns");
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_INFLIGHT) {
		sq_add(&q,
		       "%sSELECT %u," EV_COLS "t.api, t.entry_ns,"
		       " CASE WHEN b.end_ns > t.entry_ns THEN b.end_ns - t.entry_ns ELSE 0 END,"
		       " t.bytes, 1, t.comm_hash, t.seq, t.rank, t.nranks, '', 0, 0, 'inflight', "
		       "'',"
		       " 0, t.stack_id" FROM_PROC_BATCH("inflight_calls"),
		       sep, STORE_EVENT_INFLIGHT, "t.tid");
		sq_filter(&q, f, "b.end_ns");
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_THREAD) {
		sq_add(&q,
		       "%sSELECT %u," EV_COLS
		       "t.state, b.end_ns, 0, 0, 1, 0, 0, NULL, NULL, '', 0, 0,"
		       " 'thread', t.wchan, CASE WHEN t.in_syscall THEN t.syscall ELSE -1 END,"
		       " t.stack_id" FROM_PROC_BATCH("thread_states"),
		       sep, STORE_EVENT_THREAD, "t.tid");
		sq_filter(&q, f, "b.end_ns");
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_EXIT) {
		sq_add(&q,
		       "%sSELECT %u," EV_COLS
		       "'exit', p.exit_ns, 0, 0, 1, 0, 0, NULL, NULL, '', 0, 0,"
		       " 'exit', '', 0, 0 FROM processes p WHERE p.exit_ns > 0",
		       sep, STORE_EVENT_EXIT, "p.pid");
		sq_filter(&q, f, "p.exit_ns");
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_LAST_COLLECTIVE) {
		/* the bare columns come from the row of MAX(seq) */
		sq_add(&q,
		       "%sSELECT %u," EV_COLS
		       "t.op, t.entry_ns, t.exit_ns - t.entry_ns, t.bytes, 1,"
		       " t.comm_hash, MAX(t.seq)," COMM_RANK_COLS
		       ", t.dtype, 0, 0, 'collective', '', 0,"
		       " t.stack_id" FROM_PROC_BATCH("nccl_collectives"),
		       sep, STORE_EVENT_LAST_COLLECTIVE, "t.tid");
		sq_filter(&q, f, "t.entry_ns");
		sq_add(&q, " GROUP BY t.process, t.comm_hash");
	}
	if (!(kinds & ~STORE_EVENT_STACKS))
		return 0;
	sq_add(&q, " ORDER BY 9 LIMIT %u", ev.limit + 1);
	err = sq_query_rows(s, &q, store_emit__event, NULL, &ev, ev.stacks);
	return err == 1 ? 0 : err; /* 1: stopped at the limit */
}

/* ---- diagnosis inputs ------------------------------------------------------------------- */

static int sq_thread_times(struct store *base, const struct store_filter *f,
			   store_thread_time_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	int err = 0;

	/* One query per table: the filter's binds would overflow one UNION. */
	for (size_t i = 0; !err && i < STORE_NTHREAD_PARTS; i++) {
		const struct store_thread_part *part = &STORE_THREAD_PARTS[i];
		struct sq_query q = { .len = 0 };
		struct store_part_sql ps;

		/* The part's columns are unqualified: only t has them. */
		store_thread_part__sql(part, &ps);
		sq_add(&q,
		       "SELECT p.node, p.pid, t.tid, p.job, p.has_rank, p.rank, %u, %s AS ix,"
		       " SUM(%s) FROM %s t JOIN batches b ON b.id = t.batch"
		       " JOIN processes p ON p.id = t.process WHERE 1%s",
		       part->kind, ps.ix, part->value, part->table, ps.cond);
		sq_filter(&q, f, "b.end_ns");
		sq_add(&q, " GROUP BY p.id, t.tid, ix");
		err = sq_query_rows(s, &q, store_emit__thread_time, (void *)fn, ctx, 0);
	}
	return err;
}

static int sq_cpu_times(struct store *base, const struct store_filter *f, store_cpu_time_fn fn,
			void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	/* node rows: the time range and node only */
	struct store_filter nf = { .from_ns = f->from_ns, .to_ns = f->to_ns };
	struct sq_query q = { .len = 0 };
	int err;

	sq_add(&q,
	       "SELECT p.node, %u, t.cpu, p.pid, 0, p.comm, p.job, p.has_rank, p.rank, SUM(t.ns)"
	       " FROM target_cpus t JOIN batches b ON b.id = t.batch"
	       " JOIN processes p ON p.id = t.process WHERE 1",
	       STORE_CPU_TARGET);
	sq_filter(&q, f, "b.end_ns");
	sq_add(&q, " GROUP BY p.id, t.cpu");
	err = sq_query_rows(s, &q, store_emit__cpu_time, (void *)fn, ctx, 0);
	for (int i = 0; !err && i < 2; i++) {
		q = (struct sq_query){ .len = 0 };
		if (i == 0)
			sq_add(&q,
			       "SELECT b.node, %u, t.cpu, t.pid, 0, t.comm, NULL, 0, 0, SUM(t.ns)"
			       " FROM foreign_runs t JOIN batches b ON b.id = t.batch WHERE 1",
			       STORE_CPU_FOREIGN);
		else
			sq_add(&q,
			       "SELECT b.node, %u, t.cpu, 0, t.vector, NULL, NULL, 0, 0, SUM(t.ns)"
			       " FROM softirq_vectors t JOIN batches b ON b.id = t.batch WHERE 1",
			       STORE_CPU_SOFTIRQ);
		sq_filter(&q, &nf, "b.end_ns");
		sq_and_text(&q, " AND b.node = ?", f->node);
		sq_add(&q, i == 0 ? " GROUP BY b.node, t.cpu, t.pid, t.comm"
				  : " GROUP BY b.node, t.cpu, t.vector");
		err = sq_query_rows(s, &q, store_emit__cpu_time, (void *)fn, ctx, 0);
	}
	return err;
}

static int sq_node_clocks(struct store *base, const struct store_filter *f, store_node_clock_fn fn,
			  void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct sq_query q = { .len = 0 };

	sq_add(&q, "SELECT b.node, MAX(b.clock_error_ns), MAX(b.freq_hz), COUNT(*)"
		   " FROM batches b WHERE 1");
	batch_filter(&q, f);
	sq_add(&q, " GROUP BY b.node ORDER BY b.node");
	return sq_query_rows(s, &q, store_emit__node_clock, (void *)fn, ctx, 0);
}

static int sq_collective_stats(struct store *base, const struct store_filter *f,
			       store_collstat_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct sq_query q = { .len = 0 };

	sq_add(&q, "SELECT t.job, t.comm_hash, t.op, t.size_class, t.nranks, COUNT(*),"
		   " SUM(t.occurrences), SUM(t.observed_ns), SUM(t.stall_ns), SUM(t.slack_ns),"
		   " SUM(t.bytes), MAX(t.observed_max_ns), MIN(b.start_ns), MAX(b.end_ns)"
		   " FROM collective_stats t JOIN batches b ON b.id = t.batch WHERE 1");
	sq_window(&q, f, "b.end_ns", "b.start_ns");
	sq_and_text(&q, " AND t.job = ?", f->job);
	sq_add(&q, " GROUP BY t.job, t.comm_hash, t.op, t.size_class, t.nranks"
		   " ORDER BY SUM(t.stall_ns) DESC, t.job, t.comm_hash, t.op, t.size_class");
	return sq_query_rows(s, &q, store_emit__collstat, (void *)fn, ctx, 0);
}

static int sq_hangs(struct store *base, const struct store_filter *f, store_hang_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct sq_query q = { .len = 0 };

	sq_add(&q, "SELECT t.job, t.kind, t.comm_hash, t.seq, t.op, t.bytes, t.nranks, t.since_ns,"
		   " t.decided_ns, t.until_ns, t.waiting, t.missing, t.mismatched, t.report"
		   " FROM hangs t JOIN batches b ON b.id = t.batch WHERE 1");
	if (f->to_ns) {
		sq_add(&q, " AND t.decided_ns < ?");
		sq_int(&q, (int64_t)f->to_ns);
	}
	if (f->from_ns) { /* ongoing when written, or ended after from */
		sq_add(&q, " AND (t.until_ns = 0 OR t.until_ns > ?)");
		sq_int(&q, (int64_t)f->from_ns);
	}
	sq_and_text(&q, " AND t.job = ?", f->job);
	sq_add(&q, " ORDER BY t.decided_ns, t.until_ns");
	return sq_query_rows(s, &q, store_emit__hang, (void *)fn, ctx, 0);
}

static int sq_captures(struct store *base, const struct store_filter *f, store_capture_fn fn,
		       void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct sq_query q = { .len = 0 };

	sq_add(&q, "SELECT t.id, t.job, t.trigger, t.reason, t.created_ns, t.start_ns, t.end_ns,"
		   " t.freq_hz, t.offcpu, t.gpu_calls, t.targets, t.state"
		   " FROM captures t JOIN batches b ON b.id = t.batch WHERE 1");
	sq_window(&q, f, "b.end_ns", "b.start_ns");
	sq_and_text(&q, " AND t.job = ?", f->job);
	sq_add(&q, " ORDER BY t.created_ns, t.state = 'cancelled'");
	return sq_query_rows(s, &q, store_emit__capture, (void *)fn, ctx, 0);
}

static int sq_capture_runs(struct store *base, const char *capture, store_capture_run_fn fn,
			   void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct sq_query q = { .len = 0 };

	/* the latest row of each node's agent run */
	sq_add(&q, "SELECT b.node, t.start_ns, t.end_ns, t.end_reason, t.freq_hz, t.processes,"
		   " t.samples, t.gpu_calls, t.dropped, MAX(b.end_ns)"
		   " FROM capture_runs t JOIN batches b ON b.id = t.batch WHERE t.capture = ?");
	sq_text(&q, capture);
	sq_add(&q, " GROUP BY b.node, t.start_ns ORDER BY b.node, t.start_ns");
	return sq_query_rows(s, &q, store_emit__capture_run, (void *)fn, ctx, 0);
}

const struct store_ops sqlite_store_ops = {
	.name = "sqlite",
	.ingest = sqlite_store__ingest,
	.jobs = sq_jobs,
	.nodes = sq_nodes,
	.processes = sq_processes,
	.profile = sq_profile,
	.leaks = sq_leaks,
	.tally = sq_tally,
	.events = sq_events,
	.retain = sq_retain,
	.stats = sq_stats,
	.sizes = sq_sizes,
	.close = sq_close,
	.thread_times = sq_thread_times,
	.cpu_times = sq_cpu_times,
	.node_clocks = sq_node_clocks,
	.collective_stats = sq_collective_stats,
	.hangs = sq_hangs,
	.captures = sq_captures,
	.capture_runs = sq_capture_runs,
};
