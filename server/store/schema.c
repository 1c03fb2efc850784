// SPDX-License-Identifier: Apache-2.0
/*
 * The stored record types (see schema.h).  Columns are listed in stored
 * order; every field of the record's message is listed once, stored or
 * skipped.  The order of the tables is ClickHouse's insert order.
 */
#include "server/store/schema.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

#define COL(n, f)                                              \
	{                                                      \
		.name = n, .field = f, .kind = STORE_COL_VALUE \
	}
#define TEXT(n, f)                                                                     \
	{                                                                              \
		.name = n, .field = f, .kind = STORE_COL_TEXT, .ref = STORE_REF_STRING \
	}
#define STACK(n)                                                                             \
	{                                                                                    \
		.name = n, .field = "stack", .kind = STORE_COL_STACK, .ref = STORE_REF_STACK \
	}
#define PROCESS                                                                         \
	{                                                                               \
		.field = "process", .kind = STORE_COL_PROCESS, .ref = STORE_REF_PROCESS \
	}
#define SKIP(f, r)                                           \
	{                                                    \
		.field = f, .kind = STORE_COL_SKIP, .ref = r \
	}
/* The row's process's comm, copied into ClickHouse's rows. */
#define PROC_COMM                                                                   \
	{                                                                           \
		.name = "comm", .kind = STORE_COL_PROC_COMM, .flags = STORE_CH_ONLY \
	}

#define TABLE(nm, d, pp, ob, c)                                                              \
	.name = nm, .field = nm, .parent = -1, .msg = &d, .per_process = pp, .order_by = ob, \
	.cols = c, .ncols = N(c)

/* In ClickHouse every per-process row carries the process's pid, start
 * time, job, container and rank (the head); SQLite keeps one upserted row
 * per process instance (server/store/sqlite_ingest.c). */
static const struct store_column PROCESSES[] = {
	SKIP("pid", STORE_REF_NONE),	       /* head */
	SKIP("start_time_ns", STORE_REF_NONE), /* head */
	COL("ppid", "ppid"),
	TEXT("comm", "comm_str"),
	TEXT("cmdline", "cmdline_str"),
	TEXT("cgroup", "cgroup_str"),
	SKIP("container_str", STORE_REF_STRING), /* head */
	TEXT("pod", "pod_str"),
	SKIP("job_str", STORE_REF_STRING),		   /* head: the job */
	SKIP("torchelastic_run_id_str", STORE_REF_STRING), /* head: the job's fallback */
	SKIP("slurm_job_id_str", STORE_REF_STRING),	   /* head: its second fallback */
	SKIP("rank.rank", STORE_REF_NONE),		   /* head */
	{ .name = "local_rank", .field = "rank.local_rank", .absent = -1 },
	{ .name = "world_size", .field = "rank.world_size", .absent = -1 },
	{ .name = "cpu_samples", .kind = STORE_COL_PROC_SAMPLES },
	SKIP("labels", STORE_REF_NONE), /* not stored; the decoder checks them */
	SKIP("maps", STORE_REF_NONE),	/* not stored; the decoder checks them */
	COL("exit_ns", "exit_ns"),	/* 0: alive; read back by hang detection */
};

static const struct store_column CPU_SAMPLES[] = {
	PROCESS,	   COL("tid", "tid"),	  TEXT("comm", "thread_comm_str"),
	STACK("stack_id"), COL("count", "count"),
};

static const struct store_column OFFCPU_SAMPLES[] = {
	PROCESS,
	COL("tid", "tid"),
	PROC_COMM,
	STACK("stack_id"),
	COL("reason", "reason"),
	COL("ns", "ns"),
	COL("count", "count"),
};

static const struct store_column SCHED_STATS[] = {
	PROCESS,
	COL("tid", "tid"),
	COL("on_cpu_ns", "on_cpu_ns"),
	COL("runqueue_latency_ns", "runqueue_latency_ns"),
	COL("runnable_wait_ns", "runnable_wait_ns"),
	COL("switches", "switches"),
};

static const struct store_column IRQ_STATS[] = {
	COL("cpu", "cpu"),
	COL("irq_ns", "irq_ns"),
	COL("softirq_ns", "softirq_ns"),
};

static const struct store_column TIME_BREAKDOWN[] = {
	PROCESS,
	COL("tid", "tid"),
	COL("category", "category"),
	COL("ns", "ns"),
};

