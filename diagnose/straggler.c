// SPDX-License-Identifier: Apache-2.0
#include "diagnose/straggler.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/collective.h"
#include "diagnose/keymap.h"
#include "diagnose/robust.h"
#include "diagnose/seqtest.h"

#define PERIOD_RING 32		       /* intervals the period is the median of */
#define MAX_NODES 4096		       /* node names kept per job */
#define FORGET_NS (600 * 1000000000LL) /* OK states / comms silent this long go */

/* One arrival waiting for the rest of its collective. */
struct pend {
	uint64_t comm, inst, seq;
	int64_t entry_ns;
	uint64_t err_ns;
	uint32_t rank, nranks, pid, node;
};

struct comm_state {
	uint64_t comm, inst;
	double ring[PERIOD_RING]; /* ns per sequence step */
	uint32_t nring, pos;
	uint64_t last_seq;
	int64_t last_median, newest_ns;
	bool has_last;
	double period_ns; /* median of ring once nring >= min_intervals */
	uint32_t design_nranks;
	struct seqtest_design design;
};

struct rank_state {
	struct straggler_rank r;
	struct seqtest t;
	uint32_t comm; /* index into comms */
};

struct straggler_detector {
	struct straggler_opts o;
	struct seqtest_params tp; /* from o */
	char job[DIAG_NAME_LEN];
	struct pend *pend;
	size_t npend, pend_cap;
	int64_t newest_ns; /* latest entry time handed in */
	struct rank_state *states;
	uint32_t nstates;
	struct keymap index; /* (comm, rank) -> state */
	struct comm_state *comms;
	uint32_t ncomms;
	struct keymap comm_index; /* (comm, instance) -> comm */
	char (*nodes)[DIAG_NAME_LEN];
	uint32_t nnodes, nodes_cap;
	/*
	 * judge's working arrays, grown to the largest collective seen.  One
	 * collective can hold max_pending events (262144 by default, from
	 * one agent batch): as stack arrays they took 14 MB of a 8 MB HTTP
	 * worker's stack and a crafted batch crashed the server.
	 */
	struct {
		struct coll_arrival *a;
		struct coll_lag *lag;
		const struct pend **who;
		int64_t *tmp;
		size_t cap;
	} judge;
	struct straggler_stats st;
};

static const struct straggler_opts defaults = {
	.min_lag_ratio = 0.025,
	.min_lag_ns = 2000000,
	.margin = 0.05,
	.p1_min = 0.5,
	.p1_gap = 0.2,
	.p1_strong = 0.9,
	.arl0 = 1e12,
	.arl_clear = 1e6,
	.hold_ns = 60000000000ULL,
	.pending_ns = 30000000000ULL,
	.missing_ns = 60000000000ULL,
	.min_intervals = 8,
	.min_participation = 0.5,
	.max_skew_ns = 30000000000ULL,
	.ewma_alpha = 0.05,
	.max_tracked = 4096,
	.max_comms = 1024,
	.max_pending = 262144,
};

/* Options the caller left 0 take the default. */
static void opts_fill(struct straggler_opts *o, const struct straggler_opts *in)
{
	*o = defaults;
	if (!in)
		return;
#define TAKE(f)    \
	if (in->f) \
	o->f = in->f
	TAKE(min_lag_ratio);
	TAKE(min_lag_ns);
	TAKE(margin);
	TAKE(p1_min);
	TAKE(p1_gap);
	TAKE(p1_strong);
	TAKE(arl0);
	TAKE(arl_clear);
	TAKE(hold_ns);
	TAKE(pending_ns);
	TAKE(missing_ns);
	TAKE(min_intervals);
	TAKE(min_participation);
	TAKE(max_skew_ns);
	TAKE(ewma_alpha);
	TAKE(max_tracked);
	TAKE(max_comms);
	TAKE(max_pending);
#undef TAKE
}

