// SPDX-License-Identifier: Apache-2.0
/*
 * server/store/schema.c against the protobuf-c descriptors: every field of
 * every stored record is a column or explicitly skipped, index fields are
 * declared as what they index (the decoder checks them from this), every
 * Batch list is a table or handled apart; the DDL both dialects make from
 * the entries; and the decoder's index checks made from them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/batch_decode.h"
#include "server/store/clickhouse.h"
#include "server/store/schema.h"
#include "server/store/sqlite.h"

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

/* The top-level field name of a column ("grid" of "grid.x"). */
static void top_name(const char *field, char *out, size_t n)
{
	const char *dot = strchr(field, '.');

	snprintf(out, n, "%.*s", dot ? (int)(dot - field) : (int)strlen(field), field);
}

static const ProtobufCMessageDescriptor *msg_of(const struct store_table *t,
						const struct store_column *c)
{
	return (c->flags & STORE_OF_PARENT) ? STORE_TABLES[t->parent].msg : t->msg;
}

/* Every field of the table's message is listed exactly once (a
 * sub-message: all of its fields, or itself as skipped). */
static void check_coverage(const struct store_table *t)
{
	const ProtobufCMessageDescriptor *d = t->msg;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		unsigned whole = 0, parts = 0;

		for (size_t c = 0; c < t->ncols; c++) {
			const struct store_column *col = &t->cols[c];
			char top[64];

			if (!col->field || (col->flags & STORE_OF_PARENT))
				continue;
			top_name(col->field, top, sizeof(top));
			if (strcmp(top, f->name))
				continue;
			if (strchr(col->field, '.'))
				parts++;
			else
				whole++;
		}
		if (whole + parts == 0)
			fail_msg("%s: field %s.%s neither stored nor skipped", t->name, d->name,
				 f->name);
		assert_true(whole <= 1);
		if (parts) {
			const ProtobufCMessageDescriptor *sub = f->descriptor;

			if (whole || f->type != PROTOBUF_C_TYPE_MESSAGE || parts != sub->n_fields)
				fail_msg("%s: sub-message %s not covered field by field", t->name,
					 f->name);
		}
	}
}

/* Index fields follow the wire's conventions (proto/strata.proto): `*_str`
 * index Batch.strings, `process` Batch.processes, `stack` Batch.stacks. */
static void check_column(const struct store_table *t, const struct store_column *c)
{
	const ProtobufCFieldDescriptor *outer, *f = store_column__field(t, c, &outer);
	enum store_ref want = STORE_REF_NONE;

	switch (c->kind) {
	case STORE_COL_PROC_COMM:
	case STORE_COL_PROC_SAMPLES:
		assert_null(c->field);
		assert_non_null(c->name);
		assert_true(t->per_process);
		return;
	case STORE_COL_PROCESS:
	case STORE_COL_SKIP:
		assert_null(c->name);
		break;
	default:
		assert_non_null(c->name);
		assert_non_null(store_column__type(t, c, STORE_SQLITE));
		assert_non_null(store_column__type(t, c, STORE_CLICKHOUSE));
	}
	if (!f)
		fail_msg("%s: column %s: no field %s in %s", t->name, c->name ? c->name : "-",
			 c->field, msg_of(t, c)->name);
	if (ends_with(f->name, "_str"))
		want = STORE_REF_STRING;
	else if (!strcmp(f->name, "process"))
		want = STORE_REF_PROCESS;
	else if (!strcmp(f->name, "stack"))
		want = STORE_REF_STACK;
	if (want != STORE_REF_NONE && f->type != PROTOBUF_C_TYPE_UINT32)
		fail_msg("%s: index %s is not a uint32", t->name, f->name);
	if (want != STORE_REF_NONE && strchr(c->field, '.'))
		fail_msg("%s: index %s in a sub-message (the decoder reads top-level ones)",
			 t->name, c->field);
	if (c->ref != want)
		fail_msg("%s: field %s: ref %d, the wire's convention says %d", t->name, f->name,
			 c->ref, want);
	switch (c->kind) {
	case STORE_COL_TEXT:
		assert_int_equal(want, STORE_REF_STRING);
		break;
	case STORE_COL_STACK:
		assert_int_equal(want, STORE_REF_STACK);
		break;
	case STORE_COL_PROCESS:
		assert_int_equal(want, STORE_REF_PROCESS);
		break;
	case STORE_COL_VALUE:
		assert_int_equal(want, STORE_REF_NONE);
		if (outer && outer->label == PROTOBUF_C_LABEL_REPEATED)
			fail_msg("%s: %s is in a repeated message", t->name, c->field);
		break;
	default:
		break;
	}
}

