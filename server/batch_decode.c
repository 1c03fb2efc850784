// SPDX-License-Identifier: Apache-2.0
#include "server/batch_decode.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define DEFAULT_MAX_WIRE (16u << 20)
#define DEFAULT_MAX_RAW (128u << 20)
#define DEFAULT_MAX_FRAMES 4096u
#define MAX_BUILD_ID 64
#define MAX_NODE_NAME 255

static enum batch_error fail(char *err, size_t errsz, enum batch_error e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return e;
}

int batch_error__http_status(enum batch_error e)
{
	switch (e) {
	case BATCH_OK:
		return 200;
	case BATCH_TOO_LARGE:
		return 413;
	case BATCH_INVALID:
		return 422;
	default:
		return 400;
	}
}

/*
 * Decompresses one zstd frame into at most max bytes.  Streaming, with the
 * output buffer grown as needed up to max: the frame header's content size
 * is a claim, not a fact, so it neither sizes nor bounds the buffer.
 */
static enum batch_error unzstd(const void *in, size_t n, size_t max, uint8_t **out, size_t *len,
			       char *err, size_t errsz)
{
	ZSTD_inBuffer ib = { in, n, 0 };
	ZSTD_DCtx *dc;
	uint8_t *buf = NULL;
	size_t cap = 0, ret = 1;
	enum batch_error e = BATCH_OK;

	static const uint8_t magic[4] = { 0x28, 0xb5, 0x2f, 0xfd }; /* ZSTD_MAGICNUMBER, LE */

	if (n < 4 || memcmp(in, magic, 4))
		return fail(err, errsz, BATCH_NOT_ZSTD, "body is not a zstd frame");
	dc = ZSTD_createDCtx();
	if (!dc)
		return fail(err, errsz, BATCH_TOO_LARGE, "out of memory");
	/* A window larger than what we accept in total is refused early. */
	ZSTD_DCtx_setParameter(dc, ZSTD_d_windowLogMax, 27);
	*len = 0;
	while (ret != 0) {
		if (*len == cap) {
			size_t ncap = cap ? cap * 2 : 64 * 1024;
			uint8_t *nb;

			if (cap >= max) {
				e = fail(err, errsz, BATCH_TOO_LARGE,
					 "batch decompresses to more than %zu bytes", max);
				break;
			}
			if (ncap > max)
				ncap = max;
			nb = realloc(buf, ncap);
			if (!nb) {
				e = fail(err, errsz, BATCH_TOO_LARGE, "out of memory");
				break;
			}
			buf = nb;
			cap = ncap;
		}
		ZSTD_outBuffer ob = { buf, cap, *len };
		ret = ZSTD_decompressStream(dc, &ob, &ib);
		*len = ob.pos;
		if (ZSTD_isError(ret)) {
			e = fail(err, errsz, BATCH_NOT_ZSTD, "corrupt zstd data: %s",
				 ZSTD_getErrorName(ret));
			break;
		}
		if (ret != 0 && ib.pos == ib.size && ob.pos < ob.size) {
			e = fail(err, errsz, BATCH_NOT_ZSTD, "truncated zstd frame");
			break;
		}
	}
	if (e == BATCH_OK && ib.pos != ib.size)
		e = fail(err, errsz, BATCH_NOT_ZSTD, "%zu bytes after the zstd frame",
			 ib.size - ib.pos);
	ZSTD_freeDCtx(dc);
	if (e != BATCH_OK) {
		free(buf);
		return e;
	}
	*out = buf;
	return BATCH_OK;
}

/* ---- validation --------------------------------------------------------- */

struct vctx {
	const Strata__V1__Batch *b;
	const struct batch_limits *lim;
	char *err;
	size_t errsz;
};

#define CHECK(cond, ...)                                                           \
	do {                                                                       \
		if (!(cond))                                                       \
			return fail(v->err, v->errsz, BATCH_INVALID, __VA_ARGS__); \
	} while (0)
#define STR(field, what, i)                                                          \
	CHECK((field) < v->b->n_strings, "%s[%zu]: string %u out of range", what, i, \
	      (unsigned)(field))
#define PROC(field, what, i)                                                            \
	CHECK((field) < v->b->n_processes, "%s[%zu]: process %u out of range", what, i, \
	      (unsigned)(field))
#define STACK(field, what, i)                                                      \
	CHECK((field) < v->b->n_stacks, "%s[%zu]: stack %u out of range", what, i, \
	      (unsigned)(field))
#define MAPPING(field, what, i)                                                        \
	CHECK((field) < v->b->n_mappings, "%s[%zu]: mapping %u out of range", what, i, \
	      (unsigned)(field))

static enum batch_error check_processes(const struct vctx *v)
{
	const Strata__V1__Batch *b = v->b;