struct straggler_detector *straggler_detector__new(const char *job,
						   const struct straggler_opts *opts)
{
	struct straggler_detector *d = calloc(1, sizeof(*d));
	struct seqtest_design probe;

	if (!d)
		return NULL;
	opts_fill(&d->o, opts);
	d->tp = (struct seqtest_params){ .margin = d->o.margin,
					 .p1_min = d->o.p1_min,
					 .p1_gap = d->o.p1_gap,
					 .p1_strong = d->o.p1_strong,
					 .arl0 = d->o.arl0,
					 .arl_clear = d->o.arl_clear };
	if (d->o.ewma_alpha > 1 || d->o.min_participation > 1 || d->o.max_tracked > (1u << 24) ||
	    d->o.max_comms > (1u << 20) || d->o.max_pending > (1u << 26) ||
	    d->o.min_intervals > PERIOD_RING || seqtest_design(&probe, 2, &d->tp)) {
		free(d);
		errno = EINVAL;
		return NULL;
	}
	snprintf(d->job, sizeof(d->job), "%s", job ? job : "");
	d->states = calloc(d->o.max_tracked, sizeof(*d->states));
	d->comms = calloc(d->o.max_comms, sizeof(*d->comms));
	if (!d->states || !d->comms || keymap__init(&d->index, d->o.max_tracked) ||
	    keymap__init(&d->comm_index, d->o.max_comms)) {
		straggler_detector__free(d);
		errno = ENOMEM;
		return NULL;
	}
	return d;
}

void straggler_detector__free(struct straggler_detector *d)
{
	if (!d)
		return;
	free(d->states);
	free(d->comms);
	free(d->pend);
	free(d->nodes);
	free(d->judge.a);
	free(d->judge.lag);
	free(d->judge.who);
	free(d->judge.tmp);
	keymap__fini(&d->index);
	keymap__fini(&d->comm_index);
	free(d);
}

/* ---- bounded tables ------------------------------------------------------------ */

static uint32_t node_id(struct straggler_detector *d, const char *node)
{
	if (!node)
		node = "";
	for (uint32_t i = 0; i < d->nnodes; i++)
		if (!strncmp(d->nodes[i], node, DIAG_NAME_LEN - 1))
			return i;
	if (d->nnodes == d->nodes_cap) {
		uint32_t cap = d->nodes_cap ? d->nodes_cap * 2 : 16;
		void *p = cap <= MAX_NODES ? realloc(d->nodes, cap * sizeof(*d->nodes)) : NULL;

		if (!p)
			return UINT32_MAX; /* reported without a node name */
		d->nodes = p;
		d->nodes_cap = cap;
	}
	snprintf(d->nodes[d->nnodes], DIAG_NAME_LEN, "%s", node);
	return d->nnodes++;
}

/* Forgets OK states and idle communicators silent for FORGET_NS. */
static void forget_idle(struct straggler_detector *d)
{
	uint32_t w = 0, *remap = malloc((d->ncomms + 1) * sizeof(*remap));

	if (!remap)
		return;
	for (uint32_t c = 0; c < d->ncomms; c++) {
		remap[c] = UINT32_MAX;
		if (d->comms[c].newest_ns + FORGET_NS < d->newest_ns)
			continue;
		remap[c] = w;
		d->comms[w++] = d->comms[c];
	}
	d->ncomms = w;
	keymap__clear(&d->comm_index);
	for (uint32_t c = 0; c < d->ncomms; c++)
		keymap__put(&d->comm_index, d->comms[c].comm, d->comms[c].inst, c);
	w = 0;
	for (uint32_t s = 0; s < d->nstates; s++) {
		struct rank_state *rs = &d->states[s];

		if (remap[rs->comm] == UINT32_MAX ||
		    (rs->r.state == STRAGGLER_OK && rs->r.last_seen_ns + FORGET_NS < d->newest_ns))
			continue;
		rs->comm = remap[rs->comm];
		d->states[w++] = *rs;
	}
	d->nstates = w;
	keymap__clear(&d->index);
	for (uint32_t s = 0; s < d->nstates; s++)
		keymap__put(&d->index, d->states[s].r.communicator, d->states[s].r.rank, s);
	free(remap);
}

