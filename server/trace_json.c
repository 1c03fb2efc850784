// SPDX-License-Identifier: Apache-2.0
/*
 * The Perfetto / Chrome trace-event writer (server/trace_json.h).
 */
#include "server/trace_json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"
#include "lib/json_str.h"

#include "strata.pb-c.h"

/* A thread's CPU-sample track: its tid with this bit (a positive int32, as
 * trace viewers read tids). */
#define CPU_TRACK (1u << 30)

struct trace_thread {
	uint32_t tpid, tid;
	uint32_t depth;			  /* open slices */
	uint64_t frames[TRACE_MAX_DEPTH]; /* their frames' hashes, root first */
	uint64_t last_ns;		  /* the last sample's time */
};

/* Trace-event times are microseconds: written exactly, ns as the fraction. */
static void us(FILE *o, const char *key, uint64_t ns)
{
	fprintf(o, ",\"%s\":%" PRIu64 ".%03u", key, ns / 1000, (unsigned)(ns % 1000));
}

void trace_json__begin(struct trace_json *t, FILE *out, uint64_t sample_ns)
{
	memset(t, 0, sizeof(*t));
	t->out = out;
	t->sample_ns = sample_ns ? sample_ns : 10000000;
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", out);
}

static int pid_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct trace_json *t = ctx;

	return ((const uint32_t *)t->pids.v)[id] == *(const uint32_t *)key;
}

static void sep(struct trace_json *t)
{
	fputs(t->n++ ? ",\n" : "\n", t->out);
}

/* One trace "process" per rank (per pid when the rank is unknown), named
 * at its first event. */