	for (size_t i = 0; i < b->n_processes; i++) {
		const Strata__V1__Process *p = b->processes[i];

		CHECK(p->pid != 0, "processes[%zu]: pid 0", i);
		STR(p->comm_str, "processes", i);
		STR(p->cmdline_str, "processes", i);
		STR(p->cgroup_str, "processes", i);
		STR(p->container_str, "processes", i);
		STR(p->pod_str, "processes", i);
		STR(p->job_str, "processes", i);
		STR(p->torchelastic_run_id_str, "processes", i);
		STR(p->slurm_job_id_str, "processes", i);
		for (size_t j = 0; j < p->n_labels; j++) {
			STR(p->labels[j]->key_str, "processes.labels", i);
			STR(p->labels[j]->value_str, "processes.labels", i);
		}
		for (size_t j = 0; j < p->n_maps; j++) {
			MAPPING(p->maps[j]->mapping, "processes.maps", i);
			CHECK(p->maps[j]->start < p->maps[j]->end,
			      "processes[%zu].maps[%zu]: empty range", i, j);
		}
	}
	return BATCH_OK;
}

static enum batch_error check_stacks(const struct vctx *v)
{
	const Strata__V1__Batch *b = v->b;
	uint32_t max =
		v->lim && v->lim->max_stack_frames ? v->lim->max_stack_frames : DEFAULT_MAX_FRAMES;

	for (size_t i = 0; i < b->n_mappings; i++) {
		CHECK(b->mappings[i]->build_id.len <= MAX_BUILD_ID,
		      "mappings[%zu]: build-id of %zu bytes", i, b->mappings[i]->build_id.len);
		STR(b->mappings[i]->path_str, "mappings", i);
	}
	CHECK(b->n_stacks == 0 || b->stacks[0]->n_frames == 0, "stacks[0] must be the empty stack");
	for (size_t i = 0; i < b->n_stacks; i++) {
		const Strata__V1__Stack *s = b->stacks[i];

		CHECK(s->n_frames <= max, "stacks[%zu]: %zu frames (at most %u)", i, s->n_frames,
		      max);
		for (size_t j = 0; j < s->n_frames; j++) {
			const Strata__V1__Frame *f = s->frames[j];

			switch (f->kind) {
			case STRATA__V1__FRAME__KIND__NATIVE:
				MAPPING(f->mapping, "stacks.frames", i);
				break;
			case STRATA__V1__FRAME__KIND__KERNEL:
			case STRATA__V1__FRAME__KIND__PYTHON:
			case STRATA__V1__FRAME__KIND__LOST:
			case STRATA__V1__FRAME__KIND__UNKNOWN:
				break;
			default:
				CHECK(0, "stacks[%zu].frames[%zu]: unknown kind %d", i, j, f->kind);
			}
			STR(f->name_str, "stacks.frames", i);
			STR(f->module_str, "stacks.frames", i);
			STR(f->file_str, "stacks.frames", i);
		}
	}
	return BATCH_OK;
}

static enum batch_error check_cpu(const struct vctx *v)
{
	const Strata__V1__Batch *b = v->b;

	for (size_t i = 0; i < b->n_cpu_samples; i++) {
		STACK(b->cpu_samples[i]->stack, "cpu_samples", i);
		PROC(b->cpu_samples[i]->process, "cpu_samples", i);
		STR(b->cpu_samples[i]->thread_comm_str, "cpu_samples", i);
	}
	for (size_t i = 0; i < b->n_offcpu_samples; i++) {
		STACK(b->offcpu_samples[i]->stack, "offcpu_samples", i);
		PROC(b->offcpu_samples[i]->process, "offcpu_samples", i);
	}
	for (size_t i = 0; i < b->n_sched_stats; i++)
		PROC(b->sched_stats[i]->process, "sched_stats", i);
	for (size_t i = 0; i < b->n_time_breakdown; i++)
		PROC(b->time_breakdown[i]->process, "time_breakdown", i);
	/* CPU layer */
	for (size_t i = 0; i < b->n_foreign_runs; i++)
		STR(b->foreign_runs[i]->comm_str, "foreign_runs", i);
	for (size_t i = 0; i < b->n_target_cpus; i++)
		PROC(b->target_cpus[i]->process, "target_cpus", i);
	return BATCH_OK;
}

static enum batch_error check_gpu(const struct vctx *v)
{
	const Strata__V1__Batch *b = v->b;

