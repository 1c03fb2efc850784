/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One description per stored record type, read by both stores and the
 * batch decoder: which Batch list its records come from, and for every
 * field of the record's protobuf message (its ProtobufCMessageDescriptor)
 * the column it becomes or why it is not stored.  From it come
 *   - the DDL of both dialects (SQLite: server/store/sqlite.c; ClickHouse:
 *     server/store/clickhouse.c), column types from the proto field types;
 *   - the inserts (the value of every column of every record);
 *   - the decoder's index checks (server/batch_decode.c): every string,
 *     process and stack index a record holds, stored or not;
 *   - the stacks retention keeps (every table with a stack column).
 * tests/unit/test_store_schema.c checks every entry against its descriptor.
 *
 * Adding a record type: its proto message and Batch field, a producer in
 * the agent, one entry in STORE_TABLES (server/store/schema.c), and the
 * queries that read it (docs/architecture.md walks through ForeignRun).
 *
 * The batches, processes (SQLite: one upserted row per process instance)
 * and stack tables are each store's own; processes has an entry here for
 * the decoder's checks and ClickHouse's per-batch process rows.
 */
#ifndef STRATA_SERVER_STORE_SCHEMA_H
#define STRATA_SERVER_STORE_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "server/store.h"

enum store_dialect {
	STORE_SQLITE,
	STORE_CLICKHOUSE,
};

/* What a column holds. */
enum store_col_kind {
	STORE_COL_VALUE,   /* the field's number (ints, bools, enums, doubles) */
	STORE_COL_TEXT,	   /* a string index (`*_str`): the string */
	STORE_COL_STACK,   /* a stack index: the stack's id (store_stack.id) */
	STORE_COL_PROCESS, /* the process index: no column of its own, the row's
			    * process head (SQLite: a processes row; ClickHouse:
			    * the process's columns copied into the row) */
	STORE_COL_SKIP,	   /* a field that is not stored (see ref) */
	/* Derived (no field of the record): */
	STORE_COL_PROC_COMM,	/* the row's process's comm */
	STORE_COL_PROC_SAMPLES, /* the process's CPU samples in this batch */
};

/* What an index field points into; the decoder checks it is in range. */
enum store_ref {
	STORE_REF_NONE,
	STORE_REF_STRING,  /* Batch.strings */
	STORE_REF_PROCESS, /* Batch.processes */
	STORE_REF_STACK,   /* Batch.stacks */
};

/* Column flags. */
enum {
	STORE_CH_ONLY = 1u << 0,     /* ClickHouse only: its rows are denormalized
				      * (no joins), SQLite joins processes */
	STORE_ZERO_IS_ONE = 1u << 1, /* a 0 count is stored as 1 (one call) */
	STORE_OF_PARENT = 1u << 2,   /* the field is the parent record's */
};

struct store_column {
	const char *name;  /* the column; NULL for STORE_COL_PROCESS/SKIP */
	const char *field; /* the proto field; "grid.x": field x of the
			    * sub-message grid; NULL for derived columns */
	enum store_col_kind kind;
	enum store_ref ref; /* STORE_COL_SKIP: what the skipped index points
			     * into (checked all the same) */
	uint32_t flags;
	int32_t absent;	     /* value when the sub-message is absent */
	const char *ch_name; /* ClickHouse's name when it differs (its rows
			      * carry the process's own rank and pid) */
};

struct store_table {
	const char *name;
	/* Where the records are: the Batch's repeated field, or for a child
	 * table (parent >= 0) the repeated field of the parent's records. */
	const char *field;
	int parent; /* -1, or the index of the parent table in STORE_TABLES */
	const ProtobufCMessageDescriptor *msg;
	int per_process;       /* rows belong to a process: the record's process
				* index field, the parent's, or (processes) the
				* record's own index */
	const char *order_by;  /* ClickHouse: the primary key, what queries
				* filter on first */
	const char *index;     /* SQLite: "NAME(COLS)" of one index, or NULL */
	unsigned sqlite_apart; /* SQLite keeps this table its own way */
	const struct store_column *cols;
	size_t ncols;
};

enum store_table_id {
	STORE_T_PROCESSES,
	STORE_T_CPU_SAMPLES,
	STORE_T_OFFCPU_SAMPLES,
	STORE_T_SCHED_STATS,
	STORE_T_IRQ_STATS,
	STORE_T_TIME_BREAKDOWN,
	STORE_T_CUDA_LAUNCHES,
	STORE_T_CUDA_ALLOCS,
	STORE_T_CUDA_ALLOC_FAILURES,
	STORE_T_CUDA_TRANSFERS,
	STORE_T_CUDA_API_TALLY,
	STORE_T_CUDA_API_ERRORS,
	STORE_T_PROBE_DUTY,
	STORE_T_NCCL_COMMS,
	STORE_T_NCCL_COLLECTIVES,
	STORE_T_NCCL_STATS,
	STORE_T_SOFTIRQ_VECTORS,
	STORE_T_FOREIGN_RUNS,
	STORE_T_TARGET_CPUS,
	STORE_T_COLLECTIVE_STATS, /* server-derived */
	STORE_T_INFLIGHT_CALLS,
	STORE_T_THREAD_STATES,
	STORE_T_HANGS, /* server-derived */
	STORE_T_CAPTURE_RUNS,
	STORE_T_CAPTURE_SAMPLES,
	STORE_T_GPU_CALLS,
	STORE_T_CAPTURES, /* server-derived */
	STORE_NTABLES,
};