static const struct store_column CUDA_LAUNCHES[] = {
	PROCESS,
	STACK("stack_id"),
	TEXT("kernel", "kernel_name_str"),
	COL("count", "count"),
	COL("ns_in_call", "ns_in_call"),
	COL("grid_x", "grid.x"),
	COL("grid_y", "grid.y"),
	COL("grid_z", "grid.z"),
	COL("block_x", "block.x"),
	COL("block_y", "block.y"),
	COL("block_z", "block.z"),
	COL("device", "device"),
	COL("stream", "stream"),
};

static const struct store_column CUDA_ALLOCS[] = {
	PROCESS,
	COL("ptr", "ptr"),
	COL("size", "size"),
	STACK("stack_id"),
	COL("alloc_ns", "alloc_ns"),
	COL("freed", "freed"),
	COL("free_ns", "free_ns"),
	COL("device", "device"),
	TEXT("api", "api_str"),
	COL("free_only", "free_only"),
	COL("level", "level"), /* 0: the driver's (a segment), 1: a framework's (a block) */
};

static const struct store_column CUDA_ALLOC_FAILURES[] = {
	PROCESS,
	STACK("stack_id"),
	COL("code", "code"),
	TEXT("code_name", "code_name_str"),
	COL("count", "count"),
	COL("bytes", "bytes"),
};

static const struct store_column CUDA_TRANSFERS[] = {
	PROCESS,
	COL("tid", "tid"),
	STACK("stack_id"),
	COL("kind", "kind"),
	COL("direction", "direction"),
	COL("bytes", "bytes"),
	COL("ns", "ns"),
	COL("start_ns", "start_ns"),
	/* 0 from agents that did not aggregate: one call */
	{ .name = "count", .field = "count", .flags = STORE_ZERO_IS_ONE },
	TEXT("api", "api_str"),
};

static const struct store_column CUDA_API_TALLY[] = {
	PROCESS,
	TEXT("fn", "fn_str"),
	COL("calls", "calls"),
	COL("total_ns", "total_ns"),
	COL("min_ns", "min_ns"),
	COL("max_ns", "max_ns"),
	SKIP("errors", STORE_REF_NONE), /* the cuda_api_errors table */
};

/* CudaApiTally.errors, one row per code, with the tally's process and fn. */
static const struct store_column CUDA_API_ERRORS[] = {
	{ .field = "process",
	  .kind = STORE_COL_PROCESS,
	  .ref = STORE_REF_PROCESS,
	  .flags = STORE_OF_PARENT },
	{ .name = "fn",
	  .field = "fn_str",
	  .kind = STORE_COL_TEXT,
	  .ref = STORE_REF_STRING,
	  .flags = STORE_OF_PARENT },
	COL("code", "code"),
	TEXT("name", "name_str"),
	COL("count", "count"),
};

static const struct store_column PROBE_DUTY[] = {
	TEXT("probe", "probe_str"),
	COL("ratio", "ratio"),
	COL("on_ns", "on_ns"),
};

static const struct store_column NCCL_COMMS[] = {
	COL("comm_hash", "comm_hash"),
	PROCESS,
	{ .name = "rank", .field = "rank", .ch_name = "comm_rank" },
	COL("nranks", "nranks"),
	COL("device", "device"),
	COL("init_ns", "init_ns"),
	SKIP("recovered", STORE_REF_NONE), /* the live diagnosis's alone */
};

static const struct store_column NCCL_COLLECTIVES[] = {
	PROCESS,
	COL("tid", "tid"),
	COL("comm_hash", "comm_hash"),
	COL("seq", "seq"),
	TEXT("op", "op_str"),
	TEXT("dtype", "dtype_str"),
	COL("bytes", "bytes"),
	COL("entry_ns", "entry_ns"),
	COL("exit_ns", "exit_ns"),
	COL("peer", "peer"),
	STACK("stack_id"),
};

static const struct store_column NCCL_STATS[] = {
	PROCESS,
	COL("comm_hash", "comm_hash"),
	TEXT("op", "op_str"),
	COL("count", "count"),
	COL("bytes", "bytes"),
	COL("total_ns", "total_ns"),
	COL("min_ns", "min_ns"),
	COL("max_ns", "max_ns"),
};

/* Server-derived (the diagnosis engine's windows): a job's rows, not a
 * process's; the batch is the window. */