	for (size_t i = 0; i < b->n_cuda_launches; i++) {
		PROC(b->cuda_launches[i]->process, "cuda_launches", i);
		STACK(b->cuda_launches[i]->stack, "cuda_launches", i);
		STR(b->cuda_launches[i]->kernel_name_str, "cuda_launches", i);
	}
	for (size_t i = 0; i < b->n_cuda_allocs; i++) {
		PROC(b->cuda_allocs[i]->process, "cuda_allocs", i);
		STACK(b->cuda_allocs[i]->stack, "cuda_allocs", i);
		STR(b->cuda_allocs[i]->api_str, "cuda_allocs", i);
	}
	for (size_t i = 0; i < b->n_cuda_alloc_failures; i++) {
		PROC(b->cuda_alloc_failures[i]->process, "cuda_alloc_failures", i);
		STACK(b->cuda_alloc_failures[i]->stack, "cuda_alloc_failures", i);
		STR(b->cuda_alloc_failures[i]->code_name_str, "cuda_alloc_failures", i);
	}
	for (size_t i = 0; i < b->n_cuda_transfers; i++) {
		PROC(b->cuda_transfers[i]->process, "cuda_transfers", i);
		STACK(b->cuda_transfers[i]->stack, "cuda_transfers", i);
		STR(b->cuda_transfers[i]->api_str, "cuda_transfers", i);
	}
	for (size_t i = 0; i < b->n_cuda_api_tally; i++) {
		const Strata__V1__CudaApiTally *t = b->cuda_api_tally[i];

		PROC(t->process, "cuda_api_tally", i);
		STR(t->fn_str, "cuda_api_tally", i);
		for (size_t j = 0; j < t->n_errors; j++)
			STR(t->errors[j]->name_str, "cuda_api_tally.errors", i);
	}
	for (size_t i = 0; i < b->n_probe_duty; i++) {
		STR(b->probe_duty[i]->probe_str, "probe_duty", i);
		CHECK(b->probe_duty[i]->ratio >= 0 && b->probe_duty[i]->ratio <= 1,
		      "probe_duty[%zu]: ratio outside [0, 1]", i);
	}
	for (size_t i = 0; i < b->n_nccl_comms; i++)
		PROC(b->nccl_comms[i]->process, "nccl_comms", i);
	for (size_t i = 0; i < b->n_nccl_collectives; i++) {
		const Strata__V1__NcclCollective *c = b->nccl_collectives[i];

		PROC(c->process, "nccl_collectives", i);
		STR(c->op_str, "nccl_collectives", i);
		STR(c->dtype_str, "nccl_collectives", i);
		STACK(c->stack, "nccl_collectives", i);
		CHECK(c->exit_ns >= c->entry_ns, "nccl_collectives[%zu]: exit before entry", i);
	}
	for (size_t i = 0; i < b->n_nccl_stats; i++) {
		PROC(b->nccl_stats[i]->process, "nccl_stats", i);
		STR(b->nccl_stats[i]->op_str, "nccl_stats", i);
	}
	return BATCH_OK;
}

enum batch_error batch_validate(const Strata__V1__Batch *b, const struct batch_limits *lim,
				char *err, size_t errsz)
{
	const struct vctx ctx = { b, lim, err, errsz }, *v = &ctx;
	enum batch_error e;

	if (b->version != STRATA__V1__WIRE_VERSION__WIRE_VERSION_CURRENT)
		return fail(err, errsz, BATCH_BAD_VERSION,
			    "unsupported wire version %u (this server speaks %d)", b->version,
			    STRATA__V1__WIRE_VERSION__WIRE_VERSION_CURRENT);
	CHECK(b->batch_id.len == BATCH_ID_LEN, "batch_id must be %d bytes, not %zu", BATCH_ID_LEN,
	      b->batch_id.len);
	CHECK(b->node && b->node[0] && strlen(b->node) <= MAX_NODE_NAME, "node must be 1..%d bytes",
	      MAX_NODE_NAME);
	CHECK(b->end_ns >= b->start_ns && b->start_ns > 0, "bad time window [%llu, %llu)",
	      (unsigned long long)b->start_ns, (unsigned long long)b->end_ns);
	CHECK(b->n_strings == 0 || (b->strings[0] && !b->strings[0][0]), "strings[0] must be \"\"");
	if ((e = check_processes(v)) || (e = check_stacks(v)) || (e = check_cpu(v)) ||
	    (e = check_gpu(v)))
		return e;
	return BATCH_OK;
}

enum batch_error batch_decode(const void *wire, size_t n, const struct batch_limits *lim,
			      Strata__V1__Batch **out, size_t *raw_len, char *err, size_t errsz)
{
	size_t max_wire = lim && lim->max_wire ? lim->max_wire : DEFAULT_MAX_WIRE;
	size_t max_raw = lim && lim->max_raw ? lim->max_raw : DEFAULT_MAX_RAW;
	Strata__V1__Batch *b;
	uint8_t *raw = NULL;
	size_t len = 0;
	enum batch_error e;

	*out = NULL;
	if (n > max_wire)
		return fail(err, errsz, BATCH_TOO_LARGE, "batch of %zu bytes (at most %zu)", n,
			    max_wire);
	e = unzstd(wire, n, max_raw, &raw, &len, err, errsz);
	if (e)
		return e;
	if (raw_len)
		*raw_len = len;
	b = strata__v1__batch__unpack(NULL, len, raw);
	free(raw);
	if (!b)
		return fail(err, errsz, BATCH_BAD_PROTO,
			    "not a strata batch (protobuf decode failed)");
	e = batch_validate(b, lim, err, errsz);
	if (e) {
		strata__v1__batch__free_unpacked(b, NULL);
		return e;
	}
	*out = b;
	return BATCH_OK;
}

void batch_decode__free(Strata__V1__Batch *b)
{
	if (b)
		strata__v1__batch__free_unpacked(b, NULL);
}
