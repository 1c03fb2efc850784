// SPDX-License-Identifier: Apache-2.0
#include "server/store.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/clock.h"

/* Per thread: a query thread's bounds (store.h); thread-local because
 * every store read of the query, however deep, honours them. */
static __thread uint64_t read_deadline_ns;
static __thread store_client_gone_fn read_client_gone;
static __thread void *read_client;

void store__set_read_deadline(uint64_t mono_ns)
{
	read_deadline_ns = mono_ns;
}

uint64_t store__read_deadline(void)
{
	return read_deadline_ns;
}

void store__set_read_client(store_client_gone_fn gone, void *ctx)
{
	read_client_gone = gone;
	read_client = ctx;
}

void store__read_bounds_take(struct store_read_bounds *saved)
{
	*saved = (struct store_read_bounds){ read_deadline_ns, read_client_gone, read_client };
	read_deadline_ns = 0;
	read_client_gone = NULL;
	read_client = NULL;
}

void store__read_bounds_put(const struct store_read_bounds *saved)
{
	read_deadline_ns = saved->deadline_ns;
	read_client_gone = saved->gone;
	read_client = saved->ctx;
}

bool store__read_over(uint64_t *next_check_ns)
{
	uint64_t now;

	if (!read_deadline_ns && !read_client_gone)
		return false;
	now = mono_ns();
	if (read_deadline_ns && now > read_deadline_ns)
		return true;
	if (!read_client_gone || now < *next_check_ns)
		return false;
	*next_check_ns = now + STORE_GONE_CHECK_NS;
	return read_client_gone(read_client);
}

struct store *store__open(const char *spec, char *err, size_t errsz)
{
	if (!strncmp(spec, "sqlite:", 7) && spec[7])
		return store_sqlite__open(spec + 7, err, errsz);
	if (!strncmp(spec, "clickhouse://", 13))
		return store_clickhouse__open(spec, err, errsz);
	snprintf(err, errsz, "bad store \"%s\": want sqlite:PATH or clickhouse://HOST:PORT/DB",
		 spec);
	errno = EINVAL;
	return NULL;
}

static int str_match(const char *want, const char *have)
{
	return !want || !want[0] || (have && !strcmp(want, have));
}

int store_filter__match_process(const struct store_filter *f, const char *node, uint32_t pid,
				const char *job, const char *container, int has_rank, int32_t rank)
{
	if (f->pid && f->pid != pid)
		return 0;
	if (!str_match(f->node, node) || !str_match(f->job, job) ||
	    !str_match(f->container, container))
		return 0;
	if (f->has_rank) {
		if (!has_rank)
			return 0;
		if ((rank == f->rank) == !!f->rank_negate)
			return 0;
	}
	return 1;
}
