// SPDX-License-Identifier: Apache-2.0
/* The agent's on-disk spool: order, bound (oldest dropped, counted),
 * recovery after a restart, refusal of a batch larger than the bound; a
 * disk that refuses batches (held in memory, bounded, written out at the
 * end), a directory removed under it, a directory that cannot be made. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static struct spool *open_ok(const char *d, uint64_t max_bytes)
{
	int dir_err = 1;
	struct spool *s = spool__open(d, max_bytes, &dir_err);

	assert_non_null(s);
	assert_int_equal(dir_err, 0);
	return s;
}

static void put_bytes(struct spool *s, char fill, size_t n, uint64_t *seq)
{
	char buf[4096];

	memset(buf, fill, n);
	assert_int_equal(spool__put(s, buf, n, 0, seq), 0);
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
	struct spool *s = open_ok(d, 1 << 20);
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
	struct spool *s = open_ok(d, 3000);
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
	assert_int_equal(spool__put(s, big, sizeof(big), 0, NULL), -EFBIG);
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
	struct spool *s = open_ok(d, 1 << 20);
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

	s = open_ok(d, 1 << 20);
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

/* The next put's temp file name taken by a directory: the disk "refuses"
 * that one batch (EISDIR), as a full disk would. */
static void refuse_seq(const char *d, uint64_t seq)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%020llu.batch.tmp", d, (unsigned long long)seq);
	assert_int_equal(mkdir(p, 0700), 0);
}

static void test_disk_refuses_held_in_memory(void **state)
{
	char *d = tmpdir();
	struct spool *s = open_ok(d, 1 << 20);
	struct spool_stats st;
	uint64_t a, b, c, e;

	put_bytes(s, 'a', 100, &a);
	refuse_seq(d, a + 1);
	refuse_seq(d, a + 2);
	put_bytes(s, 'b', 200, &b);
	put_bytes(s, 'c', 300, &c);
	put_bytes(s, 'e', 400, &e);
	spool__stats(s, &st);
	assert_int_equal(st.disk_failed, 2);
	assert_int_equal(st.mem_files, 2);
	assert_int_equal(st.mem_bytes, 500);
	assert_int_equal(st.files, 4);
	assert_int_equal(st.written, 4);
	assert_int_equal(st.to_report, 0);
	assert_int_equal(spool__count(s), 4);
	/* one order, files and memory alike */
	expect_oldest(s, a, 'a', 100);
	assert_int_equal(spool__remove(s, a), 0);
	expect_oldest(s, b, 'b', 200);
	assert_int_equal(spool__remove(s, b), 0);
	spool__stats(s, &st);
	assert_int_equal(st.mem_files, 1);
	/* c is written out at the end, once the disk takes it */
	rm_dir(d);
	assert_int_equal(mkdir(d, 0700), 0);
	spool__free(s);
	s = open_ok(d, 1 << 20);
	spool__stats(s, &st);
	assert_int_equal(st.recovered, 1);
	expect_oldest(s, c, 'c', 300);
	spool__free(s);
	rm_dir(d);
	free(d);
}

static void test_memory_bound(void **state)
{
	char *d = tmpdir();
	struct spool *s = open_ok(d, 1ull << 30);
	const size_t mib = 1 << 20, n = SPOOL_MEM_MAX / mib + 2;
	uint8_t *buf = malloc(mib), *data;
	struct spool_stats st;
	uint64_t a, seq, first = 0;
	size_t len;

	put_bytes(s, 'a', 10, &a);
	/* the directory replaced by a file: every write fails (ENOTDIR) */
	rm_dir(d);
	fclose(fopen(d, "w"));
	for (size_t i = 0; i < n; i++) {
		memset(buf, (int)i, mib);
		assert_int_equal(spool__put(s, buf, mib, 0, &seq), 0);
		if (!first)
			first = seq;
	}
	spool__stats(s, &st);
	assert_int_equal(st.disk_failed, n);
	assert_int_equal(st.mem_bytes, SPOOL_MEM_MAX);
	assert_int_equal(st.dropped_full, 2); /* the oldest two held */
	/* a's file went with the directory: lost, counted, and the oldest
	 * batch still held is next */
	assert_int_equal(spool__oldest(s, &seq, &data, &len), 0);
	assert_int_equal(seq, first + 2);
	assert_int_equal(len, mib);
	assert_int_equal(data[0], 2);
	free(data);
	spool__stats(s, &st);
	assert_int_equal(st.lost, 1);
	assert_int_equal(st.to_report, 3);
	assert_int_equal(spool__count(s), n - 2);
	/* larger than memory's bound, disk refusing: lost, counted */
	uint8_t *big = calloc(1, SPOOL_MEM_MAX + 1);
	assert_int_equal(spool__put(s, big, SPOOL_MEM_MAX + 1, 0, NULL), -ENOTDIR);
	spool__stats(s, &st);
	assert_int_equal(st.write_failed, 1);
	assert_int_equal(st.to_report, 4);
	assert_int_equal(st.mem_bytes, SPOOL_MEM_MAX); /* nothing dropped for it */
	free(big);
	free(buf);
	spool__free(s);
	unlink(d);
	free(d);
}

