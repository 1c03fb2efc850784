// SPDX-License-Identifier: Apache-2.0
/*
 * lib/enums.h against the wire: every value the protobuf-c descriptors
 * know is a list entry of the same name (the compiler already checked the
 * other direction, lib/wire_enums.h); the name tables and the stores' SQL
 * mapping follow the lists.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "lib/enum_names.h"
#include "lib/wire_enums.h"

#define WIRE_SUFFIX(id, wire, ...) [id] = #wire,
static const char *const time_wire[STRATA_TIME_MAX] = { STRATA_TIME_CATS(WIRE_SUFFIX) };
static const char *const offcpu_wire[STRATA_OFF_MAX] = { STRATA_OFFCPU_REASONS(WIRE_SUFFIX) };
#undef WIRE_SUFFIX

/* Every non-zero value of d is entry value - 1 of an n-entry list whose
 * wire suffixes are names[], and the list has nothing the wire lacks. */
static void check_wire(const ProtobufCEnumDescriptor *d, const char *const *names, unsigned n)
{
	unsigned seen = 0;

	for (unsigned i = 0; i < d->n_values; i++) {
		const ProtobufCEnumValue *v = &d->values[i];
		unsigned e;

		if (v->value == 0) {
			assert_non_null(strstr(v->name, "UNSPECIFIED"));
			continue;
		}
		assert_true(v->value >= (int)STRATA_WIRE_ENUM_BASE);
		e = strata_enum_from_wire((unsigned)v->value);
		assert_true(e < n);
		assert_string_equal(v->name, names[e]);
		assert_int_equal(strata_enum_to_wire(e), v->value);
		seen++;
	}
	assert_int_equal(seen, n);
}

static void test_time_categories_match_wire(void **state)
{
	check_wire(&strata__v1__time_breakdown__category__descriptor, time_wire, STRATA_TIME_MAX);
	assert_int_equal(strata_time_cat_to_wire(STRATA_TIME_CPU),
			 STRATA__V1__TIME_BREAKDOWN__CATEGORY__CPU);
	assert_int_equal(strata_time_cat_to_wire(STRATA_TIME_OTHER),
			 STRATA__V1__TIME_BREAKDOWN__CATEGORY__OTHER);
}

static void test_offcpu_reasons_match_wire(void **state)
{
	check_wire(&strata__v1__off_cpu_sample__reason__descriptor, offcpu_wire, STRATA_OFF_MAX);
	assert_int_equal(strata_offcpu_reason_to_wire(STRATA_OFF_FAULT),
			 STRATA__V1__OFF_CPU_SAMPLE__REASON__PAGE_FAULT);
}

static void test_frame_kinds_match_wire(void **state)
{
	const ProtobufCEnumDescriptor *d = &strata__v1__frame__kind__descriptor;
	static const struct {
		const char *name;
		int kind;
	} kinds[] = {
		{ "NATIVE", PROFILE_KIND_NATIVE },   { "KERNEL", PROFILE_KIND_KERNEL },
		{ "PYTHON", PROFILE_KIND_PYTHON },   { "LOST", PROFILE_KIND_LOST },
		{ "UNKNOWN", PROFILE_KIND_UNKNOWN },
	};

	assert_int_equal(d->n_values, 1 + sizeof(kinds) / sizeof(kinds[0]));
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const ProtobufCEnumValue *v =
			protobuf_c_enum_descriptor_get_value_by_name(d, kinds[i].name);

		assert_non_null(v);
		assert_int_equal(v->value, kinds[i].kind);
	}
}

/* Names: one per entry, none empty, none repeated within a list; past the
 * list, "unknown". */
static void check_names(const char *(*name)(unsigned int), unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		assert_non_null(name(i));
		assert_true(name(i)[0] != '\0');
		assert_string_not_equal(name(i), "unknown");
		for (unsigned j = 0; j < i; j++)
			assert_string_not_equal(name(i), name(j));
	}
	assert_string_equal(name(n), "unknown");
}

static void test_name_tables(void **state)
{
	check_names(strata_time_cat_name, STRATA_TIME_MAX);
	check_names(strata_offcpu_reason_name, STRATA_OFF_MAX);
	check_names(strata_sampler_counter_name, STRATA_CNT_MAX);
	check_names(strata_unwind_counter_name, UNWIND_ERR_MAX);
	check_names(strata_py_counter_name, STRATA_PY_ERR_MAX);
	check_names(strata_gpu_counter_name, GPU_CNT_MAX);
	check_names(strata_sched_counter_name, STRATA_SCHED_CNT_MAX);
	/* names that reports, metrics and tests parse */
	assert_string_equal(strata_time_cat_name(STRATA_TIME_GPU_WAIT), "gpu_wait");
	assert_string_equal(strata_offcpu_reason_name(STRATA_OFF_FAULT), "page_fault");
	assert_string_equal(strata_sampler_counter_name(STRATA_CNT_COUNTS_FULL), "counts_map_full");
	assert_string_equal(strata_unwind_counter_name(UNWIND_ERR_NO_MAPPING), "no_mapping");
	assert_string_equal(strata_sched_counter_name(STRATA_SCHED_THREADS_FULL), "threads_full");
	assert_string_equal(strata_gpu_counter_name(GPU_CNT_STACK_REUSED), "stacks_reused");
}

static void test_time_precedence(void **state)
{
	static const unsigned order[] = {
		STRATA_TIME_OTHER,	STRATA_TIME_CPU,      STRATA_TIME_LOCK_WAIT,
		STRATA_TIME_IO_WAIT,	STRATA_TIME_CUDA_API, STRATA_TIME_GPU_WAIT,
		STRATA_TIME_COLLECTIVE, STRATA_TIME_RUNNABLE,
	};

	assert_int_equal(sizeof(order) / sizeof(order[0]), STRATA_TIME_MAX);
	for (size_t i = 1; i < STRATA_TIME_MAX; i++)
		assert_true(strata_time_rank(order[i]) > strata_time_rank(order[i - 1]));
	assert_int_equal(strata_time_rank(STRATA_TIME_MAX), 0);
}

static void test_store_sql(void **state)
{
	char ix[64], cond[96];

	strata_wire_enum_sql("t.category", STRATA_TIME_MAX, ix, sizeof(ix), cond, sizeof(cond));
	assert_string_equal(ix, "(t.category - 1)");
	assert_string_equal(cond, " AND t.category BETWEEN 1 AND 8");
	strata_wire_enum_sql("reason", STRATA_OFF_MAX, ix, sizeof(ix), cond, sizeof(cond));
	assert_string_equal(ix, "(reason - 1)");
	assert_string_equal(cond, " AND reason BETWEEN 1 AND 5");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_time_categories_match_wire),
		cmocka_unit_test(test_offcpu_reasons_match_wire),
		cmocka_unit_test(test_frame_kinds_match_wire),
		cmocka_unit_test(test_name_tables),
		cmocka_unit_test(test_time_precedence),
		cmocka_unit_test(test_store_sql),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
