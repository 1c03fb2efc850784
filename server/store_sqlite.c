// SPDX-License-Identifier: Apache-2.0
/*
 * The SQLite store (embedded default).  WAL mode: one writer connection
 * (ingest, retention) and a small pool of reader connections, so queries
 * run while a batch is written.  Schema in docs/server.md; stacks are
 * deduplicated by id in stacks/stack_frames, every row table points at its
 * batch (ON DELETE CASCADE: retention deletes batches) and, for per-process
 * rows, at a process instance (node, pid, start time).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/hash.h"
#include "lib/profile.h"
#include "lib/wire_enums.h"
#include "server/store.h"

#define NREADERS 3
#define MAX_STMTS 32
#define SCHEMA_VERSION "1"

struct conn {
	sqlite3 *db;
	pthread_mutex_t lock;
};

struct sqlite_store {
	struct store base;
	char *path;
	struct conn writer;
	struct conn readers[NREADERS];
	unsigned next_reader;
	pthread_mutex_t stats_lock;
	uint64_t batches, duplicates, retention_deleted;
	/* The writer's prepared ingest statements, keyed by their SQL text's
	 * address (string literals): prepared once, reused by every batch. */
	struct {
		const char *sql;
		sqlite3_stmt *st;
	} stmts[MAX_STMTS];
};

static const char SCHEMA[] =
	"CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);"
	"CREATE TABLE IF NOT EXISTS batches("
	" id INTEGER PRIMARY KEY, batch_id BLOB NOT NULL UNIQUE, node TEXT NOT NULL,"
	" agent_version TEXT, agent_run_id BLOB, seq INTEGER, start_ns INTEGER, end_ns INTEGER,"
	" received_ns INTEGER, clock_source INTEGER, clock_error_ns INTEGER, freq_hz INTEGER,"
	" wire_bytes INTEGER, cpu_samples INTEGER, drops INTEGER);"
	"CREATE INDEX IF NOT EXISTS batches_time ON batches(end_ns);"
	"CREATE INDEX IF NOT EXISTS batches_node ON batches(node, end_ns);"
	"CREATE TABLE IF NOT EXISTS processes("
	" id INTEGER PRIMARY KEY, node TEXT NOT NULL, pid INTEGER NOT NULL,"
	" start_time_ns INTEGER NOT NULL, ppid INTEGER, comm TEXT, cmdline TEXT, cgroup TEXT,"
	" container TEXT, pod TEXT, job TEXT, has_rank INTEGER, rank INTEGER,"
	" local_rank INTEGER, world_size INTEGER, first_ns INTEGER, last_ns INTEGER,"
	" UNIQUE(node, pid, start_time_ns));"
	"CREATE INDEX IF NOT EXISTS processes_job ON processes(job, rank);"
	"CREATE TABLE IF NOT EXISTS stacks(id INTEGER PRIMARY KEY, nframes INTEGER);"
	"CREATE TABLE IF NOT EXISTS stack_frames("
	" stack_id INTEGER NOT NULL, depth INTEGER NOT NULL, kind INTEGER, flags INTEGER,"
	" func TEXT, file TEXT, line INTEGER, module TEXT, build_id TEXT, addr INTEGER,"
	" PRIMARY KEY(stack_id, depth)) WITHOUT ROWID;"
#define BATCH_REF " batch INTEGER NOT NULL REFERENCES batches(id) ON DELETE CASCADE,"
#define PROC_REF " process INTEGER NOT NULL REFERENCES processes(id),"
	"CREATE TABLE IF NOT EXISTS cpu_samples(" BATCH_REF PROC_REF
	" tid INTEGER, comm TEXT, stack_id INTEGER, count INTEGER);"
	"CREATE INDEX IF NOT EXISTS cpu_samples_batch ON cpu_samples(batch);"
	"CREATE TABLE IF NOT EXISTS offcpu_samples(" BATCH_REF PROC_REF
	" tid INTEGER, stack_id INTEGER, reason INTEGER, ns INTEGER, count INTEGER);"
	"CREATE INDEX IF NOT EXISTS offcpu_samples_batch ON offcpu_samples(batch);"
	"CREATE TABLE IF NOT EXISTS sched_stats(" BATCH_REF PROC_REF
	" tid INTEGER, on_cpu_ns INTEGER, runqueue_latency_ns INTEGER,"
	" runnable_wait_ns INTEGER, switches INTEGER);"
	"CREATE TABLE IF NOT EXISTS irq_stats(" BATCH_REF
	" cpu INTEGER, irq_ns INTEGER, softirq_ns INTEGER);"
	/* CPU layer (issue 7) */
	"CREATE TABLE IF NOT EXISTS softirq_vectors(" BATCH_REF
	" cpu INTEGER, vector INTEGER, ns INTEGER);"
	"CREATE TABLE IF NOT EXISTS foreign_runs(" BATCH_REF
	" cpu INTEGER, pid INTEGER, comm TEXT, ns INTEGER);"
	"CREATE TABLE IF NOT EXISTS target_cpus(" BATCH_REF PROC_REF " cpu INTEGER, ns INTEGER);"
	"CREATE TABLE IF NOT EXISTS time_breakdown(" BATCH_REF PROC_REF
	" tid INTEGER, category INTEGER, ns INTEGER);"
	"CREATE TABLE IF NOT EXISTS cuda_launches(" BATCH_REF PROC_REF
	" stack_id INTEGER, kernel TEXT, count INTEGER, ns_in_call INTEGER,"
	" grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, block_y INTEGER,"
	" block_z INTEGER, device INTEGER, stream INTEGER);"
	"CREATE TABLE IF NOT EXISTS cuda_allocs(" BATCH_REF PROC_REF
	" ptr INTEGER, size INTEGER, stack_id INTEGER, alloc_ns INTEGER, freed INTEGER,"
	" free_ns INTEGER, device INTEGER, api TEXT, free_only INTEGER);"
	"CREATE INDEX IF NOT EXISTS cuda_allocs_key ON cuda_allocs(process, ptr, alloc_ns);"
	"CREATE TABLE IF NOT EXISTS cuda_alloc_failures(" BATCH_REF PROC_REF
	" stack_id INTEGER, code INTEGER, code_name TEXT, count INTEGER, bytes INTEGER);"
	"CREATE TABLE IF NOT EXISTS cuda_transfers(" BATCH_REF PROC_REF
	" tid INTEGER, stack_id INTEGER, kind INTEGER, direction INTEGER, bytes INTEGER,"
	" ns INTEGER, start_ns INTEGER, count INTEGER, api TEXT);"
	"CREATE TABLE IF NOT EXISTS cuda_api_tally(" BATCH_REF PROC_REF
	" fn TEXT, calls INTEGER, total_ns INTEGER, min_ns INTEGER, max_ns INTEGER);"
	"CREATE TABLE IF NOT EXISTS cuda_api_errors(" BATCH_REF PROC_REF
	" fn TEXT, code INTEGER, name TEXT, count INTEGER);"
	"CREATE TABLE IF NOT EXISTS probe_duty(" BATCH_REF
	" probe TEXT, ratio REAL, on_ns INTEGER);"
	"CREATE TABLE IF NOT EXISTS nccl_comms(" BATCH_REF PROC_REF
	" comm_hash INTEGER, rank INTEGER, nranks INTEGER, device INTEGER, init_ns INTEGER);"
	"CREATE TABLE IF NOT EXISTS nccl_collectives(" BATCH_REF PROC_REF
	" tid INTEGER, comm_hash INTEGER, seq INTEGER, op TEXT, dtype TEXT, bytes INTEGER,"
	" entry_ns INTEGER, exit_ns INTEGER, peer INTEGER, stack_id INTEGER);"
	"CREATE INDEX IF NOT EXISTS nccl_collectives_time ON nccl_collectives(entry_ns);"
	"CREATE TABLE IF NOT EXISTS nccl_stats(" BATCH_REF PROC_REF
	" comm_hash INTEGER, op TEXT, count INTEGER, bytes INTEGER, total_ns INTEGER,"
	" min_ns INTEGER, max_ns INTEGER);";

