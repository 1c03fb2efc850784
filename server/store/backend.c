// SPDX-License-Identifier: Apache-2.0
#include "server/store/backend.h"

#include <stddef.h>
#include <stdio.h>

#include "lib/log.h"
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

void store_counts__column_added(struct store_counts *c, const char *store, const char *table,
				const char *ddl)
{
	pr_warn("store: %s: table %s lacked column %s (a database made by an older "
		"server): added",
		store, table, ddl);
	pthread_mutex_lock(&c->lock);
	c->columns_added++;
	pthread_mutex_unlock(&c->lock);
}

void store_counts__read(struct store_counts *c, struct store_stats *st)
{
	pthread_mutex_lock(&c->lock);
	st->batches = c->batches;
	st->duplicates = c->duplicates;
	st->retention_deleted = c->retention_deleted;
	st->columns_added = c->columns_added;
	pthread_mutex_unlock(&c->lock);
}

/* ---- reading result rows ------------------------------------------------------ */

/*
 * A query struct's fields in the order of the result's columns: column i
 * goes to cells[i] (CELL_SKIP: a column no field takes).  A cell's kind
 * comes from its field's type, so a map cannot read a field as another.
 */
enum cell_kind {
	CELL_SKIP,
	CELL_STR,
	CELL_U64,
	CELL_U32,
	CELL_I32,
	CELL_I32_NULL, /* NULL reads as -1 (unknown) */
	CELL_STACK,    /* the column is a stack id; the field its stack */
};

struct cell {
	uint16_t off;
	uint8_t kind;
};

#define CELL(type, field)                                                                            \
	{                                                                                            \
		offsetof(struct type, field),                                                      \
	  _Generic(((struct type *)0)->field, const char *: CELL_STR, uint64_t: CELL_U64,    \
		   uint32_t: CELL_U32, int32_t: CELL_I32, const struct store_stack *: CELL_STACK) \
	}
#define CELL_OR_UNKNOWN(type, field)                        \
	{                                                   \
		offsetof(struct type, field), CELL_I32_NULL \
	}
#define SKIP_CELL            \
	{                    \
		0, CELL_SKIP \
	}
#define N(a) (sizeof(a) / sizeof((a)[0]))

static int read_cells(const struct store_row *r, const struct cell *cells, size_t n, void *out)
{
	for (size_t i = 0; i < n; i++) {
		void *p = (char *)out + cells[i].off;
		int col = (int)i, err;

		switch (cells[i].kind) {
		case CELL_STR:
			*(const char **)p = r->ops->str(r, col);
			break;
		case CELL_U64:
			*(uint64_t *)p = r->ops->u64(r, col);
			break;
		case CELL_U32:
			*(uint32_t *)p = (uint32_t)r->ops->u64(r, col);
			break;
		case CELL_I32:
			*(int32_t *)p = (int32_t)r->ops->i64(r, col);
			break;
		case CELL_I32_NULL:
			*(int32_t *)p = r->ops->null(r, col) ? -1 : (int32_t)r->ops->i64(r, col);
			break;
		case CELL_STACK:
			err = r->ops->stack(r, r->ops->u64(r, col), (const struct store_stack **)p);
			if (err)
				return err;
			break;
		default:
			break;
		}
	}
	return 0;
}

#define C(f) CELL(store_job, f)
static const struct cell JOB[] = { C(job),	  C(nodes),    C(processes), C(ranks),
				   C(world_size), C(first_ns), C(last_ns),   C(cpu_samples) };
#undef C

#define C(f) CELL(store_node, f)
static const struct cell NODE[] = { C(node),	C(agent_version), C(first_ns), C(last_ns),
				    C(batches), C(cpu_samples),	  C(drops) };
#undef C

#define C(f) CELL(store_process, f)
static const struct cell PROCESS[] = { C(node),	    C(pid),	  C(start_time_ns), C(comm),
				       C(cmdline),  C(container), C(pod),	    C(job),
				       C(has_rank), C(rank),	  C(local_rank),    C(world_size),
				       C(first_ns), C(last_ns),	  C(cpu_samples) };
#undef C

#define C(f) CELL(store_sample, f)
static const struct cell SAMPLE[] = { C(node),	   C(pid),  C(tid),   C(comm),
				      C(has_rank), C(rank), C(stack), C(value) };
#undef C

#define C(f) CELL(store_leak, f)
static const struct cell LEAK[] = { C(node),  C(pid),	      C(has_rank),  C(rank), C(stack),
				    C(bytes), C(allocations), C(oldest_ns), C(level) };
#undef C

#define C(f) CELL(store_thread_time, f)
static const struct cell THREAD_TIME[] = { C(node), C(pid),  C(tid),   C(job), C(has_rank),
					   C(rank), C(kind), C(index), C(ns) };
#undef C

#define C(f) CELL(store_cpu_time, f)
static const struct cell CPU_TIME[] = { C(node), C(kind), C(cpu),      C(pid),	C(vector),
					C(comm), C(job),  C(has_rank), C(rank), C(ns) };
