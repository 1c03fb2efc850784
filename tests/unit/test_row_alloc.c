// SPDX-License-Identifier: Apache-2.0
/* Row-range allocator: first fit, reuse, merging, bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "agent/core/row_alloc.h"

static void first_fit_and_full(void **state)
{
	struct row_alloc *a = malloc(sizeof(*a));

	row_alloc__init(a, 100);
	assert_int_equal(row_alloc__get(a, 40), 0);
	assert_int_equal(row_alloc__get(a, 40), 40);
	assert_int_equal(row_alloc__get(a, 30), -1); /* 20 left */
	assert_int_equal(row_alloc__get(a, 20), 80);
	assert_int_equal(a->used, 100);
	assert_int_equal(row_alloc__get(a, 1), -1);
	free(a);
}

static void reuse_and_merge(void **state)
{
	struct row_alloc *a = malloc(sizeof(*a));

	row_alloc__init(a, 100);
	assert_int_equal(row_alloc__get(a, 30), 0);
	assert_int_equal(row_alloc__get(a, 30), 30);
	assert_int_equal(row_alloc__get(a, 40), 60);
	row_alloc__put(a, 0, 30);
	row_alloc__put(a, 60, 40);
	assert_int_equal(a->nfree, 2);
	assert_int_equal(row_alloc__get(a, 50), -1); /* fragmented: 30 + 40 */
	row_alloc__put(a, 30, 30);		     /* merges all three */
	assert_int_equal(a->nfree, 1);
	assert_int_equal(row_alloc__get(a, 100), 0);
	assert_int_equal(a->used, 100);
	free(a);
}

static void free_list_bounded(void **state)
{
	struct row_alloc *a = malloc(sizeof(*a));
	uint32_t n = 2 * ROW_ALLOC_MAX_FREE + 4;

	row_alloc__init(a, n);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(row_alloc__get(a, 1), i);
	/* Every other row back: more holes than the list holds. */
	for (uint32_t i = 0; i < n; i += 2)
		row_alloc__put(a, i, 1);
	assert_int_equal(a->nfree, ROW_ALLOC_MAX_FREE);
	assert_true(a->leaked > 0);
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(first_fit_and_full),
		cmocka_unit_test(reuse_and_merge),
		cmocka_unit_test(free_list_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
