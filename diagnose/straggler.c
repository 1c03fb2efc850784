// SPDX-License-Identifier: Apache-2.0
#include "diagnose/straggler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/keymap.h"
#include "diagnose/robust.h"

/* Windows a rank may stay silent in the OK state before its slot is reused. */
#define EVICT_MISSING_WINDOWS 64

struct rank_state {
	struct straggler_rank r;
	uint32_t hot_streak, cool_streak;
	int64_t streak_start_ns;
	bool seen; /* this window */
};

struct straggler_detector {
	struct straggler_opts o;
	char job[DIAG_NAME_LEN];
	struct rank_state *states; /* [0, nstates) in use */
	uint32_t nstates;
	struct keymap index; /* (comm, rank) -> state */
	struct straggler_stats st;
};

/* One event's place in the window: which collective it belongs to. */
struct slot {
	const struct diag_coll_event *e;
	uint64_t epoch; /* sequence resets seen before it on its rank */
};

/* One usable arrival: the state it counts for and its lag. */
struct arrival {
	uint32_t state;
	uint32_t last; /* 1: clearly the last to arrive */
	double lag_ns; /* beyond the clock bound, >= 0 */
};

/* One judged collective: for the communicator's period. */
struct coll_point {
	uint64_t comm, instance, epoch, seq;
	int64_t median_ns;
};

static const struct straggler_opts defaults = {
	.min_lag_ratio = 0.05,
	.min_lag_ns = 2000000,
	.min_last_fraction = 0.5,
	.clear_ratio = 0.5,
	.confirm_windows = 3,
	.clear_windows = 3,
	.missing_clear = 10,
	.min_collectives = 5,
	.min_participation = 0.5,
	.max_skew_ns = 30000000000ULL,
	.ewma_alpha = 0.3,
	.max_tracked = 4096,
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
	TAKE(min_last_fraction);
	TAKE(clear_ratio);
	TAKE(confirm_windows);
	TAKE(clear_windows);
	TAKE(missing_clear);
	TAKE(min_collectives);
	TAKE(min_participation);
	TAKE(max_skew_ns);
	TAKE(ewma_alpha);
	TAKE(max_tracked);
#undef TAKE
}

