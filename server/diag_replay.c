// SPDX-License-Identifier: Apache-2.0
/*
 * Stragglers of a past range (diag_live.h, diag_live__replay): the stored
 * collectives of each job go through a fresh detector slice by slice, as
 * the live path saw them; every confirmation in the range is an episode,
 * closed by its clearing.  The same decision rule as the live alerts, so
 * a post-mortem and the page at the time agree.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/diag_inputs.h"
#include "server/diag_live.h"

#define SLICE_NS 10000000000ULL /* events fed per step */
#define MAX_SLICE_EVENTS 500000 /* per slice (store bound) */
#define MAX_REPLAY_JOBS 64	/* jobs of one answer */
#define MAX_TR 256		/* transitions per step */

static int on_collective(void *ctx, const struct store_event *e)
{
	struct diag_coll_read *c = ctx;

	if (e->comm_rank < 0 || e->comm_nranks <= 0 || !e->name || !strcmp(e->name, "Send") ||
	    !strcmp(e->name, "Recv"))
		return 0; /* unplaced, or point-to-point: not a collective */
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 4096;
		void *p = realloc(c->ev, cap * sizeof(*c->ev));

		if (!p)
			return -ENOMEM;
		c->ev = p;
		p = realloc(c->call, cap * sizeof(*c->call));
		if (!p)
			return -ENOMEM;
		c->call = p;
		c->cap = cap;
	}
	c->call[c->n] = (struct diag_coll_call){
		.op = diag_strings__add(c->names, e->name),
		.bytes = e->bytes,
		/* stored collectives returned (the live path's rule: exit 1
		 * when the agent had none) */
		.exit_ns = e->start_ns + e->dur_ns ? (int64_t)(e->start_ns + e->dur_ns) : 1,
	};
	c->ev[c->n] = (struct diag_coll_event){
		.comm_hash = e->comm_hash,
		.seq = e->seq,
		.rank = (uint32_t)e->comm_rank,
		.nranks = (uint32_t)e->comm_nranks,
		.entry_ns = (int64_t)e->start_ns,
		.clock_err_ns = diag_clocks__error(c->clocks, e->node),
		.pid = e->pid,
		.node = diag_strings__add(c->names, e->node),
	};
	if (!c->ev[c->n].node || !c->call[c->n].op)
		return -ENOMEM;
	c->n++;
	return 0;
}

static int load_kind(struct diag_coll_read *c, struct store *st, const char *job, uint32_t kind,
		     uint64_t from_ns, uint64_t to_ns, uint32_t limit, int *truncated)
{
	struct store_filter f = { .job = job, .from_ns = from_ns, .to_ns = to_ns };
	int err;

	*c = (struct diag_coll_read){ .clocks = diag_clocks__new(), .names = diag_strings__new() };
	err = c->clocks && c->names ? 0 : -ENOMEM;
	if (!err)
		err = diag_clocks__load(
			c->clocks, st,
			&(struct store_filter){ .from_ns = from_ns, .to_ns = to_ns });
	if (!err)
		err = st->ops->events(st, &f, kind, limit, truncated, on_collective, c);
	return err;
}

int diag_coll_read__load(struct diag_coll_read *c, struct store *st, const char *job,
			 uint64_t from_ns, uint64_t to_ns, uint32_t limit, int *truncated)
{
	return load_kind(c, st, job, STORE_EVENT_COLLECTIVE, from_ns, to_ns, limit, truncated);
}

int diag_coll_read__load_last(struct diag_coll_read *c, struct store *st, const char *job,
			      uint64_t from_ns, uint64_t to_ns, uint32_t limit, int *truncated)
{
	return load_kind(c, st, job, STORE_EVENT_LAST_COLLECTIVE, from_ns, to_ns, limit, truncated);
}

void diag_coll_read__fini(struct diag_coll_read *c)
{
	free(c->ev);
	free(c->call);
	diag_clocks__free(c->clocks);
	diag_strings__free(c->names);
	*c = (struct diag_coll_read){ 0 };
}