static int64_t trace_pid(struct trace_json *t, const struct store_event *e)
{
	uint32_t tpid = e->has_rank ? (uint32_t)e->rank : 1000000u + e->pid;
	uint64_t h = hash_bytes(&tpid, sizeof(tpid), 0);
	char name[256];

	if (profile_htab__find(&t->seen, h, pid_eq, &tpid, t) >= 0)
		return tpid;
	if (vec_add_indexed(&t->pids, &t->seen, h, &tpid, sizeof(tpid)) < 0)
		return -ENOMEM;
	if (e->has_rank)
		snprintf(name, sizeof(name), "rank %d (%s:%u)", e->rank, e->node, e->pid);
	else
		snprintf(name, sizeof(name), "%s:%u", e->node, e->pid);
	sep(t);
	fprintf(t->out,
		"{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":", tpid);
	json_write_str(t->out, name);
	fputs("}}", t->out);
	if (e->has_rank) {
		sep(t);
		fprintf(t->out,
			"{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%u,"
			"\"args\":{\"sort_index\":%d}}",
			tpid, e->rank);
	}
	return tpid;
}

static const char *category(const struct store_event *e)
{
	switch (e->kind) {
	case STORE_EVENT_COLLECTIVE:
		return "nccl";
	case STORE_EVENT_TRANSFER:
		return e->transfer_kind == STRATA__V1__CUDA_TRANSFER__KIND__SYNC ? "cuda_sync"
										 : "cuda_memcpy";
	case STORE_EVENT_LAUNCH:
		return "cuda_launch";
	default:
		return "cuda";
	}
}

/* ---- CPU samples: a flame chart per thread ------------------------------------------- */

static int thread_eq(uint32_t id, const void *key, const void *ctx)
{
	const struct trace_json *t = ctx;
	const uint32_t *k = key;

	return t->threads[id].tpid == k[0] && t->threads[id].tid == k[1];
}

static struct trace_thread *thread_of(struct trace_json *t, uint32_t tpid, uint32_t tid)
{
	uint32_t key[2] = { tpid, tid };
	uint64_t h = hash_bytes(key, sizeof(key), 0);
	int64_t i = profile_htab__find(&t->thread_ids, h, thread_eq, key, t);
	struct trace_thread *th;

	if (i >= 0)
		return &t->threads[i];
	if (t->nthreads == TRACE_MAX_THREADS)
		return NULL;
	if (!t->threads) {
		t->threads = calloc(TRACE_MAX_THREADS, sizeof(*t->threads));
		if (!t->threads)
			return NULL;
	}
	if (profile_htab__insert(&t->thread_ids, h, t->nthreads))
		return NULL;
	th = &t->threads[t->nthreads++];
	*th = (struct trace_thread){ .tpid = tpid, .tid = tid };
	sep(t);
	fprintf(t->out,
		"{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,"
		"\"args\":{\"name\":\"%u CPU samples\"}}",
		tpid, CPU_TRACK | tid, tid);
	return th;
}

/* Closes the thread's slices above depth keep at ns. */
static void close_to(struct trace_json *t, struct trace_thread *th, uint32_t keep, uint64_t ns)
{
	while (th->depth > keep) {
		th->depth--;
		sep(t);
		fprintf(t->out, "{\"ph\":\"E\",\"pid\":%u,\"tid\":%u", th->tpid,
			CPU_TRACK | th->tid);
		us(t->out, "ts", ns);
		fputc('}', t->out);
	}
}

static uint64_t frame_hash(const struct store_frame *f)
{
	uint64_t h = hash_bytes(&f->addr, sizeof(f->addr), f->kind);

	if (f->func)
		h = hash_bytes(f->func, strlen(f->func), h);
	if (f->module)
		h = hash_bytes(f->module, strlen(f->module), h);
	return h;
}

static int cpu_sample(struct trace_json *t, uint32_t tpid, const struct store_event *e)
{
	struct trace_thread *th = thread_of(t, tpid, e->tid);
	const struct store_stack *st = e->stack;
	uint32_t n = st ? st->nframes : 0, common = 0;
	char buf[512];

	t->samples++;
	if (!th) {
		t->samples_dropped++;
		return 0;
	}
	if (n > TRACE_MAX_DEPTH)
		n = TRACE_MAX_DEPTH; /* the root end: where the time goes stays visible */
	/* A gap (the thread did not run): everything ends a sample after the last. */
	if (th->depth && e->start_ns > th->last_ns + 2 * t->sample_ns)
		close_to(t, th, 0, th->last_ns + t->sample_ns);
	while (common < th->depth && common < n &&
	       th->frames[common] == frame_hash(&st->frames[common]))
		common++;
	close_to(t, th, common, e->start_ns);
	for (uint32_t i = common; i < n; i++) {
		const struct store_frame *sf = &st->frames[i];
		struct profile_frame f = { .func = sf->func,
					   .file = sf->file,
					   .line = sf->line,
					   .module = sf->module ? sf->module : "[unknown]",
					   .addr = sf->addr,
					   .flags = sf->flags };

		th->frames[i] = frame_hash(sf);
		sep(t);
		fprintf(t->out, "{\"ph\":\"B\",\"cat\":\"cpu\",\"pid\":%u,\"tid\":%u", tpid,
			CPU_TRACK | e->tid);
		us(t->out, "ts", e->start_ns);
		fputs(",\"name\":", t->out);
		json_write_str(t->out, profile__frame_name(&f, buf, sizeof(buf)));
		fputc('}', t->out);
	}
	th->depth = n;
	th->last_ns = e->start_ns;
	return 0;
}

/* ---- events ---------------------------------------------------------------------------- */

int trace_json__event(void *ctx, const struct store_event *e)
{
	struct trace_json *t = ctx;
	int64_t tpid = trace_pid(t, e);
	FILE *o = t->out;

	t->events++;
	if (tpid < 0)
		return (int)tpid;
	if (e->kind == STORE_EVENT_CPU_SAMPLE)
		return cpu_sample(t, (uint32_t)tpid, e);
	sep(t);
	fputs("{\"name\":", o);
	json_write_str(o, e->name);
	fprintf(o, ",\"ph\":\"X\",\"pid\":%u,\"tid\":%u", (uint32_t)tpid, e->tid);
	us(o, "ts", e->start_ns);
	us(o, "dur", e->dur_ns);
	fputs(",\"cat\":", o);
	json_write_str(o, e->kind == STORE_EVENT_GPU_CALL && e->call_kind && e->call_kind[0]
				  ? e->call_kind
				  : category(e));
	fprintf(o, ",\"args\":{\"bytes\":%" PRIu64 ",\"count\":%" PRIu64, e->bytes, e->count);
	if (e->kind == STORE_EVENT_COLLECTIVE) {
		t->collectives++;
		fprintf(o, ",\"comm_hash\":\"%016" PRIx64 "\",\"seq\":%" PRIu64, e->comm_hash,
			e->seq);
	}
	if (e->kind == STORE_EVENT_GPU_CALL) {
		t->calls++;
		fprintf(o, ",\"ret\":%d", e->ret);
		if (e->detail && e->detail[0]) {
			fputs(",\"kernel\":", o);
			json_write_str(o, e->detail);
		}
	}
	fputs("}}", o);
	return 0;
}

void trace_json__fini(struct trace_json *t)
{
	free(t->pids.v);
	free(t->threads);
	profile_htab__fini(&t->seen);
	profile_htab__fini(&t->thread_ids);
	t->pids.v = NULL;
	t->threads = NULL;
}

int trace_json__end(struct trace_json *t, int truncated, const char *other)
{
	for (uint32_t i = 0; i < t->nthreads; i++)
		close_to(t, &t->threads[i], 0, t->threads[i].last_ns + t->sample_ns);
	fprintf(t->out,
		"\n],\"otherData\":{%s%s\"truncated\":%s,\"cpu_samples\":%" PRIu64
		",\"cpu_samples_dropped\":%" PRIu64 ",\"gpu_calls\":%" PRIu64
		",\"collectives\":%" PRIu64 ",\"clock\":\"CLOCK_REALTIME\"}}\n",
		other ? other : "", other && other[0] ? "," : "", truncated ? "true" : "false",
		t->samples, t->samples_dropped, t->calls, t->collectives);
	trace_json__fini(t);
	return ferror(t->out) ? -EIO : 0;
}
