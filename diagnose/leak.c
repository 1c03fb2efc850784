// SPDX-License-Identifier: Apache-2.0
#include "diagnose/leak.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/keymap.h"
#include "diagnose/robust.h"

struct series {
	uint32_t pid;
	uint32_t level;
	uint64_t stack_id;
	char stack[LEAK_STACK_LEN];
	int64_t first_seen_ns;
	uint32_t n, head; /* ring of the last n points, head = oldest */
	uint32_t silent;  /* windows without a point */
	int64_t t[LEAK_HISTORY_MAX];
	uint64_t bytes[LEAK_HISTORY_MAX];
	bool updated;
};

struct leak_tracker {
	struct leak_opts o;
	struct series *s;
	uint32_t ns;
	struct keymap index; /* (pid, stack_id) -> series */
	struct leak_stats st;
};

static const struct leak_opts defaults = {
	.min_windows = 6,
	.history = 16,
	.min_tau = 0.8,
	.min_growth_bytes = 64ULL << 20,
	.max_series = 4096,
};

struct leak_tracker *leak_tracker__new(const struct leak_opts *opts)
{
	struct leak_tracker *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->o = defaults;
	if (opts) {
		if (opts->min_windows)
			t->o.min_windows = opts->min_windows;
		if (opts->history)
			t->o.history = opts->history;
		if (opts->min_tau > 0)
			t->o.min_tau = opts->min_tau;
		if (opts->min_growth_bytes)
			t->o.min_growth_bytes = opts->min_growth_bytes;
		if (opts->max_series)
			t->o.max_series = opts->max_series;
	}
	if (t->o.history > LEAK_HISTORY_MAX || t->o.min_windows < 3 ||
	    t->o.min_windows > t->o.history || t->o.min_tau > 1) {
		free(t);
		errno = EINVAL;
		return NULL;
	}
	t->s = calloc(t->o.max_series, sizeof(*t->s));
	if (!t->s || keymap__init(&t->index, t->o.max_series)) {
		leak_tracker__free(t);
		errno = ENOMEM;
		return NULL;
	}
	return t;
}

void leak_tracker__free(struct leak_tracker *t)
{
	if (!t)
		return;
	free(t->s);
	keymap__fini(&t->index);
	free(t);
}

static void push(struct leak_tracker *t, struct series *s, int64_t at, uint64_t bytes)
{
	uint32_t h = t->o.history;

	if (s->n < h) {
		s->t[(s->head + s->n) % h] = at;
		s->bytes[(s->head + s->n) % h] = bytes;
		s->n++;
	} else {
		s->t[s->head] = at;
		s->bytes[s->head] = bytes;
		s->head = (s->head + 1) % h;
	}
	if (bytes && !s->first_seen_ns)
		s->first_seen_ns = at;
	s->updated = true;
}

/* The series key's second half: the stack, with the level in the top bit
 * (the levels of one stack are separate series: a caching allocator's
 * segments do not move with its blocks). */
static uint64_t series_key(uint64_t stack_id, uint32_t level)
{
	return stack_id ^ ((uint64_t)(level != 0) << 63);
}

static struct series *series_of(struct leak_tracker *t, const struct diag_alloc_site *a)
{
	int64_t v = keymap__get(&t->index, a->pid, series_key(a->stack_id, a->level));
	struct series *s;