static int64_t comm_of(struct straggler_detector *d, uint64_t comm, uint64_t inst)
{
	int64_t v = keymap__get(&d->comm_index, comm, inst);

	if (v >= 0)
		return v;
	if (d->ncomms >= d->o.max_comms)
		forget_idle(d);
	if (d->ncomms >= d->o.max_comms) {
		d->st.comms_dropped++;
		return -1;
	}
	memset(&d->comms[d->ncomms], 0, sizeof(d->comms[0]));
	d->comms[d->ncomms].comm = comm;
	d->comms[d->ncomms].inst = inst;
	keymap__put(&d->comm_index, comm, inst, d->ncomms);
	return d->ncomms++;
}

static int64_t state_of(struct straggler_detector *d, uint64_t comm, uint32_t rank)
{
	int64_t v = keymap__get(&d->index, comm, rank);
	struct rank_state *s;

	if (v >= 0)
		return v;
	if (d->nstates >= d->o.max_tracked)
		forget_idle(d);
	if (d->nstates >= d->o.max_tracked) {
		d->st.tracked_dropped++;
		return -1;
	}
	s = &d->states[d->nstates];
	memset(s, 0, sizeof(*s));
	snprintf(s->r.job, sizeof(s->r.job), "%s", d->job);
	s->r.communicator = comm;
	s->r.rank = rank;
	keymap__put(&d->index, comm, rank, d->nstates);
	return d->nstates++;
}

/* ---- transitions ---------------------------------------------------------------- */

struct outbuf {
	struct straggler_transition *v;
	size_t n, max;
};

static void emit(struct straggler_detector *d, struct outbuf *ob, uint32_t change, bool missing,
		 int64_t at, const struct rank_state *s)
{
	if (ob->n >= ob->max) {
		d->st.transitions_dropped++;
		return;
	}
	ob->v[ob->n++] = (struct straggler_transition){
		.change = change, .missing = missing, .at_ns = at, .r = s->r
	};
}

static void clear(struct straggler_detector *d, struct rank_state *s, bool missing, int64_t at,
		  struct outbuf *ob)
{
	s->r.state = STRAGGLER_OK;
	emit(d, ob, STRAGGLER_CLEAR, missing, at, s);
	s->t = (struct seqtest){ .zero_ns = { at, at } };
	s->r.evidence = 0;
	s->r.since_ns = s->r.decided_ns = 0;
}

/* ---- one collective --------------------------------------------------------------- */

/* How long after `from` `to` is (0 if not after it).  Event times come from
 * agents, any int64: a signed difference could overflow. */
static uint64_t elapsed_ns(int64_t to, int64_t from)
{
	return to > from ? (uint64_t)to - (uint64_t)from : 0;
}

/* Period: the median time per sequence step between consecutive judged
 * collectives; a collective older than the last one judged (another
 * node's late batch) adds nothing, a sequence that restarts starts over. */
static void update_period(struct straggler_detector *d, struct comm_state *c, uint64_t seq,
			  int64_t median)
{
	if (c->has_last && seq > c->last_seq && median > c->last_median) {
		double tmp[PERIOD_RING];

		c->ring[c->pos] =
			((double)median - (double)c->last_median) / (double)(seq - c->last_seq);
		c->pos = (c->pos + 1) % PERIOD_RING;
		if (c->nring < PERIOD_RING)
			c->nring++;
		memcpy(tmp, c->ring, c->nring * sizeof(*tmp));
		if (c->nring >= d->o.min_intervals)
			c->period_ns = robust_median(tmp, c->nring);
	}
	if (!c->has_last || seq > c->last_seq || median > c->last_median) {
		c->last_seq = seq;
		c->last_median = median;
		c->has_last = true;
	}
	if (median > c->newest_ns)
		c->newest_ns = median;
}