static void test_tables_match_descriptors(void **state)
{
	(void)state;
	for (int i = 0; i < STORE_NTABLES; i++) {
		const struct store_table *t = &STORE_TABLES[i];
		const ProtobufCMessageDescriptor *holder = t->parent >= 0
								   ? STORE_TABLES[t->parent].msg
								   : &strata__v1__batch__descriptor;
		const ProtobufCFieldDescriptor *list =
			protobuf_c_message_descriptor_get_field_by_name(holder, t->field);
		unsigned processes = 0;

		/* Its records are a repeated field of its message type. */
		assert_non_null(list);
		assert_int_equal(list->label, PROTOBUF_C_LABEL_REPEATED);
		assert_ptr_equal(list->descriptor, t->msg);
		assert_true(t->ncols <= STORE_MAX_COLS);
		assert_non_null(t->order_by);
		check_coverage(t);
		for (size_t c = 0; c < t->ncols; c++) {
			check_column(t, &t->cols[c]);
			processes += t->cols[c].kind == STORE_COL_PROCESS;
		}
		/* Per process: by its process index (processes: its own index). */
		assert_true(processes <= 1);
		if (i != STORE_T_PROCESSES)
			assert_int_equal(processes, t->per_process);
		/* A child table's parent lists its field as skipped. */
		if (t->parent >= 0) {
			const struct store_table *p = &STORE_TABLES[t->parent];
			int skipped = 0;

			for (size_t c = 0; c < p->ncols; c++)
				skipped |= p->cols[c].kind == STORE_COL_SKIP &&
					   !strcmp(p->cols[c].field, t->field);
			assert_true(skipped);
		}
	}
}

/* Every Batch list of records is a table, or named as handled apart. */
static void test_batch_fields_covered(void **state)
{
	const ProtobufCMessageDescriptor *d = &strata__v1__batch__descriptor;

	(void)state;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const char *name = d->fields[i].name;
		int found = 0;

		for (int t = 0; t < STORE_NTABLES; t++)
			found += STORE_TABLES[t].parent < 0 && !strcmp(STORE_TABLES[t].field, name);
		for (const char *const *a = STORE_BATCH_FIELDS_APART; *a; a++)
			found += !strcmp(*a, name);
		if (found != 1)
			fail_msg("Batch.%s: in %d places (a table or apart, once)", name, found);
	}
	/* The nodes' drop totals sum every Drops field (store_batch__drops). */
	for (unsigned i = 0; i < strata__v1__drops__descriptor.n_fields; i++)
		assert_int_equal(strata__v1__drops__descriptor.fields[i].type,
				 PROTOBUF_C_TYPE_UINT64);
}

