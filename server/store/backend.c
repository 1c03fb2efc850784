// SPDX-License-Identifier: Apache-2.0
#include "server/store/backend.h"

#include <stdio.h>

#include "lib/wire_enums.h"

const char *store_process__job(const Strata__V1__Batch *b, const Strata__V1__Process *p)
{
	const char *const *S = (const char *const *)b->strings;

	if (S[p->job_str][0])
		return S[p->job_str];
	return S[p->torchelastic_run_id_str][0] ? S[p->torchelastic_run_id_str]
						: S[p->slurm_job_id_str];
}

uint64_t store_batch__drops(const Strata__V1__Batch *b)
{
	const ProtobufCMessageDescriptor *d = &strata__v1__drops__descriptor;
	uint64_t sum = 0;

	/* Every field, so a new kind of drop is counted without a change. */
	for (unsigned i = 0; b->drops && i < d->n_fields; i++)
		if (d->fields[i].type == PROTOBUF_C_TYPE_UINT64)
			sum += *(const uint64_t *)((const char *)b->drops + d->fields[i].offset);
	return sum;
}

uint64_t store_batch__cpu_samples(const Strata__V1__Batch *b, uint64_t *per_process)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < b->n_cpu_samples; i++) {
		sum += b->cpu_samples[i]->count;
		if (per_process)
			per_process[b->cpu_samples[i]->process] += b->cpu_samples[i]->count;
	}
	return sum;
}

/* ---- counters ------------------------------------------------------------------- */

void store_counts__init(struct store_counts *c)
{
	pthread_mutex_init(&c->lock, NULL);
}

void store_counts__fini(struct store_counts *c)
{
	pthread_mutex_destroy(&c->lock);
}

void store_counts__ingest(struct store_counts *c, int err)
{
	pthread_mutex_lock(&c->lock);
	if (err == 0)
		c->batches++;
	else if (err == 1)
		c->duplicates++;
	pthread_mutex_unlock(&c->lock);
}

void store_counts__retained(struct store_counts *c, uint64_t batches)
{
	pthread_mutex_lock(&c->lock);
	c->retention_deleted += batches;
	pthread_mutex_unlock(&c->lock);
}

void store_counts__read(struct store_counts *c, struct store_stats *st)
{
	pthread_mutex_lock(&c->lock);
	st->batches = c->batches;
	st->duplicates = c->duplicates;
	st->retention_deleted = c->retention_deleted;
	pthread_mutex_unlock(&c->lock);
}

/* ---- reading result rows ------------------------------------------------------ */

#define U64(col) r->ops->u64(r, (col))
#define I64(col) r->ops->i64(r, (col))
#define STR(col) r->ops->str(r, (col))

int store_emit__job(const struct store_row *r, void *fn, void *ctx)
{
	struct store_job j = {
		.job = STR(0),
		.nodes = (uint32_t)U64(1),
		.processes = (uint32_t)U64(2),
		.ranks = (uint32_t)U64(3),
		.world_size = (int32_t)I64(4),
		.first_ns = U64(5),
		.last_ns = U64(6),
		.cpu_samples = U64(7),
	};

	return ((store_job_fn)fn)(ctx, &j);
}

int store_emit__node(const struct store_row *r, void *fn, void *ctx)
{
	struct store_node n = {
		.node = STR(0),
		.agent_version = STR(1),
		.first_ns = U64(2),
		.last_ns = U64(3),
		.batches = U64(4),
		.cpu_samples = U64(5),
		.drops = U64(6),
	};

	return ((store_node_fn)fn)(ctx, &n);
}

int store_emit__process(const struct store_row *r, void *fn, void *ctx)
{
	struct store_process p = {
		.node = STR(0),
		.pid = (uint32_t)U64(1),
		.start_time_ns = U64(2),
		.comm = STR(3),
		.cmdline = STR(4),
		.container = STR(5),
		.pod = STR(6),
		.job = STR(7),
		.has_rank = (int)I64(8),
		.rank = (int32_t)I64(9),
		.local_rank = (int32_t)I64(10),
		.world_size = (int32_t)I64(11),
		.first_ns = U64(12),
		.last_ns = U64(13),
		.cpu_samples = U64(14),
	};

	return ((store_process_fn)fn)(ctx, &p);
}

int store_emit__sample(const struct store_row *r, void *fn, void *ctx)
{
	struct store_sample s = {
		.node = STR(0),
		.pid = (uint32_t)U64(1),
		.tid = (uint32_t)U64(2),
		.comm = STR(3),
		.has_rank = (int)I64(4),
		.rank = (int32_t)I64(5),
		.value = U64(7),
	};
	int err = r->ops->stack(r, U64(6), &s.stack);

	return err ? err : ((store_sample_fn)fn)(ctx, &s);
}