static void observe(struct straggler_detector *d, struct rank_state *s, const struct comm_state *c,
		    const struct pend *p, const struct coll_lag *l, struct outbuf *ob)
{
	const struct straggler_opts *o = &d->o;
	struct straggler_rank *r = &s->r;
	double a = r->collectives ? o->ewma_alpha : 1, thr;
	bool late;

	if (r->pid && r->pid != p->pid) {
		/* A new process took over this rank (restart): the old one is
		 * gone, and its evidence is not the new one's. */
		if (r->state == STRAGGLER_CONFIRMED)
			clear(d, s, true, p->entry_ns, ob);
		r->collectives = 0;
		a = 1;
	}
	if (!r->collectives)
		s->t = (struct seqtest){ .zero_ns = { p->entry_ns, p->entry_ns } };
	r->pid = p->pid;
	r->nranks = p->nranks;
	if (p->node < d->nnodes)
		snprintf(r->node, sizeof(r->node), "%s", d->nodes[p->node]);
	r->last_seen_ns = p->entry_ns;
	r->period_seconds = c->period_ns / 1e9;
	r->lag_seconds = a * l->lag_ns / 1e9 + (1 - a) * r->lag_seconds;
	r->score = a * (l->lag_ns / c->period_ns) + (1 - a) * r->score;
	r->last_fraction = a * l->last + (1 - a) * r->last_fraction;
	r->window_score = r->lag_seconds / r->period_seconds;
	r->collectives++;
	d->st.events_used++;

	thr = fmax((double)o->min_lag_ns, o->min_lag_ratio * c->period_ns);
	late = l->last && l->lag_ns >= thr;
	bool decided = seqtest__observe(&s->t, &c->design, late, p->entry_ns);
	int64_t since;

	r->evidence = seqtest__evidence(&s->t, &c->design, &since);
	if (decided && r->state != STRAGGLER_CONFIRMED) {
		r->state = STRAGGLER_CONFIRMED;
		r->since_ns = since;
		r->decided_ns = p->entry_ns;
		emit(d, ob, STRAGGLER_CONFIRM, false, p->entry_ns, s);
	}
	if (r->state == STRAGGLER_CONFIRMED) {
		if (seqtest__healthy(&s->t, &c->design) &&
		    elapsed_ns(p->entry_ns, r->decided_ns) >= o->hold_ns)
			clear(d, s, false, p->entry_ns, ob);
	} else {
		r->state = r->evidence >= 0.5 ? STRAGGLER_SUSPECT : STRAGGLER_OK;
	}
}

/* Room for n arrivals in d->judge; 0 or -ENOMEM. */
static int judge_reserve(struct straggler_detector *d, size_t n)
{
	size_t cap = d->judge.cap;
	void *p;

	if (n <= cap)
		return 0;
	while (cap < n)
		cap = cap ? 2 * cap : 64;
#define GROW(f)                                                             \
	do {                                                                \
		p = realloc((void *)d->judge.f, cap * sizeof(*d->judge.f)); \
		if (!p)                                                     \
			return -ENOMEM;                                     \
		d->judge.f = p;                                             \
	} while (0)
	GROW(a);
	GROW(lag);
	GROW(who);
	GROW(tmp);
#undef GROW
	d->judge.cap = cap;
	return 0;
}

/*
 * Gives judge's arrays back once they grew past what real communicators
 * need (a job's detector lives as long as the job: one crafted batch must
 * not keep megabytes per job).
 */
#define JUDGE_KEEP 16384
static void judge_trim(struct straggler_detector *d)
{
	if (d->judge.cap <= JUDGE_KEEP)
		return;
	free(d->judge.a);
	free(d->judge.lag);
	free((void *)d->judge.who);
	free(d->judge.tmp);
	memset(&d->judge, 0, sizeof(d->judge));
}

/* Judges the collective g[0..n) (sorted by rank, then entry time). */
static void judge(struct straggler_detector *d, const struct pend *g, size_t n, bool complete,
		  struct outbuf *ob)
{
	struct coll_arrival *a;
	struct coll_lag *lag;
	const struct pend **who;
	uint32_t present = 0, nranks = 0;
	int64_t median, ci;
	struct comm_state *c;