static void test_sqlite_ddl(void **state)
{
	char ddl[2048];

	(void)state;
	assert_int_equal(
		sqlite_store__table_ddl(&STORE_TABLES[STORE_T_CPU_SAMPLES], ddl, sizeof(ddl)), 0);
	assert_string_equal(ddl, "CREATE TABLE IF NOT EXISTS cpu_samples("
				 "batch INTEGER NOT NULL REFERENCES batches(id) ON DELETE CASCADE,"
				 " process INTEGER NOT NULL REFERENCES processes(id),"
				 " tid INTEGER, comm TEXT, stack_id INTEGER, count INTEGER);"
				 "CREATE INDEX IF NOT EXISTS cpu_samples_batch"
				 " ON cpu_samples(batch);");
	/* A node-level table; ClickHouse's own columns absent */
	assert_int_equal(
		sqlite_store__table_ddl(&STORE_TABLES[STORE_T_FOREIGN_RUNS], ddl, sizeof(ddl)), 0);
	assert_string_equal(ddl, "CREATE TABLE IF NOT EXISTS foreign_runs("
				 "batch INTEGER NOT NULL REFERENCES batches(id) ON DELETE CASCADE,"
				 " cpu INTEGER, pid INTEGER, comm TEXT, ns INTEGER);");
	assert_int_equal(
		sqlite_store__table_ddl(&STORE_TABLES[STORE_T_TARGET_CPUS], ddl, sizeof(ddl)), 0);
	assert_string_equal(ddl, "CREATE TABLE IF NOT EXISTS target_cpus("
				 "batch INTEGER NOT NULL REFERENCES batches(id) ON DELETE CASCADE,"
				 " process INTEGER NOT NULL REFERENCES processes(id),"
				 " cpu INTEGER, ns INTEGER);");
	/* a double, a child table with its parent's fn */
	assert_int_equal(
		sqlite_store__table_ddl(&STORE_TABLES[STORE_T_PROBE_DUTY], ddl, sizeof(ddl)), 0);
	assert_non_null(strstr(ddl, " probe TEXT, ratio REAL, on_ns INTEGER);"));
	assert_int_equal(
		sqlite_store__table_ddl(&STORE_TABLES[STORE_T_CUDA_API_ERRORS], ddl, sizeof(ddl)),
		0);
	assert_non_null(strstr(ddl, " fn TEXT, code INTEGER, name TEXT, count INTEGER);"));
}

static void test_clickhouse_ddl(void **state)
{
	char ddl[2048];

	(void)state;
	assert_int_equal(
		ch_store__table_ddl(&STORE_TABLES[STORE_T_OFFCPU_SAMPLES], "db", ddl, sizeof(ddl)),
		0);
	assert_string_equal(ddl,
			    "CREATE TABLE IF NOT EXISTS db.offcpu_samples (day Date, ingest UInt64,"
			    " b_start UInt64, b_end UInt64, node String, pid UInt32, pstart UInt64,"
			    " job String, container String, has_rank UInt8, rank Int32,"
			    " tid UInt32, comm String, stack_id UInt64, reason UInt8, ns UInt64,"
			    " count UInt64) ENGINE = MergeTree PARTITION BY day"
			    " ORDER BY (node, pid, stack_id)");
	assert_int_equal(
		ch_store__table_ddl(&STORE_TABLES[STORE_T_FOREIGN_RUNS], "db", ddl, sizeof(ddl)),
		0);
	assert_string_equal(ddl, "CREATE TABLE IF NOT EXISTS db.foreign_runs (day Date,"
				 " ingest UInt64, b_start UInt64, b_end UInt64, node String,"
				 " cpu UInt32, fpid UInt32, comm String, ns UInt64)"
				 " ENGINE = MergeTree PARTITION BY day ORDER BY (node, b_end)");
	/* The process rows: sub-message fields with their absent value's
	 * type, the derived sample count */
	assert_int_equal(
		ch_store__table_ddl(&STORE_TABLES[STORE_T_PROCESSES], "db", ddl, sizeof(ddl)), 0);
	assert_non_null(strstr(ddl,
			       " rank Int32, ppid UInt32, comm String, cmdline String,"
			       " cgroup String, pod String, local_rank Int32,"
			       " world_size Int32, cpu_samples UInt64, exit_ns UInt64) ENGINE"));
	assert_int_equal(
		ch_store__table_ddl(&STORE_TABLES[STORE_T_NCCL_COMMS], "db", ddl, sizeof(ddl)), 0);
	assert_non_null(strstr(ddl, " rank Int32, comm_hash UInt64, comm_rank Int32,"
				    " nranks Int32, device UInt32, init_ns UInt64)"));
}

/* A batch with one zeroed record in every table (indexes 0: valid). */
struct one_of_each {
	Strata__V1__Batch b;
	Strata__V1__Process proc, *procs[1];
	Strata__V1__Stack stack, *stacks[1];
	char *strings[1];
	uint8_t id[16];
	ProtobufCMessage *rec[STORE_NTABLES], **list[STORE_NTABLES];
};