struct episodes {
	struct diag_episode *v;
	size_t n, max;
};

/* Opens an episode per confirmation, closes the open one of its rank at
 * a clearing. */
static void take(struct episodes *ep, const struct straggler_transition *tr, int n)
{
	for (int i = 0; i < n; i++) {
		const struct straggler_rank *r = &tr[i].r;

		if (tr[i].change == STRAGGLER_CONFIRM) {
			if (ep->n < ep->max)
				ep->v[ep->n] = (struct diag_episode){ .r = *r };
			ep->n++;
			continue;
		}
		for (size_t k = ep->n < ep->max ? ep->n : ep->max; k-- > 0;) {
			struct diag_episode *e = &ep->v[k];

			if (!e->until_ns && e->r.communicator == r->communicator &&
			    e->r.rank == r->rank && !strcmp(e->r.job, r->job)) {
				e->until_ns = tr[i].at_ns;
				e->missing = tr[i].missing;
				break;
			}
		}
	}
}

static int replay_job(struct store *st, const char *job, uint64_t from_ns, uint64_t to_ns,
		      const struct straggler_opts *o, struct episodes *ep, int *truncated)
{
	struct straggler_detector *d = straggler_detector__new(job, o);
	struct straggler_transition *tr = malloc(MAX_TR * sizeof(*tr));
	int err = d && tr ? 0 : -ENOMEM;

	for (uint64_t t = from_ns; !err && t < to_ns; t += SLICE_NS) {
		uint64_t end = to_ns - t > SLICE_NS ? t + SLICE_NS : to_ns;
		struct diag_coll_read c;
		int trunc = 0, k;

		err = diag_coll_read__load(&c, st, job, t, end, MAX_SLICE_EVENTS, &trunc);
		*truncated |= trunc;
		if (!err) {
			k = straggler_detector__add(d, c.ev, c.n, tr, MAX_TR);
			if (k < 0)
				err = k;
			else
				take(ep, tr, k);
		}
		diag_coll_read__fini(&c);
	}
	if (!err) {
		int k = straggler_detector__flush(d, tr, MAX_TR);

		if (k < 0)
			err = k;
		else
			take(ep, tr, k);
	}
	free(tr);
	straggler_detector__free(d);
	return err;
}

struct job_names {
	char v[MAX_REPLAY_JOBS][DIAG_NAME_LEN];
	size_t n;
	uint64_t from_ns, to_ns;
};

static int on_job(void *ctx, const struct store_job *j)
{
	struct job_names *jn = ctx;

	if (j->last_ns < jn->from_ns || (jn->to_ns && j->first_ns >= jn->to_ns) ||
	    jn->n == MAX_REPLAY_JOBS)
		return 0;
	snprintf(jn->v[jn->n++], DIAG_NAME_LEN, "%s", j->job);
	return 0;
}

int diag_live__replay(struct store *st, const char *job, uint64_t from_ns, uint64_t to_ns,
		      const struct straggler_opts *o, struct diag_episode *out, size_t max,
		      int *truncated)
{
	struct episodes ep = { .v = out, .max = max };
	struct job_names *jn = calloc(1, sizeof(*jn));
	int err = 0;

	*truncated = 0;
	if (!jn)
		return -ENOMEM;
	jn->from_ns = from_ns;
	jn->to_ns = to_ns;
	if (job)
		snprintf(jn->v[jn->n++], DIAG_NAME_LEN, "%s", job);
	else
		err = st->ops->jobs(st, &(struct store_filter){ 0 }, on_job, jn);
	for (size_t i = 0; !err && i < jn->n; i++)
		err = replay_job(st, jn->v[i], from_ns, to_ns, o, &ep, truncated);
	free(jn);
	return err ? err : (int)(ep.n > INT32_MAX ? INT32_MAX : ep.n);
}