static const struct store_column COLLECTIVE_STATS[] = {
	TEXT("job", "job_str"),
	COL("comm_hash", "comm_hash"),
	TEXT("op", "op_str"),
	COL("size_class", "size_class"),
	COL("nranks", "nranks"),
	COL("occurrences", "occurrences"),
	COL("observed_ns", "observed_ns"),
	COL("stall_ns", "stall_ns"),
	COL("slack_ns", "slack_ns"),
	COL("bytes", "bytes"),
	COL("observed_max_ns", "observed_max_ns"),
};

static const struct store_column INFLIGHT_CALLS[] = {
	PROCESS,
	COL("tid", "tid"),
	TEXT("api", "api_str"),
	COL("entry_ns", "entry_ns"),
	COL("comm_hash", "comm_hash"),
	COL("seq", "seq"),
	COL("bytes", "bytes"),
	{ .name = "rank", .field = "rank", .ch_name = "comm_rank" },
	COL("nranks", "nranks"),
	STACK("stack_id"),
};

static const struct store_column THREAD_STATES[] = {
	PROCESS,
	COL("tid", "tid"),
	TEXT("state", "state_str"),
	TEXT("wchan", "wchan_str"),
	STACK("stack_id"),
	COL("syscall", "syscall"),
	COL("in_syscall", "in_syscall"),
};

/* Server-derived: a job's hang episodes (the latest record of one wins). */
static const struct store_column HANGS[] = {
	TEXT("job", "job_str"),
	TEXT("kind", "kind_str"),
	COL("comm_hash", "comm_hash"),
	COL("seq", "seq"),
	TEXT("op", "op_str"),
	COL("bytes", "bytes"),
	COL("nranks", "nranks"),
	COL("since_ns", "since_ns"),
	COL("decided_ns", "decided_ns"),
	COL("until_ns", "until_ns"),
	COL("waiting", "waiting"),
	COL("missing", "missing"),
	COL("mismatched", "mismatched"),
	TEXT("report", "report_str"),
};

/* Triggered deep capture (docs/diagnosis.md "Deep capture"): an agent's
 * part in a capture, its timed samples and traced GPU calls. */
static const struct store_column CAPTURE_RUNS[] = {
	TEXT("capture", "capture_str"),
	COL("start_ns", "start_ns"),
	COL("end_ns", "end_ns"),
	TEXT("end_reason", "end_reason_str"),
	COL("freq_hz", "freq_hz"),
	COL("processes", "processes"),
	COL("samples", "samples"),
	COL("gpu_calls", "gpu_calls"),
	COL("dropped", "dropped"),
	TEXT("trigger", "trigger_str"),
	COL("pid", "pid"),
	COL("from_ns", "from_ns"),
	COL("until_ns", "until_ns"),
	TEXT("job", "job_str"),
};

static const struct store_column CAPTURE_SAMPLES[] = {
	PROCESS,
	COL("tid", "tid"),
	STACK("stack_id"),
	COL("time_ns", "time_ns"),
};

static const struct store_column GPU_CALLS[] = {
	PROCESS,
	COL("tid", "tid"),
	TEXT("api", "api_str"),
	TEXT("kind", "kind_str"),
	TEXT("kernel", "name_str"),
	COL("start_ns", "start_ns"),
	COL("end_ns", "end_ns"),
	COL("ret", "ret"),
	COL("bytes", "bytes"),
	COL("ptr", "ptr"),
	STACK("stack_id"),
};

/* Server-derived: the captures (the latest record of an id wins). */
static const struct store_column CAPTURES[] = {
	TEXT("id", "id_str"),
	TEXT("job", "job_str"),
	TEXT("trigger", "trigger_str"),
	TEXT("reason", "reason_str"),
	COL("created_ns", "created_ns"),
	COL("start_ns", "start_ns"),
	COL("end_ns", "end_ns"),
	COL("freq_hz", "freq_hz"),
	COL("offcpu", "offcpu"),
	COL("gpu_calls", "gpu_calls"),
	TEXT("targets", "targets_str"),
	TEXT("state", "state_str"),
};

static const struct store_column SOFTIRQ_VECTORS[] = {
	COL("cpu", "cpu"),
	COL("vector", "vector"),
	COL("ns", "ns"),
};

