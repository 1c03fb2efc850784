// SPDX-License-Identifier: Apache-2.0
/* The unwind table builder thread: results in submission order, errors
 * passed back, a full builder refusing, a stop with work left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent/proc/table_builder.h"

struct got {
	uint64_t keys[TABLE_BUILDER_SLOTS];
	int errs[TABLE_BUILDER_SLOTS];
	uint32_t rows[TABLE_BUILDER_SLOTS];
	size_t n;
};

static void on_built(void *ctx, uint64_t key, int err, struct unwind_table *tab, uint64_t ns)
{
	struct got *g = ctx;

	assert_true(g->n < TABLE_BUILDER_SLOTS);
	assert_true(err ? tab == NULL : tab != NULL);
	g->keys[g->n] = key;
	g->errs[g->n] = err;
	g->rows[g->n++] = tab ? tab->nrows : 0;
	unwind_table__free(tab);
}

/* Collects until n results are in (10 s at most). */
static void collect_n(struct table_builder *b, struct got *g, size_t n)
{
	struct pollfd p = { .fd = table_builder__fd(b), .events = POLLIN };

	for (int i = 0; i < 1000 && g->n < n; i++) {
		poll(&p, 1, 10);
		table_builder__collect(b, on_built, g);
	}
	assert_int_equal(g->n, n);
}

static void builds_in_order(void **state)
{
	struct table_builder *b = table_builder__new();
	int self = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int text = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC); /* not an ELF */
	struct got g = { 0 };

	assert_non_null(b);
	assert_true(self >= 0 && text >= 0);
	assert_int_equal(table_builder__submit(b, self, 11), 0);
	assert_int_equal(table_builder__submit(b, text, 12), 0);
	assert_int_equal(table_builder__submit(b, self, 13), 0);
	close(self); /* the builder has its own */
	close(text);
	collect_n(b, &g, 3);
	assert_int_equal(g.keys[0], 11);
	assert_int_equal(g.errs[0], 0);
	assert_true(g.rows[0] > 0);
	assert_int_equal(g.keys[1], 12);
	assert_int_equal(g.errs[1], -ENOEXEC);
	assert_int_equal(g.keys[2], 13);
	assert_int_equal(g.rows[2], g.rows[0]);
	table_builder__free(b);
}

/* Every slot taken (queued, building or done but not collected): refused;
 * collecting frees them; freeing with work queued stops all the same. */
static void bounded(void **state)
{
	struct table_builder *b = table_builder__new();
	int fd = open("/bin/true", O_RDONLY | O_CLOEXEC);
	struct got g = { 0 };

	assert_non_null(b);
	assert_true(fd >= 0);
	for (uint64_t k = 0; k < TABLE_BUILDER_SLOTS; k++)
		assert_int_equal(table_builder__submit(b, fd, k), 0);
	assert_int_equal(table_builder__submit(b, fd, 99), -EBUSY);
	collect_n(b, &g, TABLE_BUILDER_SLOTS);
	for (size_t i = 0; i < g.n; i++)
		assert_int_equal(g.keys[i], i);
	for (uint64_t k = 0; k < 8; k++)
		assert_int_equal(table_builder__submit(b, fd, k), 0);
	close(fd);
	table_builder__free(b); /* jobs left: dropped, nothing leaks (ASan) */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(builds_in_order),
		cmocka_unit_test(bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
