// SPDX-License-Identifier: Apache-2.0
/*
 * Collective health per communicator (see collstats.h): sort the calls by
 * (communicator, sequence number), judge each group once, sum per row.
 */
#include "diagnose/collstats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t collstat_size_class(uint64_t bytes)
{
	if (!bytes)
		return 0;
	return 1ull << (63 - __builtin_clzll(bytes));
}

double collstat_bus_factor(const char *op, int32_t n)
{
	double nn = n > 0 ? (double)n : 1.0;

	if (!op)
		return 1.0;
	if (!strcmp(op, "AllReduce"))
		return 2.0 * (nn - 1.0) / nn;
	if (!strcmp(op, "ReduceScatter") || !strcmp(op, "AllGather") || !strcmp(op, "AllToAll"))
		return (nn - 1.0) / nn;
	return 1.0; /* Broadcast, Reduce, Send, Recv */
}

static int call_cmp(const void *a, const void *b)
{
	const struct collstat_call *x = a, *y = b;

	if (x->comm_hash != y->comm_hash)
		return x->comm_hash < y->comm_hash ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	if (x->rank_id != y->rank_id)
		return x->rank_id < y->rank_id ? -1 : 1;
	return (x->entry_ns > y->entry_ns) - (x->entry_ns < y->entry_ns);
}

static int same_key(const struct collstat_row *r, uint64_t comm, const char *op, uint64_t cls,
		    int32_t nranks)
{
	return r->comm_hash == comm && r->size_class == cls && r->nranks == nranks &&
	       !strncmp(r->op, op, COLLSTAT_OP_LEN - 1);
}

int collstat_merge(struct collstat_row *dst, size_t *n, size_t max, const struct collstat_row *src)
{
	struct collstat_row *r = NULL;

	for (size_t i = 0; i < *n && !r; i++)
		if (same_key(&dst[i], src->comm_hash, src->op, src->size_class, src->nranks))
			r = &dst[i];
	if (!r) {
		if (*n >= max)
			return -ENOSPC;
		r = &dst[(*n)++];
		*r = *src;
		return 0;
	}
	r->occurrences += src->occurrences;
	r->observed_ns += src->observed_ns;
	r->stall_ns += src->stall_ns;
	r->slack_ns += src->slack_ns;
	r->bytes += src->bytes;
	if (src->observed_max_ns > r->observed_max_ns)
		r->observed_max_ns = src->observed_max_ns;
	return 0;
}

static int row_cmp(const void *a, const void *b)
{
	const struct collstat_row *x = a, *y = b;
	int c;

	if (x->stall_ns != y->stall_ns)
		return x->stall_ns > y->stall_ns ? -1 : 1;
	if (x->comm_hash != y->comm_hash)
		return x->comm_hash < y->comm_hash ? -1 : 1;
	c = strcmp(x->op, y->op);
	if (c)
		return c;
	return (x->size_class > y->size_class) - (x->size_class < y->size_class);
}

void collstat_sort(struct collstat_row *rows, size_t n)
{
	if (n > 1)
		qsort(rows, n, sizeof(*rows), row_cmp);
}

/* Judges calls[0..n) of one (communicator, sequence number), sorted by
 * rank; adds it to the rows. */
static void judge(const struct collstat_call *c, size_t n, int64_t from, int64_t to,
		  struct collstat_row *rows, size_t *nrows, size_t max, struct collstat_counts *k)
{
	int64_t first = INT64_MAX, last_entry = INT64_MIN, last_exit = INT64_MIN;
	uint64_t in_call = 0, waited = 0, bytes = 0;
	int32_t nranks = -1;
	size_t m = 0; /* distinct ranks */
	struct collstat_row one;

	for (size_t i = 0; i < n; i++) {
		if (i && c[i].rank_id == c[i - 1].rank_id) {
			k->duplicates++;
			continue;
		}
		if (c[i].exit_ns < c[i].entry_ns) {
			k->no_exit++;
			return;
		}
		m++;
		if (c[i].entry_ns < first)
			first = c[i].entry_ns;
		if (c[i].entry_ns > last_entry)
			last_entry = c[i].entry_ns;
		if (c[i].exit_ns > last_exit)
			last_exit = c[i].exit_ns;
		if (c[i].bytes > bytes)
			bytes = c[i].bytes;
		if (c[i].nranks > nranks)
			nranks = c[i].nranks;
	}
	if (first < from || first >= to) {
		k->outside++;
		return;
	}
	if (m < 2 || (nranks > 0 && m < (size_t)nranks)) {
		k->partial++;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (i && c[i].rank_id == c[i - 1].rank_id)
			continue;
		in_call += (uint64_t)(c[i].exit_ns - c[i].entry_ns);
		waited += (uint64_t)(last_entry - c[i].entry_ns);
	}
	memset(&one, 0, sizeof(one));
	one.comm_hash = c[0].comm_hash;
	snprintf(one.op, sizeof(one.op), "%s", c[0].op ? c[0].op : "");
	one.size_class = collstat_size_class(bytes);
	one.nranks = nranks > 0 ? nranks : (int32_t)m;
	one.occurrences = 1;
	one.observed_ns = one.observed_max_ns = (uint64_t)(last_exit - first);
	/* means over the ranks, rounded to the nearest ns */
	one.stall_ns = (in_call + m / 2) / m;
	one.slack_ns = (waited + m / 2) / m;
	one.bytes = bytes;
	if (collstat_merge(rows, nrows, max, &one))
		k->rows_dropped++;
	else
		k->collectives++;
}

size_t collstat_window(struct collstat_call *calls, size_t n, int64_t from_ns, int64_t to_ns,
		       struct collstat_row *rows, size_t max, struct collstat_counts *counts)
{
	struct collstat_counts own;
	size_t nrows = 0;

	if (!counts)
		counts = &own;
	memset(counts, 0, sizeof(*counts));
	if (n > 1)
		qsort(calls, n, sizeof(*calls), call_cmp);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;

		while (j < n && calls[j].comm_hash == calls[i].comm_hash &&
		       calls[j].seq == calls[i].seq)
			j++;
		judge(&calls[i], j - i, from_ns, to_ns, rows, &nrows, max, counts);
		i = j;
	}
	collstat_sort(rows, nrows);
	return nrows;
}

void collstat_rates(const struct collstat_row *r, struct collstat_rates *o)
{
	double occ = (double)r->occurrences;

	memset(o, 0, sizeof(*o));
	o->bus_factor = collstat_bus_factor(r->op, r->nranks);
	o->total_stall_s = (double)r->stall_ns / 1e9;
	if (!r->occurrences)
		return;
	o->observed_s = (double)r->observed_ns / 1e9 / occ;
	o->stall_s = (double)r->stall_ns / 1e9 / occ;
	o->slack_s = (double)r->slack_ns / 1e9 / occ;
	o->bytes = (double)r->bytes / occ;
	if (r->slack_ns)
		o->required_bps = (double)r->bytes * 1e9 / (double)r->slack_ns;
	if (r->observed_ns) {
		o->algo_bps = (double)r->bytes * 1e9 / (double)r->observed_ns;
		o->bus_bps = o->algo_bps * o->bus_factor;
	}
}