static const struct store_column FOREIGN_RUNS[] = {
	COL("cpu", "cpu"),
	{ .name = "pid", .field = "pid", .ch_name = "fpid" },
	TEXT("comm", "comm_str"),
	COL("ns", "ns"),
};

static const struct store_column TARGET_CPUS[] = {
	PROCESS,
	COL("cpu", "cpu"),
	PROC_COMM,
	COL("ns", "ns"),
};

const struct store_table STORE_TABLES[STORE_NTABLES] = {
	[STORE_T_PROCESSES] = { TABLE("processes", strata__v1__process__descriptor, 1,
				      "job, node, pid, pstart", PROCESSES),
				.sqlite_apart = 1 },
	[STORE_T_CPU_SAMPLES] = { TABLE("cpu_samples", strata__v1__cpu_sample__descriptor, 1,
					"node, pid, stack_id", CPU_SAMPLES),
				  .index = "batch(batch)" },
	[STORE_T_OFFCPU_SAMPLES] = { TABLE("offcpu_samples", strata__v1__off_cpu_sample__descriptor,
					   1, "node, pid, stack_id", OFFCPU_SAMPLES),
				     .index = "batch(batch)" },
	[STORE_T_SCHED_STATS] = { TABLE("sched_stats", strata__v1__sched_stat__descriptor, 1,
					"node, pid, tid", SCHED_STATS) },
	[STORE_T_IRQ_STATS] = { TABLE("irq_stats", strata__v1__irq_stat__descriptor, 0,
				      "node, b_end", IRQ_STATS) },
	[STORE_T_TIME_BREAKDOWN] = { TABLE("time_breakdown", strata__v1__time_breakdown__descriptor,
					   1, "node, pid, tid", TIME_BREAKDOWN) },
	[STORE_T_CUDA_LAUNCHES] = { TABLE("cuda_launches", strata__v1__cuda_launch__descriptor, 1,
					  "node, pid, b_start", CUDA_LAUNCHES) },
	[STORE_T_CUDA_ALLOCS] = { TABLE("cuda_allocs", strata__v1__cuda_alloc__descriptor, 1,
					"node, pid, pstart, ptr, alloc_ns", CUDA_ALLOCS),
				  .index = "key(process, ptr, alloc_ns)" },
	[STORE_T_CUDA_ALLOC_FAILURES] = { TABLE("cuda_alloc_failures",
						strata__v1__cuda_alloc_failure__descriptor, 1,
						"node, pid", CUDA_ALLOC_FAILURES) },
	[STORE_T_CUDA_TRANSFERS] = { TABLE("cuda_transfers", strata__v1__cuda_transfer__descriptor,
					   1, "node, pid, start_ns", CUDA_TRANSFERS) },
	[STORE_T_CUDA_API_TALLY] = { TABLE("cuda_api_tally", strata__v1__cuda_api_tally__descriptor,
					   1, "node, pid, fn", CUDA_API_TALLY) },
	[STORE_T_CUDA_API_ERRORS] = { .name = "cuda_api_errors",
				      .field = "errors",
				      .parent = STORE_T_CUDA_API_TALLY,
				      .msg = &strata__v1__cuda_api_tally__code__descriptor,
				      .per_process = 1,
				      .order_by = "node, pid, fn",
				      .cols = CUDA_API_ERRORS,
				      .ncols = N(CUDA_API_ERRORS) },
	[STORE_T_PROBE_DUTY] = { TABLE("probe_duty", strata__v1__probe_duty_cycle__descriptor, 0,
				       "node, b_end", PROBE_DUTY) },
	[STORE_T_NCCL_COMMS] = { TABLE("nccl_comms", strata__v1__nccl_comm__descriptor, 1,
				       "node, pid, comm_hash", NCCL_COMMS) },
	[STORE_T_NCCL_COLLECTIVES] = { TABLE("nccl_collectives",
					     strata__v1__nccl_collective__descriptor, 1,
					     "comm_hash, seq, node, pid", NCCL_COLLECTIVES),
				       .index = "time(entry_ns)" },
	[STORE_T_NCCL_STATS] = { TABLE("nccl_stats", strata__v1__nccl_collective_stat__descriptor,
				       1, "node, pid, comm_hash", NCCL_STATS) },
	[STORE_T_SOFTIRQ_VECTORS] = { TABLE("softirq_vectors",
					    strata__v1__softirq_vector_stat__descriptor, 0,
					    "node, b_end", SOFTIRQ_VECTORS) },
	[STORE_T_FOREIGN_RUNS] = { TABLE("foreign_runs", strata__v1__foreign_run__descriptor, 0,
					 "node, b_end", FOREIGN_RUNS) },
	[STORE_T_TARGET_CPUS] = { TABLE("target_cpus", strata__v1__target_cpu__descriptor, 1,
					"node, pid, cpu", TARGET_CPUS) },
	[STORE_T_COLLECTIVE_STATS] = { TABLE("collective_stats",
					     strata__v1__collective_stat__descriptor, 0,
					     "job, b_end, comm_hash", COLLECTIVE_STATS),
				       .index = "job(job)" },
	[STORE_T_INFLIGHT_CALLS] = { TABLE("inflight_calls", strata__v1__inflight_call__descriptor,
					   1, "node, pid, b_end", INFLIGHT_CALLS) },
	[STORE_T_THREAD_STATES] = { TABLE("thread_states", strata__v1__thread_state__descriptor, 1,
					  "node, pid, b_end", THREAD_STATES) },
	[STORE_T_HANGS] = { TABLE("hangs", strata__v1__hang__descriptor, 0, "job, b_end, comm_hash",
				  HANGS),
			    .index = "job(job)" },
	[STORE_T_CAPTURE_RUNS] = { TABLE("capture_runs", strata__v1__capture_run__descriptor, 0,
					 "capture, node, b_end", CAPTURE_RUNS),
				   .index = "capture(capture)" },
	[STORE_T_CAPTURE_SAMPLES] = { TABLE("capture_samples",
					    strata__v1__capture_sample__descriptor, 1,
					    "node, pid, time_ns", CAPTURE_SAMPLES),
				      .index = "time(time_ns)" },
	[STORE_T_GPU_CALLS] = { TABLE("gpu_calls", strata__v1__gpu_call__descriptor, 1,
				      "node, pid, start_ns", GPU_CALLS),
				.index = "time(start_ns)" },
	[STORE_T_CAPTURES] = { TABLE("captures", strata__v1__capture__descriptor, 0, "id, b_end",
				     CAPTURES),
			       .index = "id(id)" },
};