	if (judge_reserve(d, n)) {
		d->st.collectives_nomem++;
		return;
	}
	a = d->judge.a;
	lag = d->judge.lag;
	who = d->judge.who;
	for (size_t i = 0; i < n; i++) {
		if (i && g[i].rank == g[i - 1].rank) {
			d->st.events_duplicate++; /* never merged: the first one counts */
			continue;
		}
		who[present] = &g[i];
		a[present++] = (struct coll_arrival){ .rank = g[i].rank,
						      .entry_ns = g[i].entry_ns,
						      .clock_err_ns = g[i].err_ns };
		if (g[i].nranks > nranks)
			nranks = g[i].nranks;
	}
	if (present < 2 || present < d->o.min_participation * nranks) {
		d->st.collectives_partial++;
		return;
	}
	ci = comm_of(d, g[0].comm, g[0].inst);
	if (ci < 0)
		return;
	c = &d->comms[ci];
	median = collective_judge(a, present, d->o.max_skew_ns, lag, d->judge.tmp);
	d->st.collectives++;
	if (!complete)
		d->st.collectives_timeout++;
	update_period(d, c, g[0].seq, median);
	if (c->period_ns <= 0) {
		d->st.collectives_warmup++;
		return;
	}
	if (c->design_nranks != nranks) {
		if (seqtest_design(&c->design, nranks, &d->tp))
			return; /* nranks < 2: cannot happen with present >= 2 */
		c->design_nranks = nranks;
	}
	for (uint32_t i = 0; i < present; i++) {
		int64_t st;

		if (lag[i].misaligned) {
			d->st.events_misaligned++;
			continue;
		}
		st = state_of(d, who[i]->comm, who[i]->rank);
		if (st < 0)
			continue;
		/* forget_idle in state_of may have moved the communicator */
		ci = keymap__get(&d->comm_index, who[i]->comm, who[i]->inst);
		if (ci < 0)
			continue;
		d->states[st].comm = (uint32_t)ci;
		observe(d, &d->states[st], &d->comms[ci], who[i], &lag[i], ob);
	}
}

/* ---- pending collectives ----------------------------------------------------------- */

static int cmp_u64(uint64_t a, uint64_t b)
{
	return (a > b) - (a < b);
}

static int cmp_pend(const void *pa, const void *pb)
{
	const struct pend *a = pa, *b = pb;
	int c;

	if ((c = cmp_u64(a->comm, b->comm)) || (c = cmp_u64(a->inst, b->inst)) ||
	    (c = cmp_u64(a->seq, b->seq)) || (c = cmp_u64(a->rank, b->rank)))
		return c;
	return (a->entry_ns > b->entry_ns) - (a->entry_ns < b->entry_ns);
}

static bool same_coll(const struct pend *a, const struct pend *b)
{
	return a->comm == b->comm && a->inst == b->inst && a->seq == b->seq;
}

/* Judges every group that is complete (all = every group), keeps the rest. */
static void process(struct straggler_detector *d, bool all, struct outbuf *ob)
{
	size_t w = 0;

	if (!d->npend)
		return;
	qsort(d->pend, d->npend, sizeof(*d->pend), cmp_pend);
	for (size_t i = 0; i < d->npend;) {
		size_t j = i + 1, distinct = 1;
		uint32_t nranks = d->pend[i].nranks;
		int64_t newest = d->pend[i].entry_ns;

		for (; j < d->npend && same_coll(&d->pend[i], &d->pend[j]); j++) {
			distinct += d->pend[j].rank != d->pend[j - 1].rank;
			if (d->pend[j].nranks > nranks)
				nranks = d->pend[j].nranks;
			if (d->pend[j].entry_ns > newest)
				newest = d->pend[j].entry_ns;
		}
		bool complete = distinct >= nranks;
		bool timeout = elapsed_ns(d->newest_ns, newest) > d->o.pending_ns;

		if (complete || timeout || all) {
			judge(d, &d->pend[i], j - i, complete, ob);
		} else {
			memmove(&d->pend[w], &d->pend[i], (j - i) * sizeof(*d->pend));
			w += j - i;
		}
		i = j;
	}
	d->npend = w;
	judge_trim(d);
}

/* A confirmed rank its communicator went on without for missing_ns: its
 * process or its agent is gone. */
static void check_missing(struct straggler_detector *d, struct outbuf *ob)
{
	for (uint32_t s = 0; s < d->nstates; s++) {
		struct rank_state *rs = &d->states[s];
		const struct comm_state *c = &d->comms[rs->comm];

		if (rs->r.state == STRAGGLER_CONFIRMED &&
		    elapsed_ns(c->newest_ns, rs->r.last_seen_ns) > d->o.missing_ns)
			clear(d, rs, true, c->newest_ns, ob);
	}
}