#undef C

#define C(f) CELL(store_node_clock, f)
static const struct cell NODE_CLOCK[] = { C(node), C(clock_error_ns), C(freq_hz), C(batches) };
#undef C

#define C(f) CELL(store_collstat, f)
static const struct cell COLLSTAT[] = { C(job),		C(comm_hash),	C(op),
					C(size_class),	C(nranks),	C(windows),
					C(occurrences), C(observed_ns), C(stall_ns),
					C(slack_ns),	C(bytes),	C(observed_max_ns),
					C(first_ns),	C(last_ns) };
#undef C

#define C(f) CELL(store_hang, f)
static const struct cell HANG[] = { C(job),	   C(kind),	C(comm_hash), C(seq),
				    C(op),	   C(bytes),	C(nranks),    C(since_ns),
				    C(decided_ns), C(until_ns), C(waiting),   C(missing),
				    C(mismatched), C(report) };
#undef C

#define C(f) CELL(store_capture, f)
static const struct cell CAPTURE[] = { C(id),	      C(job),	    C(trigger), C(reason),
				       C(created_ns), C(start_ns),  C(end_ns),	C(freq_hz),
				       C(offcpu),     C(gpu_calls), C(targets), C(state) };
#undef C

#define C(f) CELL(store_capture_run, f)
static const struct cell CAPTURE_RUN[] = { C(node),    C(start_ns),   C(end_ns),  C(end_reason),
					   C(freq_hz), C(processes),  C(samples), C(gpu_calls),
					   C(dropped), C(reported_ns) };
#undef C

#define C(f) CELL(store_tally, f)
static const struct cell TALLY[] = { C(node),	  C(pid),      SKIP_CELL /* the process key */,
				     C(has_rank), C(rank),     C(fn),
				     C(calls),	  C(total_ns), C(min_ns),
				     C(max_ns) };
#undef C
/* comm_rank, comm_nranks: NULL (no communicator record) is -1 */
#define C(f) CELL(store_event, f)
#define U(f) CELL_OR_UNKNOWN(store_event, f)
static const struct cell EVENT[] = { C(kind),	   C(node),	     C(pid),	   C(tid),
				     C(job),	   C(has_rank),	     C(rank),	   C(name),
				     C(start_ns),  C(dur_ns),	     C(bytes),	   C(count),
				     C(comm_hash), C(seq),	     U(comm_rank), U(comm_nranks),
				     C(dtype),	   C(transfer_kind), C(direction), C(call_kind),
				     C(detail),	   C(ret),	     C(stack) };
#undef U
#undef C

/* store_emit__NAME: reads a struct TYPE by its map and hands it to fn. */
#define EMIT(name, type, map)                                                           \
	int store_emit__##name(const struct store_row *r, void *fn, void *ctx)          \
	{                                                                               \
		struct type v = { 0 };                                                  \
		int err = read_cells(r, map, N(map), &v);                               \
                                                                                        \
		return err ? err : ((int (*)(void *, const struct type *))fn)(ctx, &v); \
	}

EMIT(job, store_job, JOB)
EMIT(node, store_node, NODE)
EMIT(process, store_process, PROCESS)
EMIT(sample, store_sample, SAMPLE)
EMIT(leak, store_leak, LEAK)
EMIT(thread_time, store_thread_time, THREAD_TIME)
EMIT(cpu_time, store_cpu_time, CPU_TIME)
EMIT(node_clock, store_node_clock, NODE_CLOCK)
EMIT(collstat, store_collstat, COLLSTAT)
EMIT(hang, store_hang, HANG)
EMIT(capture, store_capture, CAPTURE)
EMIT(capture_run, store_capture_run, CAPTURE_RUN)

void store_row__tally(const struct store_row *r, struct store_tally *t)
{
	*t = (struct store_tally){ 0 };
	read_cells(r, TALLY, N(TALLY), t);
}

void store_events__init(struct store_events *ev, uint32_t kinds, uint32_t limit, int *truncated,
			store_event_fn fn, void *ctx)
{
	*ev = (struct store_events){ .fn = fn,
				     .ctx = ctx,
				     .limit = limit ? limit : 100000,
				     .stacks = !!(kinds & STORE_EVENT_STACKS) };
	ev->truncated = truncated ? truncated : &ev->own_truncated;
	*ev->truncated = 0;
}

int store_emit__event(const struct store_row *r, void *fn, void *ctx)
{
	struct store_events *ev = ctx;
	struct store_event e = { 0 };
	int err;

	(void)fn;
	if (ev->n >= ev->limit) { /* the query asks for one more than the limit */
		*ev->truncated = 1;
		return 1;
	}
	/* the stack id is the last column: read only when asked for */
	err = read_cells(r, EVENT, ev->stacks ? N(EVENT) : N(EVENT) - 1, &e);
	if (err)
		return err;
	ev->n++;
	return ev->fn(ev->ctx, &e);
}

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