const char *const STORE_BATCH_FIELDS_APART[] = {
	/* the batch's own fields: the batches table */
	"version", "batch_id", "node", "agent_version", "seq", "agent_run_id", "start_ns", "end_ns",
	"clock", "freq_hz", "drops",
	/* what records index: the string table, files, stacks */
	"strings", "mappings", "stacks",
	/* the agent's kernel and the feature paths it took: counted at ingest
	 * (server/kernel_paths.c), not stored per batch */
	"kernel_release", "kernel_paths", NULL
};

/* ---- columns ------------------------------------------------------------------ */

const char *store_column__name(const struct store_column *c, enum store_dialect d)
{
	if (d == STORE_SQLITE && (c->flags & STORE_CH_ONLY))
		return NULL;
	if (d == STORE_CLICKHOUSE && c->ch_name)
		return c->ch_name;
	return c->name;
}

/* The message a column's field belongs to. */
static const ProtobufCMessageDescriptor *msg_of(const struct store_table *t,
						const struct store_column *c)
{
	return (c->flags & STORE_OF_PARENT) ? STORE_TABLES[t->parent].msg : t->msg;
}

const ProtobufCFieldDescriptor *store_column__field(const struct store_table *t,
						    const struct store_column *c,
						    const ProtobufCFieldDescriptor **outer)
{
	const ProtobufCMessageDescriptor *m = msg_of(t, c);
	const char *dot;
	char head[64];

	*outer = NULL;
	if (!c->field)
		return NULL;
	dot = strchr(c->field, '.');
	if (!dot)
		return protobuf_c_message_descriptor_get_field_by_name(m, c->field);
	snprintf(head, sizeof(head), "%.*s", (int)(dot - c->field), c->field);
	*outer = protobuf_c_message_descriptor_get_field_by_name(m, head);
	if (!*outer || (*outer)->type != PROTOBUF_C_TYPE_MESSAGE)
		return NULL;
	return protobuf_c_message_descriptor_get_field_by_name((*outer)->descriptor, dot + 1);
}

const char *store_column__type(const struct store_table *t, const struct store_column *c,
			       enum store_dialect d)
{
	const ProtobufCFieldDescriptor *outer, *f;
	int sq = d == STORE_SQLITE;