static ProtobufCMessage *new_msg(const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *m = calloc(1, d->sizeof_message);

	assert_non_null(m);
	d->message_init(m);
	return m;
}

/* Sets the repeated field name of m to the one-item list. */
static void set_list(ProtobufCMessage *m, const char *name, ProtobufCMessage **list)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);

	assert_non_null(f);
	*(size_t *)((char *)m + f->quantifier_offset) = 1;
	*(ProtobufCMessage ***)((char *)m + f->offset) = list;
}

static void one_of_each__init(struct one_of_each *o)
{
	memset(o, 0, sizeof(*o));
	strata__v1__batch__init(&o->b);
	o->b.version = STRATA__V1__WIRE_VERSION__WIRE_VERSION_CURRENT;
	o->b.batch_id = (ProtobufCBinaryData){ 16, o->id };
	o->b.node = "n";
	o->b.start_ns = 1, o->b.end_ns = 2;
	o->strings[0] = "";
	o->b.n_strings = 1, o->b.strings = o->strings;
	strata__v1__stack__init(&o->stack);
	o->stacks[0] = &o->stack;
	o->b.n_stacks = 1, o->b.stacks = o->stacks;
	for (int t = 0; t < STORE_NTABLES; t++) {
		const struct store_table *tb = &STORE_TABLES[t];

		o->rec[t] = new_msg(tb->msg);
		o->list[t] = &o->rec[t];
		if (t == STORE_T_PROCESSES)
			((Strata__V1__Process *)o->rec[t])->pid = 1;
	}
	for (int t = 0; t < STORE_NTABLES; t++) {
		const struct store_table *tb = &STORE_TABLES[t];

		set_list(tb->parent >= 0 ? o->rec[tb->parent] : &o->b.base, tb->field, o->list[t]);
	}
}

static void one_of_each__fini(struct one_of_each *o)
{
	for (int t = 0; t < STORE_NTABLES; t++)
		free(o->rec[t]);
}

/* The decoder checks every index the schema declares: one out of range
 * in any record of any table is refused, naming the list. */
static void test_decoder_checks_every_index(void **state)
{
	struct one_of_each o;
	char err[256];
	unsigned checked = 0;

	(void)state;
	one_of_each__init(&o);
	assert_int_equal(batch_validate(&o.b, NULL, err, sizeof(err)), BATCH_OK);
	for (int t = 0; t < STORE_NTABLES; t++) {
		const struct store_table *tb = &STORE_TABLES[t];

		for (size_t c = 0; c < tb->ncols; c++) {
			const struct store_column *col = &tb->cols[c];
			const ProtobufCFieldDescriptor *outer, *f;
			ProtobufCMessage *m;
			char want[96];
			uint32_t *p;

			if (col->ref == STORE_REF_NONE || (col->flags & STORE_OF_PARENT))
				continue;
			f = store_column__field(tb, col, &outer);
			m = o.rec[t];
			p = (uint32_t *)((char *)m + f->offset);
			*p = 7;
			assert_int_equal(batch_validate(&o.b, NULL, err, sizeof(err)),
					 BATCH_INVALID);
			snprintf(want, sizeof(want), "%s%s%s[0]: %s 7 out of range",
				 tb->parent >= 0 ? STORE_TABLES[tb->parent].field : "",
				 tb->parent >= 0 ? "." : "", tb->field,
				 col->ref == STORE_REF_STRING	 ? "string"
				 : col->ref == STORE_REF_PROCESS ? "process"
								 : "stack");
			assert_string_equal(err, want);
			*p = 0;
			checked++;
		}
	}
	assert_true(checked > 30);
	assert_int_equal(batch_validate(&o.b, NULL, err, sizeof(err)), BATCH_OK);
	one_of_each__fini(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tables_match_descriptors),
		cmocka_unit_test(test_batch_fields_covered),
		cmocka_unit_test(test_sqlite_ddl),
		cmocka_unit_test(test_clickhouse_ddl),
		cmocka_unit_test(test_decoder_checks_every_index),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
