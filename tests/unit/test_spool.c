// SPDX-License-Identifier: Apache-2.0
/* The agent's on-disk spool: order, bound (oldest dropped, counted),
 * recovery after a restart, refusal of a batch larger than the bound. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "uploader/spool.h"

static char *tmpdir(void)
{
	char *d = strdup("/tmp/strata-spool-XXXXXX");

	assert_non_null(mkdtemp(d));
	return d;
}

static void rm_dir(const char *d)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	assert_int_equal(system(cmd), 0);
}

static void put_bytes(struct spool *s, char fill, size_t n, uint64_t *seq)
{
	char buf[4096];

	memset(buf, fill, n);
	assert_int_equal(spool__put(s, buf, n, seq), 0);
}

static void expect_oldest(struct spool *s, uint64_t want_seq, char fill, size_t n)
{
	uint64_t seq;
	uint8_t *data;
	size_t len;

	assert_int_equal(spool__oldest(s, &seq, &data, &len), 0);
	assert_int_equal(seq, want_seq);
	assert_int_equal(len, n);
	assert_int_equal(data[0], (uint8_t)fill);
	assert_int_equal(data[n - 1], (uint8_t)fill);
	free(data);
}

static void test_order_and_remove(void **state)
{
	char *d = tmpdir();
	struct spool *s = spool__open(d, 1 << 20);
	uint64_t a, b, c, seq;
	uint8_t *data;
	size_t len;

	assert_non_null(s);
	assert_int_equal(spool__oldest(s, &seq, &data, &len), -ENOENT);
	put_bytes(s, 'a', 100, &a);
	put_bytes(s, 'b', 200, &b);
	put_bytes(s, 'c', 300, &c);
	assert_true(a < b && b < c);
	assert_int_equal(spool__count(s), 3);
	expect_oldest(s, a, 'a', 100);
	/* only the oldest can be removed: replay is in order */
	assert_int_equal(spool__remove(s, b), -ENOENT);
	assert_int_equal(spool__remove(s, a), 0);
	expect_oldest(s, b, 'b', 200);
	spool__free(s);
	rm_dir(d);
	free(d);
}

static void test_bound_drops_oldest(void **state)
{
	char *d = tmpdir();
	struct spool *s = spool__open(d, 3000);
	struct spool_stats st;
	uint64_t seqs[5];

	assert_non_null(s);
	for (int i = 0; i < 5; i++)
		put_bytes(s, (char)('0' + i), 1000, &seqs[i]);
	spool__stats(s, &st);
	assert_int_equal(st.files, 3);
	assert_int_equal(st.bytes, 3000);
	assert_int_equal(st.dropped_full, 2);
	assert_int_equal(st.written, 5);
	/* the newest three remain */
	expect_oldest(s, seqs[2], '2', 1000);
	/* larger than the whole spool: refused, nothing dropped for it */
	char big[4000] = { 0 };
	assert_int_equal(spool__put(s, big, sizeof(big), NULL), -EFBIG);
	spool__stats(s, &st);
	assert_int_equal(st.dropped_full, 2);
	assert_int_equal(st.write_failed, 1);
	spool__free(s);
	rm_dir(d);
	free(d);
}

static void test_recovery(void **state)
{
	char *d = tmpdir();
	struct spool *s = spool__open(d, 1 << 20);
	struct spool_stats st;
	uint64_t a, b, c;
	char stray[512];
	FILE *f;

	put_bytes(s, 'x', 10, &a);
	put_bytes(s, 'y', 20, &b);
	spool__free(s);
	/* a write cut short by a crash leaves a temp file */
	snprintf(stray, sizeof(stray), "%s/00000000000000000099.batch.tmp", d);
	f = fopen(stray, "w");
	assert_non_null(f);
	fclose(f);

	s = spool__open(d, 1 << 20);
	assert_non_null(s);
	spool__stats(s, &st);
	assert_int_equal(st.recovered, 2);
	assert_int_equal(st.files, 2);
	assert_int_not_equal(access(stray, F_OK), 0);
	expect_oldest(s, a, 'x', 10);
	/* numbering goes on after the recovered batches */
	put_bytes(s, 'z', 30, &c);
	assert_true(c > b);
	assert_int_equal(spool__remove(s, a), 0);
	expect_oldest(s, b, 'y', 20);
	spool__free(s);
	rm_dir(d);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_remove),
		cmocka_unit_test(test_bound_drops_oldest),
		cmocka_unit_test(test_recovery),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