int store_emit__leak(const struct store_row *r, void *fn, void *ctx)
{
	struct store_leak l = {
		.node = STR(0),
		.pid = (uint32_t)U64(1),
		.has_rank = (int)I64(2),
		.rank = (int32_t)I64(3),
		.bytes = U64(5),
		.allocations = U64(6),
		.oldest_ns = U64(7),
	};
	int err = r->ops->stack(r, U64(4), &l.stack);

	return err ? err : ((store_leak_fn)fn)(ctx, &l);
}

int store_emit__thread_time(const struct store_row *r, void *fn, void *ctx)
{
	struct store_thread_time t = {
		.node = STR(0),
		.pid = (uint32_t)U64(1),
		.tid = (uint32_t)U64(2),
		.job = STR(3),
		.has_rank = (int)I64(4),
		.rank = (int32_t)I64(5),
		.kind = (uint32_t)U64(6),
		.index = (uint32_t)U64(7),
		.ns = U64(8),
	};

	return ((store_thread_time_fn)fn)(ctx, &t);
}

int store_emit__cpu_time(const struct store_row *r, void *fn, void *ctx)
{
	struct store_cpu_time c = {
		.node = STR(0),
		.kind = (uint32_t)U64(1),
		.cpu = (uint32_t)U64(2),
		.pid = (uint32_t)U64(3),
		.vector = (uint32_t)U64(4),
		.comm = STR(5),
		.job = STR(6),
		.has_rank = (int)I64(7),
		.rank = (int32_t)I64(8),
		.ns = U64(9),
	};

	return ((store_cpu_time_fn)fn)(ctx, &c);
}

int store_emit__node_clock(const struct store_row *r, void *fn, void *ctx)
{
	struct store_node_clock c = {
		.node = STR(0),
		.clock_error_ns = U64(1),
		.freq_hz = (uint32_t)U64(2),
		.batches = U64(3),
	};

	return ((store_node_clock_fn)fn)(ctx, &c);
}

void store_row__tally(const struct store_row *r, struct store_tally *t)
{
	*t = (struct store_tally){
		.node = STR(0),
		.pid = (uint32_t)U64(1),
		.has_rank = (int)I64(3),
		.rank = (int32_t)I64(4),
		.fn = STR(5),
		.calls = U64(6),
		.total_ns = U64(7),
		.min_ns = U64(8),
		.max_ns = U64(9),
	};
}

void store_events__init(struct store_events *ev, uint32_t limit, int *truncated, store_event_fn fn,
			void *ctx)
{
	*ev = (struct store_events){ .fn = fn, .ctx = ctx, .limit = limit ? limit : 100000 };
	ev->truncated = truncated ? truncated : &ev->own_truncated;
	*ev->truncated = 0;
}

int store_emit__event(const struct store_row *r, void *fn, void *ctx)
{
	struct store_events *ev = ctx;
	struct store_event e = {
		.kind = (uint32_t)U64(0),
		.node = STR(1),
		.pid = (uint32_t)U64(2),
		.tid = (uint32_t)U64(3),
		.job = STR(4),
		.has_rank = (int)I64(5),
		.rank = (int32_t)I64(6),
		.name = STR(7),
		.start_ns = U64(8),
		.dur_ns = U64(9),
		.bytes = U64(10),
		.count = U64(11),
		.comm_hash = U64(12),
		.seq = U64(13),
		.comm_rank = r->ops->null(r, 14) ? -1 : (int32_t)I64(14),
		.comm_nranks = r->ops->null(r, 15) ? -1 : (int32_t)I64(15),
		.dtype = STR(16),
		.transfer_kind = (uint32_t)U64(17),
		.direction = (uint32_t)U64(18),
	};

	(void)fn;
	if (ev->n >= ev->limit) { /* the query asks for one more than the limit */
		*ev->truncated = 1;
		return 1;
	}
	ev->n++;
	return ev->fn(ev->ctx, &e);
}

#undef U64
#undef I64
#undef STR

/* ---- diagnosis inputs ------------------------------------------------------------- */

const struct store_thread_part STORE_THREAD_PARTS[] = {
	{ STORE_THREAD_TIME, "category", STRATA_TIME_MAX, "ns", "time_breakdown" },
	{ STORE_THREAD_OFFCPU, "reason", STRATA_OFF_MAX, "ns", "offcpu_samples" },
	{ STORE_THREAD_ONCPU, NULL, 0, "on_cpu_ns", "sched_stats" },
	{ STORE_THREAD_RUNNABLE, NULL, 0, "runqueue_latency_ns + runnable_wait_ns", "sched_stats" },
};
const size_t STORE_NTHREAD_PARTS = sizeof(STORE_THREAD_PARTS) / sizeof(STORE_THREAD_PARTS[0]);

void store_thread_part__sql(const struct store_thread_part *p, struct store_part_sql *out)
{
	snprintf(out->ix, sizeof(out->ix), "0");
	out->cond[0] = '\0';
	if (p->col)
		strata_wire_enum_sql(p->col, p->n, out->ix, sizeof(out->ix), out->cond,
				     sizeof(out->cond));
}