	if (v >= 0)
		return &t->s[v];
	if (t->ns >= t->o.max_series) {
		t->st.series_dropped++;
		return NULL;
	}
	s = &t->s[t->ns];
	memset(s, 0, sizeof(*s));
	s->pid = a->pid;
	s->level = a->level;
	s->stack_id = a->stack_id;
	snprintf(s->stack, sizeof(s->stack), "%s", a->stack ? a->stack : "");
	keymap__put(&t->index, a->pid, series_key(a->stack_id, a->level), t->ns);
	t->ns++;
	return s;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

int leak_tracker__window(struct leak_tracker *t, const struct diag_alloc_site *sites, size_t n,
			 int64_t end_ns)
{
	uint32_t *pids = malloc((n + 1) * sizeof(*pids)), w = 0;

	if (!pids)
		return -ENOMEM;
	t->st.windows++;
	t->st.sites += n;
	for (uint32_t i = 0; i < t->ns; i++)
		t->s[i].updated = false;
	for (size_t i = 0; i < n; i++) {
		struct series *s = series_of(t, &sites[i]);

		pids[i] = sites[i].pid;
		if (s && !s->updated)
			push(t, s, end_ns, sites[i].outstanding_bytes);
	}
	/* Processes that reported: their missing stacks freed everything. */
	qsort(pids, n, sizeof(*pids), cmp_u32);
	for (uint32_t i = 0; i < t->ns; i++) {
		struct series *s = &t->s[i];

		if (s->updated)
			s->silent = 0;
		else if (bsearch(&s->pid, pids, n, sizeof(*pids), cmp_u32))
			push(t, s, end_ns, 0), s->silent = 0;
		else
			s->silent++;
	}
	free(pids);
	/* Forget series silent for a whole history, or long at zero. */
	for (uint32_t i = 0; i < t->ns; i++) {
		struct series *s = &t->s[i];
		bool zero = s->n == t->o.history;

		for (uint32_t k = 0; zero && k < s->n; k++)
			zero = !s->bytes[k];
		if (s->silent >= t->o.history || zero) {
			t->st.series_evicted++;
			continue;
		}
		if (w != i)
			t->s[w] = *s;
		w++;
	}
	if (w != t->ns) {
		t->ns = w;
		keymap__clear(&t->index);
		for (uint32_t i = 0; i < t->ns; i++)
			keymap__put(&t->index, t->s[i].pid,
				    series_key(t->s[i].stack_id, t->s[i].level), i);
	}
	return 0;
}

/* The verdict on one series; true and *out filled when it leaks. */
static bool judge(const struct leak_tracker *t, const struct series *s, int64_t now,
		  struct diag_leak *out)
{
	double x[LEAK_HISTORY_MAX], y[LEAK_HISTORY_MAX], slope, tau, span;
	uint32_t h = t->o.history;

	if (s->n < t->o.min_windows)
		return false;
	for (uint32_t k = 0; k < s->n; k++) {
		uint32_t i = (s->head + k) % h;

		x[k] = ((double)s->t[i] - (double)s->t[s->head]) / 1e9;
		y[k] = (double)s->bytes[i];
	}
	tau = robust_kendall_tau(y, s->n);
	slope = robust_theil_sen(x, y, s->n);
	span = x[s->n - 1];
	if (tau < t->o.min_tau || slope <= 0 || slope * span < (double)t->o.min_growth_bytes)
		return false;
	memset(out, 0, sizeof(*out));
	out->pid = s->pid;
	out->level = s->level;
	out->stack_id = s->stack_id;
	memcpy(out->stack, s->stack, sizeof(out->stack));
	out->outstanding_bytes = (uint64_t)y[s->n - 1];
	out->growth_bytes_per_s = slope;
	out->first_seen_ns = s->first_seen_ns;
	out->age_seconds = s->first_seen_ns ? ((double)now - (double)s->first_seen_ns) / 1e9 : 0;
	out->tau = tau;
	out->windows = s->n;
	return true;
}

static int cmp_growth(const void *pa, const void *pb)
{
	double a = ((const struct diag_leak *)pa)->growth_bytes_per_s;
	double b = ((const struct diag_leak *)pb)->growth_bytes_per_s;

	return (a < b) - (a > b);
}

size_t leak_tracker__list(const struct leak_tracker *t, struct diag_leak *out, size_t max)
{
	struct diag_leak *all = malloc((t->ns + 1) * sizeof(*all));
	int64_t now = INT64_MIN;
	size_t k = 0;

	if (!all)
		return 0;
	for (uint32_t i = 0; i < t->ns; i++) {
		const struct series *s = &t->s[i];

		if (s->n && s->t[(s->head + s->n - 1) % t->o.history] > now)
			now = s->t[(s->head + s->n - 1) % t->o.history];
	}
	for (uint32_t i = 0; i < t->ns; i++)
		if (judge(t, &t->s[i], now, &all[k]))
			k++;
	qsort(all, k, sizeof(*all), cmp_growth);
	memcpy(out, all, (k < max ? k : max) * sizeof(*all));
	free(all);
	return k;
}

void leak_tracker__stats(const struct leak_tracker *t, struct leak_stats *st)
{
	*st = t->st;
	st->series = t->ns;
}
