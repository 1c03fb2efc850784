// SPDX-License-Identifier: Apache-2.0
#include "diagnose/seqtest.h"

#include <errno.h>
#include <math.h>

static bool in_unit(double v)
{
	return v > 0 && v < 1;
}

int seqtest_design(struct seqtest_design *d, uint32_t nranks, const struct seqtest_params *p)
{
	double p0, p1, p1s;

	if (nranks < 2 || !in_unit(p->margin) || !in_unit(p->p1_min) || !in_unit(p->p1_gap) ||
	    !in_unit(p->p1_strong) || !(p->arl0 > 1) || !(p->arl_clear > 1))
		return -EINVAL;
	p0 = 1.0 / nranks + p->margin;
	p1 = fmax(p->p1_min, p0 + p->p1_gap);
	p1s = fmax(p->p1_strong, p1);
	if (p0 >= 1 || p1 >= 1 || p1s >= 1)
		return -EINVAL;
	*d = (struct seqtest_design){
		.p0 = p0,
		.p1 = { p1, p1s },
		.up = { log(p1 / p0), log(p1s / p0) },
		.down = { log((1 - p1) / (1 - p0)), log((1 - p1s) / (1 - p0)) },
		.h = log(2 * p->arl0),
		.h_clear = log(p->arl_clear),
	};
	return 0;
}

uint32_t seqtest_design__min_late(const struct seqtest_design *d)
{
	return (uint32_t)ceil(d->h / fmax(d->up[0], d->up[1]));
}

double seqtest__evidence(const struct seqtest *t, const struct seqtest_design *d, int64_t *since)
{
	int k = t->s[1] > t->s[0];

	if (since)
		*since = t->zero_ns[k];
	return t->s[k] / d->h;
}

bool seqtest__observe(struct seqtest *t, const struct seqtest_design *d, bool late, int64_t at_ns)
{
	bool decided = false;

	t->observed++;
	for (int k = 0; k < SEQTEST_ALT; k++) {
		bool below = t->s[k] < d->h;

		t->s[k] = fmax(0, t->s[k] + (late ? d->up[k] : d->down[k]));
		if (t->s[k] == 0)
			t->zero_ns[k] = at_ns;
		decided |= below && t->s[k] >= d->h;
	}
	t->t = fmax(0, t->t - (late ? d->up[0] : d->down[0]));
	if (decided)
		t->t = 0; /* evidence for recovery starts now */
	return decided;
}

bool seqtest__healthy(const struct seqtest *t, const struct seqtest_design *d)
{
	return t->t >= d->h_clear;
}
