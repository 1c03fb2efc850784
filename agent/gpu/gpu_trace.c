// SPDX-License-Identifier: Apache-2.0
/*
 * Perfetto / Chrome trace JSON ("traceEvents") of the recorded calls:
 * launches, copies, syncs (with --trace) and NCCL calls as complete ("X")
 * events per thread; each process is named with its rank.  Timestamps are
 * CLOCK_REALTIME microseconds, comparable across nodes within the stated
 * clock error (otherData.clock_error_ns plus the nodes' own sync error).
 */
#include <errno.h>
#include <inttypes.h>

#include "agent/gpu/gpu_data.h"
#include "agent/gpu/gpu_names.h"
#include "lib/json_str.h"

const char *gpu_data__kernel(const struct gpu_data *d, uint32_t tgid, uint64_t object)
{
	for (size_t i = 0; i < d->nsites; i++)
		if (d->sites[i].key.tgid == tgid && d->sites[i].key.object == object &&
		    d->sites[i].kernel)
			return d->sites[i].kernel;
	return NULL;
}

static void call_args(FILE *out, const struct gpu_data *d, const struct gpu_event *e)
{
	uint32_t kind = gpu_api_kind(e->api);
	const char *ret = gpu_ret_name(e->api, e->ret);
	uint64_t a[6]; /* __u64 is unsigned long long: PRIu64 wants uint64_t */

	for (int i = 0; i < 6; i++)
		a[i] = e->a[i];

	fprintf(out, "\"ret\":%" PRId64 ",\"ret_name\":\"%s\"", (int64_t)e->ret, ret ? ret : "?");
	switch (kind) {
	case GPU_KIND_LAUNCH:
		if (gpu_data__kernel(d, e->tgid, e->a[0])) {
			fputs(",\"kernel_name\":", out); /* the target's symbol */
			json_write_str(out, gpu_data__kernel(d, e->tgid, e->a[0]));
		}
		fprintf(out,
			",\"kernel\":\"%#" PRIx64 "\",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],"
			"\"shared_mem\":%" PRIu64 ",\"stream\":\"%#" PRIx64 "\"",
			a[0], (uint32_t)a[1], (uint32_t)(a[1] >> 32), (uint32_t)a[2],
			(uint32_t)(a[2] >> 32), (uint32_t)a[3], (uint32_t)(a[3] >> 32), a[4], a[5]);
		break;
	case GPU_KIND_ALLOC:
	case GPU_KIND_FREE:
		fprintf(out, ",\"ptr\":\"%#" PRIx64 "\",\"bytes\":%" PRIu64, a[0], a[1]);
		break;
	case GPU_KIND_COPY:
		fprintf(out, ",\"bytes\":%" PRIu64 ",\"kind\":\"%s\"", a[1],
			gpu_memcpy_kind_name(a[2]));
		break;
	case GPU_KIND_COLL:
	case GPU_KIND_P2P:
	case GPU_KIND_NCCL_INIT:
		/* the element count is bytes / element size (the event's slot
		 * holds the communicator pointer) */
		fprintf(out,
			",\"comm\":\"%016" PRIx64 "\",\"comm_ptr\":\"0x%" PRIx64
			"\",\"seq\":%" PRIu64 ",\"count\":%" PRIu64 ",\"bytes\":%" PRIu64
			",\"dtype\":\"%s\",\"op\":\"%s\",\"rank\":%u,\"nranks\":%u",
			a[0], a[2], a[1],
			gpu_nccl_dtype_size(a[4] & 0xffff)
				? a[3] / gpu_nccl_dtype_size(a[4] & 0xffff)
				: 0,
			a[3], gpu_nccl_dtype_name(a[4] & 0xffff),
			gpu_nccl_op_name((a[4] >> 16) & 0xffff), (uint32_t)a[5],
			(uint32_t)(a[5] >> 32));
		break;
	default:
		break;
	}
}

int gpu_data__write_trace(const struct gpu_data *d, FILE *out)
{
	int first = 1;

	fprintf(out,
		"{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"CLOCK_REALTIME\","
		"\"clock_error_ns\":%" PRIu64 ",\"dropped_calls\":%" PRIu64
		",\"events_lost\":%" PRIu64 "},\n\"traceEvents\":[\n",
		d->clock_err_ns, d->dropped_calls, d->bpf[GPU_CNT_EVENTS_LOST]);
	for (size_t i = 0; i < d->nprocs; i++) {
		const struct gpu_proc_info *p = &d->procs[i];
		int rank = p->nccl_rank >= 0 ? p->nccl_rank : p->rank;
		char name[96];

		if (rank >= 0)
			snprintf(name, sizeof(name), "rank %d: %s (pid %u)", rank, p->comm,
				 p->tgid);
		else
			snprintf(name, sizeof(name), "%s (pid %u)", p->comm, p->tgid);
		fprintf(out,
			"%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,"
			"\"args\":{\"name\":",
			first ? "" : ",\n", p->tgid);
		json_write_str(out, name); /* the comm: the process's own choice */
		fputs("}}", out);
		first = 0;
		if (rank >= 0)
			fprintf(out,
				",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%u,"
				"\"tid\":0,\"args\":{\"sort_index\":%d}}",
				p->tgid, rank);
	}
	for (size_t i = 0; i < d->ncalls; i++) {
		const struct gpu_event *e = &d->calls[i].ev;
		uint64_t start = e->start_ns, dur = e->end_ns > start ? e->end_ns - start : 0;

		fprintf(out,
			"%s{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%u,\"tid\":%u,"
			"\"ts\":%" PRIu64 ".%03u,\"dur\":%" PRIu64 ".%03u,\"args\":{",
			first ? "" : ",\n", gpu_api_name(e->api),
			gpu_kind_name(gpu_api_kind(e->api)), e->tgid, e->tid, start / 1000,
			(unsigned)(start % 1000), dur / 1000, (unsigned)(dur % 1000));
		call_args(out, d, e);
		fputs("}}", out);
		first = 0;
	}
	fputs("\n]}\n", out);
	return ferror(out) ? -EIO : 0;
}