static void set_err(char *err, size_t errsz, const char *what, sqlite3 *db)
{
	snprintf(err, errsz, "sqlite: %s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
}

static int conn_open(struct conn *c, const char *path, int writer, char *err, size_t errsz)
{
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (writer ? SQLITE_OPEN_CREATE : 0);
	const char *pragmas = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
			      "PRAGMA foreign_keys=ON; PRAGMA busy_timeout=10000;"
			      "PRAGMA cache_size=-16384;";

	if (sqlite3_open_v2(path, &c->db, flags, NULL) != SQLITE_OK) {
		set_err(err, errsz, path, c->db);
		return -EIO;
	}
	if (sqlite3_exec(c->db, pragmas, NULL, NULL, NULL) != SQLITE_OK ||
	    (writer && sqlite3_exec(c->db, SCHEMA, NULL, NULL, NULL) != SQLITE_OK)) {
		set_err(err, errsz, "schema", c->db);
		return -EIO;
	}
	pthread_mutex_init(&c->lock, NULL);
	return 0;
}

static struct conn *reader(struct sqlite_store *s)
{
	unsigned start = __atomic_fetch_add(&s->next_reader, 1, __ATOMIC_RELAXED);

	for (unsigned i = 0; i < NREADERS; i++) {
		struct conn *c = &s->readers[(start + i) % NREADERS];

		if (!pthread_mutex_trylock(&c->lock))
			return c;
	}
	struct conn *c = &s->readers[start % NREADERS];
	pthread_mutex_lock(&c->lock);
	return c;
}

/* ---- ingest ----------------------------------------------------------------- */

struct ingest {
	struct sqlite_store *s;
	sqlite3 *db;
	const struct store_batch *sb;
	const Strata__V1__Batch *b;
	int64_t batch_row;
	int64_t *proc_rows; /* per pb process */
};

static int stmt(struct ingest *in, const char *sql, sqlite3_stmt **st)
{
	struct sqlite_store *s = in->s;
	int i;

	for (i = 0; i < MAX_STMTS && s->stmts[i].sql; i++) {
		if (s->stmts[i].sql == sql) {
			*st = s->stmts[i].st;
			return 0;
		}
	}
	if (i == MAX_STMTS)
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

static int64_t i64(uint64_t v)
{
	return (int64_t)v; /* stored as bit patterns; hashes use the full range */
}

static int ingest_batch_row(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;
	const Strata__V1__Drops *d = b->drops;
	uint64_t samples = 0, drops = 0;
	sqlite3_int64 before;
	sqlite3_stmt *st;
	int rc;

	for (size_t i = 0; i < b->n_cpu_samples; i++)
		samples += b->cpu_samples[i]->count;
	if (d)
		drops = d->map_full + d->stack_lost + d->proc_unknown + d->other +
			d->spool_dropped + d->cuda_events_lost + d->nccl_events_lost +
			d->batch_rows_dropped;
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
	sqlite3_bind_int64(st, 5, i64(b->seq));
	sqlite3_bind_int64(st, 6, i64(b->start_ns));
	sqlite3_bind_int64(st, 7, i64(b->end_ns));
	sqlite3_bind_int64(st, 8, i64(in->sb->received_ns));
	sqlite3_bind_int(st, 9, b->clock ? b->clock->source : 0);
	sqlite3_bind_int64(st, 10, b->clock ? i64(b->clock->error_bound_ns) : 0);
	sqlite3_bind_int(st, 11, (int)b->freq_hz);
	sqlite3_bind_int64(st, 12, i64(in->sb->wire_bytes));
	sqlite3_bind_int64(st, 13, i64(samples));
	sqlite3_bind_int64(st, 14, i64(drops));
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

static int ingest_processes(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;
	sqlite3_stmt *st;

	if (stmt(in,
		 "INSERT INTO processes(node,pid,start_time_ns,ppid,comm,cmdline,cgroup,container,"
		 "pod,job,has_rank,rank,local_rank,world_size,first_ns,last_ns)"
		 " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
		 " ON CONFLICT(node,pid,start_time_ns) DO UPDATE SET"
		 " last_ns=max(last_ns,excluded.last_ns), first_ns=min(first_ns,excluded.first_ns),"
		 " comm=excluded.comm,"
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
		const char *job = S(in, p->job_str);
		int rc;

		/* The job falls back to the launcher's ids when the agent did
		 * not name one. */
		if (!job[0])
			job = S(in, p->torchelastic_run_id_str)[0]
				      ? S(in, p->torchelastic_run_id_str)
				      : S(in, p->slurm_job_id_str);
		sqlite3_bind_text(st, 1, b->node, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, p->pid);
		sqlite3_bind_int64(st, 3, i64(p->start_time_ns));
		sqlite3_bind_int64(st, 4, p->ppid);
		sqlite3_bind_text(st, 5, S(in, p->comm_str), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 6, S(in, p->cmdline_str), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 7, S(in, p->cgroup_str), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 8, S(in, p->container_str), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 9, S(in, p->pod_str), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 10, job, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 11, p->rank != NULL);
		sqlite3_bind_int(st, 12, p->rank ? p->rank->rank : -1);
		sqlite3_bind_int(st, 13, p->rank ? p->rank->local_rank : -1);
		sqlite3_bind_int(st, 14, p->rank ? p->rank->world_size : -1);
		sqlite3_bind_int64(st, 15, i64(b->start_ns));
		sqlite3_bind_int64(st, 16, i64(b->end_ns));
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

		sqlite3_bind_int64(ins, 1, i64(s->id));
		sqlite3_bind_int(ins, 2, (int)s->nframes);
		if (step_done(ins))
			return -EIO;
		if (sqlite3_total_changes64(in->db) == before)
			continue; /* known stack: its frames are stored */
		for (uint32_t j = 0; j < s->nframes; j++) {
			const struct store_frame *f = &s->frames[j];

			sqlite3_bind_int64(fr, 1, i64(s->id));
			sqlite3_bind_int(fr, 2, (int)j);
			sqlite3_bind_int(fr, 3, (int)f->kind);
			sqlite3_bind_int(fr, 4, (int)f->flags);
			sqlite3_bind_text(fr, 5, f->func, -1, SQLITE_STATIC);
			sqlite3_bind_text(fr, 6, f->file, -1, SQLITE_STATIC);
			sqlite3_bind_int(fr, 7, (int)f->line);
			sqlite3_bind_text(fr, 8, f->module, -1, SQLITE_STATIC);
			sqlite3_bind_text(fr, 9, f->build_id, -1, SQLITE_STATIC);
			sqlite3_bind_int64(fr, 10, i64(f->addr));
			if (step_done(fr))
				return -EIO;
		}
	}
	return 0;
}

/* Binds ?1 batch, ?2 process row, then the caller's columns from ?3. */
static void bind_head(struct ingest *in, sqlite3_stmt *st, uint32_t process)
{
	sqlite3_bind_int64(st, 1, in->batch_row);
	sqlite3_bind_int64(st, 2, in->proc_rows[process]);
}

#define STACK_ID(idx) i64(in->sb->stacks[(idx)].id)

static int ingest_cpu(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;
	sqlite3_stmt *cpu, *off, *sch, *irq, *tb;

	if (stmt(in, "INSERT INTO cpu_samples VALUES(?,?,?,?,?,?)", &cpu) ||
	    stmt(in, "INSERT INTO offcpu_samples VALUES(?,?,?,?,?,?,?)", &off) ||
	    stmt(in, "INSERT INTO sched_stats VALUES(?,?,?,?,?,?,?)", &sch) ||
	    stmt(in, "INSERT INTO irq_stats VALUES(?,?,?,?)", &irq) ||
	    stmt(in, "INSERT INTO time_breakdown VALUES(?,?,?,?,?)", &tb))
		return -EIO;
	for (size_t i = 0; i < b->n_cpu_samples; i++) {
		const Strata__V1__CpuSample *c = b->cpu_samples[i];

		bind_head(in, cpu, c->process);
		sqlite3_bind_int64(cpu, 3, c->tid);
		sqlite3_bind_text(cpu, 4, S(in, c->thread_comm_str), -1, SQLITE_STATIC);
		sqlite3_bind_int64(cpu, 5, STACK_ID(c->stack));
		sqlite3_bind_int64(cpu, 6, i64(c->count));
		if (step_done(cpu))
			return -EIO;
	}
	for (size_t i = 0; i < b->n_offcpu_samples; i++) {
		const Strata__V1__OffCpuSample *c = b->offcpu_samples[i];

		bind_head(in, off, c->process);
		sqlite3_bind_int64(off, 3, c->tid);
		sqlite3_bind_int64(off, 4, STACK_ID(c->stack));
		sqlite3_bind_int(off, 5, c->reason);
		sqlite3_bind_int64(off, 6, i64(c->ns));
		sqlite3_bind_int64(off, 7, i64(c->count));
		if (step_done(off))
			return -EIO;
	}
	for (size_t i = 0; i < b->n_sched_stats; i++) {
		const Strata__V1__SchedStat *c = b->sched_stats[i];

		bind_head(in, sch, c->process);
		sqlite3_bind_int64(sch, 3, c->tid);
		sqlite3_bind_int64(sch, 4, i64(c->on_cpu_ns));
		sqlite3_bind_int64(sch, 5, i64(c->runqueue_latency_ns));
		sqlite3_bind_int64(sch, 6, i64(c->runnable_wait_ns));
		sqlite3_bind_int64(sch, 7, i64(c->switches));
		if (step_done(sch))
			return -EIO;
	}
	for (size_t i = 0; i < b->n_irq_stats; i++) {
		sqlite3_bind_int64(irq, 1, in->batch_row);
		sqlite3_bind_int64(irq, 2, b->irq_stats[i]->cpu);
		sqlite3_bind_int64(irq, 3, i64(b->irq_stats[i]->irq_ns));
		sqlite3_bind_int64(irq, 4, i64(b->irq_stats[i]->softirq_ns));
		if (step_done(irq))
			return -EIO;
	}
	for (size_t i = 0; i < b->n_time_breakdown; i++) {
		const Strata__V1__TimeBreakdown *c = b->time_breakdown[i];

		bind_head(in, tb, c->process);
		sqlite3_bind_int64(tb, 3, c->tid);
		sqlite3_bind_int(tb, 4, c->category);
		sqlite3_bind_int64(tb, 5, i64(c->ns));
		if (step_done(tb))
			return -EIO;
	}
	return 0;
}

/* CPU layer rows (issue 7): softirq vectors, foreign runs, target CPUs. */
static int ingest_cpu_layer(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;
	sqlite3_stmt *sv, *fr, *tc;

	if (stmt(in, "INSERT INTO softirq_vectors VALUES(?,?,?,?)", &sv) ||
	    stmt(in, "INSERT INTO foreign_runs VALUES(?,?,?,?,?)", &fr) ||
	    stmt(in, "INSERT INTO target_cpus VALUES(?,?,?,?)", &tc))
		return -EIO;
	for (size_t i = 0; i < b->n_softirq_vectors; i++) {
		sqlite3_bind_int64(sv, 1, in->batch_row);
		sqlite3_bind_int64(sv, 2, b->softirq_vectors[i]->cpu);
		sqlite3_bind_int64(sv, 3, b->softirq_vectors[i]->vector);
		sqlite3_bind_int64(sv, 4, i64(b->softirq_vectors[i]->ns));
		if (step_done(sv))
			return -EIO;
	}
	for (size_t i = 0; i < b->n_foreign_runs; i++) {
		sqlite3_bind_int64(fr, 1, in->batch_row);
		sqlite3_bind_int64(fr, 2, b->foreign_runs[i]->cpu);
		sqlite3_bind_int64(fr, 3, b->foreign_runs[i]->pid);
		sqlite3_bind_text(fr, 4, S(in, b->foreign_runs[i]->comm_str), -1, SQLITE_STATIC);
		sqlite3_bind_int64(fr, 5, i64(b->foreign_runs[i]->ns));
		if (step_done(fr))
			return -EIO;
	}
	for (size_t i = 0; i < b->n_target_cpus; i++) {
		bind_head(in, tc, b->target_cpus[i]->process);
		sqlite3_bind_int64(tc, 3, b->target_cpus[i]->cpu);
		sqlite3_bind_int64(tc, 4, i64(b->target_cpus[i]->ns));
		if (step_done(tc))
			return -EIO;
	}
	return 0;
}

static int ingest_cuda(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;
	sqlite3_stmt *la, *al, *af, *tr, *ta, *te, *pd;

	if (stmt(in, "INSERT INTO cuda_launches VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)", &la) ||
	    stmt(in, "INSERT INTO cuda_allocs VALUES(?,?,?,?,?,?,?,?,?,?,?)", &al) ||
	    stmt(in, "INSERT INTO cuda_alloc_failures VALUES(?,?,?,?,?,?,?)", &af) ||
	    stmt(in, "INSERT INTO cuda_transfers VALUES(?,?,?,?,?,?,?,?,?,?,?)", &tr) ||
	    stmt(in, "INSERT INTO cuda_api_tally VALUES(?,?,?,?,?,?,?)", &ta) ||
	    stmt(in, "INSERT INTO cuda_api_errors VALUES(?,?,?,?,?,?)", &te) ||
	    stmt(in, "INSERT INTO probe_duty VALUES(?,?,?,?)", &pd))
		return -EIO;
	for (size_t i = 0; i < b->n_cuda_launches; i++) {
		const Strata__V1__CudaLaunch *c = b->cuda_launches[i];
		const Strata__V1__Dim3 z = STRATA__V1__DIM3__INIT;
		const Strata__V1__Dim3 *g = c->grid ? c->grid : &z, *k = c->block ? c->block : &z;

		bind_head(in, la, c->process);
		sqlite3_bind_int64(la, 3, STACK_ID(c->stack));
		sqlite3_bind_text(la, 4, S(in, c->kernel_name_str), -1, SQLITE_STATIC);
		sqlite3_bind_int64(la, 5, i64(c->count));
		sqlite3_bind_int64(la, 6, i64(c->ns_in_call));
		sqlite3_bind_int64(la, 7, g->x);
		sqlite3_bind_int64(la, 8, g->y);
		sqlite3_bind_int64(la, 9, g->z);
		sqlite3_bind_int64(la, 10, k->x);
		sqlite3_bind_int64(la, 11, k->y);
		sqlite3_bind_int64(la, 12, k->z);
		sqlite3_bind_int64(la, 13, c->device);
		sqlite3_bind_int64(la, 14, i64(c->stream));
		if (step_done(la))
			return -EIO;
	}
	for (size_t i = 0; i < b->n_cuda_allocs; i++) {
		const Strata__V1__CudaAlloc *c = b->cuda_allocs[i];

		bind_head(in, al, c->process);
		sqlite3_bind_int64(al, 3, i64(c->ptr));
		sqlite3_bind_int64(al, 4, i64(c->size));
		sqlite3_bind_int64(al, 5, STACK_ID(c->stack));
		sqlite3_bind_int64(al, 6, i64(c->alloc_ns));
		sqlite3_bind_int(al, 7, c->freed);
		sqlite3_bind_int64(al, 8, i64(c->free_ns));
		sqlite3_bind_int64(al, 9, c->device);
		sqlite3_bind_text(al, 10, S(in, c->api_str), -1, SQLITE_STATIC);
		sqlite3_bind_int(al, 11, c->free_only);
		if (step_done(al))
			return -EIO;
	}
	for (size_t i = 0; i < b->n_cuda_alloc_failures; i++) {
		const Strata__V1__CudaAllocFailure *c = b->cuda_alloc_failures[i];

		bind_head(in, af, c->process);
		sqlite3_bind_int64(af, 3, STACK_ID(c->stack));
		sqlite3_bind_int(af, 4, c->code);
		sqlite3_bind_text(af, 5, S(in, c->code_name_str), -1, SQLITE_STATIC);
		sqlite3_bind_int64(af, 6, i64(c->count));
		sqlite3_bind_int64(af, 7, i64(c->bytes));
		if (step_done(af))
			return -EIO;
	}
	for (size_t i = 0; i < b->n_cuda_transfers; i++) {
		const Strata__V1__CudaTransfer *c = b->cuda_transfers[i];

		bind_head(in, tr, c->process);
		sqlite3_bind_int64(tr, 3, c->tid);
		sqlite3_bind_int64(tr, 4, STACK_ID(c->stack));
		sqlite3_bind_int(tr, 5, c->kind);
		sqlite3_bind_int(tr, 6, c->direction);
		sqlite3_bind_int64(tr, 7, i64(c->bytes));
		sqlite3_bind_int64(tr, 8, i64(c->ns));
		sqlite3_bind_int64(tr, 9, i64(c->start_ns));
		sqlite3_bind_int64(tr, 10, i64(c->count ? c->count : 1));
		sqlite3_bind_text(tr, 11, S(in, c->api_str), -1, SQLITE_STATIC);
		if (step_done(tr))
			return -EIO;
	}
	for (size_t i = 0; i < b->n_cuda_api_tally; i++) {
		const Strata__V1__CudaApiTally *c = b->cuda_api_tally[i];

		bind_head(in, ta, c->process);
		sqlite3_bind_text(ta, 3, S(in, c->fn_str), -1, SQLITE_STATIC);
		sqlite3_bind_int64(ta, 4, i64(c->calls));
		sqlite3_bind_int64(ta, 5, i64(c->total_ns));
		sqlite3_bind_int64(ta, 6, i64(c->min_ns));
		sqlite3_bind_int64(ta, 7, i64(c->max_ns));
		if (step_done(ta))
			return -EIO;
		for (size_t j = 0; j < c->n_errors; j++) {
			bind_head(in, te, c->process);
			sqlite3_bind_text(te, 3, S(in, c->fn_str), -1, SQLITE_STATIC);
			sqlite3_bind_int(te, 4, c->errors[j]->code);
			sqlite3_bind_text(te, 5, S(in, c->errors[j]->name_str), -1, SQLITE_STATIC);
			sqlite3_bind_int64(te, 6, i64(c->errors[j]->count));
			if (step_done(te))
				return -EIO;
		}
	}
	for (size_t i = 0; i < b->n_probe_duty; i++) {
		sqlite3_bind_int64(pd, 1, in->batch_row);
		sqlite3_bind_text(pd, 2, S(in, b->probe_duty[i]->probe_str), -1, SQLITE_STATIC);
		sqlite3_bind_double(pd, 3, b->probe_duty[i]->ratio);
		sqlite3_bind_int64(pd, 4, i64(b->probe_duty[i]->on_ns));
		if (step_done(pd))
			return -EIO;
	}
	return 0;
}

static int ingest_nccl(struct ingest *in)
{
	const Strata__V1__Batch *b = in->b;
	sqlite3_stmt *co, *ev, *ns;

	if (stmt(in, "INSERT INTO nccl_comms VALUES(?,?,?,?,?,?,?)", &co) ||
	    stmt(in, "INSERT INTO nccl_collectives VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", &ev) ||
	    stmt(in, "INSERT INTO nccl_stats VALUES(?,?,?,?,?,?,?,?,?)", &ns))
		return -EIO;
	for (size_t i = 0; i < b->n_nccl_comms; i++) {
		const Strata__V1__NcclComm *c = b->nccl_comms[i];

		bind_head(in, co, c->process);
		sqlite3_bind_int64(co, 3, i64(c->comm_hash));
		sqlite3_bind_int(co, 4, c->rank);
		sqlite3_bind_int(co, 5, c->nranks);
		sqlite3_bind_int64(co, 6, c->device);
		sqlite3_bind_int64(co, 7, i64(c->init_ns));
		if (step_done(co))
			return -EIO;
	}
	for (size_t i = 0; i < b->n_nccl_collectives; i++) {
		const Strata__V1__NcclCollective *c = b->nccl_collectives[i];

		bind_head(in, ev, c->process);
		sqlite3_bind_int64(ev, 3, c->tid);
		sqlite3_bind_int64(ev, 4, i64(c->comm_hash));
		sqlite3_bind_int64(ev, 5, i64(c->seq));
		sqlite3_bind_text(ev, 6, S(in, c->op_str), -1, SQLITE_STATIC);
		sqlite3_bind_text(ev, 7, S(in, c->dtype_str), -1, SQLITE_STATIC);
		sqlite3_bind_int64(ev, 8, i64(c->bytes));
		sqlite3_bind_int64(ev, 9, i64(c->entry_ns));
		sqlite3_bind_int64(ev, 10, i64(c->exit_ns));
		sqlite3_bind_int(ev, 11, c->peer);
		sqlite3_bind_int64(ev, 12, STACK_ID(c->stack));
		if (step_done(ev))
			return -EIO;
	}
	for (size_t i = 0; i < b->n_nccl_stats; i++) {
		const Strata__V1__NcclCollectiveStat *c = b->nccl_stats[i];

		bind_head(in, ns, c->process);
		sqlite3_bind_int64(ns, 3, i64(c->comm_hash));
		sqlite3_bind_text(ns, 4, S(in, c->op_str), -1, SQLITE_STATIC);
		sqlite3_bind_int64(ns, 5, i64(c->count));
		sqlite3_bind_int64(ns, 6, i64(c->bytes));
		sqlite3_bind_int64(ns, 7, i64(c->total_ns));
		sqlite3_bind_int64(ns, 8, i64(c->min_ns));
		sqlite3_bind_int64(ns, 9, i64(c->max_ns));
		if (step_done(ns))
			return -EIO;
	}
	return 0;
}

static int sq_ingest(struct store *base, const struct store_batch *sb)
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
		err = ingest_cpu(&in);
	if (!err)
		err = ingest_cpu_layer(&in);
	if (!err)
		err = ingest_cuda(&in);
	if (!err)
		err = ingest_nccl(&in);
	if (err) /* a duplicate (1) wrote nothing either */
		sqlite3_exec(in.db, "ROLLBACK", NULL, NULL, NULL);
	else if (sqlite3_exec(in.db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		sqlite3_exec(in.db, "ROLLBACK", NULL, NULL, NULL);
		err = -EIO;
	}
out:
	pthread_mutex_unlock(&s->writer.lock);
	free(in.proc_rows);
	pthread_mutex_lock(&s->stats_lock);
	if (err == 0)
		s->batches++;
	else if (err == 1)
		s->duplicates++;
	pthread_mutex_unlock(&s->stats_lock);
	return err;
}

/* ---- query building ------------------------------------------------------------ */

#define MAX_BINDS 16

struct query {
	char sql[4096];
	size_t len;
	int overflow;
	int nbind;
	struct {
		int is_text;
		int64_t i;
		const char *t;
	} binds[MAX_BINDS];
};

static void q_add(struct query *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void q_add(struct query *q, const char *fmt, ...)
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

static void q_int(struct query *q, int64_t v)
{
	if (q->nbind >= MAX_BINDS) {
		q->overflow = 1;
		return;
	}
	q->binds[q->nbind].is_text = 0;
	q->binds[q->nbind++].i = v;
}

static void q_text(struct query *q, const char *t)
{
	if (q->nbind >= MAX_BINDS) {
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
static void q_filter(struct query *q, const struct store_filter *f, const char *time_col)
{
	if (!time_col && f->batch_by_end)
		time_col = "b.end_ns";
	if (f->from_ns) {
		if (time_col)
			q_add(q, " AND %s >= ?", time_col);
		else
			q_add(q, " AND b.end_ns > ?");
		q_int(q, i64(f->from_ns));
	}
	if (f->to_ns) {
		if (time_col)
			q_add(q, " AND %s < ?", time_col);
		else
			q_add(q, " AND b.start_ns < ?");
		q_int(q, i64(f->to_ns));
	}
	if (f->node && f->node[0]) {
		q_add(q, " AND p.node = ?");
		q_text(q, f->node);
	}
	if (f->pid) {
		q_add(q, " AND p.pid = ?");
		q_int(q, f->pid);
	}
	if (f->job && f->job[0]) {
		q_add(q, " AND p.job = ?");
		q_text(q, f->job);
	}
	if (f->container && f->container[0]) {
		q_add(q, " AND p.container = ?");
		q_text(q, f->container);
	}
	if (f->has_rank) {
		q_add(q, " AND p.has_rank AND p.rank %s ?", f->rank_negate ? "<>" : "=");
		q_int(q, f->rank);
	}
}

static int q_prepare(struct query *q, sqlite3 *db, sqlite3_stmt **st)
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

static uint64_t col_u64(sqlite3_stmt *st, int i)
{
	return (uint64_t)sqlite3_column_int64(st, i);
}

/* Runs a prepared query, calling row(ctx, st) per row; row != 0 stops. */
static int q_run(sqlite3_stmt *st, int (*row)(void *ctx, sqlite3_stmt *st), void *ctx)
{
	int rc, ret = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ret = row(ctx, st);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = -EIO;
	sqlite3_finalize(st);
	return ret;
}

/* ---- stack cache for one query ----------------------------------------------------------- */

/* Frames of the stacks a query meets, loaded once each. */
struct stack_cache {
	sqlite3_stmt *load;
	struct profile_htab ids;
	struct cached_stack {
		struct store_stack st;
		struct store_frame *frames;
		char *strings; /* one block for all the frames' strings */
	} * v;
	uint32_t n, cap;
};

static int stack_cache__init(struct stack_cache *c, sqlite3 *db)
{
	memset(c, 0, sizeof(*c));
	return sqlite3_prepare_v2(db,
				  "SELECT kind,flags,func,file,line,module,build_id,addr FROM "
				  "stack_frames WHERE stack_id=? ORDER BY depth",
				  -1, &c->load, NULL) == SQLITE_OK
		       ? 0
		       : -EIO;
}

static void stack_cache__fini(struct stack_cache *c)
{
	for (uint32_t i = 0; i < c->n; i++) {
		free(c->v[i].frames);
		free(c->v[i].strings);
	}
	free(c->v);
	profile_htab__fini(&c->ids);
	sqlite3_finalize(c->load);
}

static int id_eq(uint32_t idx, const void *key, const void *ctx)
{
	const struct stack_cache *c = ctx;

	return c->v[idx].st.id == *(const uint64_t *)key;
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

static const struct store_stack *stack_cache__get(struct stack_cache *c, uint64_t id)
{
	uint64_t h = hash_bytes(&id, sizeof(id), 0);
	int64_t found = profile_htab__find(&c->ids, h, id_eq, &id, c);
	struct cached_stack cs = { .st.id = id };
	size_t nf = 0, cap = 0, bytes = 0;
	int rc;

	if (found >= 0)
		return &c->v[found].st;
	/* Two passes over the rows: sizes, then copies (rows are few). */
	sqlite3_bind_int64(c->load, 1, i64(id));
	while ((rc = sqlite3_step(c->load)) == SQLITE_ROW) {
		nf++;
		for (int k = 2; k <= 6; k++)
			bytes += (size_t)sqlite3_column_bytes(c->load, k) + 1;
	}
	sqlite3_reset(c->load);
	if (rc != SQLITE_DONE)
		return NULL;
	cs.frames = calloc(nf ? nf : 1, sizeof(*cs.frames));
	cs.strings = malloc(bytes ? bytes : 1);
	if (!cs.frames || !cs.strings)
		goto nomem;
	char *pos = cs.strings;
	while (sqlite3_step(c->load) == SQLITE_ROW && cap < nf) {
		struct store_frame *f = &cs.frames[cap++];

		f->kind = (uint32_t)sqlite3_column_int(c->load, 0);
		f->flags = (uint32_t)sqlite3_column_int(c->load, 1);
		f->func = dup_col(c->load, 2, &pos);
		f->file = dup_col(c->load, 3, &pos);
		f->line = (uint32_t)sqlite3_column_int(c->load, 4);
		f->module = dup_col(c->load, 5, &pos);
		f->build_id = dup_col(c->load, 6, &pos);
		f->addr = col_u64(c->load, 7);
	}
	sqlite3_reset(c->load);
	cs.st.frames = cs.frames;
	cs.st.nframes = (uint32_t)cap;
	if (c->n == c->cap) {
		uint32_t ncap = c->cap ? c->cap * 2 : 256;
		struct cached_stack *nv = realloc(c->v, ncap * sizeof(*nv));

		if (!nv)
			goto nomem;
		c->v = nv;
		c->cap = ncap;
	}
	if (profile_htab__insert(&c->ids, h, c->n))
		goto nomem;
	c->v[c->n] = cs;
	return &c->v[c->n++].st;
nomem:
	free(cs.frames);
	free(cs.strings);
	return NULL;
}

struct row_ctx {
	void *fn;
	void *ctx;
	struct stack_cache *stacks;
	uint32_t limit, n;
	int *truncated;
};

/*
 * Runs the built query q on a reader connection, handing rows to row(r);
 * with_stacks: r->stacks is a stack cache on that connection for the
 * rows' stack ids.
 */
static int exec_query(struct sqlite_store *s, struct query *q,
		      int (*row)(void *ctx, sqlite3_stmt *st), struct row_ctx *r, int with_stacks)
{
	struct conn *c = reader(s);
	struct stack_cache sc;
	sqlite3_stmt *st;
	int err = with_stacks ? stack_cache__init(&sc, c->db) : 0;

	r->stacks = with_stacks ? &sc : NULL;
	if (!err)
		err = q_prepare(q, c->db, &st);
	if (!err)
		err = q_run(st, row, r);
	if (with_stacks)
		stack_cache__fini(&sc);
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* ---- queries ------------------------------------------------------------------------------ */

#define FROM_PROC_BATCH(table)                                                                    \
	" FROM " table " t JOIN batches b ON b.id = t.batch JOIN processes p ON p.id = t.process" \
	" WHERE 1"

static int job_row(void *rc, sqlite3_stmt *st)
{
	struct row_ctx *r = rc;
	struct store_job j = {
		.job = col_text(st, 0),
		.nodes = (uint32_t)sqlite3_column_int(st, 1),
		.processes = (uint32_t)sqlite3_column_int(st, 2),
		.ranks = (uint32_t)sqlite3_column_int(st, 3),
		.world_size = sqlite3_column_int(st, 4),
		.first_ns = col_u64(st, 5),
		.last_ns = col_u64(st, 6),
		.cpu_samples = col_u64(st, 7),
	};

	return ((store_job_fn)r->fn)(r->ctx, &j);
}

/* Process-level filters without a time column use the process lifetime. */
static void q_proc_filter(struct query *q, const struct store_filter *f)
{
	struct store_filter g = *f;

	g.from_ns = g.to_ns = 0;
	q_filter(q, &g, NULL);
	if (f->from_ns) {
		q_add(q, " AND p.last_ns > ?");
		q_int(q, i64(f->from_ns));
	}
	if (f->to_ns) {
		q_add(q, " AND p.first_ns < ?");
		q_int(q, i64(f->to_ns));
	}
}

static int sq_jobs(struct store *base, const struct store_filter *f, store_job_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct row_ctx r = { .fn = (void *)fn, .ctx = ctx };
	struct query q = { .len = 0 };

	q_add(&q, "SELECT p.job, COUNT(DISTINCT p.node), COUNT(*),"
		  " COUNT(DISTINCT CASE WHEN p.has_rank THEN p.rank END), MAX(p.world_size),"
		  " MIN(p.first_ns), MAX(p.last_ns),"
		  " (SELECT COALESCE(SUM(t.count),0) FROM cpu_samples t JOIN processes p2"
		  "  ON p2.id = t.process WHERE p2.job = p.job)"
		  " FROM processes p WHERE p.job <> ''");
	q_proc_filter(&q, f);
	q_add(&q, " GROUP BY p.job ORDER BY MAX(p.last_ns) DESC");
	return exec_query(s, &q, job_row, &r, 0);
}

static int node_row(void *rc, sqlite3_stmt *st)
{
	struct row_ctx *r = rc;
	struct store_node n = {
		.node = col_text(st, 0),
		.agent_version = col_text(st, 1),
		.first_ns = col_u64(st, 2),
		.last_ns = col_u64(st, 3),
		.batches = col_u64(st, 4),
		.cpu_samples = col_u64(st, 5),
		.drops = col_u64(st, 6),
	};

	return ((store_node_fn)r->fn)(r->ctx, &n);
}

static int sq_nodes(struct store *base, const struct store_filter *f, store_node_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct row_ctx r = { .fn = (void *)fn, .ctx = ctx };
	struct query q = { .len = 0 };

	q_add(&q, "SELECT b.node, MAX(b.agent_version), MIN(b.start_ns), MAX(b.end_ns), COUNT(*),"
		  " SUM(b.cpu_samples), SUM(b.drops) FROM batches b WHERE 1");
	if (f->node && f->node[0]) {
		q_add(&q, " AND b.node = ?");
		q_text(&q, f->node);
	}
	if (f->from_ns) {
		q_add(&q, " AND b.end_ns > ?");
		q_int(&q, i64(f->from_ns));
	}
	if (f->to_ns) {
		q_add(&q, " AND b.start_ns < ?");
		q_int(&q, i64(f->to_ns));
	}
	if (f->pid || (f->job && f->job[0]) || f->has_rank || (f->container && f->container[0])) {
		struct store_filter g = *f;

		g.from_ns = g.to_ns = 0;
		q_add(&q, " AND b.node IN (SELECT p.node FROM processes p WHERE 1");
		q_filter(&q, &g, NULL);
		q_add(&q, ")");
	}
	q_add(&q, " GROUP BY b.node ORDER BY b.node");
	return exec_query(s, &q, node_row, &r, 0);
}

static int process_row(void *rc, sqlite3_stmt *st)
{
	struct row_ctx *r = rc;
	struct store_process p = {
		.node = col_text(st, 0),
		.pid = (uint32_t)sqlite3_column_int64(st, 1),
		.start_time_ns = col_u64(st, 2),
		.comm = col_text(st, 3),
		.cmdline = col_text(st, 4),
		.container = col_text(st, 5),
		.pod = col_text(st, 6),
		.job = col_text(st, 7),
		.has_rank = sqlite3_column_int(st, 8),
		.rank = sqlite3_column_int(st, 9),
		.local_rank = sqlite3_column_int(st, 10),
		.world_size = sqlite3_column_int(st, 11),
		.first_ns = col_u64(st, 12),
		.last_ns = col_u64(st, 13),
		.cpu_samples = col_u64(st, 14),
	};

	return ((store_process_fn)r->fn)(r->ctx, &p);
}

static int sq_processes(struct store *base, const struct store_filter *f, store_process_fn fn,
			void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct row_ctx r = { .fn = (void *)fn, .ctx = ctx };
	struct query q = { .len = 0 };

	q_add(&q, "SELECT p.node, p.pid, p.start_time_ns, p.comm, p.cmdline, p.container, p.pod,"
		  " p.job, p.has_rank, p.rank, p.local_rank, p.world_size, p.first_ns, p.last_ns,"
		  " (SELECT COALESCE(SUM(count),0) FROM cpu_samples WHERE process = p.id)"
		  " FROM processes p WHERE 1");
	q_proc_filter(&q, f);
	q_add(&q, " ORDER BY p.job, p.rank, p.node, p.pid");
	return exec_query(s, &q, process_row, &r, 0);
}

static int sample_row(void *rc, sqlite3_stmt *st)
{
	struct row_ctx *r = rc;
	struct store_sample smp = {
		.node = col_text(st, 0),
		.pid = (uint32_t)sqlite3_column_int64(st, 1),
		.tid = (uint32_t)sqlite3_column_int64(st, 2),
		.comm = col_text(st, 3),
		.has_rank = sqlite3_column_int(st, 4),
		.rank = sqlite3_column_int(st, 5),
		.value = col_u64(st, 7),
	};

	smp.stack = stack_cache__get(r->stacks, col_u64(st, 6));
	if (!smp.stack)
		return -ENOMEM;
	return ((store_sample_fn)r->fn)(r->ctx, &smp);
}

static int sq_profile(struct store *base, const struct store_filter *f,
		      enum store_profile_kind kind, store_sample_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct row_ctx r = { .fn = (void *)fn, .ctx = ctx };
	struct query q = { .len = 0 };

	if (kind == STORE_PROFILE_OFFCPU)
		q_add(&q, "SELECT p.node, p.pid, t.tid, p.comm, p.has_rank, p.rank, t.stack_id,"
			  " SUM(t.ns)" FROM_PROC_BATCH("offcpu_samples"));
	else
		q_add(&q, "SELECT p.node, p.pid, t.tid, t.comm, p.has_rank, p.rank, t.stack_id,"
			  " SUM(t.count)" FROM_PROC_BATCH("cpu_samples"));
	q_filter(&q, f, NULL);
	q_add(&q, " GROUP BY p.node, p.pid, t.tid, %s, t.stack_id",
	      kind == STORE_PROFILE_OFFCPU ? "p.comm" : "t.comm");
	return exec_query(s, &q, sample_row, &r, 1);
}

static int leak_row(void *rc, sqlite3_stmt *st)
{
	struct row_ctx *r = rc;
	struct store_leak l = {
		.node = col_text(st, 0),
		.pid = (uint32_t)sqlite3_column_int64(st, 1),
		.has_rank = sqlite3_column_int(st, 2),
		.rank = sqlite3_column_int(st, 3),
		.bytes = col_u64(st, 5),
		.allocations = col_u64(st, 6),
		.oldest_ns = col_u64(st, 7),
	};

	l.stack = stack_cache__get(r->stacks, col_u64(st, 4));
	if (!l.stack)
		return -ENOMEM;
	return ((store_leak_fn)r->fn)(r->ctx, &l);
}

static int sq_leaks(struct store *base, const struct store_filter *f, store_leak_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct row_ctx r = { .fn = (void *)fn, .ctx = ctx };
	struct query q = { .len = 0 };
	struct store_filter g = *f;
	uint64_t at = f->to_ns ? f->to_ns : INT64_MAX;

	/* Outstanding at `at`: made before it (in range) and not freed before
	 * it, whether the free came in the same record or a later one. */
	g.to_ns = 0;
	q_add(&q, "SELECT p.node, p.pid, p.has_rank, p.rank, t.stack_id, SUM(t.size), COUNT(*),"
		  " MIN(t.alloc_ns)" FROM_PROC_BATCH("cuda_allocs") " AND NOT t.free_only"
								    " AND t.alloc_ns < ?");
	q_int(&q, i64(at));
	q_add(&q, " AND NOT (t.freed AND t.free_ns < ?)");
	q_int(&q, i64(at));
	q_add(&q, " AND NOT EXISTS (SELECT 1 FROM cuda_allocs x WHERE x.process = t.process"
		  " AND x.ptr = t.ptr AND x.alloc_ns = t.alloc_ns AND x.freed AND x.free_ns < ?)");
	q_int(&q, i64(at));
	q_filter(&q, &g, "t.alloc_ns");
	q_add(&q, " GROUP BY p.node, p.pid, t.stack_id ORDER BY SUM(t.size) DESC");
	return exec_query(s, &q, leak_row, &r, 1);
}

#define MAX_CODES 64

static int tally_row(void *rc, sqlite3_stmt *st)
{
	struct row_ctx *r = rc;
	struct store_api_code codes[MAX_CODES];
	struct store_tally t = {
		.node = col_text(st, 0),
		.pid = (uint32_t)sqlite3_column_int64(st, 1),
		.has_rank = sqlite3_column_int(st, 2),
		.rank = sqlite3_column_int(st, 3),
		.fn = col_text(st, 4),
		.calls = col_u64(st, 5),
		.total_ns = col_u64(st, 6),
		.min_ns = col_u64(st, 7),
		.max_ns = col_u64(st, 8),
		.codes = codes,
	};
	/* Codes come as "code\x1fname\x1fcount\x1e..." from group_concat. */
	const char *e = (const char *)sqlite3_column_text(st, 9);
	char buf[4096];

	if (e) {
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
	return ((store_tally_fn)r->fn)(r->ctx, &t);
}

static int sq_tally(struct store *base, const struct store_filter *f, store_tally_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct row_ctx r = { .fn = (void *)fn, .ctx = ctx };
	struct query q = { .len = 0 };

	q_add(&q, "WITH tl AS (SELECT p.id AS proc, p.node, p.pid, p.has_rank, p.rank, t.fn,"
		  " SUM(t.calls) calls, SUM(t.total_ns) total, MIN(t.min_ns) mn, MAX(t.max_ns) "
		  "mx" FROM_PROC_BATCH("cuda_api_tally"));
	q_filter(&q, f, NULL);
	q_add(&q, " GROUP BY p.id, t.fn), er AS (SELECT p.id AS proc, t.fn, t.code, t.name,"
		  " SUM(t.count) n" FROM_PROC_BATCH("cuda_api_errors"));
	q_filter(&q, f, NULL);
	q_add(&q, " GROUP BY p.id, t.fn, t.code, t.name)"
		  " SELECT tl.node, tl.pid, tl.has_rank, tl.rank, tl.fn, tl.calls, tl.total, tl.mn,"
		  " tl.mx, (SELECT group_concat(er.code || char(31) || er.name || char(31) || er.n,"
		  " char(30)) FROM er WHERE er.proc = tl.proc AND er.fn = tl.fn)"
		  " FROM tl ORDER BY tl.total DESC");
	return exec_query(s, &q, tally_row, &r, 0);
}

static int event_row(void *rc, sqlite3_stmt *st)
{
	struct row_ctx *r = rc;
	struct store_event e = {
		.kind = (uint32_t)sqlite3_column_int(st, 0),
		.node = col_text(st, 1),
		.pid = (uint32_t)sqlite3_column_int64(st, 2),
		.tid = (uint32_t)sqlite3_column_int64(st, 3),
		.job = col_text(st, 4),
		.has_rank = sqlite3_column_int(st, 5),
		.rank = sqlite3_column_int(st, 6),
		.name = col_text(st, 7),
		.start_ns = col_u64(st, 8),
		.dur_ns = col_u64(st, 9),
		.bytes = col_u64(st, 10),
		.count = col_u64(st, 11),
		.comm_hash = col_u64(st, 12),
		.seq = col_u64(st, 13),
		.comm_rank = sqlite3_column_type(st, 14) == SQLITE_NULL
				     ? -1
				     : sqlite3_column_int(st, 14),
		.comm_nranks = sqlite3_column_type(st, 15) == SQLITE_NULL
				       ? -1
				       : sqlite3_column_int(st, 15),
		.dtype = col_text(st, 16),
		.transfer_kind = (uint32_t)sqlite3_column_int(st, 17),
		.direction = (uint32_t)sqlite3_column_int(st, 18),
	};

	if (r->n >= r->limit) {
		*r->truncated = 1;
		return 1;
	}
	r->n++;
	return ((store_event_fn)r->fn)(r->ctx, &e);
}

#define EV_COLS " p.node, p.pid, %s, p.job, p.has_rank, p.rank, "

static int sq_events(struct store *base, const struct store_filter *f, uint32_t kinds,
		     uint32_t limit, int *truncated, store_event_fn fn, void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	int trunc = 0;
	struct row_ctx r = { .fn = (void *)fn,
			     .ctx = ctx,
			     .limit = limit ? limit : 100000,
			     .truncated = truncated ? truncated : &trunc };
	struct query q = { .len = 0 };
	const char *sep = "";
	int err;

	*r.truncated = 0;
	if (kinds & STORE_EVENT_COLLECTIVE) {
		q_add(&q,
		      "SELECT %u," EV_COLS "t.op, t.entry_ns, t.exit_ns - t.entry_ns, t.bytes, 1,"
		      " t.comm_hash, t.seq,"
		      " (SELECT rank FROM nccl_comms c WHERE c.process = t.process AND"
		      "  c.comm_hash = t.comm_hash ORDER BY c.init_ns DESC LIMIT 1),"
		      " (SELECT nranks FROM nccl_comms c WHERE c.process = t.process AND"
		      "  c.comm_hash = t.comm_hash ORDER BY c.init_ns DESC LIMIT 1),"
		      " t.dtype, 0, 0" FROM_PROC_BATCH("nccl_collectives"),
		      STORE_EVENT_COLLECTIVE, "t.tid");
		q_filter(&q, f, "t.entry_ns");
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_TRANSFER) {
		q_add(&q,
		      "%sSELECT %u," EV_COLS "t.api, t.start_ns, t.ns, t.bytes, t.count, 0, 0,"
		      " NULL, NULL, '', t.kind, t.direction" FROM_PROC_BATCH(
			      "cuda_transfers") " AND t.start_ns > 0",
		      sep, STORE_EVENT_TRANSFER, "t.tid");
		q_filter(&q, f, "t.start_ns");
		sep = " UNION ALL ";
	}
	if (kinds & STORE_EVENT_LAUNCH) {
		q_add(&q,
		      "%sSELECT %u," EV_COLS "t.kernel, b.start_ns, t.ns_in_call, 0, t.count, 0,"
		      " 0, NULL, NULL, '', 0, 0" FROM_PROC_BATCH("cuda_launches"),
		      sep, STORE_EVENT_LAUNCH, "0");
		q_filter(&q, f, "b.start_ns");
	}
	if (!kinds)
		return 0;
	q_add(&q, " ORDER BY 9 LIMIT %u", r.limit + 1);
	err = exec_query(s, &q, event_row, &r, 0);
	return err == 1 ? 0 : err; /* 1: stopped at the limit */
}

static int sq_retain(struct store *base, uint64_t before_ns, uint64_t *deleted)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	sqlite3 *db = s->writer.db;
	sqlite3_stmt *st = NULL;
	int err = 0, n = 0;

	pthread_mutex_lock(&s->writer.lock);
	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "DELETE FROM batches WHERE end_ns < ?", -1, &st, NULL) !=
		    SQLITE_OK) {
		err = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, i64(before_ns));
	if (sqlite3_step(st) != SQLITE_DONE) {
		err = -EIO;
		goto out;
	}
	n = sqlite3_changes(db);
	sqlite3_finalize(st);
	st = NULL;
	/* Then what no remaining row refers to: processes, stacks. */
	if (sqlite3_prepare_v2(db, "DELETE FROM processes WHERE last_ns < ?", -1, &st, NULL) !=
	    SQLITE_OK) {
		err = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, i64(before_ns));
	if (sqlite3_step(st) != SQLITE_DONE)
		err = -EIO;
	if (!err && n &&
	    sqlite3_exec(db,
			 "CREATE TEMP TABLE IF NOT EXISTS live(id INTEGER PRIMARY KEY);"
			 "DELETE FROM live;"
			 "INSERT OR IGNORE INTO live SELECT stack_id FROM cpu_samples;"
			 "INSERT OR IGNORE INTO live SELECT stack_id FROM offcpu_samples;"
			 "INSERT OR IGNORE INTO live SELECT stack_id FROM cuda_launches;"
			 "INSERT OR IGNORE INTO live SELECT stack_id FROM cuda_allocs;"
			 "INSERT OR IGNORE INTO live SELECT stack_id FROM cuda_alloc_failures;"
			 "INSERT OR IGNORE INTO live SELECT stack_id FROM cuda_transfers;"
			 "INSERT OR IGNORE INTO live SELECT stack_id FROM nccl_collectives;"
			 "DELETE FROM stack_frames WHERE stack_id NOT IN live;"
			 "DELETE FROM stacks WHERE id NOT IN live;",
			 NULL, NULL, NULL) != SQLITE_OK)
		err = -EIO;
out:
	sqlite3_finalize(st);
	sqlite3_exec(db, err ? "ROLLBACK" : "COMMIT", NULL, NULL, NULL);
	pthread_mutex_unlock(&s->writer.lock);
	if (!err) {
		pthread_mutex_lock(&s->stats_lock);
		s->retention_deleted += (uint64_t)n;
		pthread_mutex_unlock(&s->stats_lock);
		if (deleted)
			*deleted = (uint64_t)n;
	}
	return err;
}

static int count_row(void *ctx, sqlite3_stmt *st)
{
	uint64_t *v = ctx;

	for (int i = 0; i < 3; i++)
		v[i] = col_u64(st, i);
	return 0;
}

static int sq_stats(struct store *base, struct store_stats *out)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct conn *c = reader(s);
	uint64_t v[3] = { 0 };
	sqlite3_stmt *st;
	struct stat sb;
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (sqlite3_prepare_v2(c->db,
			       "SELECT (SELECT COUNT(*) FROM stacks), (SELECT COUNT(*) FROM "
			       "cpu_samples), (SELECT COUNT(*) FROM nccl_collectives) + (SELECT "
			       "COUNT(*) FROM cuda_transfers)",
			       -1, &st, NULL) == SQLITE_OK)
		err = q_run(st, count_row, v);
	else
		err = -EIO;
	pthread_mutex_unlock(&c->lock);
	out->stacks = v[0];
	out->cpu_rows = v[1];
	out->event_rows = v[2];
	if (!stat(s->path, &sb))
		out->bytes_on_disk = (uint64_t)sb.st_size;
	pthread_mutex_lock(&s->stats_lock);
	out->batches = s->batches;
	out->duplicates = s->duplicates;
	out->retention_deleted = s->retention_deleted;
	pthread_mutex_unlock(&s->stats_lock);
	return err;
}

static void sq_close(struct store *base)
{
	struct sqlite_store *s = (struct sqlite_store *)base;

	for (int i = 0; i < NREADERS; i++) {
		if (s->readers[i].db) {
			sqlite3_close_v2(s->readers[i].db);
			pthread_mutex_destroy(&s->readers[i].lock);
		}
	}
	for (int i = 0; i < MAX_STMTS; i++)
		sqlite3_finalize(s->stmts[i].st);
	if (s->writer.db) {
		sqlite3_close_v2(s->writer.db);
		pthread_mutex_destroy(&s->writer.lock);
	}
	pthread_mutex_destroy(&s->stats_lock);
	free(s->path);
	free(s);
}

/* ---- diagnosis inputs ------------------------------------------------------------------- */

static int thread_time_row(void *rc, sqlite3_stmt *st)
{
	struct row_ctx *r = rc;
	struct store_thread_time t = {
		.node = col_text(st, 0),
		.pid = (uint32_t)sqlite3_column_int64(st, 1),
		.tid = (uint32_t)sqlite3_column_int64(st, 2),
		.job = col_text(st, 3),
		.has_rank = sqlite3_column_int(st, 4),
		.rank = sqlite3_column_int(st, 5),
		.kind = (uint32_t)sqlite3_column_int(st, 6),
		.index = (uint32_t)sqlite3_column_int(st, 7),
		.ns = col_u64(st, 8),
	};

	return ((store_thread_time_fn)r->fn)(r->ctx, &t);
}

static int sq_thread_times(struct store *base, const struct store_filter *f,
			   store_thread_time_fn fn, void *ctx)
{
	/* kind, the wire-enum column the index comes from (NULL: index 0) and
	 * its list's length, value expression, table.  Stored categories and
	 * reasons are wire values (lib/enums.h: strata_enum_from_wire). */
	static const struct {
		uint32_t kind;
		const char *col;
		uint32_t n;
		const char *value, *table;
	} parts[] = {
		{ STORE_THREAD_TIME, "t.category", STRATA_TIME_MAX, "t.ns", "time_breakdown" },
		{ STORE_THREAD_OFFCPU, "t.reason", STRATA_OFF_MAX, "t.ns", "offcpu_samples" },
		{ STORE_THREAD_ONCPU, NULL, 0, "t.on_cpu_ns", "sched_stats" },
		{ STORE_THREAD_RUNNABLE, NULL, 0, "t.runqueue_latency_ns + t.runnable_wait_ns",
		  "sched_stats" },
	};
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct row_ctx r = { .fn = (void *)fn, .ctx = ctx };
	int err = 0;

	/* One query per table: the filter's binds would overflow one UNION. */
	for (size_t i = 0; !err && i < sizeof(parts) / sizeof(parts[0]); i++) {
		struct query q = { .len = 0 };
		char ix[64] = "0", cond[96] = "";

		if (parts[i].col)
			strata_wire_enum_sql(parts[i].col, parts[i].n, ix, sizeof(ix), cond,
					     sizeof(cond));
		q_add(&q,
		      "SELECT p.node, p.pid, t.tid, p.job, p.has_rank, p.rank, %u, %s AS ix,"
		      " SUM(%s) FROM %s t JOIN batches b ON b.id = t.batch"
		      " JOIN processes p ON p.id = t.process WHERE 1%s",
		      parts[i].kind, ix, parts[i].value, parts[i].table, cond);
		q_filter(&q, f, "b.end_ns");
		q_add(&q, " GROUP BY p.id, t.tid, ix");
		err = exec_query(s, &q, thread_time_row, &r, 0);
	}
	return err;
}

static int cpu_time_row(void *rc, sqlite3_stmt *st)
{
	struct row_ctx *r = rc;
	struct store_cpu_time c = {
		.node = col_text(st, 0),
		.kind = (uint32_t)sqlite3_column_int(st, 1),
		.cpu = (uint32_t)sqlite3_column_int64(st, 2),
		.pid = (uint32_t)sqlite3_column_int64(st, 3),
		.vector = (uint32_t)sqlite3_column_int64(st, 4),
		.comm = col_text(st, 5),
		.job = col_text(st, 6),
		.has_rank = sqlite3_column_int(st, 7),
		.rank = sqlite3_column_int(st, 8),
		.ns = col_u64(st, 9),
	};

	return ((store_cpu_time_fn)r->fn)(r->ctx, &c);
}

static int sq_cpu_times(struct store *base, const struct store_filter *f, store_cpu_time_fn fn,
			void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct row_ctx r = { .fn = (void *)fn, .ctx = ctx };
	/* node rows: the time range and node only */
	struct store_filter nf = { .from_ns = f->from_ns, .to_ns = f->to_ns };
	struct query q = { .len = 0 };
	int err;

	q_add(&q,
	      "SELECT p.node, %u, t.cpu, p.pid, 0, p.comm, p.job, p.has_rank, p.rank, SUM(t.ns)"
	      " FROM target_cpus t JOIN batches b ON b.id = t.batch"
	      " JOIN processes p ON p.id = t.process WHERE 1",
	      STORE_CPU_TARGET);
	q_filter(&q, f, "b.end_ns");
	q_add(&q, " GROUP BY p.id, t.cpu");
	err = exec_query(s, &q, cpu_time_row, &r, 0);
	for (int i = 0; !err && i < 2; i++) {
		q = (struct query){ .len = 0 };
		if (i == 0)
			q_add(&q,
			      "SELECT b.node, %u, t.cpu, t.pid, 0, t.comm, NULL, 0, 0, SUM(t.ns)"
			      " FROM foreign_runs t JOIN batches b ON b.id = t.batch WHERE 1",
			      STORE_CPU_FOREIGN);
		else
			q_add(&q,
			      "SELECT b.node, %u, t.cpu, 0, t.vector, NULL, NULL, 0, 0, SUM(t.ns)"
			      " FROM softirq_vectors t JOIN batches b ON b.id = t.batch WHERE 1",
			      STORE_CPU_SOFTIRQ);
		q_filter(&q, &nf, "b.end_ns");
		if (f->node && f->node[0]) {
			q_add(&q, " AND b.node = ?");
			q_text(&q, f->node);
		}
		q_add(&q, i == 0 ? " GROUP BY b.node, t.cpu, t.pid, t.comm"
				 : " GROUP BY b.node, t.cpu, t.vector");
		err = exec_query(s, &q, cpu_time_row, &r, 0);
	}
	return err;
}

static int node_clock_row(void *rc, sqlite3_stmt *st)
{
	struct row_ctx *r = rc;
	struct store_node_clock c = {
		.node = col_text(st, 0),
		.clock_error_ns = col_u64(st, 1),
		.freq_hz = (uint32_t)sqlite3_column_int64(st, 2),
		.batches = col_u64(st, 3),
	};

	return ((store_node_clock_fn)r->fn)(r->ctx, &c);
}

static int sq_node_clocks(struct store *base, const struct store_filter *f, store_node_clock_fn fn,
			  void *ctx)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct row_ctx r = { .fn = (void *)fn, .ctx = ctx };
	struct query q = { .len = 0 };

	q_add(&q, "SELECT b.node, MAX(b.clock_error_ns), MAX(b.freq_hz), COUNT(*)"
		  " FROM batches b WHERE 1");
	if (f->from_ns) {
		q_add(&q, " AND b.end_ns > ?");
		q_int(&q, i64(f->from_ns));
	}
	if (f->to_ns) {
		q_add(&q, " AND b.start_ns < ?");
		q_int(&q, i64(f->to_ns));
	}
	if (f->node && f->node[0]) {
		q_add(&q, " AND b.node = ?");
		q_text(&q, f->node);
	}
	q_add(&q, " GROUP BY b.node ORDER BY b.node");
	return exec_query(s, &q, node_clock_row, &r, 0);
}

static const struct store_ops sqlite_ops = {
	.name = "sqlite",
	.ingest = sq_ingest,
	.jobs = sq_jobs,
	.nodes = sq_nodes,
	.processes = sq_processes,
	.profile = sq_profile,
	.leaks = sq_leaks,
	.tally = sq_tally,
	.events = sq_events,
	.retain = sq_retain,
	.stats = sq_stats,
	.close = sq_close,
	.thread_times = sq_thread_times,
	.cpu_times = sq_cpu_times,
	.node_clocks = sq_node_clocks,
};

struct store *store_sqlite__open(const char *path, char *err, size_t errsz)
{
	struct sqlite_store *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, errsz, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	s->base.ops = &sqlite_ops;
	pthread_mutex_init(&s->stats_lock, NULL);
	s->path = strdup(path);
	if (!s->path || conn_open(&s->writer, path, 1, err, errsz))
		goto fail;
	sqlite3_exec(s->writer.db,
		     "INSERT OR IGNORE INTO meta VALUES('schema_version', '" SCHEMA_VERSION "')",
		     NULL, NULL, NULL);
	for (int i = 0; i < NREADERS; i++)
		if (conn_open(&s->readers[i], path, 0, err, errsz))
			goto fail;
	return &s->base;
fail:
	sq_close(&s->base);
	errno = EIO;
	return NULL;
}