struct straggler_detector *straggler_detector__new(const char *job,
						   const struct straggler_opts *opts)
{
	struct straggler_detector *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	opts_fill(&d->o, opts);
	if (d->o.ewma_alpha > 1 || d->o.min_participation > 1 || d->o.clear_ratio > 1 ||
	    d->o.max_tracked > (1u << 24)) {
		free(d);
		errno = EINVAL;
		return NULL;
	}
	snprintf(d->job, sizeof(d->job), "%s", job ? job : "");
	d->states = calloc(d->o.max_tracked, sizeof(*d->states));
	if (!d->states || keymap__init(&d->index, d->o.max_tracked)) {
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
	keymap__fini(&d->index);
	free(d);
}

/* The state of (comm, rank), created when absent; -1 when the table is full. */
static int64_t state_of(struct straggler_detector *d, uint64_t comm, uint32_t rank)
{
	int64_t v = keymap__get(&d->index, comm, rank);
	struct rank_state *s;

	if (v >= 0)
		return v;
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

static void index_rebuild(struct straggler_detector *d)
{
	keymap__clear(&d->index);
	for (uint32_t s = 0; s < d->nstates; s++)
		keymap__put(&d->index, d->states[s].r.communicator, d->states[s].r.rank, s);
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return (a > b) - (a < b);
}

/* Per rank, in time order: to number sequence resets. */
static int cmp_rank_time(const void *pa, const void *pb)
{
	const struct diag_coll_event *a = ((const struct slot *)pa)->e;
	const struct diag_coll_event *b = ((const struct slot *)pb)->e;
	int c;

	if ((c = cmp_u64(a->comm_hash, b->comm_hash)) ||
	    (c = cmp_u64(a->comm_instance, b->comm_instance)) || (c = cmp_u64(a->rank, b->rank)))
		return c;
	return (a->entry_ns > b->entry_ns) - (a->entry_ns < b->entry_ns);
}

/* Per collective: the same (comm, instance, epoch, seq) side by side. */
static int cmp_collective(const void *pa, const void *pb)
{
	const struct slot *x = pa, *y = pb;
	const struct diag_coll_event *a = x->e, *b = y->e;
	int c;

	if ((c = cmp_u64(a->comm_hash, b->comm_hash)) ||
	    (c = cmp_u64(a->comm_instance, b->comm_instance)) ||
	    (c = cmp_u64(x->epoch, y->epoch)) || (c = cmp_u64(a->seq, b->seq)) ||
	    (c = cmp_u64(a->rank, b->rank)))
		return c;
	return (a->entry_ns > b->entry_ns) - (a->entry_ns < b->entry_ns);
}

static int cmp_arrival(const void *pa, const void *pb)
{
	return cmp_u64(((const struct arrival *)pa)->state, ((const struct arrival *)pb)->state);
}

static bool same_collective(const struct slot *a, const struct slot *b)
{
	return a->e->comm_hash == b->e->comm_hash && a->e->comm_instance == b->e->comm_instance &&
	       a->epoch == b->epoch && a->e->seq == b->e->seq;
}

/*
 * A rank whose sequence number goes backwards restarted its communicator
 * without a new instance number: later calls are a new epoch, so seq 5
 * before and after the restart are never taken for the same collective.
 */
static void number_epochs(struct straggler_detector *d, struct slot *sl, size_t n)
{
	qsort(sl, n, sizeof(*sl), cmp_rank_time);
	for (size_t i = 1; i < n; i++) {
		const struct diag_coll_event *p = sl[i - 1].e, *e = sl[i].e;

		if (p->comm_hash != e->comm_hash || p->comm_instance != e->comm_instance ||
		    p->rank != e->rank)
			continue;
		sl[i].epoch = sl[i - 1].epoch;
		if (e->seq < p->seq) {
			sl[i].epoch++;
			d->st.seq_resets++;
		}
	}
}

/*
 * Judges one collective sl[0..n) (sorted by rank): appends the lag of each
 * usable arrival to arr and the collective's median entry time to pts.
 * tmp holds n values.
 */
static void judge_collective(struct straggler_detector *d, const struct slot *sl, size_t n,
			     struct arrival *arr, size_t *narr, struct coll_point *pts,
			     size_t *npts, int64_t *tmp)
{
	uint32_t nranks = 0, present = 0;
	int64_t median, err_med, t1 = INT64_MIN, t2 = INT64_MIN;
	const struct diag_coll_event *latest = NULL;
	size_t first = *narr;

	/* Unique ranks, compacted in place of tmp's index space. */
	const struct slot *uniq[n];
	for (size_t i = 0; i < n; i++) {
		if (i && sl[i].e->rank == sl[i - 1].e->rank) {
			d->st.events_duplicate++;
			continue;
		}
		uniq[present++] = &sl[i];
		if (sl[i].e->nranks > nranks)
			nranks = sl[i].e->nranks;
	}
	if (present < 2 || present < d->o.min_participation * nranks) {
		d->st.collectives_partial++;
		return;
	}
	for (uint32_t i = 0; i < present; i++)
		tmp[i] = uniq[i]->e->entry_ns;
	median = robust_median_i64(tmp, present);
	for (uint32_t i = 0; i < present; i++)
		tmp[i] = (int64_t)(uniq[i]->e->clock_err_ns & INT64_MAX);
	err_med = robust_median_i64(tmp, present);
	d->st.collectives++;
	pts[(*npts)++] = (struct coll_point){ .comm = sl[0].e->comm_hash,
					      .instance = sl[0].e->comm_instance,
					      .epoch = sl[0].epoch,
					      .seq = sl[0].e->seq,
					      .median_ns = median };

	for (uint32_t i = 0; i < present; i++) {
		const struct diag_coll_event *e = uniq[i]->e;
		int64_t lag;
		double bound = (double)(e->clock_err_ns & INT64_MAX) + (double)err_med;

		if (e->entry_ns > t1) {
			t2 = t1;
			t1 = e->entry_ns;
			latest = e;
		} else if (e->entry_ns > t2) {
			t2 = e->entry_ns;
		}
		/* Hostile timestamps: a difference that overflows is misaligned. */
		if (__builtin_sub_overflow(e->entry_ns, median, &lag) || lag == INT64_MIN ||
		    (uint64_t)(lag < 0 ? -lag : lag) > d->o.max_skew_ns) {
			d->st.events_misaligned++;
			continue;
		}
		int64_t st = state_of(d, e->comm_hash, e->rank);
		if (st < 0)
			continue;
		struct rank_state *s = &d->states[st];
		if (s->r.pid && s->r.pid != e->pid) {
			/* A new process took over this rank (restart): the
			 * old one's history is not its own. */
			struct straggler_rank keep = s->r;

			memset(s, 0, sizeof(*s));
			memcpy(s->r.job, keep.job, sizeof(s->r.job));
			s->r.communicator = keep.communicator;
			s->r.rank = keep.rank;
		}
		s->r.pid = e->pid;
		if (e->node)
			snprintf(s->r.node, sizeof(s->r.node), "%s", e->node);
		s->seen = true;
		arr[(*narr)++] = (struct arrival){
			.state = (uint32_t)st,
			/* Only the part of the lag clocks cannot explain. */
			.lag_ns = (double)lag > bound ? (double)lag - bound : 0,
		};
		d->st.events_used++;
	}
	/* Clearly last: later than the runner-up by more than both clocks'
	 * error bounds. */
	if (!latest || t2 == INT64_MIN ||
	    (double)t1 - (double)t2 <= (double)(latest->clock_err_ns & INT64_MAX) + (double)err_med)
		return;
	for (size_t k = first; k < *narr; k++)
		if (d->states[arr[k].state].r.rank == latest->rank)
			arr[k].last = 1;
}

static bool same_comm_run(const struct coll_point *a, const struct coll_point *b)
{
	return a->comm == b->comm && a->instance == b->instance && a->epoch == b->epoch;
}

/*
 * Period of each communicator: the median time between consecutive judged
 * collectives (per sequence step).  pts is in (comm, instance, epoch, seq)
 * order.  Written into every state of that communicator seen this window.
 */
static void set_periods(struct straggler_detector *d, const struct coll_point *pts, size_t npts,
			double *tmp)
{
	size_t i = 0;

	while (i < npts) {
		size_t j = i, k = 0;
		uint64_t comm = pts[i].comm;

		/* All points of this communicator (any instance / epoch). */
		while (j < npts && pts[j].comm == comm) {
			if (j > i && same_comm_run(&pts[j - 1], &pts[j]) &&
			    pts[j].seq > pts[j - 1].seq)
				tmp[k++] =
					((double)pts[j].median_ns - (double)pts[j - 1].median_ns) /
					(double)(pts[j].seq - pts[j - 1].seq);
			j++;
		}
		if (k) {
			double period = robust_median(tmp, k);

			for (uint32_t s = 0; s < d->nstates; s++)
				if (d->states[s].seen && d->states[s].r.communicator == comm)
					d->states[s].r.period_seconds = period / 1e9;
		}
		i = j;
	}
}

static void emit(struct straggler_detector *d, struct straggler_transition *out, size_t max_out,
		 size_t *nout, uint32_t change, bool missing, int64_t at,
		 const struct rank_state *s)
{
	if (*nout >= max_out) {
		d->st.transitions_dropped++;
		return;
	}
	out[*nout] = (struct straggler_transition){
		.change = change, .missing = missing, .at_ns = at, .r = s->r
	};
	(*nout)++;
}

/* Hysteresis: hot windows confirm, cool windows clear, others hold. */
static void advance(struct straggler_detector *d, struct rank_state *s, int64_t start, int64_t end,
		    struct straggler_transition *out, size_t max_out, size_t *nout)
{
	const struct straggler_opts *o = &d->o;
	struct straggler_rank *r = &s->r;
	bool judged = r->collectives >= o->min_collectives && r->period_seconds > 0;
	bool hot = judged && r->lag_seconds * 1e9 >= (double)o->min_lag_ns &&
		   r->window_score >= o->min_lag_ratio && r->last_fraction >= o->min_last_fraction;
	bool cool = judged && !hot &&
		    (r->window_score < o->min_lag_ratio * o->clear_ratio ||
		     r->lag_seconds * 1e9 < (double)o->min_lag_ns);

	if (judged)
		r->score = o->ewma_alpha * r->window_score + (1 - o->ewma_alpha) * r->score;
	if (hot) {
		s->cool_streak = 0;
		if (!s->hot_streak++)
			s->streak_start_ns = start;
		if (r->state != STRAGGLER_CONFIRMED) {
			r->state = STRAGGLER_SUSPECT;
			if (s->hot_streak >= o->confirm_windows) {
				r->state = STRAGGLER_CONFIRMED;
				r->since_ns = s->streak_start_ns;
				emit(d, out, max_out, nout, STRAGGLER_CONFIRM, false, end, s);
			}
		}
	} else if (cool) {
		s->hot_streak = 0;
		if (r->state == STRAGGLER_SUSPECT)
			r->state = STRAGGLER_OK;
		if (r->state == STRAGGLER_CONFIRMED && ++s->cool_streak >= o->clear_windows) {
			r->state = STRAGGLER_OK;
			emit(d, out, max_out, nout, STRAGGLER_CLEAR, false, end, s);
			r->since_ns = 0;
		}
	}
}

/* Ranks without events: agent down, process gone or idle communicator.
 * Their streaks hold; a confirmed one clears after missing_clear windows. */
static void advance_missing(struct straggler_detector *d, struct rank_state *s, int64_t end,
			    struct straggler_transition *out, size_t max_out, size_t *nout)
{
	s->r.missing_windows++;
	if (s->r.state == STRAGGLER_CONFIRMED && s->r.missing_windows >= d->o.missing_clear) {
		s->r.state = STRAGGLER_OK;
		s->hot_streak = s->cool_streak = 0;
		emit(d, out, max_out, nout, STRAGGLER_CLEAR, true, end, s);
		s->r.since_ns = 0;
	}
}

/* Forgets OK ranks silent for long, so the table never fills with the dead. */
static void evict(struct straggler_detector *d)
{
	uint32_t w = 0;

	for (uint32_t s = 0; s < d->nstates; s++) {
		const struct rank_state *rs = &d->states[s];

		if (rs->r.state == STRAGGLER_OK && rs->r.missing_windows >= EVICT_MISSING_WINDOWS)
			continue;
		if (w != s)
			d->states[w] = *rs;
		w++;
	}
	if (w != d->nstates) {
		d->nstates = w;
		index_rebuild(d);
	}
}

int straggler_detector__window(struct straggler_detector *d, const struct diag_coll_event *ev,
			       size_t n, int64_t start_ns, int64_t end_ns,
			       struct straggler_transition *out, size_t max_out)
{
	struct slot *sl = NULL;
	struct arrival *arr = NULL;
	struct coll_point *pts = NULL;
	int64_t *tmp = NULL;
	double *dtmp = NULL;
	size_t ns = 0, narr = 0, npts = 0, nout = 0;
	int err = 0;

	d->st.windows++;
	d->st.events += n;
	sl = malloc((n + 1) * sizeof(*sl));
	arr = malloc((n + 1) * sizeof(*arr));
	pts = malloc((n + 1) * sizeof(*pts));
	tmp = malloc((n + 1) * sizeof(*tmp));
	dtmp = malloc((n + 1) * sizeof(*dtmp));
	if (!sl || !arr || !pts || !tmp || !dtmp) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!ev[i].nranks || ev[i].rank >= ev[i].nranks) {
			d->st.events_bad++;
			continue;
		}
		sl[ns++] = (struct slot){ .e = &ev[i] };
	}
	for (uint32_t s = 0; s < d->nstates; s++)
		d->states[s].seen = false;

	number_epochs(d, sl, ns);
	qsort(sl, ns, sizeof(*sl), cmp_collective);
	for (size_t i = 0; i < ns;) {
		size_t j = i + 1;

		while (j < ns && same_collective(&sl[i], &sl[j]))
			j++;
		judge_collective(d, &sl[i], j - i, arr, &narr, pts, &npts, tmp);
		i = j;
	}
	set_periods(d, pts, npts, dtmp);

	/* Per state: median lag and how often it was last. */
	qsort(arr, narr, sizeof(*arr), cmp_arrival);
	for (size_t i = 0; i < narr;) {
		size_t j = i, last = 0;

		while (j < narr && arr[j].state == arr[i].state) {
			dtmp[j - i] = arr[j].lag_ns;
			last += arr[j].last;
			j++;
		}
		struct straggler_rank *r = &d->states[arr[i].state].r;
		r->collectives = (uint32_t)(j - i);
		r->lag_seconds = robust_median(dtmp, j - i) / 1e9;
		r->last_fraction = (double)last / (double)(j - i);
		r->window_score = r->period_seconds > 0 ? r->lag_seconds / r->period_seconds : 0;
		r->missing_windows = 0;
		i = j;
	}
	for (uint32_t s = 0; s < d->nstates; s++) {
		if (d->states[s].seen)
			advance(d, &d->states[s], start_ns, end_ns, out, max_out, &nout);
		else
			advance_missing(d, &d->states[s], end_ns, out, max_out, &nout);
	}
	evict(d);
out:
	free(sl);
	free(arr);
	free(pts);
	free(tmp);
	free(dtmp);
	return err ? err : (int)nout;
}

static int cmp_suspicion(const void *pa, const void *pb)
{
	const struct straggler_rank *a = pa, *b = pb;

	if (a->state != b->state)
		return a->state > b->state ? -1 : 1;
	return (a->score < b->score) - (a->score > b->score);
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
}