static void test_dir_removed(void **state)
{
	char *d = tmpdir();
	struct spool *s = open_ok(d, 1 << 20);
	struct spool_stats st;
	uint64_t a, b;

	put_bytes(s, 'a', 10, &a);
	rm_dir(d); /* a cleanup of the node's disk */
	put_bytes(s, 'b', 20, &b);
	spool__stats(s, &st);
	assert_int_equal(st.dir_made, 1);
	assert_int_equal(st.mem_files, 0);
	expect_oldest(s, b, 'b', 20);
	spool__stats(s, &st);
	assert_int_equal(st.lost, 1);
	spool__free(s);
	rm_dir(d);
	free(d);
}

static void test_dir_unusable_at_open(void **state)
{
	char *d = tmpdir(), sub[512];
	struct spool *s;
	uint64_t a;
	int dir_err = 0;
	FILE *f;

	/* a file where the spool's parent should be */
	snprintf(sub, sizeof(sub), "%s/file", d);
	f = fopen(sub, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(sub, sizeof(sub), "%s/file/spool", d);
	s = spool__open(sub, 1 << 20, &dir_err);
	assert_non_null(s);
	assert_int_equal(dir_err, -ENOTDIR);
	put_bytes(s, 'a', 10, &a);
	expect_oldest(s, a, 'a', 10);
	spool__free(s);
	rm_dir(d);
	free(d);
}

/* A lost batch is told by a later one, with the drops it was carrying. */
static void test_lost_drops_told_again(void **state)
{
	char *d = tmpdir();
	struct spool *s = open_ok(d, 3000);
	char buf[1000] = { 0 };
	struct spool_stats st;

	assert_int_equal(spool__put(s, buf, sizeof(buf), 0, NULL), 0);
	assert_int_equal(spool__put(s, buf, sizeof(buf), 5, NULL), 0); /* tells 5 */
	assert_int_equal(spool__put(s, buf, sizeof(buf), 0, NULL), 0);
	assert_int_equal(spool__put(s, buf, sizeof(buf), 1, NULL), 0); /* the first goes */
	spool__stats(s, &st);
	assert_int_equal(st.to_report, 1);
	assert_int_equal(spool__put(s, buf, sizeof(buf), 0, NULL), 0); /* the second goes */
	spool__stats(s, &st);
	assert_int_equal(st.dropped_full, 2);
	assert_int_equal(st.to_report, 1 + 1 + 5);
	spool__free(s);
	rm_dir(d);
	free(d);
}

/* Memory batches dropped behind a head that cannot move (an outage): the
 * ring reclaims them, and what is left comes out in order, every count
 * back at 0. */
static void test_ring_reclaims_dropped(void **state)
{
	char *d = tmpdir();
	struct spool *s = open_ok(d, 1ull << 30);
	const size_t sz = 64 << 10, held = SPOOL_MEM_MAX / sz, puts = 4 * held + 7;
	uint8_t *buf = malloc(sz), *data;
	struct spool_stats st;
	uint64_t a, seq, first = 0, want;
	size_t len, n = 0;

	put_bytes(s, 'a', 10, &a);
	rm_dir(d);
	fclose(fopen(d, "w")); /* every write fails from here */
	for (size_t i = 0; i < puts; i++) {
		memset(buf, (int)(i & 0xff), sz);
		assert_int_equal(spool__put(s, buf, sz, 0, &seq), 0);
		if (!first)
			first = seq;
	}
	spool__stats(s, &st);
	assert_int_equal(st.mem_files, held);
	assert_int_equal(st.dropped_full, puts - held);
	want = first + (puts - held);
	while (!spool__oldest(s, &seq, &data, &len)) {
		assert_int_equal(seq, want);
		assert_int_equal(len, sz);
		assert_int_equal(data[0], (uint8_t)((seq - first) & 0xff));
		free(data);
		assert_int_equal(spool__remove(s, seq), 0);
		want++;
		n++;
	}
	assert_int_equal(n, held);
	spool__stats(s, &st);
	assert_int_equal(st.files, 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(st.mem_files, 0);
	assert_int_equal(st.mem_bytes, 0);
	assert_int_equal(st.lost, 1); /* a's file went with the directory */
	assert_int_equal(st.to_report, 1 + puts - held);
	assert_int_equal(spool__count(s), 0);
	free(buf);
	spool__free(s);
	unlink(d);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_remove),
		cmocka_unit_test(test_bound_drops_oldest),
		cmocka_unit_test(test_recovery),
		cmocka_unit_test(test_disk_refuses_held_in_memory),
		cmocka_unit_test(test_memory_bound),
		cmocka_unit_test(test_dir_removed),
		cmocka_unit_test(test_dir_unusable_at_open),
		cmocka_unit_test(test_lost_drops_told_again),
		cmocka_unit_test(test_ring_reclaims_dropped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