/* Room for one more arrival, up to max_pending.  0 or -ENOMEM. */
static int pend_grow(struct straggler_detector *d)
{
	size_t cap = d->pend_cap ? d->pend_cap * 2 : 1024;
	void *p;

	if (cap > d->o.max_pending)
		cap = d->o.max_pending;
	if (cap <= d->pend_cap)
		return -ENOMEM;
	p = realloc(d->pend, cap * sizeof(*d->pend));
	if (!p)
		return -ENOMEM;
	d->pend = p;
	d->pend_cap = cap;
	return 0;
}

int straggler_detector__add(struct straggler_detector *d, const struct diag_coll_event *ev,
			    size_t n, struct straggler_transition *out, size_t max_out)
{
	struct outbuf ob = { .v = out, .max = max_out };

	d->st.events += n;
	for (size_t i = 0; i < n; i++) {
		const struct diag_coll_event *e = &ev[i];

		if (e->nranks < 2 || e->rank >= e->nranks) {
			d->st.events_bad++;
			continue;
		}
		if (d->npend == d->pend_cap && pend_grow(d)) {
			/* Full: judge what is there with the ranks present. */
			d->st.pending_dropped += d->npend;
			process(d, true, &ob);
			if (d->npend == d->pend_cap) { /* no memory at all */
				d->st.pending_dropped++;
				continue;
			}
		}
		d->pend[d->npend++] = (struct pend){ .comm = e->comm_hash,
						     .inst = e->comm_instance,
						     .seq = e->seq,
						     .entry_ns = e->entry_ns,
						     .err_ns = e->clock_err_ns,
						     .rank = e->rank,
						     .nranks = e->nranks,
						     .pid = e->pid,
						     .node = node_id(d, e->node) };
		if (e->entry_ns > d->newest_ns)
			d->newest_ns = e->entry_ns;
	}
	process(d, false, &ob);
	check_missing(d, &ob);
	return (int)ob.n;
}

int straggler_detector__flush(struct straggler_detector *d, struct straggler_transition *out,
			      size_t max_out)
{
	struct outbuf ob = { .v = out, .max = max_out };

	process(d, true, &ob);
	return (int)ob.n;
}

int straggler_detector__expire(struct straggler_detector *d, struct straggler_transition *out,
			       size_t max_out)
{
	struct outbuf ob = { .v = out, .max = max_out };

	process(d, true, &ob);
	for (uint32_t s = 0; s < d->nstates; s++)
		if (d->states[s].r.state == STRAGGLER_CONFIRMED)
			clear(d, &d->states[s], true, d->newest_ns, &ob);
	return (int)ob.n;
}

static int cmp_suspicion(const void *pa, const void *pb)
{
	const struct straggler_rank *a = pa, *b = pb;

	if (a->state != b->state)
		return a->state > b->state ? -1 : 1;
	return (a->evidence < b->evidence) - (a->evidence > b->evidence);
}

size_t straggler_detector__list(const struct straggler_detector *d, bool confirmed_only,
				struct straggler_rank *out, size_t max)
{
	struct straggler_rank *all = malloc((d->nstates + 1) * sizeof(*all));
	size_t total = 0;

	for (uint32_t s = 0; s < d->nstates; s++) {
		const struct straggler_rank *r = &d->states[s].r;

		if (confirmed_only && r->state != STRAGGLER_CONFIRMED)
			continue;
		if (all)
			all[total] = *r;
		else if (total < max)
			out[total] = *r; /* no memory: unsorted, still correct */
		total++;
	}
	if (all) {
		/* The most suspicious first, whatever max is. */
		qsort(all, total, sizeof(*all), cmp_suspicion);
		memcpy(out, all, (total < max ? total : max) * sizeof(*all));
		free(all);
	}
	return total;
}

void straggler_detector__stats(const struct straggler_detector *d, struct straggler_stats *st)
{
	*st = d->st;
	st->tracked = d->nstates;
	st->pending = d->npend;
}
