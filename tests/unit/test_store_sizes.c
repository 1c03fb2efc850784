// SPDX-License-Identifier: Apache-2.0
/*
 * /metrics' cache of the store's sizes (server/store_sizes.c): the store is
 * counted at most once a minute however often, and however many at once,
 * Prometheus scrapes; a failed count keeps the last sizes (with their age)
 * and is tried again a minute later, not at every scrape.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "server/store_sizes.h"

#define S 1000000000ULL

struct counting_store {
	struct store base;
	uint64_t reads; /* atomic */
	int fail;	/* the next reads fail with this (0: succeed) */
};

static int count_sizes(struct store *base, struct store_sizes *out)
{
	struct counting_store *cs = (struct counting_store *)base;
	uint64_t n = __atomic_add_fetch(&cs->reads, 1, __ATOMIC_RELAXED);

	if (cs->fail)
		return cs->fail;
	*out = (struct store_sizes){
		.stacks = n, .cpu_rows = 10 * n, .event_rows = 100 * n, .bytes_on_disk = 1000 * n
	};
	return 0;
}

static const struct store_ops counting_ops = { .name = "counting", .sizes = count_sizes };

static void test_read_once_a_minute(void **state)
{
	struct counting_store cs = { .base.ops = &counting_ops };
	struct store_sizes_cache c = { 0 };
	struct store_sizes z;
	uint64_t age, t0 = 5000 * S;

	(void)state;
	assert_int_equal(store_sizes__get(&c, &cs.base, t0, &z, &age), 0);
	assert_int_equal(cs.reads, 1);
	assert_int_equal(z.cpu_rows, 10);
	assert_int_equal(age, 0);
	/* scrapes within the minute: the kept sizes, older each time */
	for (uint64_t t = t0 + 15 * S; t < t0 + STORE_SIZES_EVERY_NS; t += 15 * S) {
		assert_int_equal(store_sizes__get(&c, &cs.base, t, &z, &age), 0);
		assert_int_equal(z.stacks, 1);
		assert_int_equal(age, t - t0);
	}
	assert_int_equal(cs.reads, 1);
	assert_int_equal(c.reads, 1);
	/* a minute on: read again */
	assert_int_equal(store_sizes__get(&c, &cs.base, t0 + STORE_SIZES_EVERY_NS, &z, &age), 0);
	assert_int_equal(cs.reads, 2);
	assert_int_equal(z.bytes_on_disk, 2000);
	assert_int_equal(age, 0);
	/* a scrape that read the clock just before that one claimed */
	assert_int_equal(store_sizes__get(&c, &cs.base, t0 + STORE_SIZES_EVERY_NS - 1, &z, &age),
			 0);
	assert_int_equal(cs.reads, 2);
	assert_int_equal(age, 0);
}

static void test_failed_read(void **state)
{
	struct counting_store cs = { .base.ops = &counting_ops, .fail = -EIO };
	struct store_sizes_cache c = { 0 };
	struct store_sizes z;
	uint64_t age, t0 = 5000 * S;

	(void)state;
	/* never read: nothing to show, and no read at every scrape after */
	assert_int_equal(store_sizes__get(&c, &cs.base, t0, &z, &age), -EAGAIN);
	assert_int_equal(store_sizes__get(&c, &cs.base, t0 + 15 * S, &z, &age), -EAGAIN);
	assert_int_equal(cs.reads, 1);
	cs.fail = 0;
	assert_int_equal(store_sizes__get(&c, &cs.base, t0 + 60 * S, &z, &age), 0);
	assert_int_equal(cs.reads, 2);
	assert_int_equal(z.stacks, 2);
	/* the store fails later: the last sizes stay, their age says so */
	cs.fail = -ETIMEDOUT;
	assert_int_equal(store_sizes__get(&c, &cs.base, t0 + 120 * S, &z, &age), 0);
	assert_int_equal(cs.reads, 3);
	assert_int_equal(z.stacks, 2);
	assert_int_equal(age, 60 * S);
	assert_int_equal(c.reads, 3);
}

/* A store without the op (a test's fake) has no sizes, and no crash. */
static void test_store_without_sizes(void **state)
{
	static const struct store_ops no_sizes = { .name = "none" };
	struct store s = { .ops = &no_sizes };
	struct store_sizes_cache c = { 0 };
	struct store_sizes z;
	uint64_t age;

	(void)state;
	assert_int_equal(store_sizes__get(&c, &s, 5000 * S, &z, &age), -EOPNOTSUPP);
	assert_int_equal(c.reads, 0);
}

struct scraper {
	pthread_t t;
	struct store_sizes_cache *c;
	struct counting_store *cs;
	uint64_t now;
	int ok;
};

static void *scrape(void *arg)
{
	struct scraper *s = arg;
	struct store_sizes z;
	uint64_t age;

	for (int i = 0; i < 1000; i++)
		s->ok += store_sizes__get(s->c, &s->cs->base, s->now, &z, &age) == 0;
	return NULL;
}

/* Scrapes at once: one of them reads, the others answer with what is kept. */
static void test_concurrent_scrapes(void **state)
{
	struct counting_store cs = { .base.ops = &counting_ops };
	struct store_sizes_cache c = { 0 };
	struct scraper s[8];

	(void)state;
	for (int i = 0; i < 8; i++) {
		s[i] = (struct scraper){ .c = &c, .cs = &cs, .now = 5000 * S };
		assert_int_equal(pthread_create(&s[i].t, NULL, scrape, &s[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		assert_int_equal(pthread_join(s[i].t, NULL), 0);
	int ok = 0;

	for (int i = 0; i < 8; i++)
		ok += s[i].ok;
	assert_int_equal(cs.reads, 1);
	/* answers given before the one read was done had nothing to show;
	 * the reader's own (at least) had its sizes */
	assert_true(ok > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_once_a_minute),
		cmocka_unit_test(test_failed_read),
		cmocka_unit_test(test_concurrent_scrapes),
		cmocka_unit_test(test_store_without_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