	switch (c->kind) {
	case STORE_COL_TEXT:
	case STORE_COL_PROC_COMM:
		return sq ? "TEXT" : "String";
	case STORE_COL_STACK:
	case STORE_COL_PROC_SAMPLES:
		return sq ? "INTEGER" : "UInt64";
	case STORE_COL_VALUE:
		break;
	default:
		return NULL;
	}
	f = store_column__field(t, c, &outer);
	if (!f)
		return NULL;
	switch (f->type) {
	case PROTOBUF_C_TYPE_DOUBLE:
		return sq ? "REAL" : "Float64";
	case PROTOBUF_C_TYPE_FLOAT:
		return sq ? "REAL" : "Float32";
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		return sq ? "INTEGER" : "Int32";
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		return sq ? "INTEGER" : "Int64";
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return sq ? "INTEGER" : "UInt32";
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return sq ? "INTEGER" : "UInt64";
	case PROTOBUF_C_TYPE_BOOL:
	case PROTOBUF_C_TYPE_ENUM: /* the wire's enums are small */
		return sq ? "INTEGER" : "UInt8";
	default:
		return NULL; /* strings, bytes, messages: not a column */
	}
}

int store_column__add_ddl(const struct store_table *t, const struct store_column *c,
			  enum store_dialect d, char *buf, size_t size)
{
	const char *name = store_column__name(c, d), *type = store_column__type(t, c, d);
	int n;

	if (!name || !type)
		return -EINVAL;
	if (c->kind == STORE_COL_TEXT || c->kind == STORE_COL_PROC_COMM)
		n = snprintf(buf, size, "%s %s DEFAULT ''", name, type);
	else
		n = snprintf(buf, size, "%s %s DEFAULT %d", name, type, (int)c->absent);
	return n < 0 || (size_t)n >= size ? -E2BIG : 0;
}

size_t store_table__columns(const struct store_table *t, enum store_dialect d, int types, char *buf,
			    size_t size)
{
	size_t len = 0;

	if (size)
		buf[0] = '\0';
	for (size_t i = 0; i < t->ncols; i++) {
		const struct store_column *c = &t->cols[i];
		const char *name = store_column__name(c, d);
		int n;

		if (!name)
			continue;
		n = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, "%s%s%s%s",
			     len ? ", " : "", name, types ? " " : "",
			     types ? store_column__type(t, c, d) : "");
		len += (size_t)(n > 0 ? n : 0);
	}
	return len;
}

size_t store_table__ncolumns(const struct store_table *t, enum store_dialect d)
{
	size_t n = 0;

	for (size_t i = 0; i < t->ncols; i++)
		n += store_column__name(&t->cols[i], d) != NULL;
	return n;
}

int store_table__has_stacks(const struct store_table *t)
{
	for (size_t i = 0; i < t->ncols; i++)
		if (t->cols[i].kind == STORE_COL_STACK)
			return 1;
	return 0;
}

/* ---- records -------------------------------------------------------------------- */

static const void *at(const ProtobufCMessage *m, unsigned offset)
{
	return (const char *)m + offset;
}

uint32_t store_rec__u32(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	return *(const uint32_t *)at(m, f->offset);
}

/* How a scalar field's value is kept in a store_value. */
static int value_type(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_DOUBLE:
	case PROTOBUF_C_TYPE_FLOAT:
		return STORE_V_F64;
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		return STORE_V_I64;
	default: /* unsigned, bool, enum (stored unsigned, as its bits) */
		return STORE_V_U64;
	}
}

static void scalar(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
		   struct store_value *v)
{
	const void *p = at(m, f->offset);

	v->type = value_type(f);
	switch (f->type) {
	case PROTOBUF_C_TYPE_DOUBLE:
		v->f = *(const double *)p;
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		v->f = *(const float *)p;
		break;
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		v->i = *(const int32_t *)p;
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		v->i = *(const int64_t *)p;
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		v->u = *(const uint32_t *)p;
		break;
	case PROTOBUF_C_TYPE_BOOL:
		v->u = *(const protobuf_c_boolean *)p ? 1 : 0;
		break;
	case PROTOBUF_C_TYPE_ENUM:
		v->u = (uint64_t)(int64_t) * (const int *)p;
		break;
	default: /* UINT64, FIXED64 */
		v->u = *(const uint64_t *)p;
		break;
	}
}