extern const struct store_table STORE_TABLES[STORE_NTABLES];

/* Batch fields that are not record tables (the string table, mappings,
 * stacks, the batch's own fields): NULL-terminated, for the test. */
extern const char *const STORE_BATCH_FIELDS_APART[];

/* ---- columns and DDL ------------------------------------------------------ */

/* The column's name in the dialect, or NULL when the dialect has no such
 * column (STORE_COL_PROCESS/SKIP, ClickHouse-only columns in SQLite). */
const char *store_column__name(const struct store_column *c, enum store_dialect d);

/* The column's SQL type in the dialect ("INTEGER", "UInt32"...). */
const char *store_column__type(const struct store_table *t, const struct store_column *c,
			       enum store_dialect d);

/*
 * "name TYPE DEFAULT v" of column c of table t in dialect d, to add it to
 * a table a database made before the field existed (ALTER TABLE ADD
 * COLUMN): the rows written before read as a record without the field
 * would (the column's absent value: 0, or '' for text).  0, -EINVAL (no
 * such column in d) or -E2BIG.
 */
int store_column__add_ddl(const struct store_table *t, const struct store_column *c,
			  enum store_dialect d, char *buf, size_t size);

/* The field descriptor a column reads (of the sub-message for "a.b": then
 * *outer is the sub-message's field), NULL for derived columns. */
const ProtobufCFieldDescriptor *store_column__field(const struct store_table *t,
						    const struct store_column *c,
						    const ProtobufCFieldDescriptor **outer);

/*
 * Appends the table's columns in the dialect, "name TYPE" (types) or
 * "name" each, ", "-separated, to buf; returns the length it needs (as
 * snprintf).  The common head of a dialect (batch and process references,
 * ClickHouse's copied batch and process columns) is the store's own.
 */
size_t store_table__columns(const struct store_table *t, enum store_dialect d, int types, char *buf,
			    size_t size);

/* Number of columns of the table in the dialect (without the head). */
size_t store_table__ncolumns(const struct store_table *t, enum store_dialect d);

/* True when a column of the table is a stack id. */
int store_table__has_stacks(const struct store_table *t);

/* ---- records ---------------------------------------------------------------- */

#define STORE_MAX_COLS 24

/* A table's field descriptors, looked up once per batch (by name). */
struct store_fields {
	const ProtobufCFieldDescriptor *f[STORE_MAX_COLS];     /* per column */
	const ProtobufCFieldDescriptor *outer[STORE_MAX_COLS]; /* "a.b": a */
};

/* One record of a table in a batch, with what its columns need. */
struct store_rec {
	const struct store_table *t;
	const struct store_fields *fd;
	const Strata__V1__Batch *b;
	const ProtobufCMessage *msg;	/* the record */
	const ProtobufCMessage *parent; /* child tables: the parent record */
	size_t i;			/* index in its list (child: the parent's) */
	uint32_t process;		/* per_process tables: the process index */
};

/* A column's value: u (unsigned integers, bools, enums, stack ids), i
 * (signed integers), f or s (text), by type. */
struct store_value {
	enum { STORE_V_U64, STORE_V_I64, STORE_V_F64, STORE_V_TEXT } type;
	uint64_t u;
	int64_t i;
	double f;
	const char *s;
};

/*
 * The value of column col (an index into the table's cols) of record r.
 * stacks: the batch's symbolized stacks (STORE_COL_STACK); proc_samples:
 * CPU samples per process index (STORE_COL_PROC_SAMPLES).  Only for
 * columns that have a name in some dialect.
 */
void store_rec__value(const struct store_rec *r, size_t col, const struct store_stack *stacks,
		      const uint64_t *proc_samples, struct store_value *v);

/*
 * Calls fn for every record of table t in batch b, in order (a child
 * table's: every child of every parent record); fn's non-zero return
 * stops and is returned.  The batch must be validated, except by the
 * decoder itself (which checks the process index before using it).
 */
int store_table__each(const struct store_table *t, const Strata__V1__Batch *b,
		      int (*fn)(void *ctx, const struct store_rec *r), void *ctx);

/* A uint32 field of a record (an index), by descriptor. */
uint32_t store_rec__u32(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f);

#endif /* STRATA_SERVER_STORE_SCHEMA_H */