void store_rec__value(const struct store_rec *r, size_t col, const struct store_stack *stacks,
		      const uint64_t *proc_samples, struct store_value *v)
{
	const struct store_column *c = &r->t->cols[col];
	const ProtobufCMessage *m = (c->flags & STORE_OF_PARENT) ? r->parent : r->msg;
	const ProtobufCFieldDescriptor *f = r->fd->f[col], *outer = r->fd->outer[col];

	memset(v, 0, sizeof(*v));
	switch (c->kind) {
	case STORE_COL_TEXT:
		v->type = STORE_V_TEXT;
		v->s = r->b->strings[store_rec__u32(m, f)];
		return;
	case STORE_COL_STACK:
		v->type = STORE_V_U64;
		v->u = stacks[store_rec__u32(m, f)].id;
		return;
	case STORE_COL_PROC_COMM:
		v->type = STORE_V_TEXT;
		v->s = r->b->strings[r->b->processes[r->process]->comm_str];
		return;
	case STORE_COL_PROC_SAMPLES:
		v->type = STORE_V_U64;
		v->u = proc_samples[r->process];
		return;
	default:
		break;
	}
	if (outer) {
		m = *(const ProtobufCMessage *const *)at(m, outer->offset);
		if (!m) { /* an absent sub-message */
			v->type = value_type(f);
			v->u = (uint64_t)(int64_t)c->absent;
			v->i = c->absent;
			v->f = c->absent;
			return;
		}
	}
	scalar(m, f, v);
	if ((c->flags & STORE_ZERO_IS_ONE) && v->type == STORE_V_U64 && !v->u)
		v->u = 1;
}

/* The repeated field of message m named name: its count and items. */
static size_t repeated(const ProtobufCMessage *m, const char *name, ProtobufCMessage *const **items)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);

	if (!f || f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE) {
		*items = NULL;
		return 0;
	}
	*items = *(ProtobufCMessage *const *const *)at(m, f->offset);
	return *(const size_t *)at(m, f->quantifier_offset);
}

/* The process index of a per-process record: its process field, its
 * parent's, or its own index (the processes table). */
static const ProtobufCFieldDescriptor *process_field(const struct store_table *t, int *of_parent)
{
	for (size_t i = 0; i < t->ncols; i++) {
		if (t->cols[i].kind == STORE_COL_PROCESS) {
			const ProtobufCFieldDescriptor *outer;

			*of_parent = !!(t->cols[i].flags & STORE_OF_PARENT);
			return store_column__field(t, &t->cols[i], &outer);
		}
	}
	return NULL;
}

int store_table__each(const struct store_table *t, const Strata__V1__Batch *b,
		      int (*fn)(void *ctx, const struct store_rec *r), void *ctx)
{
	const struct store_table *pt = t->parent >= 0 ? &STORE_TABLES[t->parent] : NULL;
	ProtobufCMessage *const *parents, *const *items;
	size_t nparents = repeated(&b->base, pt ? pt->field : t->field, &parents);
	int of_parent = 0;
	const ProtobufCFieldDescriptor *pf = t->per_process ? process_field(t, &of_parent) : NULL;
	struct store_fields fd;
	int err;

	for (size_t c = 0; c < t->ncols && c < STORE_MAX_COLS; c++)
		fd.f[c] = store_column__field(t, &t->cols[c], &fd.outer[c]);

	if (!pt) { /* the batch is the one parent */
		items = parents;
		for (size_t i = 0; i < nparents; i++) {
			struct store_rec r = { .t = t, .fd = &fd, .b = b, .msg = items[i], .i = i };

			if (t->per_process)
				r.process = pf ? store_rec__u32(items[i], pf) : (uint32_t)i;
			if ((err = fn(ctx, &r)))
				return err;
		}
		return 0;
	}
	for (size_t i = 0; i < nparents; i++) {
		size_t n = repeated(parents[i], t->field, &items);

		for (size_t j = 0; j < n; j++) {
			struct store_rec r = { .t = t,
					       .fd = &fd,
					       .b = b,
					       .msg = items[j],
					       .parent = parents[i],
					       .i = i };

			if (t->per_process && pf)
				r.process = store_rec__u32(of_parent ? parents[i] : items[j], pf);
			if ((err = fn(ctx, &r)))
				return err;
		}
	}
	return 0;
}
